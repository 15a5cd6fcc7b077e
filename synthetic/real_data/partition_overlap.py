"""How much a federation reuses its images, compared by pixel content (not by index).

A paper's setting can ask for more samples than the pool holds (CGPFL: 40 clients × E[n] =
108,000 > 60,000 Fashion-MNIST training images), so an image may be held by several
clients; it must never be in both the training and the test split of *one* client.
:func:`partition_reuse` measures both: ``summary.json``'s ``partition_reuse`` of a run on a
paper partition, and the test that no client's test split holds its own training images.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["partition_reuse", "reuse_line", "row_digests"]


def row_digests(x) -> np.ndarray:
    """One 16-byte BLAKE2b digest per row of ``x`` (a tensor or array, rows = samples), of
    its bytes: equal digests ⇔ equal pixel content (up to a 2⁻¹²⁸ collision)."""
    a = np.ascontiguousarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
    flat = a.reshape(len(a), -1)
    return np.array([hashlib.blake2b(r.tobytes(), digest_size=16).digest() for r in flat],
                    dtype="S16")


def _owners(split) -> np.ndarray:
    counts = np.asarray(split.counts.cpu() if hasattr(split.counts, "cpu") else split.counts)
    return np.repeat(np.arange(len(counts)), counts)


def partition_reuse(fed) -> dict:
    """Counts of reuse in ``fed`` (a :class:`~synthetic.federation.Federation`):

    * ``distinct_images`` / ``rows``: distinct pixel contents among all train + test rows;
    * ``images_in_several_clients``: distinct images held by more than one client;
    * ``rows_repeated_in_client``: rows whose image appears earlier in the same client
      (its training split, then its test split);
    * ``test_rows_in_own_train``: test rows whose image is in the *same* client's training
      split (must be 0);
    * ``test_rows_in_any_train``: test rows whose image is in *some* client's training split
      (another client's model may have trained on it; it is not that client's test row).
    """
    tr, te = row_digests(fed.train.x), row_digests(fed.test.x)
    otr, ote = _owners(fed.train), _owners(fed.test)
    train_pairs = set(zip(otr.tolist(), tr.tolist()))
    seen, repeated = set(), 0
    for pair in zip(np.concatenate([otr, ote]).tolist(), np.concatenate([tr, te]).tolist()):
        repeated += pair in seen
        seen.add(pair)
    own = sum((c, h) in train_pairs for c, h in zip(ote.tolist(), te.tolist()))
    train_set = set(tr.tolist())
    any_train = sum(h in train_set for h in te.tolist())
    allh = np.concatenate([tr, te])
    owner = np.concatenate([otr, ote])
    pairs = np.unique(np.rec.fromarrays([allh, owner]))
    _, holders = np.unique(pairs["f0"], return_counts=True)
    return {"rows": int(len(allh)), "distinct_images": int(len(holders)),
            "images_in_several_clients": int((holders > 1).sum()),
            "rows_repeated_in_client": int(repeated),
            "test_rows": int(len(te)), "test_rows_in_own_train": int(own),
            "test_rows_in_any_train": int(any_train)}


def reuse_line(r: dict) -> str:
    """One line for a run's start-up output."""
    return (f"partition reuse (by pixel content): {r['distinct_images']} distinct images in "
            f"{r['rows']} rows, {r['images_in_several_clients']} held by several clients; "
            f"test rows in their own client's training split: {r['test_rows_in_own_train']}, "
            f"in some client's: {r['test_rows_in_any_train']} of {r['test_rows']}")
