"""The OAK paper's own splits (``hdgp.data.bayesian_benchmarks``).

The split rule is checked against its definition (NumPy's global legacy generator);
the rebuilt data sets are checked against the paper itself: deterministic
scikit-learn baselines on our splits must give the mean and std over 10 splits
that its Table 5 prints, to the printed three decimals.
"""

import numpy as np
import pandas as pd
import pytest

from hdgp.data.bayesian_benchmarks import BB_SETS, N_SPLITS, bb_split_indices, load_bb, load_bb_split


@pytest.mark.parametrize("n_rows", [23, 100, 209, 1503])
@pytest.mark.parametrize("split", [0, 3, 9])
def test_split_is_the_suites_global_seed_shuffle(n_rows, split):
    # the suite's code: np.random.seed(BASE_SEED + split) with BASE_SEED = 0, np.random.shuffle, first int(0.9 n)
    np.random.seed(split)
    expected = np.arange(n_rows)
    np.random.shuffle(expected)
    n_train = int(n_rows * 0.9)
    state = np.random.get_state()[1].copy()
    train, test = bb_split_indices(n_rows, split)
    np.testing.assert_array_equal(train, expected[:n_train])
    np.testing.assert_array_equal(test, expected[n_train:])
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # the global generator is left alone


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True, None])
def test_split_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="split must be"):
        bb_split_indices(10, bad)


def test_unknown_set_and_split_out_of_range_are_named():
    with pytest.raises(ValueError, match="available: " + ", ".join(BB_SETS)):
        load_bb("yacht")
    with pytest.raises(ValueError, match=r"split must be in \[0, 9\]"):
        load_bb_split("machine", N_SPLITS)


@pytest.mark.data
@pytest.mark.parametrize("name", ["machine", "boston", "energy"])
def test_rebuilt_sets_are_standardised_with_all_rows(data_dir, name):
    X, y = load_bb(name, data_dir)
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(X.std(0), 1, atol=1e-5)  # std / (std + 1e-6)
    assert abs(y.mean()) < 1e-10 and abs(y.std() - 1) < 1e-5
    Xtr, ytr, Xte, yte = load_bb_split(name, 4, data_dir)
    assert len(ytr) == int(0.9 * len(y)) and len(ytr) + len(yte) == len(y)


def _paper_table5(data_dir):
    from hdgp.bench.reference import find_reference_dir

    ref = find_reference_dir(data_dir=data_dir)
    if ref is None or not (ref / "oak_table5_regression_rmse.csv").is_file():
        pytest.skip("the papers' reference tables (shared/reference) were not found")
    return pd.read_csv(ref / "oak_table5_regression_rmse.csv")


def _rmse_over_splits(name, make, data_dir):
    out = []
    for split in range(N_SPLITS):
        X_train, y_train, X_test, y_test = load_bb_split(name, split, data_dir)
        out.append(np.sqrt(np.mean((make().fit(X_train, y_train).predict(X_test) - y_test) ** 2)))
    return np.mean(out), np.std(out)


@pytest.mark.data
@pytest.mark.parametrize("name", ["machine", "servo", "fertility", "forest", "stock", "airfoil", "boston"])
def test_deterministic_baselines_reproduce_the_papers_table5(data_dir, name):
    from sklearn.linear_model import LinearRegression
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.svm import SVR

    table = _paper_table5(data_dir)
    makers = {"Linear": LinearRegression, "KNN": KNeighborsRegressor, "SVM": SVR}
    for model, make in makers.items():
        mean, std = _rmse_over_splits(name, make, data_dir)
        row = table[(table.dataset == name) & (table.model == model)].iloc[0]
        # printed to three decimals: our value must round to theirs (0.0006 allows a tie at the last digit)
        assert abs(mean - row["mean"]) <= 6e-4, (name, model, mean, row["mean"])
        assert abs(std - row["std"]) <= 6e-4, (name, model, std, row["std"])


@pytest.mark.data
def test_energy_in_the_spreadsheets_row_order_reproduces_knn_and_svr(data_dir):
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.svm import SVR

    table = _paper_table5(data_dir)
    for model, make in (("KNN", KNeighborsRegressor), ("SVM", SVR)):
        mean, std = _rmse_over_splits("energy", make, data_dir)
        row = table[(table.dataset == "energy") & (table.model == model)].iloc[0]
        assert abs(mean - row["mean"]) <= 1e-3 and abs(std - row["std"]) <= 6e-4, (model, mean, std)
