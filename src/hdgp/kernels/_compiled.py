r"""Compiled (Numba) CPU loops for the kernels' hot spots, and the switch that selects them.

**The all-order additive sum.** :math:`\sum_r \sigma_r^2 e_r(k_1, \dots, k_D)` and its reverse
sweep (see :class:`~hdgp.kernels.functions.additive_sum._AdditiveSum`) are :math:`O(DR)` passes per matrix
entry. As tensor operations every pass streams whole rows of entries through memory, and the
backward pass keeps :math:`DR` prefix rows per tile: it is bound by memory traffic, not arithmetic.
Here the recurrences run over short runs of :data:`_RUN` entries whose working set (the
:math:`D \times R` prefixes, the :math:`R + 1` polynomials and adjoints) stays in the first cache
levels, with the innermost loops over entries, which LLVM vectorises (timings against the tensor
version: ``benchmarks/additive_kernel_speed.py`` and benchmarks/README.md).

Both sum kernels walk the rows of a block ``(D, rows, cols)``: row ``ia`` is row ``row0 + ia`` of
the output and covers columns ``0 .. row0 + ia`` when ``lower`` (the lower triangle of a
symmetric matrix; the block's other columns are not read), otherwise all ``cols`` columns.

**The backward pass of the SE kernels** (:class:`~hdgp.kernels.se_kernel._SEMinusOuter`) needs six
reductions of :math:`W = G \odot (K + uv^\top)` and :math:`G`; as tensor operations they read the
:math:`D \times n \times m` matrices about nine times, here once (:func:`se_outer_backward`).

**The Sobol index of every term** (:func:`hdgp.explain.term_sobol`): sums
:math:`\sum_{ab} h_{ab} \prod_{i \in u} L_i[a, b]` over the entries of the symmetric matrices, for
every term :math:`u` in pre-order (:func:`term_sums`). The entries are walked in blocks of
:data:`_TERM_BLOCK` through the whole enumeration, so the running products of each block stay in
cache, and a subtree whose running product is zero on a block (a feature the fit switched off, a
zero Sobol matrix) is skipped: its terms add nothing there.

Every loop is serial and releases the GIL (``nogil``): a caller that has threads to spare runs
several on disjoint blocks at once (:mod:`hdgp.kernels.functions.se_additive_sum`), with no Numba
threading layer of its own to contend with torch's and BLAS's. Numba compiles them at their first call
in an installation (a few seconds) and caches the result beside this module.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit

__all__ = ["ENABLED", "as_array", "rows_backward", "rows_forward", "se_exponent_block", "se_outer_backward",
           "se_outer_reductions", "subtract_outer_block", "term_sums", "use_compiled", "zero_missing_block"]

#: CPU work runs compiled; off (tests, comparisons), it takes the tensor code other devices run.
ENABLED = True

#: Entries per run of the forward sum: its R + 1 running polynomials stay in L1 (the backward sizes its
#: runs by its prefix table, :func:`_backward_run`).
_RUN = 64


def _jit(function):
    """``numba.njit`` with an on-disk cache, or without one where Numba finds no writable place for
    it (a read-only installation and home folder): then it compiles again in every process.

    Of the fast-math licences only reassociation (which lets LLVM vectorise the reductions) and
    fused multiply-adds: NaN and infinities keep IEEE meaning, as in the tensor code."""
    options = dict(fastmath={"reassoc", "contract"}, error_model="numpy", nogil=True)
    try:
        return njit(cache=True, **options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(**options)(function)


def _jit_exact(function):
    """:func:`_jit` without fast-math licences: every operation rounds as written (as the tensor code does)."""
    options = dict(error_model="numpy", nogil=True)
    try:
        return njit(cache=True, **options)(function)
    except RuntimeError:  # no cache locator (see _jit)
        return njit(**options)(function)


def use_compiled(t) -> bool:
    """Whether work on tensor ``t`` runs compiled: CPU floating tensors, while :data:`ENABLED` and
    Numba compiles (``NUMBA_DISABLE_JIT=1`` would run the loops as Python, far slower than tensors)."""
    return (ENABLED and not numba.config.DISABLE_JIT and t.device.type == "cpu"
            and t.dtype in (torch.float32, torch.float64))


def as_array(t: torch.Tensor, dtype: torch.dtype | None = None) -> np.ndarray:
    """A C-contiguous NumPy view (or copy) of ``t``'s values, in ``dtype``, for the loops below."""
    return t.detach().to(dtype or t.dtype).contiguous().numpy()

#: Matrix entries per block of :func:`term_sums`: one running product per order (8 kB each) and the
#: block's D rows of the Sobol matrices (144 kB at D = 18) stay in L1/L2.
_TERM_BLOCK = 1024


@_jit
def _run_width(row: int, lower: bool, cols: int) -> int:
    return row + 1 if lower else cols


@_jit
def rows_forward(block, row0, lower, variances, out):
    """``out[row0 + ia, c] = Σ_r σ_r² e_r(block[:, ia, c])`` for the columns of each row."""
    n_dims, rows, cols = block.shape
    max_order = variances.shape[0] - 1
    e = np.empty((max_order + 1, _RUN), dtype=block.dtype)
    for ia in range(rows):
        a = row0 + ia
        width = _run_width(a, lower, cols)
        for start in range(0, width, _RUN):
            w = min(_RUN, width - start)
            e[0, :] = 1.0
            e[1:, :] = 0.0
            for i in range(n_dims):
                k = block[i, ia, start : start + w]
                for r in range(min(i + 1, max_order), 0, -1):  # descending: e_{r-1} is still old
                    er, em = e[r], e[r - 1]
                    for t in range(w):
                        er[t] += k[t] * em[t]
            o = out[a, start : start + w]
            for t in range(w):
                o[t] = variances[0]
            for r in range(1, max_order + 1):
                er, s = e[r], variances[r]
                for t in range(w):
                    o[t] += s * er[t]


#: Bytes of the backward's prefix table per run (see :func:`_backward_run`).
_TABLE_BYTES = 2**18


@_jit
def _backward_run(n_dims, max_order):
    """Entries per run of :func:`rows_backward`: as many as keep its table of (D + 1)(R + 1) rows within
    :data:`_TABLE_BYTES`, a multiple of 8 between 32 and 512. Longer runs write longer pieces of each of
    the D rows of the base gradient at a time."""
    run = _TABLE_BYTES // (8 * (n_dims + 1) * (max_order + 1))
    return max(32, min(512, run - run % 8))


@_jit
def rows_backward(block, row0, lower, variances, grad_out, need_base, grad_block, grad_var):
    r"""Reverse sweep of :func:`rows_forward`: adds :math:`\partial L/\partial\sigma^2` to ``grad_var``
    and, when ``need_base``, writes :math:`\partial L/\partial k` into ``grad_block`` (zero in the
    columns a ``lower`` row does not cover). ``grad_out`` is indexed like ``out``.

    Per run of entries the forward recurrence is replayed into a table
    :math:`P_{i,r} = e_r(k_1..k_i)` (each step writes a new row of it, so the prefixes cost no copies),
    then the adjoints :math:`a_r = \partial L/\partial e_r` run backwards from :math:`a_r = \sigma_r^2 G`:
    :math:`\partial L/\partial k_i = \sum_{r \ge 1} a_r P_{i-1,r-1}` and :math:`a_r \leftarrow a_r + k_i a_{r+1}`.
    Only the orders that can be non-zero are visited (:math:`e_r` of :math:`i` values vanishes for
    :math:`r > i`, and :math:`a_r` is not read again once :math:`r` exceeds the steps left), about
    half the passes of the full :math:`D \times R` sweep where :math:`R` is close to :math:`D`."""
    n_dims, rows, cols = block.shape
    max_order = variances.shape[0] - 1
    run = _backward_run(n_dims, max_order)
    e = np.empty((max_order + 1, run), dtype=block.dtype)
    adj = np.empty((max_order + 1, run), dtype=block.dtype)
    table = np.empty((n_dims + 1, max_order + 1, run), dtype=block.dtype)  # table[i, r] = e_r(k_1..k_i)
    table[:, 0, :] = 1.0  # e_0, never written below
    top_order = min(n_dims, max_order)
    for ia in range(rows):
        a = row0 + ia
        width = _run_width(a, lower, cols)
        if need_base:
            grad_block[:, ia, width:] = 0.0
        for start in range(0, width, run):
            w = min(run, width - start)
            g = grad_out[a, start : start + w]
            if not need_base:  # only the polynomials: the forward recurrence in place, descending (e_{r-1} still old)
                e[0, :] = 1.0
                e[1:, :] = 0.0
                for i in range(n_dims):
                    k = block[i, ia, start : start + w]
                    for r in range(min(i + 1, max_order), 0, -1):
                        er, em = e[r], e[r - 1]
                        for t in range(w):
                            er[t] += k[t] * em[t]
                last = e
            else:
                for i in range(n_dims):  # table[i + 1] from table[i]; e_i(k_1..k_i) starts from e_i(k_1..k_{i-1}) = 0
                    k, src, dst = block[i, ia, start : start + w], table[i], table[i + 1]
                    for r in range(1, min(i + 1, max_order) + 1):
                        d, s, lo = dst[r], src[r], src[r - 1]
                        if r <= i:
                            for t in range(w):
                                d[t] = s[t] + k[t] * lo[t]
                        else:
                            for t in range(w):
                                d[t] = k[t] * lo[t]
                last = table[n_dims]
            for r in range(top_order + 1):
                er = last[r]
                acc = 0.0
                for t in range(w):
                    acc += er[t] * g[t]
                grad_var[r] += acc
            if not need_base:
                continue
            for r in range(1, max_order + 1):
                ar, s = adj[r], variances[r]
                for t in range(w):
                    ar[t] = s * g[t]
            for i in range(n_dims - 1, -1, -1):
                k, gk, p = block[i, ia, start : start + w], grad_block[i, ia, start : start + w], table[i]
                a1 = adj[1]
                for t in range(w):  # ∂L/∂k_i = Σ_r a_r e_{r-1}(k_1..k_{i-1}), e_0 = 1
                    gk[t] = a1[t]
                for r in range(2, min(i + 1, max_order) + 1):
                    ar, pr = adj[r], p[r - 1]
                    for t in range(w):
                        gk[t] += ar[t] * pr[t]
                for r in range(1, min(i, max_order - 1) + 1):  # adjoint of e_{r+1} ← e_{r+1} + k e_r, ascending r
                    ar, an = adj[r], adj[r + 1]
                    for t in range(w):
                        ar[t] += k[t] * an[t]


@_jit_exact
def se_exponent_block(xa, r0, xb, scale, out):
    r"""``out[d, i, j]`` :math:`= (x^a_{d, r_0 + i} - x^b_{d, j})^2 s_d` for a row block ``out`` ``(D, rows, cols)``
    of the SE kernels' exponents, ``xa`` ``(D, n)``, ``xb`` ``(D, m)`` (the same array for :math:`k(X, X)`),
    ``scale`` ``(D,)`` (:math:`s_d = -1/2\ell_d^2`): one pass and the same roundings as the tensor expression
    ``(a - b)² · s``."""
    n_dims, rows, cols = out.shape
    for d in range(n_dims):
        s = scale[d]
        ad, bd = xa[d], xb[d]
        for i in range(rows):
            a = ad[r0 + i]
            o = out[d, i]
            for j in range(cols):
                t = a - bd[j]
                o[j] = (t * t) * s


@_jit
def subtract_outer_block(out, r0, u, v):
    r"""``out[d, i, j] -= u[d, r0 + i] * v[d, j]`` for a row block ``out`` ``(D, rows, cols)``, ``u`` ``(D, n)``,
    ``v`` ``(D, m)``, as one fused multiply-add where the CPU has one (as torch's ``addcmul_`` does)."""
    n_dims, rows, cols = out.shape
    for d in range(n_dims):
        ud, vd = u[d], v[d]
        for i in range(rows):
            a = ud[r0 + i]
            o = out[d, i]
            for j in range(cols):
                o[j] -= a * vd[j]


@_jit_exact
def zero_missing_block(out, r0, miss_a, miss_b):
    """Zero the entries of a row block ``out`` ``(D, rows, cols)`` whose row ``r0 + i`` is missing in
    ``miss_a`` ``(D, n)`` or whose column ``j`` is missing in ``miss_b`` ``(D, m)`` (either may be ``(D, 0)``:
    nothing missing there)."""
    n_dims, rows, cols = out.shape
    for d in range(n_dims):
        if miss_a.shape[1]:
            ma = miss_a[d]
            for i in range(rows):
                if ma[r0 + i]:
                    out[d, i, :] = 0.0
        if miss_b.shape[1]:
            mb = miss_b[d]
            for i in range(rows):
                o = out[d, i]
                for j in range(cols):
                    if mb[j]:
                        o[j] = 0.0


@_jit
def se_outer_backward(K, G, a, b, u, v, has_outer, rows, cols, Wb, WTa, gu, gv):
    r"""One pass over ``K`` and ``G`` (both ``(L, n, m)``) for the SE kernels' backward: with
    :math:`W = G \odot (K + u v^\top)` (:math:`W = G \odot K` without ``has_outer``), writes
    ``rows`` = :math:`W\mathbf 1`, ``Wb`` = :math:`Wb`, ``gu`` = :math:`-Gv` (each ``(L, n)``) and
    ``cols`` = :math:`W^\top\mathbf 1`, ``WTa`` = :math:`W^\top a`, ``gv`` = :math:`-G^\top u` (each ``(L, m)``)."""
    n_lead, n, m = K.shape
    cols[:] = 0.0
    WTa[:] = 0.0
    gv[:] = 0.0
    for lead in range(n_lead):
        bl, vl, cl, tl, gvl = b[lead], v[lead], cols[lead], WTa[lead], gv[lead]
        for i in range(n):
            ki, gi = K[lead, i], G[lead, i]
            ai, ui = a[lead, i], u[lead, i]
            row = 0.0
            row_b = 0.0
            g_v = 0.0
            if has_outer:
                for j in range(m):
                    w = (ki[j] + ui * vl[j]) * gi[j]
                    row += w
                    row_b += w * bl[j]
                    cl[j] += w
                    tl[j] += w * ai
                    g_v += gi[j] * vl[j]
                    gvl[j] -= gi[j] * ui
            else:
                for j in range(m):
                    w = ki[j] * gi[j]
                    row += w
                    row_b += w * bl[j]
                    cl[j] += w
                    tl[j] += w * ai
            rows[lead, i] = row
            Wb[lead, i] = row_b
            gu[lead, i] = -g_v


@_jit
def term_sums(L, h, depth, subtree, out):
    r"""Adds :math:`\sum_p h_p \prod_{i \in u} L_{ip}` to ``out`` for every term :math:`u` of at
    most ``depth`` of the ``D`` features, in pre-order ((0,), (0, 1), (0, 1, 2), ..., (1,), ...).

    ``L`` is ``(D, P)`` (the Sobol matrices' entries), ``h`` is ``(P,)``; ``subtree[j, level]`` is
    the number of terms below the term of ``level + 1`` features whose last feature is ``j`` (they
    are passed over where its running product is zero on a block).
    """
    n_dims, n_entries = L.shape
    run = np.empty((depth, _TERM_BLOCK), dtype=L.dtype)
    last = np.empty(depth, dtype=np.int64)
    for start in range(0, n_entries, _TERM_BLOCK):
        w = min(_TERM_BLOCK, n_entries - start)
        r0 = run[0]
        for t in range(w):
            r0[t] = h[start + t]
        level, pos = 0, 0
        last[0] = 0
        while level >= 0:
            j = last[level]
            src, lj = run[level], L[j, start : start + w]
            acc = 0.0
            if level + 1 < depth and j + 1 < n_dims:  # a term with terms below it
                dst = run[level + 1]
                mag = 0.0
                for t in range(w):
                    v = src[t] * lj[t]
                    dst[t] = v
                    acc += v
                    mag += abs(v)
                out[pos] += acc
                pos += 1
                if mag != 0.0:  # (NaN included: it must reach the sums)
                    level += 1
                    last[level] = j + 1
                    continue
                pos += subtree[j, level]
            else:
                for t in range(w):
                    acc += src[t] * lj[t]
                out[pos] += acc
                pos += 1
            while level >= 0:  # the next sibling, or the parent's
                last[level] += 1
                if last[level] < n_dims:
                    break
                level -= 1


def se_outer_reductions(K, G, a0, b0, u, v):
    r"""The reductions of :class:`~hdgp.kernels.se_kernel._SEMinusOuter`'s backward pass by
    :func:`se_outer_backward` (tensors in and out): the row and
    column sums of :math:`W`, :math:`Wb`, :math:`W^\top a` (shaped like ``a0``, ``b0``) and
    :math:`-Gv`, :math:`-G^\top u` (shaped like ``u``, ``v``; None without them)."""
    n, m = K.shape[-2:]
    flat = lambda t, size: as_array(t.reshape(-1, size), K.dtype)  # noqa: E731
    Kf, Gf = flat(K, n * m).reshape(-1, n, m), flat(G.expand(K.shape), n * m).reshape(-1, n, m)
    af, bf = flat(a0, n), flat(b0, m)
    has_outer = u is not None
    uf, vf = (flat(u, n), flat(v, m)) if has_outer else (af, bf)  # (not read without the outer term)
    rows, Wb, gu = (np.empty_like(af) for _ in range(3))
    cols, WTa, gv = (np.empty_like(bf) for _ in range(3))
    se_outer_backward(Kf, Gf, af, bf, uf, vf, has_outer, rows, cols, Wb, WTa, gu, gv)
    column = lambda x, like: torch.from_numpy(x).reshape(like.shape)  # noqa: E731
    return (column(rows, a0), column(cols, b0), column(Wb, a0), column(WTa, b0),
            column(gu, u) if has_outer else None, column(gv, v) if has_outer else None)
