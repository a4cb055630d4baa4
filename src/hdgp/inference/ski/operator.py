"""The SKI covariance :math:`\\sum_j c_j W_j T_j W_j^\\top` as a ``linear_operator`` with analytic
gradients, and as a dense matrix with its own autograd function for small n."""

from __future__ import annotations

import warnings

import torch
from linear_operator.operators import LinearOperator

from .interpolation import _interp, _interp_t, _interpolation_csr
from .toeplitz import _toeplitz_matmul


class _DenseSKIMatrix(torch.autograd.Function):
    """:math:`K^{\\mathrm{SKI}} = \\sum_j c_j W_j T_j W_j^\\top` as a dense (n, n) matrix, for small n.

    Forward, per projection: :math:`W_j T_j` (sparse times dense, :math:`4nm`) and its product with
    :math:`W_j^\\top` (:math:`4n^2`). Backward, for an upstream gradient :math:`G` (symmetrised to
    :math:`S`), with :math:`P_j = W_j^\\top S` (m, n) and :math:`B_j = P_j W_j` (m, m):

    .. math::

        \\frac{\\partial}{\\partial c_j} = \\langle B_j, T_j\\rangle,\\qquad
        \\frac{\\partial}{\\partial\\,\\mathrm{col}_j[l]} = c_j \\sum_{|g - g'| = l} (B_j)_{gg'},\\qquad
        \\frac{\\partial}{\\partial w_{ik}} = 2 c_j\\,(P_j^\\top T_j)_{i,\\,\\mathrm{index}_{ik}},

    all sparse products and gathers: no (n, n, ·) intermediate and no scatter into an (n, m) array,
    which autograd through the gathers would build.
    """

    @staticmethod
    def forward(ctx, weight, col, coef, index):
        J, n, _ = index.shape
        m = col.shape[-1]
        lag = (torch.arange(m, device=col.device)[:, None] - torch.arange(m, device=col.device)).abs()
        maps = [_interpolation_csr(index[j], weight[j].detach(), m) for j in range(J)]
        K = torch.zeros(n, n, dtype=col.dtype, device=col.device)
        for j, (W, _) in enumerate(maps):
            K += coef[j] * (W @ (W @ col[j][lag]).T)  # c_j W_j (W_j T_j)^T
        ctx.save_for_backward(weight, col, coef, index)
        ctx.maps, ctx.lag = maps, lag
        return K

    @staticmethod
    def backward(ctx, grad):
        weight, col, coef, index = ctx.saved_tensors
        S = 0.5 * (grad + grad.T)
        m = col.shape[-1]
        g_weight, g_col, g_coef = torch.zeros_like(weight), torch.zeros_like(col), torch.zeros_like(coef)
        n = index.shape[1]
        for j, (_, Wt) in enumerate(ctx.maps):
            P = Wt @ S  # W_j^T S, (m, n)
            B = Wt @ P.T  # W_j^T S W_j, (m, m)
            sums = torch.bincount(ctx.lag.reshape(-1), weights=B.reshape(-1), minlength=m)
            g_coef[j] = (sums * col[j]).sum()
            g_col[j] = coef[j] * sums
            # rows of T_j at the 4 grid points of every data row, (n, 4, m): whole rows of the (m, m)
            # matrix copied, not an (n, 4, m) index array built and gathered entry by entry
            at = col[j][ctx.lag].index_select(0, index[j].reshape(-1)).view(n, 4, m)
            g_weight[j] = 2 * coef[j] * torch.bmm(at, P.T.unsqueeze(-1)).squeeze(-1)
        return g_weight, g_col, g_coef, None


def _dense_ski_matrix(op: ProjectedSKIOperator) -> torch.Tensor:
    """:math:`K^{\\mathrm{SKI}}` of ``op`` as a dense matrix with the analytic gradient of :class:`_DenseSKIMatrix`."""
    return _DenseSKIMatrix.apply(op.weight, op.col, op.coef, op.index)


class ProjectedSKIOperator(LinearOperator):
    """:math:`\\sum_j c_j W_j T_j W_j^\\top` as a ``linear_operator`` (symmetric, n x n).

    Parameters
    ----------
    weight, index : tensors of shape (J, n, 4)
        Output of :func:`cubic_interpolation`.
    col : torch.Tensor of shape (J, m)
        First columns of the Toeplitz grid covariances.
    coef : torch.Tensor of shape (J,)
        Weights :math:`c_j` (sub-kernel weight times output scale).
    """

    def __init__(self, weight, index, col, coef, sparse_cache=None):
        # linear_operator rebuilds the operator from its tensors (inside inv_quad_logdet's forward and
        # backward, and for dtype / device / batch changes) and hands non-tensor keywords to the rebuilt
        # copy: the copies share this dict, and reuse its CSR matrices while their index and weight are
        # the very tensors they were built from (_sparse_key), instead of building them once per copy
        sparse_cache = {} if sparse_cache is None else sparse_cache
        super().__init__(weight, index, col, coef, sparse_cache=sparse_cache)  # a floating tensor first: dtype
        self.index, self.weight, self.col, self.coef = index, weight, col, coef
        self._sparse_cache = sparse_cache
        self._csr = None

    def _sparse_key(self) -> tuple:
        """Identity of the interpolation data: storage, offset, shape, stride and version of ``index`` and
        ``weight`` (a detached alias shares storage and version counter with its source), and the grid size."""
        return tuple((t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()),
                      t._version, t.dtype, t.device) for t in (self.index, self.weight)) + (self.col.shape[-1],)

    def _sparse(self):
        """Constant copies of :math:`W = [W_1 \\cdots W_J]` (n x Jm) and :math:`W^\\top` as CSR matrices.

        Used for products that need no gradient (every CG / Lanczos iteration):
        one sparse product replaces 4 gathers or scatters of (J, n, t) temporaries.
        """
        if self._csr is None:
            key = self._sparse_key()
            if self._sparse_cache.get("key") == key:
                self._csr, self._w_order = self._sparse_cache["csr"], self._sparse_cache["order"]
                return self._csr
            J, n, _ = self.index.shape
            m = self.col.shape[-1]
            flat = (self.index + m * torch.arange(J, device=self.index.device)[:, None, None]).reshape(-1)
            values = self.weight.detach().reshape(-1)
            rows = torch.arange(n, device=flat.device).repeat_interleave(4).repeat(J)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                # row-major order of W: within a row, (j, k) already sorts the columns j m + index
                order = torch.arange(J * n * 4, device=flat.device).view(J, n, 4).transpose(0, 1).reshape(-1)
                crow = torch.arange(0, 4 * J * n + 1, 4 * J, device=flat.device)
                W = torch.sparse_csr_tensor(crow, flat[order], values[order], size=(n, J * m))
                self._w_order = order
                order = torch.argsort(flat, stable=True)  # grid-major: CSR of W^T
                crow_t = torch.zeros(J * m + 1, dtype=torch.long, device=flat.device)
                crow_t[1:] = torch.bincount(flat, minlength=J * m).cumsum(0)
                Wt = torch.sparse_csr_tensor(crow_t, rows[order], values[order], size=(J * m, n))
            self._csr = (W, Wt)
            # the entry keeps index and weight alive, so no other tensor can take their storage (in the key)
            self._sparse_cache.update(key=key, csr=self._csr, order=self._w_order, data=(self.index, self.weight))
        return self._csr

    def _matmul(self, rhs: torch.Tensor) -> torch.Tensor:
        vector = rhs.dim() == 1
        rhs = rhs.unsqueeze(-1) if vector else rhs
        J, m = self.col.shape
        if torch.is_grad_enabled() and any(a.requires_grad for a in (self.weight, self.col, self.coef)):
            U = _interp_t(self.index, self.weight, rhs, m)  # differentiable in the weights
            V = _toeplitz_matmul(self.col, U) * self.coef[:, None, None]
            out = _interp(self.index, self.weight, V)
        else:
            W, Wt = self._sparse()
            V = _toeplitz_matmul(self.col, (Wt @ rhs).view(J, m, -1)) * self.coef[:, None, None]
            out = W @ V.reshape(J * m, -1)
        return out.squeeze(-1) if vector else out

    def _bilinear_derivative(self, left_vecs: torch.Tensor, right_vecs: torch.Tensor):
        """Analytic gradient of :math:`\\sum_t l_t^\\top K r_t` w.r.t. ``(weight, index, col, coef)``.

        With :math:`U^L_j = W_j^\\top L`, :math:`U^R_j = W_j^\\top R`:
        :math:`\\partial/\\partial c_j = \\langle U^L_j, T_j U^R_j\\rangle`;
        :math:`\\partial/\\partial\\,\\mathrm{col}_j[l] = c_j \\sum_{|a-b|=l} (U^L_j U^{R\\top}_j)_{ab}`
        (a cross-correlation, by FFT); and for the interpolation weight of row
        :math:`i` at grid point :math:`g`,
        :math:`c_j \\sum_t (L_{it} (T_j U^R_j)_{gt} + R_{it} (T_j U^L_j)_{gt})`, evaluated only on the
        sparsity pattern of :math:`W` (``sampled_addmm``).
        """
        L = left_vecs.unsqueeze(-1) if left_vecs.dim() == 1 else left_vecs
        R = right_vecs.unsqueeze(-1) if right_vecs.dim() == 1 else right_vecs
        J, m = self.col.shape
        W, Wt = self._sparse()
        UL, UR = (Wt @ L).view(J, m, -1), (Wt @ R).view(J, m, -1)
        TL, TR = _toeplitz_matmul(self.col, UL), _toeplitz_matmul(self.col, UR)
        coef = self.coef.detach()
        g_coef = (UL * TR).sum((1, 2))
        FL = torch.fft.rfft(UL.transpose(-1, -2), n=2 * m, dim=-1)
        FR = torch.fft.rfft(UR.transpose(-1, -2), n=2 * m, dim=-1)
        xc = torch.fft.irfft((FL.conj() * FR).sum(-2), n=2 * m, dim=-1)  # xc[:, l] = sum_a UL[a] UR[a + l]
        # (negative lags wrap around to 2m - l)
        g_col = xc[:, :m].clone()
        g_col[:, 1:] += xc[:, m + 1:].flip(-1)
        g_col = g_col * coef[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sampled = torch.sparse.sampled_addmm(W, L, (TR * coef[:, None, None]).reshape(J * m, -1).T, beta=0.0)
            sampled = torch.sparse.sampled_addmm(sampled, R, (TL * coef[:, None, None]).reshape(J * m, -1).T)
        g_weight = torch.empty_like(self.weight).reshape(-1)
        g_weight[self._w_order] = sampled.values()
        grads = (g_weight.view_as(self.weight), None, g_col, g_coef)
        return tuple(g if a.requires_grad else None for g, a in zip(grads, (self.weight, self.index, self.col,
                                                                            self.coef)))

    def _diagonal(self) -> torch.Tensor:
        # indices of one row are consecutive, so (W T W^T)_ii = sum_{k,l} w_k w_l col[|k - l|]
        lag = (torch.arange(4)[:, None] - torch.arange(4)[None, :]).abs().to(self.col.device)
        C = self.col[:, lag]  # (J, 4, 4)
        return torch.einsum("jnk,jkl,jnl,j->n", self.weight, C, self.weight, self.coef)

    def _size(self) -> torch.Size:
        n = self.index.shape[1]
        return torch.Size([n, n])

    def _transpose_nonbatch(self) -> ProjectedSKIOperator:
        return self

    def _expand_batch(self, batch_shape):  # pragma: no cover - non-batched operator
        raise ValueError("ProjectedSKIOperator does not support batch shapes.")
