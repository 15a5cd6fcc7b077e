"""Every registered algorithm on Flower (``flwr``, optional extra ``flower``): a ServerApp
strategy + ClientApp running the algorithm's own contract functions
(:mod:`algorithms.engine.contract`: ``first_phase`` and ``server_aggregate`` on the server,
``client_update`` with N = 1 on each client), so a Flower run equals the in-process engine run.

Modules: :mod:`~algorithms.flower.records` (engine objects ↔ Flower records, the data-free
server federation), :mod:`~algorithms.flower.client` (``make_client_app``),
:mod:`~algorithms.flower.strategy` (``PFLStrategy``, ``make_server_app``),
:mod:`~algorithms.flower.local` (``simulate`` with Flower's Ray simulation or an in-process
grid), :mod:`~algorithms.flower.app` (module-level apps for ``flwr run`` deployments).
See ``docs/flower.md``.  There is no Flower-specific algorithm code.
"""

INSTALL_HINT = 'Flower is not installed; install the extra from the checkout: ' \
               'pip install -e ".[flower]" (pins flwr[simulation]==1.41.0)'


def require_flwr() -> None:
    """Raise ``ImportError`` with the install command when ``flwr`` is missing."""
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
