"""Exporting displayed matrices: .npy always, CSV when small enough to open in a spreadsheet."""

from __future__ import annotations

import io

import numpy as np

MAX_CSV_CELLS = 200_000  # beyond this a CSV is too large to be useful; .npy is offered alone


def to_npy_bytes(array: np.ndarray) -> bytes:
    """Serialise an array with np.save (no pickle: allow_pickle=False)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def matrices_to_csv(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, head_ids) -> str | None:
    """Long-format CSV `head,i,j,value` of (heads, R, C) values at positions rows x cols.

    Masked entries (-inf) are written as empty values. Returns None above MAX_CSV_CELLS cells.
    """
    values = np.asarray(values)
    if values.size > MAX_CSV_CELLS:
        return None
    heads, n_rows, n_cols = values.shape
    h, r, c = np.meshgrid(np.asarray(head_ids), rows, cols, indexing="ij")  # each (H, R, C)
    lines = ["head,i,j,value"]
    for hh, ii, jj, v in zip(h.ravel(), r.ravel(), c.ravel(), values.ravel(), strict=True):
        lines.append(f"{hh},{ii},{jj},{v:.6g}" if np.isfinite(v) else f"{hh},{ii},{jj},")
    return "\n".join(lines) + "\n"
