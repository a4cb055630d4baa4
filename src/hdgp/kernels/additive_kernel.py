"""Additive kernel of all interaction orders (Duvenaud et al., 2011) with order variances.

The order-:math:`r` kernel is the elementary symmetric polynomial :math:`e_r` of the
one-dimensional base kernels. It is evaluated with the subtraction-free recurrence

.. math::

    e_r(k_1, \\dots, k_i) = e_r(k_1, \\dots, k_{i-1}) + k_i\\, e_{r-1}(k_1, \\dots, k_{i-1}),

which costs the same :math:`O(D R)` elementwise passes as the Newton–Girard
formulae (Duvenaud eq. 1.13, OAK Algorithm 1) but has none of their cancellation.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np
import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from linear_operator import to_dense

from ..exceptions import CostWarning
from . import log_positive
from ._autograd import refuse_double_backward
from ._compiled import as_array, rows_backward, rows_forward, use_compiled

__all__ = ["AdditiveKernel", "additive_sum", "elementary_symmetric", "symmetric_additive_sum"]

#: Elements processed together on the CPU: the D + 2(R + 1) rows of one tile stay in cache,
#: and the backward pass stores only D·R·_CHUNK prefix values (measured fastest on 2-core x86).
_CHUNK = 16384
#: On a GPU, tiles are as wide as keeps the backward's D·R prefix rows at 2^28 entries (2 GB in
#: float64): cache tiling buys nothing there and every elementwise pass is a kernel launch (with
#: CPU-sized tiles sparse OAK on a 256 × 15,000 K_uf made ~200,000 launches per evaluation).
_GPU_PREFIX_ENTRIES = 2**28

#: From this many rows on, k(X, X) is summed on its lower triangle (:func:`symmetric_additive_sum`).
#: Measured with the compiled sum, OAK's constrained-SE base (D = R = 8), kernel + backward, one
#: thread: n = 64 0.94x, 128 1.10x, 200 1.27x, 300 1.35x the whole matrix. A GPU takes the whole
#: matrix as one tile and would gain nothing.
_SYMMETRIC_MIN_N = 128
#: k(X, X)'s base kernels are evaluated in about this many row blocks of its lower triangle: more
#: blocks compute less of the upper triangle (1/(2·blocks) of it), at one base-kernel call each.
_BASE_BLOCKS = 16

#: Bytes of one row block's base stack (D x rows x cols) where no autograd graph is kept (posteriors,
#: predictions, the values of a fit's last evaluations): the kernel matrix is then filled block by block
#: and no block outlives its rows. Larger blocks came fresh from the OS at every call (glibc maps
#: allocations above 32 MB and unmaps them when freed) and their page faults cost more than the sums.
_NO_GRAD_BLOCK_BYTES = 2**23

#: Above this many elementwise passes (D·R) per kernel evaluation, warn about cost.
_COST_WARN_PASSES = 1000


def elementary_symmetric(base: torch.Tensor, max_order: int) -> torch.Tensor:
    r"""Elementary symmetric polynomials :math:`e_0, \dots, e_R` of a stack of arrays.

    .. math::

        e_r(k_1, \dots, k_D) = \sum_{i_1 < \dots < i_r} \prod_{l=1}^{r} k_{i_l}
        \qquad (\text{Duvenaud eqs. 1.8–1.12})

    computed elementwise with the recurrence
    :math:`e_r^{(i)} = e_r^{(i-1)} + k_i e_{r-1}^{(i-1)}` (no subtractions).

    Parameters
    ----------
    base : torch.Tensor of shape (D, ...)
        The :math:`D` arrays :math:`k_i` (e.g. one kernel matrix per input feature).
    max_order : int
        Highest order :math:`R \ge 0` to return.

    Returns
    -------
    torch.Tensor of shape (R + 1, ...)
        ``out[r]`` is :math:`e_r(k_1, \dots, k_D)`; orders above :math:`D` are zero.

    Examples
    --------
    >>> import torch
    >>> elementary_symmetric(torch.tensor([[1.0], [2.0], [3.0]]), 3).flatten().tolist()
    [1.0, 6.0, 11.0, 6.0]
    """
    out = base.new_zeros((max_order + 1,) + tuple(base.shape[1:]))
    out[0] = 1.0
    for i in range(base.shape[0]):
        _absorb(out, base[i], min(i + 1, max_order))
    return out


def _absorb(e: torch.Tensor, k: torch.Tensor, top: int) -> None:
    """In place: e_r ← e_r + k·e_{r-1} for r = top..1 (descending, so e_{r-1} is still old)."""
    for r in range(top, 0, -1):
        e[r].addcmul_(k, e[r - 1])


def _reverse_sweep(k, g, variances, prefix, e, grad_k):
    r"""One tile of the backward pass (see :class:`_AdditiveSum`): returns the tile's
    :math:`\partial L/\partial\sigma^2` and writes :math:`\partial L/\partial k` into ``grad_k``
    (None: only the variances' gradient). ``prefix`` and ``e`` are scratch buffers shaped like
    ``(D, R) + k.shape[1:]`` and ``(R + 1,) + k.shape[1:]``."""
    n_dims, max_order = k.shape[0], variances.numel() - 1
    e.zero_()
    e[0] = 1.0
    for i in range(n_dims):  # prefix[i, r] = e_r(k_1..k_{i-1}) for r < R: the values each step multiplies
        prefix[i] = e[:max_order]
        _absorb(e, k[i], min(i + 1, max_order))
    grad_var = torch.tensordot(e, g, dims=g.dim())
    if grad_k is None:
        return grad_var
    adj = variances.view((-1,) + (1,) * g.dim()) * g
    for i in reversed(range(n_dims)):
        gb = grad_k[i]
        torch.mul(adj[1], prefix[i, 0], out=gb)  # the first term written, not added to zeros
        for r in range(1, max_order):
            gb.addcmul_(adj[r + 1], prefix[i, r])
        # adjoint of e_r ← e_r + k e_{r-1}: a_{r} ← a_{r} + k a_{r+1}, ascending r
        for r in range(max_order):
            adj[r].addcmul_(k[i], adj[r + 1])
    return grad_var


class _AdditiveSum(torch.autograd.Function):
    r""":math:`\sum_{r=0}^{R} \sigma_r^2 e_r(k_1..k_D)` with a memory-light backward pass.

    Forward keeps only :math:`R+1` running buffers. Backward reverses the recurrence:
    with adjoints :math:`a_r = \partial L / \partial e_r^{(i)}`, starting from
    :math:`a_r = \sigma_r^2 G`, each step gives
    :math:`\partial L/\partial k_i = \sum_r a_r\, e_{r-1}^{(i-1)}` and
    :math:`a_r \leftarrow a_r + k_i a_{r+1}`. The prefix polynomials
    :math:`e^{(i-1)}` are recomputed tile by tile (``chunk`` elements), so the extra
    storage is :math:`D R` tiles, never :math:`D R` full matrices. On the CPU both passes run as
    compiled loops instead (:mod:`._compiled`), the same recurrences over short runs of entries.
    """

    @staticmethod
    def forward(ctx, base, order_variances, chunk):
        ctx.save_for_backward(base, order_variances)
        ctx.chunk = chunk
        if use_compiled(base):
            rows = _as_rows(base)
            out = rows.new_empty(rows.shape[1:])
            return _compiled_forward([rows], order_variances, False, out).reshape(base.shape[1:])
        flat = base.reshape(base.shape[0], -1)
        out = flat.new_empty(flat.shape[1])
        # element tiles keep the (R + 1 + D) working rows in cache
        for start in range(0, flat.shape[1], chunk):
            e = elementary_symmetric(flat[:, start : start + chunk], order_variances.numel() - 1)
            out[start : start + chunk] = order_variances @ e
        return out.reshape(base.shape[1:])

    @staticmethod
    def backward(ctx, grad_out):
        refuse_double_backward("AdditiveKernel")
        base, variances = ctx.saved_tensors
        if use_compiled(base):
            rows = _as_rows(base)
            (grad_rows,), grad_var = _compiled_backward([rows], variances, False, grad_out.reshape(rows.shape[1:]),
                                                        ctx.needs_input_grad[:1])
            return (grad_rows.reshape(base.shape) if grad_rows is not None else None), grad_var, None
        n_dims, max_order = base.shape[0], variances.numel() - 1
        flat_base = base.reshape(n_dims, -1)
        flat_grad = grad_out.reshape(-1)
        grad_base = torch.empty_like(flat_base) if ctx.needs_input_grad[0] else None
        grad_var = torch.zeros_like(variances)
        # buffers reused across tiles (fresh allocations page-fault on every tile)
        width = min(ctx.chunk, flat_grad.numel())
        prefix_buf = flat_base.new_empty((n_dims, max_order, width))
        e_buf = flat_base.new_empty((max_order + 1, width))
        for start in range(0, flat_grad.numel(), ctx.chunk):
            k = flat_base[:, start : start + ctx.chunk]
            width = k.shape[1]
            grad_k = grad_base[:, start : start + ctx.chunk] if grad_base is not None else None
            grad_var += _reverse_sweep(k, flat_grad[start : start + ctx.chunk], variances,
                                       prefix_buf[..., :width], e_buf[:, :width], grad_k)
        grad_base = grad_base.reshape(base.shape) if grad_base is not None else None
        return grad_base, grad_var, None


class _SymmetricAdditiveSum(torch.autograd.Function):
    r""":class:`_AdditiveSum` of symmetric :math:`n \times n` base matrices, on their lower triangle.

    Every :math:`k_i(X, X)` is symmetric and so is the sum, so both passes walk only the row
    blocks' entries left of and inside the diagonal (about :math:`n^2/2` of the :math:`n^2`)
    and the upper triangle is copied from the lower. The base arrives as row blocks
    :math:`k_i(X_{[R_0, R_1)}, X_{[0, R_1)})` (:func:`symmetric_additive_sum`), walked in tiles of
    at most ``chunk`` entries. Backward sees :math:`G + G^\top` left of the tiles' diagonal squares
    (each such entry stands for its mirror too) and :math:`G` inside them (where both mirrors are
    computed), and returns a base gradient that is zero right of those squares: the base kernels'
    own backward then gives the same parameter gradients as the full sum, since
    :math:`k_i(x_a, x_b) = k_i(x_b, x_a)`.
    """

    @staticmethod
    def forward(ctx, order_variances, chunk, *blocks):
        ctx.save_for_backward(order_variances, *blocks)
        ctx.chunk = chunk
        n = blocks[-1].shape[-1]
        out = blocks[0].new_empty(n, n)
        if use_compiled(blocks[0]):
            _compiled_forward(blocks, order_variances, True, out)
        else:
            for i, row0, r0, r1 in _tiles(blocks, chunk):
                e = elementary_symmetric(blocks[i][:, r0 - row0 : r1 - row0, :r1], order_variances.numel() - 1)
                out[r0:r1, :r1] = torch.tensordot(order_variances, e, dims=1)
        return _mirror_lower(out)

    @staticmethod
    def backward(ctx, grad_out):
        refuse_double_backward("AdditiveKernel")
        variances, *blocks = ctx.saved_tensors
        if use_compiled(blocks[0]):
            mirrored = _fold_upper_onto_lower(grad_out)  # each entry left of the diagonal stands for its mirror too
            grads, grad_var = _compiled_backward(blocks, variances, True, mirrored, ctx.needs_input_grad[2:])
            return (grad_var, None, *grads)
        n_dims, max_order = blocks[0].shape[0], variances.numel() - 1
        # right of each tile's diagonal square is the only part the sweeps leave unwritten
        grads = [torch.empty_like(b) if needs else None for b, needs in zip(blocks, ctx.needs_input_grad[2:])]
        grad_var = torch.zeros_like(variances)
        tiles = list(_tiles(blocks, ctx.chunk))
        size = max((r1 - r0) * r1 for _, _, r0, r1 in tiles)
        prefix_buf, e_buf = blocks[0].new_empty((n_dims, max_order, size)), blocks[0].new_empty((max_order + 1, size))
        for i, row0, r0, r1 in tiles:
            shape = (r1 - r0, r1)
            g = grad_out[r0:r1, :r1].clone()
            g[:, :r0] += grad_out[:r0, r0:r1].T  # left of the diagonal square: each entry also stands for its mirror
            grad_k = None
            if grads[i] is not None:
                rows = grads[i][:, r0 - row0 : r1 - row0]
                rows[..., r1:].zero_()
                grad_k = rows[..., :r1]
            grad_var += _reverse_sweep(blocks[i][:, r0 - row0 : r1 - row0, :r1], g, variances,
                                       prefix_buf[..., : shape[0] * shape[1]].view(n_dims, max_order, *shape),
                                       e_buf[:, : shape[0] * shape[1]].view(max_order + 1, *shape), grad_k)
        return (grad_var, None, *grads)


#: Rows per panel of the triangle copies below: a panel and the transposed block it reads stay in cache.
_MIRROR_ROWS = 256


def _mirror_lower(out: torch.Tensor) -> torch.Tensor:
    """``out`` (n, n) with its strict lower triangle copied onto the upper one, in place, panel by panel.

    ``torch.where(triu, out.T, out)`` read all of ``out.T`` with stride n and wrote a new matrix:
    5x as long (n = 4000, one thread: 287 ms against 56 ms, *ad hoc*), and as long as the compiled
    sum's own share of a step at that size."""
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
    (``g + g.T`` on the whole matrix: 84 ms at n = 3000, here about 50 ms, *ad hoc*)."""
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


def _base_block(n: int, calls: int = 1) -> int:
    """Entries per row block of k(X, X)'s base matrices: about :data:`_BASE_BLOCKS` blocks, none
    smaller than a tile of the sum per kernel the base calls (a stack of ``calls`` feature groups
    pays each group's fixed cost in every block: 20 categorical groups, n = 400, made the blocks
    1.3x slower than one whole matrix)."""
    return max(_CHUNK * calls, n * n // (2 * _BASE_BLOCKS))


def _as_rows(base: torch.Tensor) -> torch.Tensor:
    """A base stack ``(D, ...)`` as one row ``(D, 1, N)`` of the compiled kernels: the whole sum is
    elementwise, and long rows keep their loops busy (an ``(n, 1)`` layout would pay a row's fixed
    cost for every entry)."""
    return base.reshape(base.shape[0], 1, math.prod(base.shape[1:]))


def _compiled_forward(blocks, variances, lower: bool, out: torch.Tensor) -> torch.Tensor:
    """Fill ``out`` from consecutive row blocks ``(D, rows, cols)`` (:func:`._compiled.rows_forward`)."""
    v, row0 = as_array(variances, out.dtype), 0
    for block in blocks:
        rows_forward(as_array(block), row0, lower, v, out.numpy())
        row0 += block.shape[1]
    return out


def _compiled_backward(blocks, variances, lower: bool, grad_out: torch.Tensor, needs):
    """Gradients of :func:`_compiled_forward`: one per block (None where ``needs`` is false) and the variances'."""
    g, v = as_array(grad_out), as_array(variances, grad_out.dtype)
    # float64 sums whatever the dtype: a float32 total of n² terms would keep few digits
    grad_var, grads, row0 = np.zeros(v.shape, dtype=np.float64), [], 0
    for block, need in zip(blocks, needs):
        b = as_array(block)
        grad = np.empty_like(b) if need else np.empty((1, 1, 1), dtype=b.dtype)
        rows_backward(b, row0, lower, v, g, bool(need), grad, grad_var)
        grads.append(torch.from_numpy(grad) if need else None)
        row0 += block.shape[1]
    return grads, torch.from_numpy(grad_var).to(variances)


def additive_sum(base: torch.Tensor, order_variances: torch.Tensor, chunk: Optional[int] = None):
    r"""Weighted sum of elementary symmetric polynomials, differentiable.

    .. math::

        k = \sum_{r=0}^{R} \sigma_r^2\, e_r(k_1, \dots, k_D)

    Parameters
    ----------
    base : torch.Tensor of shape (D, ...)
        Stack of the :math:`D` one-dimensional kernel evaluations.
    order_variances : torch.Tensor of shape (R + 1,)
        :math:`\sigma_0^2, \dots, \sigma_R^2`.
    chunk : int, optional
        Elements processed together by the tensor tiles (tuning / tests; the compiled CPU
        loops need none). Default :data:`_CHUNK`; on a GPU as many as keep the backward's
        prefix buffer at :data:`_GPU_PREFIX_ENTRIES`.

    Returns
    -------
    torch.Tensor of shape base.shape[1:]
    """
    constant = _order_zero_only(order_variances, base.shape[1:], base)
    if constant is not None:
        return constant
    if chunk is None:
        passes = base.shape[0] * max(order_variances.numel() - 1, 1)
        chunk = _CHUNK if base.device.type == "cpu" else max(_CHUNK, _GPU_PREFIX_ENTRIES // passes)
    return _AdditiveSum.apply(base, order_variances, int(chunk))


def symmetric_additive_sum(base, order_variances: torch.Tensor, chunk: Optional[int] = None):
    r""":func:`additive_sum` of symmetric base matrices :math:`k_i(X, X)`, computed on their lower
    triangle (about half the elementwise passes, forward and backward; see :class:`_SymmetricAdditiveSum`).

    Parameters
    ----------
    base : torch.Tensor of shape (D, n, n), or a sequence of row blocks
        The symmetric base matrices, whole, or as consecutive row blocks
        :math:`k_i(X_{[R_0, R_1)}, X_{[0, R_1)})` of shape :math:`(D, R_1 - R_0, R_1)` covering
        rows :math:`0..n` (the part of the lower triangle they hold, so the base kernels need not
        evaluate the upper one). Only entries left of and inside the diagonal tiles are read.
    order_variances : torch.Tensor of shape (R + 1,)
    chunk : int, optional
        Entries per tile of the tensor tiles (default :data:`_CHUNK`; the compiled CPU loops need none).

    Returns
    -------
    torch.Tensor of shape (n, n)
    """
    blocks = (base,) if isinstance(base, torch.Tensor) else tuple(base)
    row0 = 0
    for block in blocks:
        if block.dim() != 3 or block.shape[-1] != row0 + block.shape[-2] or block.shape[0] != blocks[0].shape[0]:
            raise ValueError(f"Row blocks of a symmetric base must be (D, R1 - R0, R1) for consecutive rows "
                             f"R0..R1; got {tuple(block.shape)} for rows from {row0}.")
        row0 = block.shape[-1]
    constant = _order_zero_only(order_variances, (row0, row0), blocks[0])
    if constant is not None:
        return constant
    return _SymmetricAdditiveSum.apply(order_variances, int(chunk or _CHUNK), *blocks)


def _order_zero_only(order_variances: torch.Tensor, shape, like: torch.Tensor):
    r"""The sum when it has no order above 0 (R = 0): the constant :math:`\sigma_0^2` (no base
    gradient); None otherwise. Refuses an empty ``order_variances``."""
    if order_variances.dim() != 1 or order_variances.numel() < 1:
        raise ValueError(f"order_variances must have shape (R + 1,) with R >= 0, got {tuple(order_variances.shape)}.")
    if order_variances.numel() > 1:
        return None
    return order_variances.to(like)[0].expand(shape).clone()


def _get_order_variances(module):
    # module-level (not a lambda) so kernels with priors can be pickled
    return module.order_variances


def _set_order_variances(module, value):
    module._set_order_variances(value)


class AdditiveKernel(Kernel):
    r"""Additive kernel with interactions of all orders 0..R and one variance per order.

    .. math::

        k(\mathbf x, \mathbf x') = \sum_{r=0}^{R} \sigma_r^2\,
        e_r\big(k_1(x_1, x_1'), \dots, k_D(x_D, x_D')\big)

    (Duvenaud et al. eqs. 1.2–1.5 and 1.13; OAK Algorithm 1, which adds the order-0
    constant term :math:`\sigma_0^2`). With unconstrained SE base kernels this is the
    additive GP of Duvenaud; with constrained base kernels
    (:mod:`hdgp.kernels.orthogonal_kernel`) it is the orthogonal additive kernel (OAK).

    Parameters
    ----------
    base_kernel : gpytorch.kernels.Kernel
        Feature-wise base kernel. It is called on inputs reshaped to
        ``(..., D, n, 1)`` (one 1-D input per feature, features along a batch
        dimension) and must return ``(..., D, n, m)``: :class:`~hdgp.kernels.SEKernel`
        or the constrained kernels of :mod:`hdgp.kernels.orthogonal_kernel`. GPyTorch's
        ``RBFKernel(batch_shape=torch.Size([D]))`` computes the same, but GPyTorch then
        counts its feature dimension as a batch of ``D`` independent kernels in any kernel
        that contains this one (a ``ScaleKernel``, a sum), which breaks such compositions.
        The base kernels should have unit scale: the order variances carry the scale.
    num_dims : int
        Number of input features :math:`D`.
    max_order : int, optional
        Highest interaction order :math:`R`, :math:`1 \le R \le D`. Default
        :math:`\min(D, 10)`.
    order_variance_prior : gpytorch.priors.Prior, optional
        Prior on each :math:`\sigma_r^2` (OAK: a Gamma prior, Section 5; (1, 0.2) in the authors' code).
    order_variance_constraint : gpytorch.constraints.Interval, optional
        Constraint on :math:`\sigma_r^2`, default positive on a log scale (order
        variances span many decades; L-BFGS converges much faster in log space).

    Attributes
    ----------
    order_variances : torch.Tensor of shape (R + 1,)
        :math:`\sigma_0^2, \dots, \sigma_R^2`; initialised to
        :math:`1 / ((R+1) \binom{D}{r})` so every order starts with equal prior variance
        at unit base-kernel values.

    Examples
    --------
    >>> import torch
    >>> from gpytorch.kernels import RBFKernel, ScaleKernel
    >>> from hdgp.kernels import SEKernel
    >>> k = AdditiveKernel(SEKernel(3), num_dims=3, max_order=2)
    >>> (ScaleKernel(k) + RBFKernel())(torch.randn(5, 3)).to_dense().shape
    torch.Size([5, 5])
    """

    has_lengthscale = False

    def __init__(
        self,
        base_kernel: Kernel,
        num_dims: int,
        max_order: Optional[int] = None,
        order_variance_prior: Optional[Prior] = None,
        order_variance_constraint: Optional[Interval] = None,
        **kwargs,
    ):
        if int(num_dims) != num_dims or num_dims < 1:
            raise ValueError(f"num_dims must be a positive integer, got {num_dims!r}.")
        num_dims = int(num_dims)
        if max_order is None:
            max_order = min(num_dims, 10)
        if int(max_order) != max_order or not 1 <= max_order <= num_dims:
            raise ValueError(
                f"max_order must be an integer between 1 and the number of features "
                f"({num_dims}), got {max_order!r}."
            )
        max_order = int(max_order)
        if kwargs.get("batch_shape", torch.Size()) != torch.Size():
            raise ValueError("AdditiveKernel has no batch of independent kernels (batch_shape); build one "
                             "kernel per output instead.")
        features = getattr(base_kernel, "num_features", num_dims)
        if features != num_dims:
            raise ValueError(f"The base kernel holds {features} feature kernels, but num_dims={num_dims}.")
        if num_dims * max_order > _COST_WARN_PASSES:
            warnings.warn(
                f"AdditiveKernel with {num_dims} features and max_order={max_order} makes "
                f"{num_dims * max_order} elementwise passes over each n×m kernel matrix per "
                "evaluation; consider a lower max_order.",
                CostWarning,
                stacklevel=2,
            )
        super().__init__(**kwargs)
        self.base_kernel = base_kernel
        self.num_dims = num_dims
        self.max_order = max_order
        if order_variance_constraint is None:
            order_variance_constraint = log_positive()
        self.register_parameter("raw_order_variances", torch.nn.Parameter(torch.zeros(max_order + 1)))
        self.register_constraint("raw_order_variances", order_variance_constraint)
        if order_variance_prior is not None:
            if not isinstance(order_variance_prior, Prior):
                raise TypeError(
                    "order_variance_prior must be a gpytorch.priors.Prior, got "
                    f"{type(order_variance_prior).__name__}."
                )
            self.register_prior(
                "order_variance_prior",
                order_variance_prior,
                _get_order_variances,
                _set_order_variances,
            )
        init = [1.0 / ((max_order + 1) * math.comb(num_dims, r)) for r in range(max_order + 1)]
        self._set_order_variances(init)

    @property
    def batch_shape(self) -> torch.Size:
        # the base kernel's batch dimension indexes features, not independent kernels
        return self._batch_shape

    @batch_shape.setter
    def batch_shape(self, value: torch.Size) -> None:
        self._batch_shape = value

    @property
    def order_variances(self) -> torch.Tensor:
        return self.raw_order_variances_constraint.transform(self.raw_order_variances)

    @order_variances.setter
    def order_variances(self, value) -> None:
        self._set_order_variances(value)

    def _set_order_variances(self, value) -> None:
        raw = self.raw_order_variances  # Python floats go straight to its dtype, not through float32
        value = torch.as_tensor(value, dtype=raw.dtype, device=raw.device)
        if value.dim() == 0:  # one value for every order (as GPyTorch broadcasts a scalar length-scale)
            value = value.expand(self.raw_order_variances.shape)
        if value.shape != self.raw_order_variances.shape:
            raise ValueError(
                f"order_variances must have shape ({self.max_order + 1},), got {tuple(value.shape)}."
            )
        self.initialize(raw_order_variances=self.raw_order_variances_constraint.inverse_transform(value))

    def _symmetric_values(self, X: torch.Tensor, calls: int) -> torch.Tensor:
        """k(X, X) without a graph, by the compiled lower-triangle sum of :class:`_SymmetricAdditiveSum`
        (the same values), each row block's base matrices summed and freed before the next are made:
        the graph's blocks, all alive at once, held D n² / 2 values (1.3 GB at n = 5000, D = 13)."""
        n = X.shape[0]
        out = X.new_empty(n, n)
        variances = as_array(self.order_variances.detach(), X.dtype)
        entries = max(_CHUNK * max(calls, 1), _NO_GRAD_BLOCK_BYTES // (self.num_dims * X.element_size()))
        for r0, r1 in _row_blocks(0, n, min(_base_block(n, max(calls, 1)), entries)):
            rows_forward(as_array(self.base_matrices(X[r0:r1], X[:r1])), r0, True, variances, out.numpy())
        return _mirror_lower(out)

    def base_matrices(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False) -> torch.Tensor:
        r"""Stack of per-feature base kernel evaluations :math:`k_i(x_i, x_i')`.

        Parameters
        ----------
        x1, x2 : torch.Tensor of shape (..., n, D) and (..., m, D)

        Returns
        -------
        torch.Tensor of shape (..., D, n, m), or (..., D, n) when ``diag``.
        """
        if x1.shape[-1] != self.num_dims or x2.shape[-1] != self.num_dims:
            raise ValueError(
                f"AdditiveKernel expects inputs with {self.num_dims} features, got "
                f"{x1.shape[-1]} and {x2.shape[-1]}."
            )
        # contiguous (..., D, n, 1) inputs: elementwise base kernels lay their output out like
        # their inputs, and a transposed view would give (n, m, D) memory order, so every
        # per-feature pass of the Newton-Girard sum would stride across D (5-10x slower at D=128)
        a = x1.transpose(-1, -2).unsqueeze(-1).contiguous()
        b = x2.transpose(-1, -2).unsqueeze(-1).contiguous()
        return to_dense(self.base_kernel.forward(a, b, diag=diag))

    def _needs_graph(self, x1: torch.Tensor, x2: torch.Tensor) -> bool:
        return torch.is_grad_enabled() and (x1.requires_grad or x2.requires_grad
                                            or any(p.requires_grad for p in self.parameters()))

    def _no_grad_rows(self, x1: torch.Tensor, cols: int) -> int:
        """Rows of x1 per block of a graph-free evaluation against ``cols`` columns (see _NO_GRAD_BLOCK_BYTES)."""
        return max(1, _NO_GRAD_BLOCK_BYTES // (self.num_dims * max(cols, 1) * x1.element_size()))

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError("AdditiveKernel does not support last_dim_is_batch.")
        if not diag and x1 is x2 and x1.dim() == 2 and x1.device.type == "cpu" and x1.shape[0] >= _SYMMETRIC_MIN_N:
            # k(X) (GPyTorch passes X twice): base kernels and sum on the lower triangle, half the passes
            n = x1.shape[0]
            calls = len(getattr(self.base_kernel, "kernels", ()))  # FeatureStackKernel: one kernel per group
            if not self._needs_graph(x1, x2) and use_compiled(x1):
                return self._symmetric_values(x1, calls)
            blocks = [self.base_matrices(x1[r0:r1], x1[:r1])
                      for r0, r1 in _row_blocks(0, n, _base_block(n, max(calls, 1)))]
            return symmetric_additive_sum(blocks, self.order_variances.to(blocks[0]))
        if not diag and x1.dim() == 2 and x2.dim() == 2 and x1.device.type == "cpu" and not self._needs_graph(x1, x2):
            step = self._no_grad_rows(x1, x2.shape[0])
            if x1.shape[0] > step:  # in row blocks (elementwise: the same values as one call)
                variances = self.order_variances.to(x1)
                out = x1.new_empty(x1.shape[0], x2.shape[0])
                for r0 in range(0, x1.shape[0], step):
                    out[r0:r0 + step] = additive_sum(self.base_matrices(x1[r0:r0 + step], x2).movedim(-3, 0), variances)
                return out
        base = self.base_matrices(x1, x2, diag=diag)
        variances = self.order_variances.to(base)
        if diag:
            return additive_sum(base.movedim(-2, 0), variances)
        return additive_sum(base.movedim(-3, 0), variances)
