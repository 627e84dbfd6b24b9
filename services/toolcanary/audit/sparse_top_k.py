"""Top-k neighbours between two sets of sparse row vectors, a block of left rows at a time.

A full left x right score matrix for 6,800 BFCL turns against 25,600 tasks would hold 174 M cells; one
block of `chunk_rows` rows keeps memory at `chunk_rows x right` float32 cells whatever the sizes. The raw
product is the dot product (cosine for l2-normalised TF-IDF rows, shared-item counts for binary rows); a
`transform` turns counts into Jaccard similarity using the row sizes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

Transform = Callable[[np.ndarray, slice], np.ndarray]


def top_k(
    left: sp.csr_matrix,
    right: sp.csr_matrix,
    k: int,
    chunk_rows: int,
    *,
    transform: Transform | None = None,
    desc: str = "",
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """For each left row, the `k` right rows of highest score, best first.

    Args:
        left, right: CSR matrices over the same columns.
        k: neighbours per left row (fewer columns than k: the rest are index -1, score 0).
        chunk_rows: left rows per block.
        transform: maps a block's dense dot products (and the block's row slice) to scores.
    Returns:
        (indices, scores), both of shape (left rows, k); indices are right row numbers.
    """
    n, m = left.shape[0], right.shape[0]
    indices = np.full((n, k), -1, dtype=np.int64)
    scores = np.zeros((n, k), dtype=np.float32)
    if n == 0 or m == 0:
        return indices, scores
    right_t = right.T.tocsc().astype(np.float32)
    take = min(k, m)
    blocks = range(0, n, chunk_rows)
    for start in tqdm(blocks, desc=desc, unit="block", disable=not progress or len(blocks) < 2, leave=False):
        rows = slice(start, min(start + chunk_rows, n))
        block = (left[rows].astype(np.float32) @ right_t).toarray()
        if transform is not None:
            block = transform(block, rows)
        if take < m:
            part = np.argpartition(-block, take - 1, axis=1)[:, :take]
        else:
            part = np.broadcast_to(np.arange(m), (block.shape[0], m))
        part_scores = np.take_along_axis(block, part, axis=1)
        # Best first; equal scores in right-row order, so a rerun lists them the same way.
        order = np.lexsort((part, -part_scores), axis=1)
        indices[rows, :take] = np.take_along_axis(part, order, axis=1)
        scores[rows, :take] = np.take_along_axis(part_scores, order, axis=1)
    return indices, scores


def row_sizes(matrix: sp.csr_matrix) -> np.ndarray:
    """Number of stored (non-zero) entries per row, for binary matrices the size of each set."""
    return np.diff(matrix.indptr).astype(np.float32)


def jaccard(left_sizes: np.ndarray, right_sizes: np.ndarray) -> Transform:
    def transform(shared: np.ndarray, rows: slice) -> np.ndarray:
        union = left_sizes[rows, None] + right_sizes[None, :] - shared
        return np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)

    return transform
