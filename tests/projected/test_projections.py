"""Direction sets of RPA-GP (eq. 4) and DPA-GP (eq. 7)."""

import math

import numpy as np
import pytest
import torch

from hdgp.projections import (
    diverse_directions,
    expand_degrees,
    min_pairwise_angle,
    random_directions,
    redundancy_loss,
)


def test_expand_degrees_mixed_groups():
    assert expand_degrees(1, 3) == (1, 1, 1)
    assert expand_degrees([(2, 1), (1, 3)], None) == (1, 1, 3)
    with pytest.raises(ValueError, match="disagrees"):
        expand_degrees([(2, 1)], 5)
    with pytest.raises(ValueError, match="n_projections"):
        expand_degrees(1, 0)


def test_random_directions_are_seeded_and_have_variance_one_over_degree():
    degrees = (1,) * 3 + (2,) * 3 + (4,) * 3
    P = random_directions(4000, degrees, random_state=3)
    assert P.shape == (sum(degrees), 4000) and P.dtype == torch.float64
    assert torch.equal(P, random_directions(4000, degrees, random_state=3))
    assert not torch.equal(P, random_directions(4000, degrees, random_state=4))
    rows = np.repeat(degrees, degrees)
    for D in (1, 2, 4):
        var = P[torch.as_tensor(rows == D)].var().item()
        assert abs(var * D - 1.0) < 0.03  # 4000*#rows draws: std error ~1 %


def test_random_directions_may_have_more_rows_than_features():
    # eq. 4 puts no bound on D_j: the paper's RPA-GP-3 has degree-6 projections on 4 features
    P = random_directions(2, (3, 1), random_state=0)
    assert P.shape == (4, 2) and torch.linalg.matrix_rank(P[:3]).item() == 2
    with pytest.raises(ValueError, match="n_features must be >= 1"):
        random_directions(0, (1,))


def test_diverse_directions_orthonormal_when_few():
    P = diverse_directions(7, 5, random_state=0)
    assert torch.allclose(P @ P.T, torch.eye(5, dtype=P.dtype), atol=1e-12)
    assert redundancy_loss(P).item() < 1e-20
    assert min_pairwise_angle(P) == pytest.approx(math.pi / 2, abs=1e-6)


def test_diverse_directions_beat_random_ones_when_many():
    d, J = 5, 20
    P = diverse_directions(d, J, random_state=1)
    assert torch.allclose(P.norm(dim=1), torch.ones(J, dtype=P.dtype))
    losses = [redundancy_loss(random_directions(d, (1,) * J, random_state=s)).item() for s in range(10)]
    angles = [min_pairwise_angle(random_directions(d, (1,) * J, random_state=s)) for s in range(10)]
    assert redundancy_loss(P).item() < 0.6 * min(losses)
    assert min_pairwise_angle(P) > max(angles)
    # a tight frame bound: sum_{j,j'} (eta_j^T eta_j')^4 >= 3 J^2 / (d (d + 2)) (4-design bound)
    assert redundancy_loss(P).item() + J >= 3 * J**2 / (d * (d + 2)) - 1e-6
    assert redundancy_loss(P).item() + J < 1.05 * 3 * J**2 / (d * (d + 2))


def test_single_direction_angle():
    assert min_pairwise_angle(torch.ones(1, 3)) == pytest.approx(math.pi / 2)


@pytest.mark.parametrize("J", [3, 4, 7, 20])
def test_diverse_lines_in_the_plane_reach_the_bound_with_the_widest_smallest_angle(J):
    """d = 2: lines pi/J apart attain the minimum 3J^2/8 - J of eq. (7); L-BFGS stopped at other
    minimisers whose closest lines were 0.01-1.2 degrees apart for J = 20."""
    eta = diverse_directions(2, J, random_state=3)
    assert torch.allclose(eta.norm(dim=1), torch.ones(J, dtype=eta.dtype))
    assert redundancy_loss(eta).item() == pytest.approx(3 * J**2 / 8 - J, rel=1e-12)
    assert min_pairwise_angle(eta) == pytest.approx(math.pi / J, rel=1e-9)
    assert not torch.allclose(eta, diverse_directions(2, J, random_state=4))  # the seed rotates them


def test_orthonormal_directions_are_gram_schmidt_of_the_seeded_gaussian_columns():
    """'Unique, sign-fixed Q factor': the QR's R has a positive diagonal, so the directions are
    Gram-Schmidt of the seeded Gaussian columns whatever sign convention LAPACK uses (kills the
    mutant that drops the sign fix)."""
    d, J, seed = 6, 4, 7
    P = diverse_directions(d, J, random_state=seed)
    V = torch.as_tensor(np.random.RandomState(seed).standard_normal((d, J)), dtype=torch.float64)
    R = P @ V  # = Q^T V, upper triangular with a positive diagonal
    torch.testing.assert_close(torch.tril(R, -1), torch.zeros(J, J, dtype=R.dtype), atol=1e-12, rtol=0)
    assert (torch.diagonal(R) > 0).all()
    torch.testing.assert_close(P[0], V[:, 0] / V[:, 0].norm(), atol=1e-14, rtol=0)


def test_min_pairwise_angle_treats_opposite_directions_as_one_line():
    """Antipodal separation uses |cos|: a direction and its near-negative are ~0 apart, not ~pi/2
    (kills the mutant without .abs())."""
    eps = 0.01
    eta = torch.tensor([[1.0, 0.0], [-1.0, eps], [0.0, 1.0]], dtype=torch.float64)
    assert min_pairwise_angle(eta) == pytest.approx(math.atan(eps), rel=1e-9)
