"""Display reductions: which positions sit under which pixel, and (panels, T, T) stacks of
matrices reduced to display resolution. numpy only (torch is imported for max pooling alone),
no plotly: the compute modules (`models.heads`) and the drawing kit (`figures.render`) both use
it, so no compute module imports the drawing kit.

  display_positions, panel_resolution, block_starts   which positions sit under which pixel
  masked_pixels                                       pixels wholly after the causal diagonal
  pool_max, stack_view (StackView)                    reduce (panels, T, T) stacks to pixels
  quantize                                            pixels as 8-bit codes for a browser canvas
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from alibi_viz.errors import AlibiVizError

IMAGE_PIXEL_BUDGET = 600_000  # pixels over all panels of one figure (PNG, a few hundred kB at most)
HOVER_CELL_BUDGET = 12_000  # hover cells over all panels (12-20 bytes each in the JSON, base64)
MAX_PANEL_PIXELS = 512  # per side: more than a panel is ever drawn wide


# ----------------------------------------------------------------------------- positions

def display_positions(length: int, max_points: int) -> np.ndarray:
    """Positions to evaluate so that `length` positions fit in `max_points` pixels.

    Returns int64 indices, one per pixel, each the position under the pixel's centre; all of
    range(length) when it fits. Pixel p then sits at x = (p + 0.5) * length / k - 0.5.
    """
    k = max(1, min(length, max_points))
    return np.floor((np.arange(k) + 0.5) * length / k).astype(np.int64)


def panel_resolution(length: int, num_panels: int, budget: int, cap: int = MAX_PANEL_PIXELS) -> int:
    """Pixels per side for each of `num_panels` square panels sharing `budget` pixels."""
    return max(2, min(length, cap, int(math.sqrt(budget / max(1, num_panels)))))


def block_starts(length: int, side: int) -> np.ndarray:
    """First position of each of `side` even blocks covering range(length), int64 (side,)."""
    return np.floor(np.arange(side) * length / side).astype(np.int64)


def masked_pixels(seq_len: int, rows: int, cols: int) -> np.ndarray:
    """Bool (rows, cols): pixels whose every key comes after every query (causal mask)."""
    r_last = np.append(block_starts(seq_len, rows)[1:], seq_len) - 1  # last query of each row
    c_first = block_starts(seq_len, cols)
    return c_first[None, :] > r_last[:, None]


# ----------------------------------------------------------------------------- pooling

def pool_max(stack, side: int) -> np.ndarray:
    """Max-pool a (panels, T, T) stack (or one (T, T) map) to `side` x `side` pixels.

    Adaptive pooling: pixel k covers positions floor(k T / side) .. ceil((k + 1) T / side) - 1,
    so its centre sits at about (k + 0.5) T / side - 0.5 (as `image_panel` places it). Max
    rather than mean so that a sharp diagonal or a single strong key stays visible when many
    positions share a pixel. Returns float32 of the input's rank.
    """
    array = np.asarray(stack, dtype=np.float32)
    if array.ndim not in (2, 3) or array.shape[-1] != array.shape[-2] or array.shape[-1] == 0:
        raise AlibiVizError(f"Expected a (T, T) map or (panels, T, T) stack, got {array.shape}.")
    side = max(1, min(array.shape[-1], int(side)))
    if side == array.shape[-1]:
        return array
    import torch  # only here: the bias explorer's numpy path never max-pools

    pooled = torch.nn.functional.adaptive_max_pool2d(torch.from_numpy(array)[None], side)[0]
    return pooled.numpy()  # (panels, side, side) or (side, side)


@dataclass
class StackView:
    """A stack of (T, T) matrices (one per head) reduced to display resolution.

    images:      (panels, R, C) float32; pixel (r, c) covers query positions
                 [r*T/R, (r+1)*T/R) and keys [c*T/C, (c+1)*T/C).
    hover:       (panels, len(hover_rows), len(hover_cols)) exact entries at those positions.
    hover_rows, hover_cols: int64 positions of the hover samples.
    seq_len:     T.
    reduced:     None at full resolution, else how it was reduced ("block max", "sampled").
    """

    images: np.ndarray
    hover: np.ndarray
    hover_rows: np.ndarray
    hover_cols: np.ndarray
    seq_len: int
    reduced: str | None = None


def stack_view(stack, side: int | None = None, pixel_budget: int = IMAGE_PIXEL_BUDGET,
               hover_side: int | None = None, reduce: str = "max") -> StackView:
    """Reduce a (panels, T, T) stack to at most `side` pixels per side (default: the panels
    share `pixel_budget` pixels), max-pooling blocks (reduce="max", for probabilities) or
    sampling the position under each pixel (reduce="sample", for scores). The hover grid holds
    exact entries at about `hover_side` positions per side (default: HOVER_CELL_BUDGET cells
    over all panels)."""
    stack = np.asarray(stack, dtype=np.float32)
    if stack.ndim != 3 or stack.shape[1] != stack.shape[2] or stack.shape[1] == 0:
        raise AlibiVizError(f"Expected a (panels, T, T) stack of matrices, got {stack.shape}.")
    panels, T, _T = stack.shape
    if side is None:
        side = panel_resolution(T, panels, pixel_budget)
    side = max(1, min(T, side))
    if side == T:
        images, reduced = stack, None
    elif reduce == "max":
        images, reduced = pool_max(stack, side), "block max"  # (panels, side, side)
    elif reduce == "sample":
        pos = display_positions(T, side)
        images, reduced = stack[:, pos][:, :, pos], "sampled"  # (panels, side, side)
    else:
        raise AlibiVizError(f"reduce must be 'max' or 'sample', got {reduce!r}.")
    if hover_side is None:
        hover_side = max(2, int(math.sqrt(HOVER_CELL_BUDGET / panels)))
    hpos = display_positions(T, min(T, hover_side))
    hover = stack[:, hpos][:, :, hpos]  # (panels, h, h)
    return StackView(images=np.ascontiguousarray(images), hover=np.ascontiguousarray(hover),
                     hover_rows=hpos, hover_cols=hpos, seq_len=T, reduced=reduced)


# ----------------------------------------------------------------------------- 8-bit codes

CODE_LEVELS = 255  # codes 0..254 span the colour scale
CODE_MASKED = 255  # a pixel with no value (masked, NaN), drawn grey


def quantize(values, vmin: float, vmax: float) -> np.ndarray:
    """Float values (any shape) as uint8 codes for a canvas: 0..254 spread evenly from `vmin`
    to `vmax` (values outside are clipped), CODE_MASKED where a value is not finite.

    A code reads back as vmin + code / 254 * (vmax - vmin), to half a step: 8 bits are what a
    colour scale of 256 colours shows, and a quarter of float32's bytes in the page.
    """
    values = np.asarray(values, dtype=np.float32)
    span = np.float32((vmax - vmin) or 1.0)
    scaled = (values - np.float32(vmin)) * np.float32(CODE_LEVELS - 1) / span
    finite = np.isfinite(scaled)
    codes = np.clip(np.rint(np.where(finite, scaled, 0)), 0, CODE_LEVELS - 1).astype(np.uint8)
    codes[~finite] = CODE_MASKED
    return codes
