"""hdgp's kernels inside BoTorch (the ``botorch`` extra): a ``SingleTaskGP`` with an OAK or a Duvenaud
additive covariance is fitted by BoTorch's own ``fit_gpytorch_mll`` and drives one step of Bayesian
optimisation (``optimize_acqf`` on LogExpectedImprovement), as the README promises researchers."""

import warnings

import numpy as np
import pytest
import torch

botorch = pytest.importorskip("botorch", reason="BoTorch is an optional extra: pip install 'hdgp[botorch]'")

from botorch.acquisition import LogExpectedImprovement  # noqa: E402
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.optim import optimize_acqf  # noqa: E402
from gpytorch.constraints import Interval  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402
from gpytorch.priors import GammaPrior  # noqa: E402

from hdgp.kernels import SEKernel  # noqa: E402
from hdgp.kernels.additive_kernel import AdditiveKernel  # noqa: E402
from hdgp.kernels.orthogonal_kernel import ConstrainedSEKernel  # noqa: E402
from hdgp.measures import gaussian_measure  # noqa: E402

DT = torch.float64
D = 3


def _kernel(kind):
    """The covariance OAKRegressor builds for continuous features (constrained SE kernels under a Gaussian
    measure of the inputs, summed over interaction orders by Newton-Girard, with its Gamma(1, 0.2) prior on
    the order variances), or Duvenaud's additive one.

    The length-scales are bounded to [0.05, 5] on the unit box. Unbounded, BoTorch's L-BFGS ran the OAK
    kernel along a ridge of the marginal likelihood: as l grows a constrained SE kernel vanishes (it keeps
    only what varies over the measure) and the order variances grow to make up for it; at l ~ 1e5 and
    sigma^2 ~ e^50 the difference of two nearly equal terms was no longer positive definite and every fit
    attempt failed. A bound (or a length-scale prior) is what a BoTorch user sets on such a kernel.
    """
    bounded = {"lengthscale_constraint": Interval(0.05, 5.0)}
    if kind == "oak":
        # the uniform distribution on the unit box, matched in mean and standard deviation
        base = ConstrainedSEKernel(gaussian_measure(np.full(D, 0.5), np.full(D, 12 ** -0.5)), **bounded)
    else:
        base = SEKernel(D, **bounded)
    return AdditiveKernel(base, num_dims=D, max_order=2, order_variance_prior=GammaPrior(1.0, 0.2)).to(DT)


def _objective(X):
    return torch.sin(3 * X[:, 0]) + (X[:, 1] - 0.5) * (X[:, 2] - 0.5) * 4 - (X[:, 0] - 0.6) ** 2


@pytest.mark.parametrize("kind", ["oak", "additive"])
def test_kernel_fits_in_single_task_gp_and_optimises_an_acquisition_function(kind):
    torch.manual_seed(0)
    X = torch.rand(20, D, dtype=DT, generator=torch.Generator().manual_seed(1))
    Y = _objective(X).unsqueeze(-1)
    kernel = _kernel(kind)
    model = SingleTaskGP(X, Y, covar_module=kernel)
    assert model.covar_module is kernel
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    before = {n: p.detach().clone() for n, p in kernel.named_parameters()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's notes on input scaling and optimiser status
        fit_gpytorch_mll(mll)
    # BoTorch's optimiser moved hdgp's hyper-parameters (the gradients reached them) to a finite optimum
    moved = [n for n, p in kernel.named_parameters() if not torch.allclose(p.detach(), before[n])]
    assert moved, "fit_gpytorch_mll left every kernel parameter where it started"
    assert all(torch.isfinite(p).all() for p in kernel.parameters())
    model.eval()
    # the fitted model explains the data: the posterior mean at the training inputs tracks the targets
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)
    assert torch.corrcoef(torch.stack([mean, Y.squeeze(-1)]))[0, 1] > 0.9
    # a batch of q x d inputs, as acquisition functions evaluate them, gives one posterior per batch
    with torch.no_grad():
        batched = model.posterior(torch.rand(4, 2, D, dtype=DT)).mean
    assert batched.shape == (4, 2, 1)

    bounds = torch.tensor([[0.0] * D, [1.0] * D], dtype=DT)
    acqf = LogExpectedImprovement(model, best_f=Y.max())
    starts = torch.rand(4, 1, D, dtype=DT, generator=torch.Generator().manual_seed(2))
    candidate, value = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=4, batch_initial_conditions=starts,
                                     options={"maxiter": 50})
    assert candidate.shape == (1, D)
    assert torch.isfinite(candidate).all() and torch.isfinite(value).all()
    assert ((candidate >= bounds[0]) & (candidate <= bounds[1])).all()
    # the gradients of the acquisition function through hdgp's kernel moved the best start uphill
    with torch.no_grad():
        start_values = acqf(starts)
    assert value > start_values.max() + 1e-3
