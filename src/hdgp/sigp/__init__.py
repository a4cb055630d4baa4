"""Subspace-induced Gaussian processes (Tan & Mukherjee): subspace estimation and EM.

Modules: :mod:`~hdgp.sigp.lowrank` (RBF kernel and its pivoted-Cholesky factor),
:mod:`~hdgp.sigp.subspace` (SDR subspace, eqs. 6-7), :mod:`~hdgp.sigp.em`
(Algorithm 1, eqs. 9-14), :mod:`~hdgp.sigp.cv` (hyper-parameters by
cross-validation). The scikit-learn estimators live in
:mod:`hdgp.estimators.sigp`.
"""
