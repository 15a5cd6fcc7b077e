"""``pflt data``: fetch, verify and list the real image datasets (docs/data.md).

Examples::

    pflt data list                          # each dataset: where found, verified, size, fetch
    pflt data fetch fmnist                  # into the data home ($PFLT_DATA or the user cache)
    pflt data fetch mnist --dir ~/data/mnist --mirror https://my.mirror/mnist/
    pflt data fetch emnist                  # every EMNIST split (one archive)
    pflt data fetch emnist --emnist-split letters
    pflt data verify fmnist:/usr/share/datasets/fashion-mnist
    pflt data verify emnist-letters:~/data/emnist

``fetch`` is the only command that downloads.  It tries the ``--mirror`` URLs first, then
the publisher and known mirrors; resumes an interrupted download; checks size and pinned
digest; renames the verified file into place.  ``verify`` checks the files' digests and then
every split's sample count, class counts, image shape, dtype and label range; a mismatch is
one line and exit code 2.  ``pflt run --data NAME`` (no directory) reads the data home.
"""

from __future__ import annotations

import argparse
import sys

from pflt.cli import OneLineParser, UserError

EMNIST_SPLITS = ("balanced", "letters", "byclass", "bymerge", "digits", "mnist")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data", help="fetch, verify and list the real datasets (MNIST, Fashion-MNIST, "
        "EMNIST, CIFAR-10/100)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=OneLineParser)
    f = sub.add_parser("fetch", help="download a dataset against its pinned digests")
    f.add_argument("name", metavar="NAME",
                   help="mnist, fmnist, emnist (every split), emnist-SPLIT, cifar10, cifar100")
    f.add_argument("--dir", default=None,
                   help="directory to put the files in (default: the data home's NAME/)")
    f.add_argument("--mirror", action="append", default=[], metavar="URL",
                   help="base URL tried before the built-in sources (repeatable; the file "
                   "name is appended)")
    f.add_argument("--emnist-split", choices=EMNIST_SPLITS, default=None,
                   help="with NAME emnist: only this split")
    f.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait on the network before trying the next source (30)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(func=_fetch)
    v = sub.add_parser("verify", help="check a dataset directory against the pinned values")
    v.add_argument("spec", metavar="NAME[:DIR]",
                   help="e.g. fmnist:DIR, emnist-letters:DIR; without DIR: the data home")
    v.add_argument("--emnist-split", choices=EMNIST_SPLITS, default=None,
                   help="with NAME emnist: this split (default balanced)")
    v.set_defaults(func=_verify)
    ls = sub.add_parser("list", help="each dataset: where found, verified, size, fetch command")
    ls.set_defaults(func=_list)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _names(name: str, split: str | None) -> list[str]:
    from synthetic.real_data import registry

    if split is not None:
        if name != "emnist":
            raise UserError(f"--emnist-split applies to NAME emnist, not {name}")
        return [f"emnist-{split}"]
    return [registry.entry(name).name]


def _fetch(args: argparse.Namespace) -> int:
    from synthetic.real_data.fetch import check_mirror, check_timeout, fetch

    check_timeout(args.timeout)          # finite, in (0, a day]: before any directory is made
    for mirror in args.mirror:
        check_mirror(mirror)
    names = ([f"emnist-{s}" for s in EMNIST_SPLITS]
             if args.name == "emnist" and args.emnist_split is None
             else _names(args.name, args.emnist_split))
    progress = None if args.no_progress else sys.stderr
    for name in names:
        dest = fetch(name, args.dir, args.mirror, timeout=args.timeout, progress=progress)
        print(f"{name}: verified in {dest}  (use: --data {name}"
              f"{'' if args.dir is None else ':' + str(dest)})")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from synthetic.real_data.home import resolve_dataset
    from synthetic.real_data.load import verify_directory

    name, _, root = args.spec.partition(":")
    (name,) = _names(name, args.emnist_split)
    root = root or str(resolve_dataset(name))
    for line in verify_directory(name, root):
        print(f"  {line}")
    print(f"{name}: verified ({root})")
    return 0


def _list(args: argparse.Namespace) -> int:
    from synthetic.real_data import registry
    from synthetic.real_data.home import data_home, fetch_hint, find_dataset

    print(f"data home: {data_home()}  ($PFLT_DATA, else the user cache directory)")
    rows = [("dataset", "where", "status", "size", "fetch with")]
    for name in registry.names():
        where = find_dataset(name)
        status, size = _status(name, where) if where else ("not found", "-")
        rows.append((name, str(where or "-"), status, size, fetch_hint(name)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    return 0


def _status(name: str, where) -> tuple[str, str]:
    """``("digests ok" | "digest mismatch: FILE" | "present, no pinned digest", size)``;
    the split contents are checked by ``pflt data verify``."""
    from synthetic.real_data import registry
    from synthetic.real_data.load import _file_dir
    from synthetic.real_data.validate import DataMismatch, check_file, find_file

    entry = registry.entry(name)
    base = _file_dir(entry, where)
    total, pinned_all = 0, True
    for pinned in entry.files:
        path = find_file(base, pinned)
        total += path.stat().st_size
        if not pinned.pinned:
            pinned_all = False
            continue
        try:
            check_file(path, pinned)
        except DataMismatch:
            return f"digest MISMATCH: {path.name}", f"{total / 1e6:.1f} MB"
    status = "digests ok" if pinned_all else "present, no pinned digest (pflt data verify)"
    return status, f"{total / 1e6:.1f} MB"
