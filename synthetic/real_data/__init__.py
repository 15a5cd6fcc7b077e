"""Real image datasets with pinned contents: the registry of pins
(:mod:`~synthetic.real_data.registry`), validation on every load
(:mod:`~synthetic.real_data.validate`, :mod:`~synthetic.real_data.load`), the data home
(:mod:`~synthetic.real_data.home`), the fetcher (:mod:`~synthetic.real_data.fetch`, the only
code that downloads, run by ``pflt data fetch``) and the papers' partitions
(:mod:`~synthetic.real_data.paper_partitions`).  Importing this package downloads nothing."""
