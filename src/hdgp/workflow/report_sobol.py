"""The report's section on the uncertainty of the Sobol ranking (:func:`hdgp.sobol_intervals.sobol_intervals`).

For each latent function with a Sobol decomposition, the top terms get a posterior mean and a 90 %
credible interval of their normalised Sobol index, the share of posterior samples in which each keeps
its rank or stays among the top three, and the share in which the top three keep their order.
"""

from __future__ import annotations

import html
import weakref

from ..sobol_intervals import sobol_intervals

__all__ = ["interval_results", "interval_data", "interval_section"]

#: Credible mass of the intervals in the report.
LEVEL = 0.9
#: Leading terms whose ranking the report checks.
TOP_K = 3
#: Posterior samples and quadrature points of the input measure per latent function.
N_SAMPLES, N_POINTS = 1000, 64
#: Support points (training rows of an exact fit, inducing points) above which the report skips the intervals:
#: the posterior covariance of the stacked components costs a triangular solve with that many rows.
MAX_SUPPORT = 4000


#: The last results per estimator (``hdgp explain --json`` builds the page and the JSON from one model),
#: keyed by ``top`` and the fitted posteriors themselves so that a refit is never served old results.
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def interval_results(est, explained, top: int) -> list:
    """One :class:`~hdgp.sobol_intervals.SobolIntervals` per entry of ``explained`` (None where skipped)."""
    posteriors = [getattr(est, "posterior_", None), *getattr(est, "posteriors_", ())]
    try:
        cached = _CACHE.get(est)
    except TypeError:  # not weakly referable
        cached = None
    if (cached is not None and cached[0] == top and len(cached[1]) == len(posteriors)
            and all(a is b for a, b in zip(cached[1], posteriors))):
        return cached[2]
    out = _compute(est, explained, top)
    try:
        _CACHE[est] = (top, posteriors, out)
    except TypeError:
        pass
    return out


def _compute(est, explained, top: int) -> list:
    out = []
    for index, entry in enumerate(explained):
        posteriors = getattr(est, "posteriors_", None)
        posterior = posteriors[index] if posteriors is not None else getattr(est, "posterior_", None)
        if posterior is None or posterior.X.shape[0] > MAX_SUPPORT or not entry.result.terms:
            out.append(None)
            continue
        out.append(sobol_intervals(est, max_terms=top, level=LEVEL, top_k=TOP_K, n_samples=N_SAMPLES,
                                   n_points=N_POINTS, class_index=index))
    return out


def interval_data(results) -> list:
    """JSON-ready summaries (``hdgp explain --json``)."""
    return [None if r is None else r.to_dict() for r in results]


def interval_section(results, labels) -> list[str]:
    """HTML of the section: one table per latent function, with its ``labels`` entry as heading (or none)."""
    e = html.escape
    parts = ["<h2 id='sobol-uncertainty'>How certain is the ranking?</h2>",
             f"<p class='note'>Posterior of each Sobol index: the fitted model's posterior over the function induces "
             f"one over each component's variance share. Mean and {LEVEL:.0%} credible interval from "
             f"{N_SAMPLES} joint posterior samples; 'keeps rank': the share of samples in which the term holds "
             f"its rank among the listed terms; 'top {TOP_K}': the share in which it is among the {TOP_K} largest. "
             "The intervals are for this model's Sobol indices, under the input distribution it fitted to the "
             "training rows, with its hyper-parameters fixed: as statements about the population the rows came from "
             "they are too narrow, since another sample of rows would move both "
             "(<code>hdgp.sobol_intervals.sobol_intervals(..., method='bootstrap')</code> refits on resampled rows and "
             "includes that spread).</p>"]
    for r, label in zip(results, labels):
        if label:
            parts.append(f"<h3>{e(label)}</h3>")
        if r is None:
            parts.append("<p class='note'>Skipped: the posterior has more than "
                         f"{MAX_SUPPORT} support points.</p>")
            continue
        lead = " → ".join(" × ".join(map(str, n)) for n in r.names[:r.top_k])
        parts.append(f"<p class='stability'>The order of the top {r.top_k} terms ({e(lead)}) holds in "
                     f"<b>{r.rank_stable:.0%}</b> of the posterior samples.</p>")
        rows = "".join(
            f"<tr><td>{i + 1}</td><td class='l'>{e(' × '.join(map(str, n)))}</td><td>{est:.4f}</td><td>{m:.4f}</td>"
            f"<td>[{lo:.4f}, {hi:.4f}]</td><td>{k:.0%}</td><td>{t:.0%}</td></tr>"
            for i, (n, est, m, lo, hi, k, t) in enumerate(zip(r.names, r.estimate, r.mean, r.lower, r.upper,
                                                               r.keeps_rank, r.in_top_k)))
        parts.append("<table class='sobol-intervals'><tr><th>rank</th><th class='l'>term</th><th>Sobol index</th>"
                     f"<th>posterior mean</th><th>{LEVEL:.0%} interval</th><th>keeps rank</th><th>top {TOP_K}</th>"
                     f"</tr>{rows}</table>")
    return parts
