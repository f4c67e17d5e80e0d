"""Statistical tests that always come with an effect size, a confidence interval and n.

Every public test returns one *row*: a plain dict with the columns of :data:`STAT_COLUMNS` (``test, group_a,
group_b, statistic, df, p, p_adj, adj_method, effect, effect_size, ci_low, ci_high, n``). Collect rows with
:func:`results_table`, which builds the tidy DataFrame and fills ``p_adj`` with a multiple-comparison correction
over the whole family (Holm by default).

Conventions the book uses (and why)
-----------------------------------
* **Chi-square on a 2x2 table**: Yates' continuity correction is the *replication* value, because the BOLD audit
  called ``scipy.stats.chi2_contingency`` whose default applies it to 2x2 tables (their published 62.86). The
  uncorrected Pearson statistic is reported beside it (``correction=False``): Yates is known to be conservative, and
  the book treats Pearson as primary.
* **Cohen's d**: ``kind="pooled"`` (textbook d, SD pooled with weights n-1) is the book's primary effect size;
  ``kind="average"`` (mean difference over the root of the *unweighted* mean of the two variances, d_av) reproduces
  the audit's 0.099. With very unequal n (1,172 vs 353) the two differ, and only the pooled form has the usual
  sampling distribution. CIs use the normal approximation SE = sqrt((na+nb)/(na*nb) + d^2/(2(na+nb))) for both
  forms.
* **Odds ratio**: +0.5 is added to *every* cell (Haldane-Anscombe), as the audit did, and the CI is Wald on the log
  scale: exp(log OR +- 1.96 SE), SE = sqrt(sum 1/(cell+0.5)).
* **t tests**: the effect is the mean difference (a - b) with the matching t CI; standardised effects are separate
  rows (:func:`cohens_d`, :func:`hedges_g`).
* **Many tests at once**: :func:`group_tests` is the one engine for two-group tests: it runs a dict of tests on
  every column of a [cells, n, dimensions] array for many label rows. The vectorised Student, Welch, Hedges' g and
  permutation tests (the specification curve and its joint null) equal the scalar tests here; :func:`column_test`
  runs a scalar test in it (``profiles.profile_stats``). :func:`holm` is the one Holm rule, vectorised
  (:func:`adjust_pvalues` calls it); :func:`permutation_p` the one permutation p with its floor.
* **Correlated observations**: completions of one occupation are not independent; :func:`cluster_bootstrap_ci`
  resamples whole clusters (occupations) within each group, which is the CI the book prefers for completion-level
  quantities.

One concept over 600 lines: the statistics engine. Every test returns the same row (``STAT_COLUMNS``) with its
effect size and interval, and the vectorised two-group engine sits beside the scalar tests it must equal.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

from .errors import ParameterError, check_at_most
from .precision import p_text

__all__: list[str] = []

STAT_COLUMNS = [
    "test", "group_a", "group_b", "statistic", "df", "p", "p_adj", "adj_method",
    "effect", "effect_size", "ci_low", "ci_high", "n",
]
_Z975 = _st.norm.ppf(0.975)


def stat_row(test: str, *, statistic=np.nan, df=np.nan, p=np.nan, effect: str = "",
         effect_size=np.nan, ci=(np.nan, np.nan), n=0, group_a="a", group_b="b") -> dict:
    return {
        "test": test, "group_a": group_a, "group_b": group_b,
        "statistic": float(statistic), "df": float(df), "p": float(p),
        "p_adj": np.nan, "adj_method": "",
        "effect": effect, "effect_size": float(effect_size),
        "ci_low": float(ci[0]), "ci_high": float(ci[1]), "n": int(n),
    }


def _values(x, name: str, min_n: int = 2) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"group {name!r}: expected a 1-D sequence of numbers, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"group {name!r}: {int(np.isnan(arr).sum())} missing values (NaN); drop or impute them "
                         f"explicitly")
    if arr.size < min_n:
        raise ValueError(f"group {name!r}: {arr.size} values, need at least {min_n}")
    return arr


# ---------------------------------------------------------------- two groups, continuous
def _t_test(a, b, equal_var: bool, test: str, group_a: str, group_b: str) -> dict:
    a, b = _values(a, group_a), _values(b, group_b)
    if a.var() == 0 and b.var() == 0:
        raise ValueError(f"{test}: both groups ({group_a!r}, {group_b!r}) are constant; t is undefined")
    res = _st.ttest_ind(a, b, equal_var=equal_var)
    ci = res.confidence_interval(0.95)
    return stat_row(test, statistic=res.statistic, df=res.df, p=res.pvalue,
                effect="mean_difference", effect_size=a.mean() - b.mean(),
                ci=(ci.low, ci.high), n=a.size + b.size, group_a=group_a, group_b=group_b)


def welch_t(a, b, *, test: str = "welch_t", group_a: str = "a", group_b: str = "b") -> dict:
    """Welch's unequal-variance t test of mean(a) - mean(b); df Welch-Satterthwaite."""
    return _t_test(a, b, False, test, group_a, group_b)


def student_t(a, b, *, test: str = "student_t", group_a: str = "a", group_b: str = "b") -> dict:
    """Student's pooled-variance t test of mean(a) - mean(b)."""
    return _t_test(a, b, True, test, group_a, group_b)


def _d_ci(d: float, na: int, nb: int, scale: float = 1.0) -> tuple[float, float]:
    se = np.sqrt((na + nb) / (na * nb) + d**2 / (2 * (na + nb))) * scale
    return d - _Z975 * se, d + _Z975 * se


def cohens_d(a, b, *, kind: str = "pooled", group_a: str = "a", group_b: str = "b") -> dict:
    """Cohen's d of a - b.

    ``kind="pooled"``: SD = sqrt(((na-1)va + (nb-1)vb) / (na+nb-2)) (the book's primary d). ``kind="average"``: SD =
    sqrt((va + vb) / 2), the audit's form (d_av), used for replication. The row's test and effect are
    ``cohens_d_pooled`` or ``cohens_d_average``."""
    a, b = _values(a, group_a), _values(b, group_b)
    va, vb = a.var(ddof=1), b.var(ddof=1)
    if kind == "pooled":
        sd = np.sqrt(((a.size - 1) * va + (b.size - 1) * vb) / (a.size + b.size - 2))
    elif kind == "average":
        sd = np.sqrt((va + vb) / 2)
    else:
        raise ValueError(f"cohens_d: kind must be 'pooled' or 'average', got {kind!r}")
    if sd == 0:
        raise ValueError(f"cohens_d: both groups ({group_a!r}, {group_b!r}) have zero variance; d is undefined")
    d = (a.mean() - b.mean()) / sd
    return stat_row(f"cohens_d_{kind}", effect=f"cohens_d_{kind}", effect_size=d,
                ci=_d_ci(d, a.size, b.size), n=a.size + b.size, group_a=group_a, group_b=group_b)


def _hedges(diff, va, vb, na: int, nb: int) -> tuple:
    """Hedges' g from two groups' moments, elementwise over arrays (or on scalars): ``diff`` mean a - mean b,
    ``va, vb`` their ddof-1 variances, ``na, nb`` their sizes; ``(g, ci_low, ci_high)``: the pooled-SD d
    (SD = sqrt(((na-1)va + (nb-1)vb) / (na+nb-2))) times the small-sample factor J = 1 - 3/(4(na+nb) - 9), and
    the normal-approximation 95% CI of d (:func:`_d_ci`'s SE) times J. The one computation of g: the scalar row
    (:func:`hedges_g`), the vectorised engine (:func:`_hedges_test`) and the resampled rows (:func:`rowwise_g`)
    call it, so their numbers agree to the bit. A zero pooled SD gives an infinite or NaN d, without a warning."""
    n = na + nb
    with np.errstate(divide="ignore", invalid="ignore"):
        d = diff / np.sqrt(((na - 1) * va + (nb - 1) * vb) / (n - 2))
    j = 1 - 3 / (4 * n - 9)
    se_d = np.sqrt(n / (na * nb) + d**2 / (2 * n))
    return d * j, (d - _Z975 * se_d) * j, (d + _Z975 * se_d) * j


def hedges_g(a, b, *, group_a: str = "a", group_b: str = "b") -> dict:
    """Hedges' g: pooled-SD d times the small-sample factor J = 1 - 3/(4(na+nb) - 9), with 95% CI (:func:`_hedges`;
    :func:`cohens_d` checks the groups and gives the row)."""
    row = cohens_d(a, b, kind="pooled", group_a=group_a, group_b=group_b)
    a, b = _values(a, group_a), _values(b, group_b)
    g, lo, hi = _hedges(a.mean() - b.mean(), a.var(ddof=1), b.var(ddof=1), a.size, b.size)
    row.update(test="hedges_g", effect="hedges_g", effect_size=float(g), ci_low=float(lo), ci_high=float(hi))
    return row


def mann_whitney(a, b, *, test: str = "mann_whitney", group_a: str = "a", group_b: str = "b",
                 n_boot: int = 2000, seed: int = 0) -> dict:
    """Two-sided Mann-Whitney U; effect = rank-biserial r = 2U/(na*nb) - 1 (a > b positive), percentile bootstrap CI."""
    a, b = _values(a, group_a, 1), _values(b, group_b, 1)
    res = _st.mannwhitneyu(a, b, alternative="two-sided")
    rbc = 2 * res.statistic / (a.size * b.size) - 1
    # r = mean over all pairs of sign(a_i - b_j), identical to 2U/(na*nb) - 1; vectorised per replicate.
    rng = np.random.default_rng(seed)
    boots = np.array([np.sign(rng.choice(a, a.size)[:, None] - rng.choice(b, b.size)[None, :]).mean()
                      for _ in range(n_boot)])
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return stat_row(test, statistic=res.statistic, p=res.pvalue, effect="rank_biserial",
                effect_size=rbc, ci=(lo, hi), n=a.size + b.size, group_a=group_a, group_b=group_b)


# ---------------------------------------------------------------- counts and proportions
def _table(table, shape=None) -> np.ndarray:
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or (shape is not None and t.shape != shape):
        raise ValueError(f"contingency table must be {'x'.join(map(str, shape)) if shape else '2-D'}, got shape "
                         f"{t.shape}")
    if (t < 0).any():
        raise ValueError("contingency table has negative counts")
    if (t.sum(axis=0) == 0).any() or (t.sum(axis=1) == 0).any():
        raise ValueError(f"contingency table has an empty row or column (chi-square undefined): {t.tolist()}")
    return t


def _cramers_v(t: np.ndarray) -> float:
    chi2 = _st.chi2_contingency(t, correction=False).statistic
    return float(np.sqrt(chi2 / (t.sum() * (min(t.shape) - 1))))


#: Bootstrap counts below this give percentile CIs from a handful of order statistics: the floor of every function
#: that publishes a 95% interval (the notebooks' parameter checks and the library calls behind them alike).
MIN_N_BOOT = 100


def check_n_boot(n_boot, *, minimum: int | None = None, name: str = "n_boot", default: int | None = None) -> int:
    """``n_boot`` as an int, or a ``ParameterError`` naming it. Fewer than two replicates cannot give an
    interval (0 gives NaN); callers that report CIs ask for more with ``minimum`` (the notebooks: 100). At most
    ``errors.max_resamples()`` (``default`` sizes the message's run-time estimate)."""
    least = max(2, minimum or 0)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < least:
        raise ParameterError(f"{name} must be an integer >= {least} for a percentile bootstrap CI, got {n_boot!r}")
    return check_at_most(int(n_boot), name, default=default)


def _table_bootstrap_ci(t: np.ndarray, n_boot: int, seed: int):
    """Percentile CI of Cramér's V by multinomial resampling of the observed table.

    Degenerate draws (an empty margin, V undefined) are left out of the percentile set."""
    n_boot = check_n_boot(n_boot)
    rng = np.random.default_rng(seed)
    n = int(t.sum())
    draws = rng.multinomial(n, (t / t.sum()).ravel(), size=n_boot).reshape(n_boot, *t.shape).astype(float)
    rows, cols = draws.sum(axis=2, keepdims=True), draws.sum(axis=1, keepdims=True)
    ok = (rows > 0).all(axis=(1, 2)) & (cols > 0).all(axis=(1, 2))
    if not ok.any():
        return np.nan, np.nan
    expected = rows[ok] * cols[ok] / n
    chi2 = ((draws[ok] - expected) ** 2 / expected).sum(axis=(1, 2))
    v = np.sqrt(chi2 / (n * (min(t.shape) - 1)))
    return tuple(np.percentile(v, [2.5, 97.5]))


def chi2_table(table, *, correction: bool = True, test: str | None = None,
               group_a: str = "rows", group_b: str = "columns", n_boot: int = 1000, seed: int = 0) -> dict:
    """Chi-square test of independence on an r x k table of counts.

    ``correction`` applies Yates' continuity correction (only has an effect on 2x2 tables, exactly as
    ``scipy.stats.chi2_contingency``). Effect: Cramér's V (= |phi| for 2x2) from the *uncorrected* statistic, with a
    multinomial parametric-bootstrap percentile CI."""
    t = _table(table)
    res = _st.chi2_contingency(t, correction=correction)
    yates = correction and t.shape == (2, 2)
    name = test or ("chi2_yates" if yates else "chi2_pearson")
    lo, hi = _table_bootstrap_ci(t, n_boot, seed)
    return stat_row(name, statistic=res.statistic, df=res.dof, p=res.pvalue, effect="cramers_v",
                effect_size=_cramers_v(t), ci=(lo, hi), n=int(t.sum()), group_a=group_a, group_b=group_b)


def odds_ratio(table, *, add: float = 0.5, test: str = "odds_ratio_wald",
               group_a: str = "row 1", group_b: str = "row 2") -> dict:
    """Odds ratio (a/b)/(c/d) of the 2x2 table [[a, b], [c, d]] with ``add`` added to every cell.

    ``add=0.5`` is the Haldane-Anscombe correction the audit used (always applied, not only on zero cells). Wald 95%
    CI on log OR with SE = sqrt(sum 1/cell); ``statistic`` is z = log OR / SE with its two-sided normal p."""
    t = np.asarray(table, dtype=float)
    if t.shape != (2, 2):
        raise ValueError(f"odds_ratio: table must be 2x2, got shape {t.shape}")
    if (t < 0).any():
        raise ValueError("odds_ratio: negative counts")
    c = t + add
    if (c == 0).any():
        raise ValueError(f"odds_ratio: a zero cell with add={add}; use add=0.5 (Haldane) or another test")
    log_or = np.log(c[0, 0] * c[1, 1] / (c[0, 1] * c[1, 0]))
    se = np.sqrt((1 / c).sum())
    z = log_or / se
    return stat_row(test, statistic=z, p=2 * _st.norm.sf(abs(z)), effect="odds_ratio",
                effect_size=np.exp(log_or), ci=(np.exp(log_or - _Z975 * se), np.exp(log_or + _Z975 * se)),
                n=int(t.sum()), group_a=group_a, group_b=group_b)


def wilson(x: int, n: int) -> tuple[float, float]:
    p = x / n
    centre = (p + _Z975**2 / (2 * n)) / (1 + _Z975**2 / n)
    half = _Z975 * np.sqrt(p * (1 - p) / n + _Z975**2 / (4 * n**2)) / (1 + _Z975**2 / n)
    return centre - half, centre + half


def _proportion_test(x_a: int, n_a: int, x_b: int, n_b: int, *, test: str = "two_proportion_z",
                    group_a: str = "a", group_b: str = "b") -> dict:
    """Two-sided pooled z test of p_a = x_a/n_a vs p_b = x_b/n_b (= uncorrected Pearson chi-square).

    Effect: risk difference p_a - p_b with Newcombe's hybrid Wilson-score 95% CI (well-behaved for the rare events
    here, unlike the Wald interval)."""
    for x, n, g in ((x_a, n_a, group_a), (x_b, n_b, group_b)):
        if n <= 0 or not 0 <= x <= n:
            raise ValueError(f"proportion_test: group {g!r} has x={x}, n={n}; need 0 <= x <= n and n > 0")
    pa, pb = x_a / n_a, x_b / n_b
    pool = (x_a + x_b) / (n_a + n_b)
    se = np.sqrt(pool * (1 - pool) * (1 / n_a + 1 / n_b))
    z = (pa - pb) / se if se > 0 else np.nan
    p = 2 * _st.norm.sf(abs(z)) if se > 0 else 1.0
    la, ua = wilson(x_a, n_a)
    lb, ub = wilson(x_b, n_b)
    d = pa - pb
    lo = d - np.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    hi = d + np.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    return stat_row(test, statistic=z, p=p, effect="risk_difference", effect_size=d, ci=(lo, hi),
                n=n_a + n_b, group_a=group_a, group_b=group_b)


def hurdle_tests(a, b, *, group_a: str = "a", group_b: str = "b", name: str = "count",
                 seed: int = 0) -> list[dict]:
    """Two-part (hurdle) view of zero-inflated non-negative values.

    Part 1, presence: share of observations > 0 per group (:func:`proportion_test`). Part 2, intensity among the
    non-zero observations: Welch t (mean difference) and Mann-Whitney (rank-biserial). Part 2 rows are skipped
    (raise) only if a group has too few non-zero values; callers record that as a skip."""
    a, b = _values(a, group_a, 1), _values(b, group_b, 1)
    rows = [_proportion_test(int((a > 0).sum()), a.size, int((b > 0).sum()), b.size,
                            test=f"hurdle_presence:{name}", group_a=group_a, group_b=group_b)]
    nz_a, nz_b = a[a > 0], b[b > 0]
    rows.append(welch_t(nz_a, nz_b, test=f"hurdle_intensity_welch:{name}", group_a=group_a, group_b=group_b))
    rows.append(mann_whitney(nz_a, nz_b, test=f"hurdle_intensity_mwu:{name}", group_a=group_a,
                             group_b=group_b, seed=seed))
    return rows


# ---------------------------------------------------------------- more than two groups
def welch_anova(values, groups, *, test: str = "welch_anova", n_boot: int = 1000, seed: int = 0) -> dict:
    """One-way Welch ANOVA (pingouin) across any number of groups.

    Effect: eta squared (SS_between / SS_total) with a percentile bootstrap CI resampling observations within
    groups."""
    import pingouin as pg  # deferred: pingouin pulls in statsmodels and takes seconds to import

    n_boot = check_n_boot(n_boot)
    df = pd.DataFrame({"y": np.asarray(values, dtype=float), "g": np.asarray(groups)})
    sizes = df.groupby("g").size()
    if len(sizes) < 2 or (sizes < 2).any():
        raise ValueError(f"welch_anova: need >= 2 groups with >= 2 values each, got sizes {sizes.to_dict()}")
    res = pg.welch_anova(data=df, dv="y", between="g").iloc[0]

    def eta2(y: np.ndarray, codes: np.ndarray) -> float:
        grand = y.mean()
        sst = ((y - grand) ** 2).sum()
        ssb = sum(((y[codes == k].mean() - grand) ** 2) * (codes == k).sum() for k in np.unique(codes))
        return ssb / sst if sst > 0 else np.nan

    y, codes = df["y"].to_numpy(), pd.factorize(df["g"])[0]
    rng = np.random.default_rng(seed)
    idx_by = [np.flatnonzero(codes == k) for k in np.unique(codes)]
    boots = []
    for _ in range(n_boot):
        idx = np.concatenate([rng.choice(ix, ix.size) for ix in idx_by])
        boots.append(eta2(y[idx], codes[idx]))
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return stat_row(test, statistic=res["F"], df=res["ddof1"], p=res["p_unc"] if "p_unc" in res else res["p-unc"],
                effect="eta_squared", effect_size=eta2(y, codes), ci=(lo, hi), n=len(df),
                group_a="all", group_b="all")


# ---------------------------------------------------------------- corrections and bootstrap
def holm(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Holm-adjusted p values along ``axis`` (no NaN allowed), vectorised over the other axes
    (:func:`adjust_pvalues` is the NaN-aware 1-D entry point and calls this)."""
    p = np.moveaxis(np.asarray(p, dtype=float), axis, -1)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    adj = np.minimum(np.maximum.accumulate(ps * (m - np.arange(m)), axis=-1), 1.0)
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, axis=-1)
    return np.moveaxis(out, -1, axis)


def adjust_pvalues(p: Sequence[float], method: str = "holm") -> np.ndarray:
    """Family-wise corrected p values (``"holm"`` or ``"bonferroni"``); NaN entries stay NaN and are not counted."""
    if method not in ("holm", "bonferroni"):
        raise ValueError(f"adjust_pvalues: method must be 'holm' or 'bonferroni', got {method!r}")
    p = np.asarray(p, dtype=float)
    out, ok = np.full_like(p, np.nan), ~np.isnan(p)
    if ok.any():
        out[ok] = holm(p[ok]) if method == "holm" else np.minimum(p[ok] * int(ok.sum()), 1.0)
    return out


_TIE = 1e-12  # null statistics equal to the observed one up to rounding count as reaching it


def permutation_p(observed, null, alternative: str = "greater") -> np.ndarray:
    """The permutation p ``(1 + #{null reaching observed}) / (1 + K)`` over the last axis of ``null`` [..., K]
    (``observed`` [...]): never below its floor ``1 / (K + 1)``, because the observed labelling is one of the
    possible ones. ``alternative``: ``"greater"`` (null >= observed) or ``"two-sided"`` (|null| >= |observed|);
    a null value within 1e-12 (relative above 1) of the observed one reaches it."""
    observed, null = np.asarray(observed, dtype=float), np.asarray(null, dtype=float)
    if alternative == "two-sided":
        observed, null = np.abs(observed), np.abs(null)
    elif alternative != "greater":
        raise ValueError(f"permutation_p: alternative must be 'greater' or 'two-sided', got {alternative!r}")
    tol = _TIE * np.maximum(1.0, np.abs(observed))
    count = (null >= (observed - tol)[..., None]).sum(axis=-1)
    return (1 + count) / (null.shape[-1] + 1)


def permutation_p_text(p: float, n_permutations: int) -> str:
    """A permutation p ``(1 + count) / (K + 1)`` as text: at its floor ``1 / (K + 1)`` (it says only that no
    permutation reached the observed statistic) ``"≤ 1/201"``, else ``"= 0.21"`` or ``"< 0.001"``
    (:func:`bias_utils.core.precision.p_text`)."""
    if p <= (1 + 1e-9) / (n_permutations + 1):
        return f"≤ 1/{n_permutations + 1:,}"
    return p_text(p, relation=True)


def results_table(rows: Iterable[dict], *, method: str = "holm") -> pd.DataFrame:
    """Tidy table of test rows (:data:`STAT_COLUMNS` first, extra keys kept) with ``p_adj`` over the family."""
    df = pd.DataFrame(list(rows))
    for c in STAT_COLUMNS:
        if c not in df:
            df[c] = np.nan
    df["p_adj"] = adjust_pvalues(df["p"].to_numpy(dtype=float), method)
    df["adj_method"] = np.where(df["p"].notna(), method, "")
    extra = [c for c in df.columns if c not in STAT_COLUMNS]
    return df[STAT_COLUMNS + extra].reset_index(drop=True)


def percentile_interval(boots: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(boots, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_ci(values, statistic: Callable[[np.ndarray], float] = np.mean, *, n_boot: int = 2000,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """Percentile bootstrap of ``statistic`` over i.i.d. observations: ``(estimate, low, high)``."""
    n_boot = check_n_boot(n_boot)
    x = _values(values, "values", 1)
    rng = np.random.default_rng(seed)
    boots = np.array([statistic(rng.choice(x, x.size)) for _ in range(n_boot)])
    return (float(statistic(x)), *percentile_interval(boots, level))


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of every row pair of ``a`` and ``b`` [replicates, n]; NaN where a row is constant."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    constant = (np.ptp(a, axis=1) == 0) | (np.ptp(b, axis=1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def rowwise_correlation(method: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r, or Spearman's ρ (Pearson's r of the average ranks, as scipy), of every row pair."""
    if method == "spearman":
        a, b = _st.rankdata(a, axis=1), _st.rankdata(b, axis=1)
    return _rowwise_pearson(a, b)


def rowwise_g(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hedges' g of ``a`` against ``b`` for every row [replicates, n_a] and [replicates, n_b]: the pooled-SD d times
    J = 1 − 3/(4(n_a + n_b) − 9), as ``stats.hedges_g`` (:func:`_hedges`)."""
    return _hedges(a.mean(axis=1) - b.mean(axis=1), a.var(axis=1, ddof=1), b.var(axis=1, ddof=1), a.shape[1],
                   b.shape[1])[0]


def correlation_rows(x, y, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> list[dict]:
    """Pearson and Spearman rows (:data:`STAT_COLUMNS`) of ``x`` against ``y``: the coefficient as
    ``statistic`` and ``effect_size``, scipy's p, and a percentile interval from resampling the pairs
    (the units, e.g. occupations) with replacement, ``n_boot`` times (the resamples :func:`bootstrap_ci` draws
    over the pair indices with this seed; a resample with a constant side is left out). Fewer than 3 pairs, or
    a constant ``x`` or ``y``, give NaN."""
    n_boot = check_n_boot(n_boot)
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    draws = resamples(n, n_boot, seed)
    rows = []
    for method in ("pearson", "spearman"):
        est = float(rowwise_correlation(method, x[None], y[None])[0]) if n >= 3 else np.nan
        if np.isnan(est):
            rows.append({"test": method, "effect": "r" if method == "pearson" else "rho", "effect_size": np.nan,
                         "statistic": np.nan, "p": np.nan, "ci_low": np.nan, "ci_high": np.nan, "n": n})
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est, p = (float(v) for v in (_st.pearsonr if method == "pearson" else _st.spearmanr)(x, y))
        lo, hi = percentile_interval(rowwise_correlation(method, x[draws], y[draws]), level)
        rows.append({"test": method, "effect": "r" if method == "pearson" else "rho", "effect_size": est,
                     "statistic": est, "p": p, "ci_low": lo, "ci_high": hi, "n": n})
    return rows


def _rowwise_partial(method: str, x: np.ndarray, y: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """Partial Pearson's r, or Spearman's ρ (on average ranks, the controls ranked too), of every row pair of ``x``
    and ``y`` [replicates, n] with ``controls`` [replicates, n, k] held fixed: Pearson's r of the residuals of
    each side's least-squares fit on an intercept and the controls. NaN where a residual is constant."""
    if method == "spearman":
        x, y = _st.rankdata(x, axis=1), _st.rankdata(y, axis=1)
        controls = _st.rankdata(controls, axis=1)
    design = np.concatenate([np.ones(x.shape + (1,)), controls], axis=2)
    hat = design @ np.linalg.pinv(design)  # [replicates, n, n]: projection on the controls' span
    rx = x - np.einsum("rij,rj->ri", hat, x)
    ry = y - np.einsum("rij,rj->ri", hat, y)
    # a side the controls explain wholly leaves residuals at rounding level: no partial correlation
    spent = [(r * r).sum(axis=1) <= 1e-20 * np.maximum(((v - v.mean(axis=1, keepdims=True)) ** 2).sum(axis=1), 1e-300)
             for r, v in ((rx, x), (ry, y))]
    return np.where(spent[0] | spent[1], np.nan, _rowwise_pearson(rx, ry))


def _partial_p(r: np.ndarray, n: int, k: int) -> np.ndarray:
    """Two-sided p of partial correlations over ``n`` units with ``k`` controls: Student's t with n − 2 − k df (exact
    for Pearson's r of normal data; for Spearman's ρ the large-sample approximation scipy uses for ρ itself)."""
    df = n - 2 - k
    with np.errstate(invalid="ignore", divide="ignore"):
        t = r * np.sqrt(df / np.clip(1 - r * r, 1e-300, None))
    return 2 * _st.t.sf(np.abs(t), df)


def resamples(n: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, n] unit indices drawn with replacement: the resamples :func:`correlation_rows` and
    :func:`partial_correlation_rows` draw with this seed."""
    rng = np.random.default_rng(seed)
    index = np.arange(n, dtype=float)
    return np.array([rng.choice(index, n) for _ in range(n_boot)], dtype=int) if n else np.zeros((n_boot, 0), int)


def partial_correlation_rows(x, y, controls, *, n_boot: int = 1000, seed: int = 0,
                             level: float = 0.95) -> list[dict]:
    """Partial Pearson and Spearman rows (:data:`STAT_COLUMNS`; ``test``: ``partial_pearson``,
    ``partial_spearman``) of ``x`` against ``y`` with ``controls`` (a [n] or [n, k] array, or a DataFrame) held
    fixed: does ``x`` carry ``y`` beyond what the controls carry? The coefficient (the correlation of the two
    sides' residuals on the controls; Spearman on ranks) as ``statistic`` and ``effect_size``; ``df`` = n − 2 − k
    and the t-test's p (:func:`_partial_p`); a percentile interval from resampling the units ``n_boot`` times
    (the resamples :func:`correlation_rows` draws with this seed; a resample with a constant residual is left
    out). With no controls the rows are the plain correlations. Fewer than k + 3 units give NaN."""
    n_boot = check_n_boot(n_boot)
    x, y = np.asarray(x, float), np.asarray(y, float)
    z = np.asarray(controls, float).reshape(len(x), -1)
    n, k = z.shape
    draws = resamples(n, n_boot, seed)
    rows = []
    for method in ("pearson", "spearman"):
        row = {"test": f"partial_{method}", "effect": "partial r" if method == "pearson" else "partial rho",
               "df": n - 2 - k, "n": n}
        est = float(_rowwise_partial(method, x[None], y[None], z[None])[0]) if n >= k + 3 else np.nan
        if np.isnan(est):
            rows.append({**row, "effect_size": np.nan, "statistic": np.nan, "p": np.nan, "ci_low": np.nan,
                         "ci_high": np.nan})
            continue
        lo, hi = percentile_interval(_rowwise_partial(method, x[draws], y[draws], z[draws]), level)
        rows.append({**row, "effect_size": est, "statistic": est, "p": float(_partial_p(np.array(est), n, k)),
                     "ci_low": lo, "ci_high": hi})
    return rows


def cluster_bootstrap_ci(data: pd.DataFrame, statistic: Callable[[pd.DataFrame], float], *, cluster: str,
                         strata: str | None = None, n_boot: int = 1000, seed: int = 0,
                         level: float = 0.95) -> tuple[float, float, float]:
    """Percentile bootstrap that resamples whole clusters (e.g. occupations) with replacement.

    With ``strata`` (e.g. the group column) clusters are resampled within each stratum, so every replicate keeps the
    number of occupations per group. ``statistic(df)`` gets the resampled rows; replicates where it is undefined
    (NaN) are excluded. Returns ``(estimate, low, high)``."""
    n_boot = check_n_boot(n_boot)
    if cluster not in data or (strata is not None and strata not in data):
        raise KeyError(f"cluster_bootstrap_ci: column {cluster!r}{' or ' + repr(strata) if strata else ''} not in data")
    rng = np.random.default_rng(seed)
    parts = [data] if strata is None else [g for _, g in data.groupby(strata, sort=True)]
    # Precompute per-stratum cluster -> row positions so each replicate is one take().
    plans = []
    for part in parts:
        codes, uniq = pd.factorize(part[cluster])
        plans.append((part, [np.flatnonzero(codes == k) for k in range(len(uniq))]))
    boots = []
    for _ in range(n_boot):
        pieces = []
        for part, members in plans:
            pick = rng.integers(0, len(members), len(members))
            pieces.append(part.iloc[np.concatenate([members[k] for k in pick])])
        boots.append(statistic(pd.concat(pieces, ignore_index=True)))
    tail = (1 - level) / 2 * 100
    boots = np.asarray(boots, dtype=float)
    if np.isnan(boots).all():
        return float(statistic(data)), np.nan, np.nan
    lo, hi = np.nanpercentile(boots, [tail, 100 - tail])
    return float(statistic(data)), float(lo), float(hi)


# ---------------------------------------------------------------- vectorised two-group tests and regression
def permutation_reference(n: int, n_a: int, n_permutations: int, seed: int = 0) -> tuple[np.ndarray, bool]:
    """Label matrices for the permutation test: ``(R [K, n] bool, exact)``. When the number of distinct splits
    ``C(n, n_a)`` is at most ``n_permutations`` every split is enumerated (``exact=True``, the observed one among
    them); otherwise ``n_permutations`` random relabellings."""
    if math.comb(n, n_a) <= n_permutations:
        rows = np.zeros((math.comb(n, n_a), n), bool)
        for i, idx in enumerate(combinations(range(n), n_a)):
            rows[i, list(idx)] = True
        return rows, True
    rng = np.random.default_rng(seed)
    rows = np.zeros((n_permutations, n), bool)
    for i in range(n_permutations):
        rows[i, rng.permutation(n)[:n_a]] = True
    return rows, False


@dataclass
class _GroupSample:
    """What a test of :func:`group_tests` sees: values ``V`` [C, n, D] as given, label rows [P, n]
    (True = group a), group sizes and names, and the :attr:`moments` every vectorised test shares."""

    V: np.ndarray
    labels: np.ndarray
    na: int
    nb: int
    names: tuple[str, str]

    @cached_property
    def moments(self) -> tuple[np.ndarray, ...]:
        """``(Z, ma, mb, va, vb)``: ``V`` centred and scaled per column (the tests are invariant to it and it
        keeps the sums well conditioned); per label row the group means and ddof-1 variances of ``Z``."""
        sd = self.V.std(axis=1, keepdims=True)
        Z = (self.V - self.V.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
        A, na, nb = self.labels.astype(np.float64), self.na, self.nb
        tot, tot2 = Z.sum(axis=1), (Z**2).sum(axis=1)  # [C, D]
        sa, qa = np.einsum("pn,cnd->pcd", A, Z), np.einsum("pn,cnd->pcd", A, Z**2)
        ma, mb = sa / na, (tot - sa) / nb
        va, vb = (qa - na * ma**2) / (na - 1), (tot2 - qa - nb * mb**2) / (nb - 1)
        return Z, ma, mb, np.maximum(va, 0.0), np.maximum(vb, 0.0)

    def pooled(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(mean a - mean b, pooled variance, n)`` of the standardised columns."""
        _, ma, mb, va, vb = self.moments
        n = self.na + self.nb
        return ma - mb, ((self.na - 1) * va + (self.nb - 1) * vb) / (n - 2), n


def _mean_difference_test(s: _GroupSample) -> dict[str, np.ndarray]:
    """``diff``: mean a - mean b of the standardised columns."""
    return {"diff": s.pooled()[0]}


def _student_test(s: _GroupSample) -> dict[str, np.ndarray]:
    """``t_student, df_student, p_student``, as :func:`student_t`."""
    diff, sp2, n = s.pooled()
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / np.sqrt(sp2 * (1 / s.na + 1 / s.nb))
    return {"t_student": t, "df_student": np.full_like(t, n - 2), "p_student": 2 * _st.t.sf(np.abs(t), n - 2)}


def _welch_test(s: _GroupSample) -> dict[str, np.ndarray]:
    """``t_welch, df_welch, p_welch``, as :func:`welch_t`."""
    _, ma, mb, va, vb = s.moments
    na, nb = s.na, s.nb
    with np.errstate(divide="ignore", invalid="ignore"):
        se2 = va / na + vb / nb
        t = (ma - mb) / np.sqrt(se2)
        df = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    return {"t_welch": t, "df_welch": df, "p_welch": 2 * _st.t.sf(np.abs(t), df)}


def _hedges_test(s: _GroupSample) -> dict[str, np.ndarray]:
    """``g, g_low, g_high``: Hedges' g with its normal-approximation 95% CI, as :func:`hedges_g` (:func:`_hedges`
    of the standardised columns' moments)."""
    _, ma, mb, va, vb = s.moments
    g, low, high = _hedges(ma - mb, va, vb, s.na, s.nb)
    return {"g": g, "g_low": low, "g_high": high}


def _permutation_test(reference: tuple[np.ndarray, bool]) -> Callable[[_GroupSample], dict[str, np.ndarray]]:
    """``p_permutation`` against ``reference`` (:func:`permutation_reference`): the share of its relabellings
    whose |mean difference| reaches the observed one; ``(1 + count) / (K + 1)``, or ``count / K`` when exact."""
    R, exact = reference

    def test(s: _GroupSample) -> dict[str, np.ndarray]:
        Z, ma, mb, _, _ = s.moments
        W = R / s.na - (~R) / s.nb  # [K, n]: one relabelling's mean difference as a weighted sum
        null = np.sort(np.abs(np.einsum("kn,cnd->cdk", W, Z)), axis=-1)  # [C, D, K]
        K, obs = null.shape[-1], np.abs(ma - mb)
        tol = 1e-9 * np.maximum(1.0, obs)  # the observed split itself ties exactly; rounding must not break it
        count = np.empty(obs.shape)
        for c, dd in np.ndindex(*null.shape[:2]):
            count[:, c, dd] = K - np.searchsorted(null[c, dd], obs[:, c, dd] - tol[:, c, dd], side="left")
        return {"p_permutation": count / K if exact else (1 + count) / (K + 1)}
    return test


def column_test(test: Callable[..., dict], name: str) -> Callable[[_GroupSample], dict[str, np.ndarray]]:
    """A scalar test of this module (``welch_t``, ``hedges_g``, ...) as a :func:`group_tests` test, run on every
    label row and column of the values as given (exactly its numbers): its row's ``statistic, df, p,
    effect_size, ci_low, ci_high`` as arrays ``<name>_<field>`` [P, C, D]."""
    fields = ("statistic", "df", "p", "effect_size", "ci_low", "ci_high")

    def run(s: _GroupSample) -> dict[str, np.ndarray]:
        out = {f"{name}_{f}": np.empty((len(s.labels), s.V.shape[0], s.V.shape[2])) for f in fields}
        for p, c, d in np.ndindex(*next(iter(out.values())).shape):
            lab = s.labels[p]
            row = test(s.V[c, lab, d], s.V[c, ~lab, d], group_a=s.names[0], group_b=s.names[1])
            for f in fields:
                out[f"{name}_{f}"][p, c, d] = row[f]
        return out
    return run


#: The vectorised tests of the specification curve (its permutation test needs a reference).
TWO_GROUP_TESTS = {"mean_difference": _mean_difference_test, "hedges_g": _hedges_test, "student": _student_test,
                   "welch": _welch_test}


def group_tests(V: np.ndarray, labels: np.ndarray,
                tests: Mapping[str, Callable[[_GroupSample], Mapping[str, np.ndarray]]] | None = None, *,
                reference: tuple[np.ndarray, bool] | None = None, names: tuple[str, str] = ("a", "b")) -> dict:
    """The one engine for two-group tests (compare fairlearn's ``MetricFrame(metrics=...)``): every test of
    ``tests`` (name -> function of a :class:`GroupSample`, default :data:`TWO_GROUP_TESTS`) on every column of
    ``V`` [C, n, D] for each label row of ``labels`` [P, n] (True = group a, the same group sizes in every
    row, each at least 2); ``reference`` adds :func:`permutation_test`. Returns the tests' arrays [P, C, D]
    in one dict. The default tests give ``diff`` (mean a - mean b of the standardised columns), ``g, g_low,
    g_high``, ``t_student, df_student, p_student``, ``t_welch, df_welch, p_welch``, equal to the scalar
    tests here; :func:`column_test` runs a scalar test itself (exactly its numbers)."""
    V = np.asarray(V, dtype=np.float64)
    labels = np.atleast_2d(np.asarray(labels, bool))
    if V.ndim != 3 or labels.shape[1] != V.shape[1]:
        raise ValueError(f"values of shape {V.shape} and labels of shape {labels.shape} do not align")
    na, nb = int(labels[0].sum()), V.shape[1] - int(labels[0].sum())
    if na < 2 or nb < 2 or (labels.sum(axis=1) != na).any():
        raise ValueError(f"every label row needs the same group sizes, each at least 2 (got {na} and {nb})")
    tests = dict(TWO_GROUP_TESTS if tests is None else tests)
    if reference is not None:
        tests["permutation"] = _permutation_test(reference)
    sample = _GroupSample(V, labels, na, nb, tuple(names))
    return {k: v for test in tests.values() for k, v in test(sample).items()}


def ols(y: np.ndarray, X: np.ndarray, names: Sequence[str]) -> pd.DataFrame:
    """Least squares with classical (homoskedastic) standard errors.

    ``X`` [n, k] must include the intercept column if one is wanted. Columns: ``term, coef, se, t, df, p, ci_low,
    ci_high`` (t-based 95% CI)."""
    y, X = np.asarray(y, float), np.asarray(X, float)
    n, k = X.shape
    if n <= k:
        raise ValueError(f"{n} observations for {k} coefficients")
    if np.linalg.matrix_rank(X) < k:
        raise ValueError(f"the design of {list(names)} is rank deficient (a regressor is constant or collinear)")
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    df = n - k
    sigma2 = resid @ resid / df
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(X.T @ X)))
    t = coef / se
    q = _st.t.ppf(0.975, df)
    return pd.DataFrame({"term": list(names), "coef": coef, "se": se, "t": t, "df": df,
                         "p": 2 * _st.t.sf(np.abs(t), df), "ci_low": coef - q * se, "ci_high": coef + q * se})
