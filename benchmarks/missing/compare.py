"""OAK with missing cells: marginalisation against mean imputation and complete-case fitting.

A synthetic FANOVA function of 4 independent N(0, 1) inputs, 20 % of the cells missing
(completely at random) in the training and in the test rows. Prints held-out RMSE and NLPD of

- marginalised: OAKRegressor on the NaN cells (the expected kernel at fit and predict time);
- mean-imputed: OAKRegressor on cells filled with the training column means (fit and test);
- complete-case: OAKRegressor fitted on the complete training rows, test cells mean-imputed.

Run: python benchmarks/missing/compare.py [n_repeats]
"""

import sys

import numpy as np
from scipy.stats import norm

from hdgp import OAKRegressor


def truth(X):
    return np.sin(1.5 * X[:, 0]) + 0.8 * X[:, 1] * X[:, 2] + 0.5 * X[:, 3]


def scores(mean, std, y):
    return float(np.sqrt(np.mean((mean - y) ** 2))), float(-np.mean(norm.logpdf(y, mean, std)))


def run(seed, n=300, n_test=500, share=0.2):
    rng = np.random.default_rng(seed)
    X, Xs = rng.normal(size=(n, 4)), rng.normal(size=(n_test, 4))
    y, ys = truth(X) + 0.1 * rng.normal(size=n), truth(Xs) + 0.1 * rng.normal(size=n_test)
    X[rng.random(X.shape) < share] = np.nan
    Xs[rng.random(Xs.shape) < share] = np.nan
    fill = np.nanmean(X, axis=0)
    imputed, imputed_test = np.where(np.isnan(X), fill, X), np.where(np.isnan(Xs), fill, Xs)
    complete = ~np.isnan(X).any(axis=1)
    out = {}
    for name, (Xf, yf, Xp) in {"marginalised": (X, y, Xs), "mean-imputed": (imputed, y, imputed_test),
                               "complete-case": (X[complete], y[complete], imputed_test)}.items():
        model = OAKRegressor(max_order=2, random_state=seed).fit(Xf, yf)
        out[name] = scores(*model.predict(Xp, return_std=True), ys)
    return out


if __name__ == "__main__":
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    results = [run(seed) for seed in range(repeats)]
    for name in results[0]:
        rmse, nlpd = np.array([r[name] for r in results]).T
        print(f"{name:>14}: RMSE {rmse.mean():.3f} ± {rmse.std():.3f}   NLPD {nlpd.mean():.3f} ± {nlpd.std():.3f}")
