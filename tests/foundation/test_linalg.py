"""Dense helpers: the LAPACK fast paths agree with torch's own factorisation and inverse."""

import pytest
import torch

from hdgp.exceptions import NotPositiveDefiniteError
from hdgp.linalg import _cholesky_ex, folded_inverse, robust_cholesky


def _spd(n=40, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g, dtype=dtype)
    return A @ A.T / n + 0.5 * torch.eye(n, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cholesky_matches_torch_and_leaves_its_input_alone(dtype):
    K = _spd(dtype=dtype)
    before = K.clone()
    L, info = _cholesky_ex(K)
    assert info == 0
    torch.testing.assert_close(L, torch.linalg.cholesky(K))
    assert torch.equal(L, L.tril())  # the upper triangle is zero, as torch returns it
    assert torch.equal(K, before)


def test_cholesky_reads_the_lower_triangle_of_non_contiguous_input():
    K = _spd()
    skewed = K.tril() + 5.0 * K.triu(1)  # garbage above the diagonal, as LAPACK allows
    L, _ = _cholesky_ex(skewed.T.contiguous().T)  # a column-major view of the same values
    torch.testing.assert_close(L, torch.linalg.cholesky(K))


def test_cholesky_reports_an_indefinite_matrix():
    K = _spd()
    K[7, 7] = -1.0
    assert _cholesky_ex(K)[1] > 0
    with pytest.raises(NotPositiveDefiniteError):
        robust_cholesky(-torch.eye(5, dtype=torch.float64), warn=False)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_folded_inverse_has_the_inverse_as_its_symmetric_part(dtype):
    K = _spd(dtype=dtype)
    L = torch.linalg.cholesky(K)
    P = folded_inverse(L)
    inverse = torch.linalg.inv(K)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close((P + P.T) / 2, inverse, **tol)
    torch.testing.assert_close(P.diagonal(), inverse.diagonal(), **tol)
    S = _spd(seed=1, dtype=dtype)  # any symmetric matrix sees the inverse
    torch.testing.assert_close((P * S).sum(), (inverse * S).sum(), **tol)
    assert torch.equal(L, torch.linalg.cholesky(K))  # the factor is not overwritten


def test_folded_inverse_falls_back_to_the_full_inverse_for_batches():
    K = torch.stack([_spd(seed=0), _spd(seed=1)])
    P = folded_inverse(torch.linalg.cholesky(K))
    torch.testing.assert_close(P, torch.linalg.inv(K))
