"""Walking the lower triangle of a symmetric :math:`n \\times n` matrix: row blocks and tiles of a
bounded number of entries, and the in-place copies between the two triangles."""

from __future__ import annotations

import math

import torch


#: Rows per panel of the triangle copies below: a panel and the transposed block it reads stay in cache.
_MIRROR_ROWS = 256


def _mirror_lower(out: torch.Tensor) -> torch.Tensor:
    """``out`` (n, n) with its strict lower triangle copied onto the upper one, in place, panel by panel.

    ``torch.where(triu, out.T, out)`` would read all of ``out.T`` with stride n and write a new
    matrix; panels keep the block being read and the one being written in cache."""
    n = out.shape[0]
    for r0 in range(0, n, _MIRROR_ROWS):
        r1 = min(r0 + _MIRROR_ROWS, n)
        out[r0:r1, r1:] = out[r1:, r0:r1].T
        square = out[r0:r1, r0:r1]
        square.copy_(square.tril() + square.tril(-1).T)
    return out


def _fold_upper_onto_lower(g: torch.Tensor) -> torch.Tensor:
    """A new (n, n) matrix holding ``g + g.T`` on the strict lower triangle of ``g`` (n, n), ``g``'s
    diagonal, and zeros above (which the lower-triangle sweeps do not read), panel by panel
    (cache-friendly, as :func:`_mirror_lower`)."""
    n = g.shape[0]
    out = g.new_zeros(n, n)
    for r0 in range(0, n, _MIRROR_ROWS):
        r1 = min(r0 + _MIRROR_ROWS, n)
        torch.add(g[r0:r1, :r0], g[:r0, r0:r1].T, out=out[r0:r1, :r0])
        square = g[r0:r1, r0:r1]
        out[r0:r1, r0:r1] = square.tril() + square.T.tril(-1)
    return out


def _row_blocks(start: int, stop: int, chunk: int) -> list[tuple[int, int]]:
    """Row blocks ``[r0, r1)`` of rows ``start..stop`` of a lower triangle, each covering at most
    ``chunk`` entries ``[r0, r1) × [0, r1)`` (the largest r1 with (r1 − r0)·r1 ≤ chunk, and at least one row)."""
    blocks, r0 = [], start
    while r0 < stop:
        r1 = min(stop, max(r0 + 1, int((r0 + math.sqrt(r0 * r0 + 4 * chunk)) / 2)))
        blocks.append((r0, r1))
        r0 = r1
    return blocks


def _tiles(blocks, chunk: int):
    """``(i, row0, r0, r1)``: the tiles of at most ``chunk`` entries inside each row block ``blocks[i]``,
    which holds rows ``row0..`` (a tile: rows ``[r0, r1)``, columns ``[0, r1)`` of the triangle)."""
    row0 = 0
    for i, block in enumerate(blocks):
        row1 = block.shape[-1]
        for r0, r1 in _row_blocks(row0, row1, chunk):
            yield i, row0, r0, r1
        row0 = row1
