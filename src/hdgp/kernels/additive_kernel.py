"""Additive kernel of all interaction orders (Duvenaud et al., 2011) with order variances.

The order-:math:`r` kernel is the elementary symmetric polynomial :math:`e_r` of the
one-dimensional base kernels. It is evaluated with the subtraction-free recurrence

.. math::

    e_r(k_1, \\dots, k_i) = e_r(k_1, \\dots, k_{i-1}) + k_i\\, e_{r-1}(k_1, \\dots, k_{i-1}),

which costs the same :math:`O(D R)` elementwise passes as the Newton–Girard
formulae (Duvenaud eq. 1.13, OAK Algorithm 1) but has none of their cancellation
(:mod:`hdgp.kernels.symmetric_polynomials`). The sums run through the autograd functions of
:mod:`hdgp.kernels.functions` (compiled loops on the CPU, tensor tiles elsewhere).
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from linear_operator import to_dense

from ..exceptions import CostWarning
from ._constraints import log_positive
from ._own_batch_shape import OwnBatchShape
from ._compiled import as_array, rows_forward, use_compiled
from .functions.additive_sum import _CHUNK, additive_sum, symmetric_additive_sum
from .functions.triangle import _mirror_lower, _row_blocks
from .symmetric_polynomials import elementary_symmetric

__all__ = ["AdditiveKernel", "additive_sum", "elementary_symmetric", "symmetric_additive_sum"]

#: From this many rows on, k(X, X) is summed on its lower triangle (:func:`symmetric_additive_sum`):
#: the half of the passes saved then outweighs the row blocks' fixed costs (break-even timings:
#: benchmarks/README.md). A GPU takes the whole matrix as one tile and would gain nothing.
_SYMMETRIC_MIN_N = 128
#: k(X, X)'s base kernels are evaluated in about this many row blocks of its lower triangle: more
#: blocks compute less of the upper triangle (1/(2·blocks) of it), at one base-kernel call each.
_BASE_BLOCKS = 16

#: Bytes of one row block's base stack (D x rows x cols) where no autograd graph is kept (posteriors,
#: predictions, the values of a fit's last evaluations): the kernel matrix is then filled block by block
#: and no block outlives its rows. Blocks stay below glibc's 32 MB mmap threshold: larger ones come
#: fresh from the OS at every call (and go back when freed), and their page faults cost more than the sums.
_NO_GRAD_BLOCK_BYTES = 2**23

#: Above this many elementwise passes (D·R) per kernel evaluation, warn about cost.
_COST_WARN_PASSES = 1000


def _base_block(n: int, calls: int = 1) -> int:
    """Entries per row block of k(X, X)'s base matrices: about :data:`_BASE_BLOCKS` blocks, none
    smaller than a tile of the sum per kernel the base calls (a stack of ``calls`` feature groups
    pays each group's fixed cost in every block)."""
    return max(_CHUNK * calls, n * n // (2 * _BASE_BLOCKS))


def _stacked(x: torch.Tensor) -> torch.Tensor:
    """Points ``(n, D)`` in the base kernels' feature-stacked layout ``(D, n, 1)``, contiguous."""
    return x.transpose(-1, -2).unsqueeze(-1).contiguous()


def _get_order_variances(module):
    # module-level (not a lambda) so kernels with priors can be pickled
    return module.order_variances


def _set_order_variances(module, value):
    module._set_order_variances(value)


class AdditiveKernel(OwnBatchShape, Kernel):
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
        the graph's blocks, all alive at once, hold D n² / 2 values."""
        out = X.new_empty(X.shape[0], X.shape[0])
        variances = as_array(self.order_variances.detach(), X.dtype)
        for r0, r1 in self._light_blocks(X, calls):
            rows_forward(as_array(self.base_matrices(X[r0:r1], X[:r1])), r0, True, variances, out.numpy())
        return _mirror_lower(out)

    def _light_blocks(self, X: torch.Tensor, calls: int) -> list[tuple[int, int]]:
        """Row blocks of k(X, X)'s lower triangle for walks that keep no block (:meth:`_symmetric_values`, the
        fused ``lower_additive_sum``): base stacks of at most :data:`_NO_GRAD_BLOCK_BYTES`, which stay in the
        caches between a block's passes (timings: benchmarks/README.md, "OAK's fused sum")."""
        entries = max(_CHUNK * max(calls, 1), _NO_GRAD_BLOCK_BYTES // (self.num_dims * X.element_size()))
        return _row_blocks(0, X.shape[0], min(_base_block(X.shape[0], max(calls, 1)), entries))

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
        # per-feature pass of the Newton-Girard sum would stride across D
        a = x1.transpose(-1, -2).unsqueeze(-1).contiguous()
        b = x2.transpose(-1, -2).unsqueeze(-1).contiguous()
        return to_dense(self.base_kernel.forward(a, b, diag=diag))

    def _lower_base_blocks(self, X: torch.Tensor, bounds) -> list[torch.Tensor]:
        """``[base_matrices(X[r0:r1], X[:r1]) for r0, r1 in bounds]``, by the base kernel's own
        ``lower_row_blocks`` where it has one (it shares the per-point work between the blocks)."""
        shared = getattr(self.base_kernel, "lower_row_blocks", None)
        if shared is None:
            return [self.base_matrices(X[r0:r1], X[:r1]) for r0, r1 in bounds]
        if X.shape[-1] != self.num_dims:
            raise ValueError(f"AdditiveKernel expects inputs with {self.num_dims} features, got {X.shape[-1]}.")
        return [to_dense(b) for b in shared(X.transpose(-1, -2).unsqueeze(-1).contiguous(), bounds)]

    def memory_light_cross(self, x1: torch.Tensor, x2: torch.Tensor) -> bool:
        r"""Whether :math:`k(X_1, X_2)` of two point sets ``(n, D)``, ``(m, D)`` is summed by the base kernel's
        ``cross_additive_sum`` (constrained SE kernels: no base block is kept, so with a graph it holds the
        :math:`n \times m` result and row blocks of two buffers, not :math:`D` base matrices): compiled CPU
        work, inputs without a gradient and a base kernel that has one (:meth:`cross_parts_available`).
        Learned inducing inputs (a gradient) and other devices take the base-matrix path."""
        if x1.dim() != 2 or x2.dim() != 2 or x1.shape[0] == 0 or x2.shape[0] == 0:
            return False
        if x1.shape[-1] != self.num_dims or x2.shape[-1] != self.num_dims:
            return False  # base_matrices names the mismatch
        if x1.requires_grad or x2.requires_grad or not use_compiled(x1) or x2.dtype != x1.dtype:
            return False
        return self.cross_parts_available()

    def cross_parts_available(self) -> bool:
        """Whether the base kernel sums cross-covariances without base blocks: it has ``cross_additive_sum``
        and, for a feature stack, every group has ``outer_parts``."""
        base = self.base_kernel
        if getattr(base, "cross_additive_sum", None) is None:
            return False
        groups = getattr(base, "kernels", None)
        return groups is None or all(getattr(k, "outer_parts", None) is not None for k in groups)

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
            bounds = _row_blocks(0, n, _base_block(n, max(calls, 1)))
            fused = getattr(self.base_kernel, "lower_additive_sum", None)
            if fused is not None and use_compiled(x1) and not x1.requires_grad:  # no base block kept
                out = fused(_stacked(x1), self._light_blocks(x1, calls), self.order_variances.to(x1))
                if out is not None:
                    return out
            blocks = self._lower_base_blocks(x1, bounds)
            return symmetric_additive_sum(blocks, self.order_variances.to(blocks[0]))
        if not diag and x1 is not x2 and self.memory_light_cross(x1, x2):
            out = self.base_kernel.cross_additive_sum(_stacked(x1), _stacked(x2), self.order_variances.to(x1))
            if out is not None:
                return out
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
