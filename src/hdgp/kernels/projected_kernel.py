"""Projected-additive kernel of RPA-GP / DPA-GP and their -ARD variants.

.. math::

    k(x, x') = \\sum_{j=1}^{J} \\alpha_j\\, k_j\\big(P^{(j)} A x,\\; P^{(j)} A x'\\big)

(Delbridge, Bindel & Wilson 2020, eq. 2 and Sec. 4.3). Two parameterisations:

* ``ard=True`` (-ARD, Sec. 4.3): :math:`A = \\mathrm{diag}(1/\\ell)` with one learned
  length-scale per *input* dimension, unit sub-kernel length-scales and fixed
  weights :math:`\\alpha_j = 1/J`;
* ``ard=False`` (RPA-GP-1, DPA-GP, RPA-GP-2/3): :math:`A = I`, every sub-kernel
  :math:`j` has its own length-scale :math:`\\lambda_j` and learned weights
  :math:`\\alpha = \\mathrm{softmax}(\\rho)` (they sum to one, so an outer
  ``ScaleKernel`` carries the total signal variance).

The default RBF sub-kernels are evaluated by a fused autograd function that
accumulates the sum over :math:`j` and recomputes each term in the backward
pass, so memory stays :math:`O(n^2)` for any :math:`J` (a stacked
:math:`J \\times n \\times n` tensor is what runs out of memory in GPyTorch
issue #748).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from gpytorch.kernels import Kernel
from torch.utils.checkpoint import checkpoint

from ._autograd import refuse_double_backward
from ._constraints import log_positive
from ._elementwise import exp_
from ._own_batch_shape import broadcast_batch
from .ard_kernel import _centred

__all__ = ["ProjectedAdditiveKernel"]


#: Entries of one block's (J, rows, cols) temporaries on the CPU: ~1 MB in float64, so every
#: elementwise pass runs in cache, yet each torch call covers all J terms and several rows
#: (per-term blocks of few rows would spend much of the kernel time dispatching small ops).
_CPU_BLOCK_ENTRIES = 2**17
#: The same on a GPU: there, cache blocking buys nothing and each elementwise pass is a kernel
#: launch, so blocks are as large as keeps a temporary at 2^26 entries (512 MB in float64).
_GPU_BLOCK_ENTRIES = 2**26
#: Fewest rows per block: with fewer, the per-call overhead outweighs the cache.
_MIN_BLOCK_ROWS = 8
#: Exponents are clamped to ≥ −708 before the exponential: e^x for x < −708 is a subnormal number or
#: 0, which the exponential routines compute on a slow path (far pairs of points are most of a
#: high-dimensional K); e^{−708} ≈ 3.3·10⁻³⁰⁸ stands for them instead, below any tolerance of the sum.
_EXP_FLOOR = 708.0


def _stack(Z: torch.Tensor, slices, terms: list[int]) -> torch.Tensor:
    """Columns of the sub-kernels ``terms`` (all of one degree D) as ``(..., len(terms), n, D)``, times √½."""
    degree = slices[terms[0]].stop - slices[terms[0]].start
    cols = [slices[j].start + k for j in terms for k in range(degree)]
    # contiguous in n: every block pass reads rows of these
    return Z[..., cols].unflatten(-1, (len(terms), degree)).movedim(-2, -3).contiguous().mul_(math.sqrt(0.5))


def _term_groups(Z1: torch.Tensor, Z2: torch.Tensor, slices, symmetric: bool):
    """The sub-kernels grouped by degree: ``[(terms, U1, U2), ...]`` with ``U = √½ z``, ``(..., J_g, n, D)``.

    The √½ makes every term :math:`\\exp(-\\lVert u - u' \\rVert^2)`. One-dimensional
    terms use exact differences (:func:`_block_terms`); for :math:`D > 1` both inputs are
    centred by :func:`~hdgp.kernels.ard_kernel._centred`, since the matrix-product
    expansion used there is exact only near the centre.
    """
    by_degree: dict[int, list[int]] = {}
    for j, sl in enumerate(slices):
        by_degree.setdefault(sl.stop - sl.start, []).append(j)
    groups = []
    for degree, terms in by_degree.items():
        U2 = _stack(Z2, slices, terms)
        U1 = U2 if symmetric else _stack(Z1, slices, terms)
        if degree > 1:
            U1, U2 = _centred(U1, U2)
            U1 = U2 if symmetric else U1
        groups.append((terms, U1, U2))
    return groups


def _block_terms(a: torch.Tensor, b: torch.Tensor, zero: torch.Tensor, keep_differences: bool = False):
    """:math:`E_{jik} = \\exp(-\\lVert a_{ji} - b_{jk} \\rVert^2)`, ``(..., J, r, m)``, for ``a (..., J, r, D)``, ``b (..., J, m, D)``.

    Returns ``(E, t)``. In 1-D, :math:`t = a_i - b_k` is formed exactly and
    :math:`-t^2` in one fused ``addcmul`` pass onto ``zero`` (a 0-d zero tensor); ``t``
    is returned (else ``None``) when ``keep_differences``. For :math:`D > 1`, one
    batched product :math:`\\lVert a\\rVert^2 + \\lVert b\\rVert^2 - 2ab^\\top` on centred
    inputs (:func:`_term_groups`); ``t`` is ``None``.
    """
    if a.shape[-1] == 1:
        t = a - b.transpose(-1, -2)
        E = torch.addcmul(zero, t, t, value=-1.0, out=None if keep_differences else t)
        return exp_(E.clamp_min_(-_EXP_FLOOR)), t if keep_differences else None
    sq = a.square().sum(-1, keepdim=True) + b.square().sum(-1).unsqueeze(-2)
    sq.add_(a @ b.transpose(-1, -2), alpha=-2.0)
    return exp_(sq.clamp_(0.0, _EXP_FLOOR).neg_()), None


def _block_gradients(M: torch.Tensor, a: torch.Tensor, b: torch.Tensor, t, first_col: int):
    """:math:`\\sum_k M_{jik}(a_{ji} - b_{jk})` for every row ``(..., J, r, D)``, and
    :math:`\\sum_i M_{jik}(b_{jk} - a_{ji})` for the columns from ``first_col`` on ``(..., J, m', D)``.

    In 1-D from the differences ``t`` (one product :math:`M \\odot t`, overwriting ``t``,
    summed both ways); otherwise :math:`\\mathrm{rowsum}(M)\\, a - M b` and
    :math:`\\mathrm{colsum}(M)\\, b - M^\\top a`, the latter as :math:`(a^\\top M)^\\top`
    (row-vector products read M in its own order).
    """
    if t is not None:
        Mt = t.mul_(M)
        return Mt.sum(-1, keepdim=True), -Mt[..., first_col:].sum(-2).unsqueeze(-1)
    right, b_right = M[..., first_col:], b[..., first_col:, :]
    rows = M.sum(-1, keepdim=True) * a - M @ b
    cols = right.sum(-2).unsqueeze(-1) * b_right - (a.transpose(-1, -2) @ right).transpose(-1, -2)
    return rows, cols


def _row_blocks(groups, n_rows: int, n_cols: int, batch: torch.Size, device: torch.device, symmetric: bool):
    """``(first row, number of rows, first column)`` of blocks of rows that tile the ``(n_rows, n_cols)`` K.

    A block's temporaries hold width × rows × cols entries (width: terms of the largest
    degree group in ``groups`` times the number of ``batch`` entries): about :data:`_CPU_BLOCK_ENTRIES` on the CPU,
    :data:`_GPU_BLOCK_ENTRIES` on a GPU. For a symmetric K (both arguments the same
    tensor) each block only spans the columns from its own diagonal on: the upper
    triangle, half the work.
    """
    budget = _CPU_BLOCK_ENTRIES if device.type == "cpu" else _GPU_BLOCK_ENTRIES
    width = max(len(terms) for terms, _, _ in groups) * batch.numel()
    step = max(_MIN_BLOCK_ROWS, budget // max(1, width * n_cols))
    for start in range(0, n_rows, step):
        yield start, min(step, n_rows - start), start if symmetric else 0


class _ProjectedRBFSum(torch.autograd.Function):
    """:math:`K = \\sum_j w_j \\exp(-\\tfrac12 \\lVert Z_1^{(j)} - Z_2^{(j)} \\rVert^2)` with O(n^2) memory.

    ``slices[j]`` gives the columns of ``Z1``/``Z2`` that belong to sub-kernel
    ``j``; internally the terms are grouped by degree and stacked as
    :math:`u = \\sqrt{1/2}\\, z` (:func:`_term_groups`), so that
    :math:`E_j = \\exp(-\\lVert u_1 - u_2 \\rVert^2)`. With :math:`M_j = G \\odot E_j`
    the backward pass is

    .. math::

        \\frac{\\partial}{\\partial u_{1,ji}} = -2 w_j \\sum_k M_{jik}\\,(u_{1,ji} - u_{2,jk}),\\qquad
        \\frac{\\partial}{\\partial u_{2,jk}} = -2 w_j \\sum_i M_{jik}\\,(u_{2,jk} - u_{1,ji})

    (:func:`_block_gradients`), and :math:`\\partial/\\partial w_j = \\sum M_j`. When both
    arguments are the same tensor :math:`Z` (training, :math:`K(X, X)`) the two add up
    to the first with :math:`G + G^\\top` in place of :math:`G`. Both passes walk K in
    blocks of rows (:func:`_row_blocks`), all terms of a degree at once, and recompute
    the terms there, so memory stays O(n²) for any J; for :math:`K(X, X)` they visit
    only the upper triangle (half the exponentials) and mirror it.
    """

    @staticmethod
    def forward(ctx, Z1, Z2, weights, slices):
        symmetric = Z1 is Z2
        groups = _term_groups(Z1, Z2, slices, symmetric)
        n1, n2 = Z1.shape[-2], Z2.shape[-2]
        K = Z1.new_empty(broadcast_batch(Z1.shape[:-2], Z2.shape[:-2]) + (n1, n2))
        zero = K.new_zeros(())
        for r0, nr, c0 in _row_blocks(groups, n1, n2, K.shape[:-2], Z1.device, symmetric):
            block = None
            for terms, U1, U2 in groups:
                E, _ = _block_terms(U1.narrow(-2, r0, nr), U2.narrow(-2, c0, n2 - c0), zero)
                part = (weights[terms] @ E.flatten(-2)).unflatten(-1, E.shape[-2:])  # Σ_j w_j E_j
                block = part if block is None else block.add_(part)
            K.narrow(-2, r0, nr).narrow(-1, c0, n2 - c0).copy_(block)
            if symmetric:  # mirror the block right of the diagonal into the lower triangle
                right = block.narrow(-1, nr, n2 - c0 - nr)
                K.narrow(-2, r0 + nr, right.shape[-1]).narrow(-1, r0, nr).copy_(right.transpose(-1, -2))
        ctx.slices, ctx.symmetric = slices, symmetric
        ctx.save_for_backward(Z1, Z2, weights)
        return K

    @staticmethod
    def backward(ctx, G):
        refuse_double_backward("ProjectedAdditiveKernel")
        Z1, Z2, weights = ctx.saved_tensors
        need_z1, need_z2, need_w = ctx.needs_input_grad[:3]
        symmetric = ctx.symmetric and need_z1 and need_z2
        groups = _term_groups(Z1, Z2, ctx.slices, ctx.symmetric)
        n1, n2 = Z1.shape[-2], Z2.shape[-2]
        G = torch.broadcast_to(G, broadcast_batch(G.shape, Z1.shape[:-2] + (n1, n2)))
        batch = G.shape[:-2]
        g1 = [G.new_zeros(batch + U1.shape[-3:]) for _, U1, _ in groups] if need_z1 else None
        g2 = [G.new_zeros(batch + U2.shape[-3:]) for _, _, U2 in groups] if need_z2 and not symmetric else None
        gw = G.new_zeros(batch + weights.shape) if need_w else None
        zero = G.new_zeros(())
        for r0, nr, c0 in _row_blocks(groups, n1, n2, batch, G.device, symmetric):
            G_block = G.narrow(-2, r0, nr).narrow(-1, c0, n2 - c0)
            if symmetric:  # G + G^T on this block: each entry of M + M^T below, computed once
                G_block = G_block + G.narrow(-2, c0, n2 - c0).narrow(-1, r0, nr).transpose(-1, -2)
            for i, (terms, U1, U2) in enumerate(groups):
                a, b = U1.narrow(-2, r0, nr), U2.narrow(-2, c0, n2 - c0)
                E, t = _block_terms(a, b, zero, keep_differences=True)
                M = E.mul_(G_block.unsqueeze(-3))
                if need_w:
                    # symmetric: the part right of the block's square diagonal part also stands for
                    # its mirror image below the diagonal; the square holds both triangles of G + G^T
                    gw[..., terms] += M.sum((-1, -2)) - 0.5 * M[..., :nr].sum((-1, -2)) if symmetric \
                        else M.sum((-1, -2))
                rows, cols = _block_gradients(M, a, b, t, nr if symmetric else 0)
                if symmetric:
                    g1[i].narrow(-2, r0, nr).add_(rows)
                    g1[i].narrow(-2, r0 + nr, cols.shape[-2]).add_(cols)
                    continue
                if need_z1:
                    g1[i].narrow(-2, r0, nr).copy_(rows)
                if g2 is not None:
                    g2[i].add_(cols)
        # chain rule through u = √½ z: ∂/∂z = -2 w_j √½ (...)
        scale = -math.sqrt(2.0) * weights
        gZ1 = _unstacked(g1, groups, scale, ctx.slices).sum_to_size(Z1.shape) if need_z1 else None
        gZ2 = _unstacked(g2, groups, scale, ctx.slices).sum_to_size(Z2.shape) if g2 is not None else None
        # with Z1 and Z2 the same tensor autograd adds the two gradients: all of it is in gZ1
        return gZ1, gZ2, gw.sum_to_size(weights.shape) if need_w else None, None


def _unstacked(grads, groups, scale: torch.Tensor, slices) -> torch.Tensor:
    """Per-group gradients ``(..., J_g, n, D)``, each term's times ``scale[j]``, back in the
    column layout ``(..., n, sum(degrees))`` of Z."""
    columns = [None] * len(slices)
    for g, (terms, _, _) in zip(grads, groups):
        for k, j in enumerate(terms):
            columns[j] = g[..., k, :, :] * scale[j]
    return torch.cat(columns, dim=-1)


class ProjectedAdditiveKernel(Kernel):
    """Sum of low-dimensional kernels on fixed linear projections of the inputs.

    .. math::

        k(x, x') = \\sum_{j=1}^{J} \\alpha_j\\, k_j\\big(P^{(j)} A x,\\; P^{(j)} A x'\\big)

    Parameters
    ----------
    projections : torch.Tensor of shape (sum(degrees), d)
        Stacked rows of :math:`P^{(1)}, \\dots, P^{(J)}` (see :mod:`hdgp.projections`).
        Fixed (a buffer), never learned.
    degrees : sequence of int, optional
        :math:`D_j`, the number of rows of each :math:`P^{(j)}`; default all 1.
    ard : bool, default True
        -ARD parameterisation (learned :math:`A = \\mathrm{diag}(1/\\ell)`, unit
        sub-kernel length-scales, :math:`\\alpha_j = 1/J`); otherwise per-projection
        length-scales :math:`\\lambda_j` and learned softmax weights.
    base_kernel : gpytorch.kernels.Kernel, optional
        Sub-kernel applied to each scaled projection :math:`z_j` (shared by all
        :math:`j`). Default: the unit RBF :math:`\\exp(-\\tfrac12\\lVert z - z'\\rVert^2)`
        through a fused, memory-light path. A custom kernel is evaluated term by
        term under activation checkpointing, so memory also stays :math:`O(n^2)`.

    Attributes
    ----------
    weights : torch.Tensor of shape (J,)
        :math:`\\alpha`.
    input_lengthscale : torch.Tensor of shape (d,)
        :math:`\\ell` (only when ``ard``).
    projection_lengthscale : torch.Tensor of shape (J,)
        :math:`\\lambda` (only when not ``ard``).

    Length-scales are stored as their logarithms (raw parameter = log value,
    :func:`~hdgp.kernels.log_positive`, as hdgp's estimators build every kernel).

    References
    ----------
    Delbridge, Bindel & Wilson (2020), eq. (2)-(4) and Sec. 4.3.

    Examples
    --------
    >>> import torch
    >>> from hdgp.projections import diverse_directions
    >>> k = ProjectedAdditiveKernel(diverse_directions(3, 5, random_state=0))
    >>> X = torch.randn(4, 3, dtype=torch.float64)
    >>> k(X, X).to_dense().shape
    torch.Size([4, 4])
    """

    has_lengthscale = False

    def __init__(
        self,
        projections: torch.Tensor,
        degrees: Sequence[int] | None = None,
        *,
        ard: bool = True,
        base_kernel: Kernel | None = None,
        **kwargs,
    ):
        if kwargs.get("batch_shape", torch.Size()) != torch.Size():
            raise ValueError("ProjectedAdditiveKernel has no batch of independent kernels (batch_shape); build "
                             "one kernel per output instead.")
        super().__init__(**kwargs)
        if projections.dim() != 2 or projections.shape[0] < 1:
            raise ValueError(f"projections must be a (sum(degrees), d) matrix, got shape {tuple(projections.shape)}.")
        degrees = (1,) * projections.shape[0] if degrees is None else tuple(int(D) for D in degrees)
        if sum(degrees) != projections.shape[0] or min(degrees) < 1:
            raise ValueError(
                f"degrees {degrees} must be positive and sum to the number of projection rows "
                f"({projections.shape[0]})."
            )
        self.register_buffer("projections", projections)
        self.degrees = degrees
        ends = torch.tensor(degrees).cumsum(0).tolist()
        self._slices = tuple(slice(e - D, e) for e, D in zip(ends, degrees))
        self.ard = bool(ard)
        self.base_kernel = base_kernel
        J, d = len(degrees), projections.shape[1]
        dtype = projections.dtype
        if self.ard:
            self.register_parameter("raw_input_lengthscale", torch.nn.Parameter(torch.zeros(d, dtype=dtype)))
            self.register_constraint("raw_input_lengthscale", log_positive())
        else:
            self.register_parameter("raw_projection_lengthscale", torch.nn.Parameter(torch.zeros(J, dtype=dtype)))
            self.register_constraint("raw_projection_lengthscale", log_positive())
            self.register_parameter("raw_weights", torch.nn.Parameter(torch.zeros(J, dtype=dtype)))

    @property
    def n_projections(self) -> int:
        """Number of sub-kernels :math:`J`."""
        return len(self.degrees)

    @property
    def input_lengthscale(self) -> torch.Tensor:
        return self.raw_input_lengthscale_constraint.transform(self.raw_input_lengthscale)

    @input_lengthscale.setter
    def input_lengthscale(self, value) -> None:
        value = torch.as_tensor(value).to(self.raw_input_lengthscale)
        self.initialize(raw_input_lengthscale=self.raw_input_lengthscale_constraint.inverse_transform(value))

    @property
    def projection_lengthscale(self) -> torch.Tensor:
        return self.raw_projection_lengthscale_constraint.transform(self.raw_projection_lengthscale)

    @projection_lengthscale.setter
    def projection_lengthscale(self, value) -> None:
        value = torch.as_tensor(value).to(self.raw_projection_lengthscale)
        self.initialize(
            raw_projection_lengthscale=self.raw_projection_lengthscale_constraint.inverse_transform(value)
        )

    @property
    def weights(self) -> torch.Tensor:
        if self.ard:
            J = self.n_projections
            return self.projections.new_full((J,), 1.0 / J)
        return torch.softmax(self.raw_weights, dim=0)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Scaled projections :math:`z = P A x`, one column per projection row, ``(..., n, sum(degrees))``.

        Each sub-kernel's length-scale is folded in, so the sub-kernels act on
        :math:`z` with unit length-scale. Computed in the dtype of ``x``, whatever the
        dtype of the projections and length-scales (as GPyTorch's kernels do).
        """
        if x.shape[-1] != self.projections.shape[1]:
            raise ValueError(
                f"inputs have {x.shape[-1]} features but the projections expect {self.projections.shape[1]}."
            )
        P = self.projections.to(x)
        if self.ard:
            return (x / self.input_lengthscale.to(x)) @ P.T
        lam = torch.repeat_interleave(self.projection_lengthscale, torch.tensor(self.degrees, device=x.device))
        return (x @ P.T) / lam.to(x)

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise ValueError("ProjectedAdditiveKernel does not support last_dim_is_batch=True.")
        z1 = self.project(x1)
        z2 = z1 if x2 is x1 else self.project(x2)
        w = self.weights.to(z1)
        if self.base_kernel is None:
            if diag:
                # equal points have distance 0, also where a projection overflowed to inf (inf - inf)
                d = torch.where(z1 == z2, torch.zeros_like(z1), z1 - z2)
                return sum(w[j] * torch.exp(-0.5 * (d[..., sl] ** 2).sum(-1)) for j, sl in enumerate(self._slices))
            return _ProjectedRBFSum.apply(z1, z2, w, self._slices)
        K = None
        for j, sl in enumerate(self._slices):
            Kj = checkpoint(self._weighted_term, z1[..., sl], z2[..., sl], w[j], diag, use_reentrant=False)
            K = Kj if K is None else K + Kj
        return K

    def _weighted_term(self, a, b, wj, diag):
        return wj * self.base_kernel(a, b, diag=diag).to_dense()
