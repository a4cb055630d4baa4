"""``--model auto``'s choice rule, studied on cached cross-validated predictions (issue #41).

For each data set and split of the ``generalisation`` protocol (z-scored inputs and target, as the
harness gives them to ``hdgp fit --model auto``), every regression family's default preset is

* cross-validated on the training rows with the folds ``hdgp.workflow.select`` uses up to
  ``CV_MAX_ROWS`` rows (its seeded 80 / 20 split, then the 4 other folds), keeping each row's
  validation mean and standard deviation, and
* fitted on all training rows and predicted on the test rows (the family's own harness row).

Both are cached (``--cache``, one ``.npz`` per set and split), so a choice rule is judged on them in
seconds: for every rule, the family it picks from the cross-validated predictions alone and that
family's test RMSE / NLPD, against the best family's mean test RMSE (#41's bar: within 5 %).

    HDGP_DATA_DIR=<shared>/data OMP_NUM_THREADS=1 python benchmarks/auto_rules.py \\
        --datasets fertility concreteslump servo machine yacht autos autompg diabetes --splits 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from hdgp import metrics
from hdgp.bench.datasets import load_split
from hdgp.bench.protocols._specs import DatasetSpec
from hdgp.io.table import TableSchema
from hdgp.workflow import select as sel
from hdgp.workflow.estimation import make_estimator

FAMILIES = ("OAK", "Additive", "GAM", "RBF-ARD", "DPA-GP-ARD", "SIGP")


def folds(n: int, random_state: int = 0):
    """The K folds of ``select`` (no categorical columns here)."""
    fit_idx, val_idx = train_test_split(np.arange(n), test_size=sel.VALIDATION_FRACTION, random_state=random_state)
    k = round(1 / sel.VALIDATION_FRACTION) - 1
    rest = np.random.default_rng(random_state).permutation(fit_idx)
    return [(fit_idx, val_idx)] + [(np.setdiff1d(np.arange(n), rest[j::k]), rest[j::k]) for j in range(k)]


def cache_one(name: str, split: int, cache: Path) -> Path:
    path = cache / f"{name}-{split}.npz"
    if path.exists():
        return path
    data = load_split(DatasetSpec(name), split, "zscore")
    X = pd.DataFrame(data.X_train, columns=[f"x{j}" for j in range(data.X_train.shape[1])])
    y = np.asarray(data.y_train, float)
    frame = X.assign(target=y)
    schema, X_raw, y = TableSchema.infer(frame, "target", task="regression")
    X_test = pd.DataFrame(data.X_test, columns=X.columns)
    out = {"y": y, "y_test": np.asarray(data.y_test, float)}
    fs = folds(len(y))
    out["cv_rows"] = np.concatenate([v for _, v in fs])
    for fam in FAMILIES:
        start = time.perf_counter()
        means, stds = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for tr, va in fs:
                est = make_estimator(fam, schema, random_state=0, strict=False)
                est.fit(schema.encode(X_raw.iloc[tr]), y[tr])
                m, s = est.predict(schema.encode(X_raw.iloc[va]), return_std=True)
                means.append(m), stds.append(s)
            cv_seconds = time.perf_counter() - start
            est = make_estimator(fam, schema, random_state=0, strict=False)
            est.fit(schema.encode(X_raw), y)
            m, s = est.predict(schema.encode(X_test), return_std=True)
        out[f"{fam}:cv_mean"], out[f"{fam}:cv_std"] = np.concatenate(means), np.concatenate(stds)
        out[f"{fam}:test_mean"], out[f"{fam}:test_std"] = m, s
        out[f"{fam}:seconds"] = np.array([cv_seconds, time.perf_counter() - start - cv_seconds])
        print(f"{name} {split} {fam}: cv {cv_seconds:.1f} s, test RMSE {metrics.rmse(out['y_test'], m):.4f}",
              flush=True)
    np.savez(path, **out)
    return path


def _per_row(y, mean, std):
    """Per-row squared error and calibrated log density (``select._score``'s terms) and the factor."""
    z2 = ((y - mean) / std) ** 2
    r = float(np.mean(z2))
    return (y - mean) ** 2, -0.5 * np.log(2 * np.pi * r * std ** 2) - 0.5 * z2 / r, r


def _within(terms: dict, leader: str, z: float = 2.0) -> list:
    """Names whose paired per-row terms (higher is better) are not below the leader's beyond ``z`` SE."""
    out = []
    for name, t in terms.items():
        d = t - terms[leader]
        se = float(np.std(d, ddof=1) / np.sqrt(len(d)))
        if float(np.mean(d)) >= -z * se:
            out.append(name)
    return out


def _rules(c: dict, fams) -> dict:
    """Family each rule picks from the cross-validated predictions in ``c``."""
    y = c["y"][c["cv_rows"]]
    sq, ld, ratio = {}, {}, {}
    for f in fams:
        sq[f], ld[f], ratio[f] = _per_row(y, c[f"{f}:cv_mean"], c[f"{f}:cv_std"])
    best_ld = max(fams, key=lambda f: ld[f].mean())
    best_sq = min(fams, key=lambda f: sq[f].mean())
    neg_sq = {f: -sq[f] for f in fams}
    ok_ld = _within(ld, best_ld)
    ok_sq = _within(neg_sq, best_sq)
    ok_ld1 = _within(ld, best_ld, 1.0)
    # the log density the same means get with one constant (calibrated) variance: -log RMSE - log(2 pi e)/2
    homo = {f: -0.5 * np.log(2 * np.pi * sq[f].mean()) - 0.5 * sq[f] / sq[f].mean() for f in fams}
    blend = {f: 0.5 * (ld[f] + homo[f]) for f in fams}
    rank_sq = {f: i for i, f in enumerate(sorted(fams, key=lambda f: sq[f].mean()))}
    rank_ld = {f: i for i, f in enumerate(sorted(fams, key=lambda f: -ld[f].mean()))}
    return {"log density": best_ld, "rmse": best_sq,
            "blend": max(fams, key=lambda f: blend[f].mean()),
            "borda": min(fams, key=lambda f: (rank_sq[f] + rank_ld[f], rank_ld[f])),
            "rmse among ld-equivalent (1 SE)": min(ok_ld1, key=lambda f: sq[f].mean()),
            "rmse among ld-equivalent": min(ok_ld, key=lambda f: sq[f].mean()),
            "ld among rmse-equivalent": max(ok_sq, key=lambda f: ld[f].mean()),
            "_ratio": ratio}


def report(cache: Path, sets) -> str:
    rows = []
    for path in sorted(cache.glob("*.npz")):
        name, split = path.stem.rsplit("-", 1)
        if sets and name not in sets:
            continue
        c = dict(np.load(path))
        test = {f: metrics.rmse(c["y_test"], c[f"{f}:test_mean"]) for f in FAMILIES}
        for cands, label in ((("OAK", "DPA-GP-ARD", "RBF-ARD", "SIGP"), "4"), (FAMILIES, "6")):
            picks = _rules(c, cands)
            ratio = picks.pop("_ratio")
            for rule, f in picks.items():
                std = c[f"{f}:test_std"] * np.sqrt(ratio[f])
                rows.append({"set": name, "split": int(split), "cands": label, "rule": rule, "pick": f,
                             "rmse": test[f], "nlpd": metrics.nlpd(c["y_test"], c[f"{f}:test_mean"], std)})
        for f in FAMILIES:
            rows.append({"set": name, "split": int(split), "cands": "-", "rule": f, "pick": f, "rmse": test[f],
                         "nlpd": metrics.nlpd(c["y_test"], c[f"{f}:test_mean"], c[f"{f}:test_std"])})
    t = pd.DataFrame(rows)
    mean = t.groupby(["set", "cands", "rule"])[["rmse", "nlpd"]].mean().reset_index()
    best = mean[mean.cands == "-"].groupby("set")["rmse"].min()
    mean["/best"] = mean["rmse"] / mean["set"].map(best)
    picks = t.groupby(["set", "cands", "rule"])["pick"].apply(lambda s: ",".join(x[:4] for x in s))
    mean["picks"] = mean.set_index(["set", "cands", "rule"]).index.map(picks)
    lines = [mean.round(3).to_string()]
    rule_rows = mean[mean.cands != "-"]
    summary = rule_rows.groupby(["cands", "rule"]).agg(ok=("/best", lambda r: int((r <= 1.05).sum())),
                                                       sets=("/best", "size"), mean_ratio=("/best", "mean"),
                                                       worst=("/best", "max"), nlpd=("nlpd", "mean"))
    lines.append(summary.round(3).to_string())
    return "\n\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--cache", type=Path, default=Path("auto-rules-cache"))
    parser.add_argument("--report", action="store_true", help="judge the rules on what is cached")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.cache, args.datasets if args.datasets != ["all"] else None))
        return 0
    args.cache.mkdir(parents=True, exist_ok=True)
    for name in args.datasets:
        for split in args.splits:
            cache_one(name, split, args.cache)
    print(json.dumps({"cached": len(list(args.cache.glob("*.npz")))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
