"""Constrained (orthogonal) one-dimensional kernels of the OAK model (Lu et al., 2022).

Conditioning a GP :math:`f \\sim \\mathcal{GP}(0, k)` on
:math:`S = \\int f(x) p(x)\\,dx = 0` gives (OAK eqs. 7–8)

.. math::

    \\tilde k(x, x') = k(x, x') - \\frac{\\mathbb E[S f(x)]\\, \\mathbb E[S f(x')]}{\\mathbb E[S^2]},
    \\quad \\mathbb E[S f(x)] = \\int p(s) k(s, x)\\,ds,
    \\quad \\mathbb E[S^2] = \\iint p(s) p(s') k(s, s')\\,ds\\,ds'.

Both kernels here take the feature-stacked layout of
:class:`~hdgp.kernels.additive_kernel.AdditiveKernel`: inputs ``(..., G, n, 1)``
with one feature per batch entry, output ``(..., G, n, m)``. Each also provides
``sobol_integral`` — the matrices :math:`L[a, b] = \\int \\tilde k(x, a) \\tilde k(x, b)
p(x)\\,dx` of OAK eq. (14) used for analytic Sobol indices.

Missing inputs (NaN) are marginalised, not imputed. Every constrained component integrates
to zero under its measure, :math:`\\int \\tilde k(x, x') p(dx) = 0`, so replacing
:math:`\\tilde k(x, \\cdot)` by its expectation over an unobserved :math:`x \\sim p` gives

.. math::

    \\mathbb E_p[\\tilde k(x, x')] = 0 \\ (x' \\text{ any other point, observed or not}), \\qquad
    \\mathbb E_p[\\tilde k(x, x)] = 1 - \\frac{\\int p(x)\\, m(x)^2\\,dx}{\\mathbb E[S^2]}

on the point's own diagonal (:math:`m(x) = \\mathbb E[S f(x)]`; the SE base has unit variance).
Both 1-D kernels return zero rows and columns for NaN inputs and
:math:`\\mathbb E_p[\\tilde k(x, x)]` on a ``diag=True`` call; NaN never enters arithmetic, so
gradients stay finite. :class:`OrthogonalAdditiveKernel` puts the row's own diagonal back in
:math:`k(X, X)`, where the 1-D kernels cannot tell that two NaN cells belong to one row. The
interaction kernel is multilinear in the 1-D kernels (OAK eq. 11), so this is the expected
kernel :math:`\\mathbb E_{x_j \\sim p_j}[k(x, x')]` exactly: the terms containing a missing
feature vanish from every covariance and add their prior variance to the row's own. At a
test row with :math:`x_j` missing the posterior mean is then exactly the average of the
posterior means over :math:`x_j \\sim p_j` (an exact marginalisation when the features are
independent under the product measure, which the kernel assumes); its variance is the
posterior variance of the terms without :math:`j` plus the prior variance of those with
:math:`j`, which exceeds the average posterior variance over :math:`x_j` by
:math:`\\operatorname{tr}(K_y^{-1} \\operatorname{Cov}_{x_j}[k(X, x)])`.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from ..measures import MixtureMeasure
from ._constraints import log_positive
from ._elementwise import exp_
from .additive_kernel import AdditiveKernel
from .functions.se_additive_sum import OuterPartsSums
from .se_kernel import FeatureKernel, se_minus_outer

__all__ = ["ConstrainedSEKernel", "ConstrainedCategoricalKernel", "OrthogonalAdditiveKernel"]


def _gauss_overlap(mu, var, a, p, b, q):
    r""":math:`\int \mathcal N(x; \mu, v)\, e^{-(x-a)^2/2p}\, e^{-(x-b)^2/2q}\,dx` (broadcasting).

    The two exponentials multiply to :math:`e^{-(a-b)^2/2(p+q)} e^{-(x-c)^2/2r}` with
    :math:`r = pq/(p+q)`, :math:`c = (aq+bp)/(p+q)`; the Gaussian integral of the
    latter is :math:`\sqrt{r/(r+v)}\, e^{-(c-\mu)^2/2(r+v)}`. With :math:`v = 0` it is
    the point evaluation, so point masses need no special case. :math:`r` and :math:`c` are
    formed from the ratios :math:`q/(p+q)` and :math:`p/(p+q)`: a feature switched off by a fit
    has :math:`\ell \approx 10^{138}`, and :math:`pq` overflows where :math:`p` does not.
    """
    s = p + q
    share_q, share_p = q / s, p / s
    r = p * share_q
    c = a * share_q + b * share_p
    return torch.exp(-((a - b) ** 2) / (2 * s) - (c - mu) ** 2 / (2 * (r + var))) * torch.sqrt(r / (r + var))


def _se_overlap_matrix(mu, var, x1, x2, l2):
    r""":math:`\int \mathcal N(x; \mu, v)\, e^{-(x-a)^2/2\ell^2} e^{-(x-b)^2/2\ell^2}\,dx` for every pair
    :math:`(a, b)` of ``x1`` (..., n, 1) and ``x2`` (..., m, 1): :func:`_gauss_overlap` with
    :math:`p = q = \ell^2`, where :math:`r = \ell^2/2` and :math:`c = (a+b)/2`, i.e.

    .. math:: \sqrt{\tfrac{r}{r+v}}\, \exp\Big(-\frac{(a-b)^2}{4\ell^2} - \frac{(a+b-2\mu)^2}{8(r+v)}\Big),

    built in two buffers of the output's size (the general form makes about eight).
    """
    r = l2 / 2
    out = x1 - x2.transpose(-1, -2)
    out.square_().mul_(-0.25 / l2)
    centre = x1 - 2 * mu + x2.transpose(-1, -2)
    out.add_(centre.square_().mul_(-0.125 / (r + var)))
    return exp_(out).mul_(torch.sqrt(r / (r + var)))


def _mask_missing(x: torch.Tensor):
    """``(mask, x)``: the NaN cells of ``x`` and ``x`` with them set to 0 (None and ``x`` itself when none is
    missing), so that no NaN reaches arithmetic and autograd (a NaN times a zero gradient is NaN)."""
    miss = torch.isnan(x)
    if not miss.any():
        return None, x
    return miss, x.masked_fill(miss, 0.0)


def _zero_missing(out: torch.Tensor, miss1, miss2) -> torch.Tensor:
    r"""``out`` (..., n, m) with the rows of missing ``miss1`` (..., n, 1) and the columns of missing
    ``miss2`` (..., m, 1) set to zero: :math:`\mathbb E_p[\tilde k(x, \cdot)] = 0`."""
    if miss1 is not None:
        out = out.masked_fill(miss1, 0.0)
    if miss2 is not None:
        out = out.masked_fill(miss2.transpose(-1, -2), 0.0)
    return out


class ConstrainedSEKernel(OuterPartsSums, FeatureKernel):
    r"""Unit-variance SE kernels constrained to integrate to zero under mixture measures.

    For feature :math:`i` with length-scale :math:`\ell` and measure
    :math:`p = \sum_k w_k \mathcal N(\mu_k, \delta_k^2)`:

    .. math::

        \tilde k(x, x') = e^{-(x-x')^2/2\ell^2} - \frac{m(x)\, m(x')}{c}, \qquad
        m(x) = \sum_k w_k \frac{\ell}{\sqrt{\ell^2+\delta_k^2}}
               e^{-\frac{(x-\mu_k)^2}{2(\ell^2+\delta_k^2)}}, \qquad
        c = \sum_{j,k} w_j w_k \frac{\ell}{\sqrt{\ell^2+\delta_j^2+\delta_k^2}}
               e^{-\frac{(\mu_j-\mu_k)^2}{2(\ell^2+\delta_j^2+\delta_k^2)}}

    (OAK eq. 10 for one Gaussian, eqs. 30–31 for a mixture, eq. 32 for the
    empirical measure, where :math:`\delta_k = 0`).

    Parameters
    ----------
    measure : hdgp.measures.MixtureMeasure
        One measure per feature; one length-scale per feature (a
        :class:`~hdgp.kernels.se_kernel.FeatureKernel`: the feature dimension is no batch).
    """

    has_lengthscale = True

    def __init__(self, measure: MixtureMeasure, **kwargs):
        if not isinstance(measure, MixtureMeasure):
            raise TypeError(f"measure must be a MixtureMeasure, got {type(measure).__name__}.")
        kwargs.setdefault("lengthscale_constraint", log_positive())
        super().__init__(measure.num_dims, **kwargs)
        self.measure = measure

    def _measure_params(self, ref: torch.Tensor):
        m = self.measure
        # (D, 1, K) so they broadcast against inputs of shape (..., D, n, 1)
        return tuple(t.to(ref).unsqueeze(-2) for t in (m.locations, m.scales**2, m.weights))

    def _mean_embedding(self, x, l2):
        """m(x) = E[S f(x)] for x of shape (..., D, n, 1); returns (..., D, n)."""
        mu, var, w = self._measure_params(x)
        t = l2 + var
        return (w * torch.sqrt(l2 / t) * torch.exp(-((x - mu) ** 2) / (2 * t))).sum(-1)

    def _total_variance(self, l2):
        """c = E[S²] per feature, shape (D, 1, 1)."""
        mu, var, w = self._measure_params(l2)
        t = l2 + var + var.transpose(-1, -2)
        pair = w * w.transpose(-1, -2) * torch.sqrt(l2 / t) * torch.exp(-((mu - mu.transpose(-1, -2)) ** 2) / (2 * t))
        return pair.sum((-1, -2)).unsqueeze(-1).unsqueeze(-1)

    def expected_diagonal(self, l2: torch.Tensor | None = None) -> torch.Tensor:
        r""":math:`\mathbb E_{x \sim p}[\tilde k(x, x)] = 1 - \int p(x) m(x)^2 dx / c` per feature, shape (D, 1):
        the prior variance of the component at an unobserved input (module docstring).

        For point masses :math:`\int p\, m^2 = \sum_k w_k m(\mu_k)^2`; for Gaussian components
        :math:`\sum_{k,i,j} w_k a_i a_j \int \mathcal N_k(x)\, e^{-(x-\mu_i)^2/2(\ell^2+\delta_i^2)}
        e^{-(x-\mu_j)^2/2(\ell^2+\delta_j^2)} dx` with :math:`a_i = w_i \ell/\sqrt{\ell^2+\delta_i^2}`
        (:func:`_gauss_overlap`; the quantity :math:`t_4` of :meth:`sobol_integral`).
        """
        l2 = self.lengthscale**2 if l2 is None else l2
        mu, var, w = self._measure_params(l2)  # (D, 1, K)
        n_dims, n_comp = mu.shape[0], mu.shape[-1]
        if self.measure.is_discrete:
            m_at = self._mean_embedding(mu.transpose(-1, -2), l2)  # (D, K)
            second = (w.squeeze(-2) * m_at**2).sum(-1)
        else:
            amp = w * torch.sqrt(l2 / (l2 + var))
            t = l2 + var

            def shaped(x, axis):  # (D, K) along axis 1, 2 or 3 of (D, K, K, K)
                shape = [n_dims, 1, 1, 1]
                shape[axis] = n_comp
                return x.reshape(shape)

            overlap = _gauss_overlap(shaped(mu, 1), shaped(var, 1), shaped(mu, 2), shaped(t, 2), shaped(mu, 3),
                                     shaped(t, 3))
            second = (shaped(w, 1) * shaped(amp, 2) * shaped(amp, 3) * overlap).sum((1, 2, 3))
        return (1.0 - second / self._total_variance(l2).reshape(-1)).unsqueeze(-1)

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError("ConstrainedSEKernel does not support last_dim_is_batch.")
        self._check_layout(x1)
        if not diag:
            self._check_layout(x2)
        l2 = self.lengthscale**2  # (D, 1, 1)
        c = self._total_variance(l2)
        miss1, x1 = _mask_missing(x1)
        m1 = self._mean_embedding(x1, l2)
        if diag:
            out = 1.0 - m1**2 / c.squeeze(-1)
            if miss1 is None:
                return out
            return torch.where(miss1.squeeze(-1), self.expected_diagonal(l2).expand_as(out), out)
        miss2, x2 = _mask_missing(x2)
        m2 = self._mean_embedding(x2, l2)
        return _zero_missing(se_minus_outer(x1, x2, l2, m1 / c.squeeze(-1), m2), miss1, miss2)

    def outer_parts(self, x: torch.Tensor):
        r"""The pieces of :math:`\tilde k_i = E_i - u_i v_i^\top` at the points ``x``: ``(x, miss, l2, u, v)``
        with ``x`` (D, n, 1) its missing cells set to 0, ``miss`` those cells (or None), :math:`\ell^2`
        (D, 1, 1), :math:`u = m(x)/c` and :math:`v = m(x)` (D, n) (class docstring), differentiable in the
        length-scales. :math:`\tilde k(x, x')` is :math:`E(x, x') - u(x) v(x')` with the rows of missing
        cells zeroed, as :meth:`forward` computes it.
        """
        self._check_layout(x)
        l2 = self.lengthscale**2
        c = self._total_variance(l2)
        miss, x = _mask_missing(x)
        m = self._mean_embedding(x, l2)
        return x, miss, l2, m / c.squeeze(-1), m

    def lower_row_blocks(self, x: torch.Tensor, bounds) -> list[torch.Tensor]:
        r"""``[forward(x[..., r0:r1, :], x[..., :r1, :]) for r0, r1 in bounds]``: the row blocks of
        :math:`\tilde k(X, X)`'s lower triangle, with the per-point terms :math:`\ell^2`,
        :math:`c = \mathbb E[S^2]` and :math:`m(x)` formed once for all rows instead of once per block
        (the same values; the autograd graph then holds them once).

        Parameters
        ----------
        x : torch.Tensor of shape (D, n, 1)
        bounds : sequence of (r0, r1)
            Row ranges; block ``(r0, r1)`` covers columns ``0..r1``.
        """
        self._check_layout(x)
        l2 = self.lengthscale**2
        c = self._total_variance(l2)
        miss, x = _mask_missing(x)
        m = self._mean_embedding(x, l2)
        u = m / c.squeeze(-1)
        blocks = []
        for r0, r1 in bounds:
            block = se_minus_outer(x[..., r0:r1, :], x[..., :r1, :], l2, u[..., r0:r1], m[..., :r1])
            if miss is not None:
                block = _zero_missing(block, miss[..., r0:r1, :], miss[..., :r1, :])
            blocks.append(block)
        return blocks

    @torch.no_grad()
    def sobol_integral(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        r"""Matrices :math:`L_i[a, b] = \int \tilde k_i(x, a)\, \tilde k_i(x, b)\, p_i(x)\,dx`
        (values only: Sobol indices are read off a fitted model, so no gradient is formed).

        Closed form for Gaussian components (OAK appendix G.1, with the prefactor
        :math:`\sigma^4` of G.1.4 — here the base variance is 1) and the weighted
        sum :math:`\sum_k w_k \tilde k(\mu_k, a) \tilde k(\mu_k, b)` for point
        masses (appendix G.2, eq. 48).

        Parameters
        ----------
        x1, x2 : torch.Tensor of shape (D, n, 1) and (D, m, 1)

        Returns
        -------
        torch.Tensor of shape (D, n, m)
        """
        miss1, x1 = _mask_missing(x1)
        miss2, x2 = _mask_missing(x2)
        return _zero_missing(self._sobol_integral(x1, x2), miss1, miss2)

    def _sobol_integral(self, x1, x2):
        mu, var, w = self._measure_params(x1)  # (D, 1, K)
        if self.measure.is_discrete:
            at_loc = mu.transpose(-1, -2)  # (D, K, 1)
            k1 = self.forward(at_loc, x1)  # (D, K, n)
            k2 = self.forward(at_loc, x2)
            return (k1 * w.transpose(-1, -2)).transpose(-1, -2) @ k2
        l2 = self.lengthscale**2
        c = self._total_variance(l2)
        m1 = self._mean_embedding(x1, l2).unsqueeze(-1)  # (D, n, 1)
        m2 = self._mean_embedding(x2, l2).unsqueeze(-2)  # (D, 1, m)
        amp = w * torch.sqrt(l2 / (l2 + var))  # w_j ℓ/√(ℓ²+δ_j²), (D, 1, K)
        out = None
        for k in range(mu.shape[-1]):
            mu_k, var_k, w_k = mu[..., k : k + 1], var[..., k : k + 1], w[..., k : k + 1]
            term = _se_overlap_matrix(mu_k, var_k, x1, x2, l2)  # ∫ N_k(x) k(x, a) k(x, b) dx
            # ∫ N_k(x) k(x, a) m(x) dx, summed over the components j of m
            t2_1 = (amp * _gauss_overlap(mu_k, var_k, x1, l2, mu, l2 + var)).sum(-1, keepdim=True)
            t2_2 = (amp * _gauss_overlap(mu_k, var_k, x2, l2, mu, l2 + var)).sum(-1, keepdim=True)
            # ∫ N_k(x) m(x)² dx
            t4 = (
                amp.transpose(-1, -2)
                * amp
                * _gauss_overlap(mu_k, var_k, mu.transpose(-1, -2), l2 + var.transpose(-1, -2), mu, l2 + var)
            ).sum((-1, -2)).reshape(-1, 1, 1)
            # term - t2_1 m2ᵀ/c - m1 t2_2ᵀ/c + m1 m2ᵀ t4/c², in place: rank-one updates of one (D, n, m) buffer
            term.addcmul_(t2_1 / c, m2, value=-1.0)
            term.addcmul_(m1, t2_2.transpose(-1, -2) / c, value=-1.0)
            term.addcmul_(m1 * t4 / c**2, m2)
            term.mul_(w_k)
            out = term if out is None else out.add_(term)
        return out


class ConstrainedCategoricalKernel(Kernel):
    r"""Categorical kernel constrained to zero mean under the level frequencies.

    .. math::

        A = W W^\top + \operatorname{diag}(\kappa), \qquad
        B = A - \frac{(A w)(A w)^\top}{w^\top A w}, \qquad \tilde k(i, j) = B_{ij}

    (OAK appendix C, eqs. 19–20). A binary feature is the case of two levels.

    Parameters
    ----------
    level_weights : array-like of shape (M,)
        Probabilities :math:`w` of the :math:`M` levels (e.g. training frequencies).
        With one level (a constant column) :math:`B = 0`: a function of a constant
        with zero mean is zero, so the feature explains nothing.
    rank : int, default=1
        Columns of :math:`W` (0 gives a diagonal :math:`A`).

    Notes
    -----
    Inputs are integer level codes ``0..M-1`` stored as floats, ``-1`` for a level
    outside the training set (pandas' code for a value not among the categories), or NaN
    for a missing value; anything else raises ``ValueError``. A missing value is marginalised
    (module docstring): zero row and column, and :math:`\sum_c w_c B_{cc}` on the diagonal. An unknown level gets a zero row and column,
    :math:`\tilde k(-1, \cdot) = 0`: the component is fixed at its mean under the
    level weights, zero by the constraint, with no variance (a model cannot know how
    a level it never saw differs from the average). The kernel serves a single feature
    (batch size 1 in the feature-stacked layout).
    """

    #: Code of a level not seen in training.
    UNKNOWN = -1

    def __init__(self, level_weights, rank: int = 1, **kwargs):
        super().__init__(**kwargs)
        w = torch.as_tensor(level_weights, dtype=torch.float64).reshape(-1)
        if w.numel() < 1 or (w < 0).any() or w.sum() <= 0 or not torch.isfinite(w).all():
            raise ValueError(
                f"level_weights must hold non-negative finite probabilities with a positive sum, got {w.tolist()}."
            )
        if int(rank) != rank or rank < 0:
            raise ValueError(f"rank must be a non-negative integer, got {rank!r}.")
        n_levels = w.numel()
        self.num_levels = n_levels
        self.register_buffer("level_weights", w / w.sum())
        gen = torch.Generator().manual_seed(0)
        init_w = 0.5 * torch.randn(n_levels, int(rank), generator=gen, dtype=torch.float64)
        self.register_parameter("raw_covar_factor", torch.nn.Parameter(init_w))
        self.register_parameter("raw_kappa", torch.nn.Parameter(torch.zeros(n_levels, dtype=torch.float64)))
        self.register_constraint("raw_kappa", log_positive())
        self.initialize(raw_kappa=self.raw_kappa_constraint.inverse_transform(torch.ones(n_levels)))

    @property
    def kappa(self) -> torch.Tensor:
        return self.raw_kappa_constraint.transform(self.raw_kappa)

    def constrained_matrix(self) -> torch.Tensor:
        r"""The :math:`M \times M` matrix :math:`B` of eq. (20), without subtracting two matrices
        of the size of :math:`A`.

        With :math:`s = W^\top w`, :math:`t = \kappa \odot w`, :math:`\tau = w^\top t` and
        :math:`d = w^\top A w = s^\top s + \tau`, expanding :math:`Aw = Ws + t` gives

        .. math::
            B = W\big(I - \hat s\hat s^\top + \tfrac{\tau}{d}\,\hat s\hat s^\top\big)W^\top
                + \operatorname{diag}(\kappa) - \frac{W s\,t^\top + t\,s^\top W^\top + t t^\top}{d},
            \qquad \hat s = s/\lVert s\rVert.

        The literal :math:`A - (Aw)(Aw)^\top/d` cancels catastrophically when a fit drives
        :math:`\kappa \to 0` with :math:`W` nearly orthogonal to :math:`w` (:math:`d \to 0`, as a MAP
        fit on a feature with few levels can reach); this form keeps full relative accuracy there
        (the test compares both with 60-digit arithmetic).
        """
        W = self.raw_covar_factor
        kappa = self.kappa
        w = self.level_weights.to(W)
        s, t = W.T @ w, kappa * w
        tau = w @ t
        d = s @ s + tau
        s_hat = s / s.norm().clamp_min(torch.finfo(s.dtype).tiny)
        inner = torch.eye(len(s), dtype=W.dtype, device=W.device) - (1.0 - tau / d) * torch.outer(s_hat, s_hat)
        Ws = W @ s
        cross = torch.outer(Ws, t)
        return W @ inner @ W.T + torch.diag(kappa) - (cross + cross.T + torch.outer(t, t)) / d

    def _codes(self, x: torch.Tensor) -> torch.Tensor:
        """Level codes as row indices of the padded matrix: ``-1`` (unknown) picks its zero last row."""
        codes = x.squeeze(-1)
        codes = codes.masked_fill(torch.isnan(codes), self.UNKNOWN)  # missing: the zero row, as unknown
        bad = ~torch.isfinite(codes) | (codes != torch.round(codes)) | (codes < self.UNKNOWN) \
            | (codes >= self.num_levels)
        if bad.any():
            raise ValueError(
                f"Categorical kernel expects integer level codes in 0..{self.num_levels - 1}, or "
                f"{self.UNKNOWN} for an unknown level; got e.g. {codes[bad].flatten()[0].item()!r}."
            )
        return codes.long()

    def _padded_matrix(self, like: torch.Tensor) -> torch.Tensor:
        """:math:`B` with a zero row and column appended, the unknown level's."""
        return torch.nn.functional.pad(self.constrained_matrix().to(like), (0, 1, 0, 1))

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError("ConstrainedCategoricalKernel does not support last_dim_is_batch.")
        B = self._padded_matrix(x1)
        i = self._codes(x1)
        if diag:
            out = B[i, i]
            missing = torch.isnan(x1.squeeze(-1))
            if missing.any():  # E_w[B_cc]: the prior variance at an unobserved level
                out = torch.where(missing, (self.level_weights.to(B) * B.diagonal()[:-1]).sum(), out)
            return out
        j = self._codes(x2)
        return B[i.unsqueeze(-1), j.unsqueeze(-2)]

    def sobol_integral(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        r""":math:`L[a, b] = \sum_c w_c B_{c a} B_{c b}` (OAK eq. 14 with the discrete measure).

        Parameters
        ----------
        x1, x2 : torch.Tensor of shape (1, n, 1) and (1, m, 1)

        Returns
        -------
        torch.Tensor of shape (1, n, m)
        """
        B = self._padded_matrix(x1)[: self.num_levels]  # rows: the levels the measure weighs
        w = self.level_weights.to(B)
        Ba = B[:, self._codes(x1)]  # (M, 1, n)
        Bb = B[:, self._codes(x2)]
        return torch.einsum("c,cgn,cgm->gnm", w, Ba, Bb)


class OrthogonalAdditiveKernel(AdditiveKernel):
    r"""The OAK kernel (OAK eq. 11 over constrained 1-D kernels) taking missing inputs (NaN).

    The constrained base kernels give zero rows and columns for a missing cell (module docstring);
    on a point's own diagonal the expected kernel keeps the prior variance of the terms that
    contain a missing feature. ``forward(x1, x2)`` with the same points (``x1 is x2``, or equal
    with NaN in the same cells: the rows of one table) adds, for every row :math:`i` with a
    missing cell, :math:`\mathbb E[k(x_i, x_i)] - k_0(x_i, x_i)` to entry :math:`(i, i)`, where
    :math:`k_0` is the kernel with the missing 1-D kernels zeroed; ``diag=True`` gives
    :math:`\mathbb E[k(x_i, x_i)]` directly. Two different rows both missing :math:`x_j` have
    independent :math:`x_j`, so their covariance loses the terms with :math:`j`. Without missing
    cells it is :class:`~hdgp.kernels.additive_kernel.AdditiveKernel`.
    """

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        out = super().forward(x1, x2, diag=diag, last_dim_is_batch=last_dim_is_batch, **params)
        if diag:
            return out
        rows = torch.isnan(x1).any(-1)  # (..., n)
        if not rows.any() or not _same_points(x1, x2):
            return out
        expected = super().forward(x1, x1, diag=True)  # (..., n)
        own = out.diagonal(dim1=-2, dim2=-1)
        return out + torch.diag_embed(torch.where(rows, expected - own, torch.zeros_like(own)))


def _same_points(x1: torch.Tensor, x2: torch.Tensor) -> bool:
    """Whether ``x1`` and ``x2`` hold the same rows, NaN cells included."""
    if x1 is x2:
        return True
    if x1.shape != x2.shape:
        return False
    miss = torch.isnan(x1)
    return bool(torch.equal(miss, torch.isnan(x2)) and torch.equal(x1.masked_fill(miss, 0.0), x2.masked_fill(miss, 0.0)))
