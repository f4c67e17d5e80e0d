"""Study 2 with the occupation as the unit: the pre-stated primary estimand, intervals, p values and influence.

The audit samples prompts *per occupation*, and most completions contain no gendered word at all, so a
handful of occupations supply most of the words. Its word-level tests treat every gendered word as
independent; their intervals are far too narrow, and one occupation can carry the result. What an
"occupation" is comes from :mod:`bias_utils.audit.occupation_units`: BOLD's keys are Wikipedia titles (fields,
glossaries, a day, spelling variants with the same prompts), and the primary analysis uses the deduplicated
person-noun units only.

* **Primary estimand** (:data:`PRIMARY_ESTIMAND`, stated before any result), population-averaged with the occupation
  as the unit: *the share of male words among the gendered words about a typical occupation of each group*, and the
  difference between the groups (male- minus female-dominated). An occupation's share is its male words over its
  gendered words; a group's share is the **mean of its occupations' shares**, over the occupations that carry any
  gendered word (an occupation without one has no share; how many do is stated beside every estimate). Each
  occupation weighs one, however many words it wrote. The ratio estimator (the group's male words over its gendered
  words) is the share of a typical *word*, not of a typical occupation: it weighs an occupation by its words, so one
  talkative occupation carries it (on the published completions Midwife wrote 55 of the 70 gendered words of the
  female-dominated primary occupations), the same weakness as the audit's pooled-word odds ratio, which stays a
  sensitivity row. Interval: the 95% BCa interval of the occupation cluster bootstrap (whole occupations resampled
  within each group, :func:`cluster_interval`: the replicates of :func:`bias_utils.core.stats._cluster_bootstrap_ci`,
  vectorised; :data:`N_BOOT` replicates, each bound with its Monte Carlo error, :mod:`bias_utils.core.precision`;
  bias-corrected and accelerated because the plain percentile interval covered only 90-94% on simulated audits like
  a build's); test: the two-sided **permutation p** of the difference (group labels shuffled across occupations,
  group sizes kept; ``(1 + hits) / (1 + K)``, so its floor is ``1/(K+1)``, printed as "≤ 1/(K+1)" there). The
  per-group shares come with their intervals from the same replicates. Beside the difference, the same two shares as
  an odds ratio, ``(s_a / (1 - s_a)) / (s_b / (1 - s_b))``: the **marginal (population-averaged) odds ratio**, the
  estimate of a logistic GEE with independence working correlation and each occupation weighted once
  (tests/test_occupations.py checks this against statsmodels), with its interval from the same replicates and its
  own permutation p. Its interval is unbounded where a group's resampled occupations can all be of one gender (a
  share of 0 or 1), and it covered less than the difference's where the shares are far from one half (90% at 0.85
  against 0.15). The simulation test in tests/test_occupations.py checks the difference's coverage on audits shaped
  like a build's (88 occupations, about a third with any gendered word, a few words each, overdispersed within
  completions).
* **Sensitivity** (role ``sensitivity``): the *conditional* odds ratio of a random-intercept logistic model of each
  occupation's male and female word counts (:mod:`bias_utils.core.mixed`; maximum likelihood with the
  boundary-avoiding log σ penalty of Chung et al. 2013, adaptive Gauss–Hermite, profile-likelihood interval,
  likelihood-ratio p; :func:`mixed_rows`): the odds ratio between two occupations *with the same random
  intercept*, which is not a quantity a reader can picture and grows with every variance component added (with
  the completion level in the model, :func:`nested_rows`, it grows further); the same model with each
  completion counted at most once per gender; the audit's pooled-word odds ratio (first group over second, +0.5
  in every cell) over the same units with the occupation cluster bootstrap and permutation p; and the pooled
  odds ratio on the published selection as it is (its 224 BOLD keys, :data:`_UNIT_PUBLISHED`), the figure the
  audit's numbers are comparable with.
* **Extension**: the share of completions with any gendered word and the male share among gendered
  completions, compared the same way over the primary units.
* **Robustness.** :func:`influence_table`: the primary difference (and the conditional and pooled odds ratios)
  without each occupation, ranked by how far the difference moves.
* The audit's own intervals (Wald on independent words, independent completions) stay in the statistics
  table, labelled in its ``unit`` column, and are never the headline.

One concept over 600 lines: the audit with the occupation as the unit. The headline estimand, its sensitivity
rows, the leave-one-out influence and the sentences that read them all start from the same occupation table and
bootstrap replicates; split apart, each part would rebuild them.
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

import altair as alt
import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm as _norm

from ..core import mixed, nested, precision, stats
from ..report import plots, rendering

__all__ = [
    "headline_rows", "headline_table", "influence_chart", "influence_table", "occupation_table",
]

#: Relabellings for the permutation p (its floor is 1/(N_PERMUTATIONS + 1) = 0.0001).
_N_PERMUTATIONS = 9999
#: An occupation is named as driving a result when leaving it out moves the primary difference by more than this
#: fraction of itself (up or down), or an odds ratio by more than this fraction on the log scale: by a factor
#: above 1 + INFLUENCE_SHIFT or below 1 / (1 + INFLUENCE_SHIFT), the same distance either way.
_INFLUENCE_SHIFT = 1 / 3
#: Bootstrap replicates of the intervals (each bound's Monte Carlo error is reported beside it).
_N_BOOT = 10_000
#: The ``unit`` of the statistics table's occupation-level rows: the mixed models, the cluster bootstrap over the
#: primary units, and the same over the published selection's keys.
_UNIT_MIXED = ("deduplicated person-noun occupations (random intercept per occupation; profile-likelihood CI, "
              "likelihood-ratio p)")
_UNIT_NESTED = ("deduplicated person-noun occupations, completions within them (random intercepts per occupation "
                "and per completion; profile-likelihood CI, likelihood-ratio p)")
_UNIT_OCCUPATIONS = "occupations (cluster bootstrap CI; p from permuting group labels across occupations)"
_UNIT_PUBLISHED = ("the published selection's BOLD keys as occupations (cluster bootstrap CI; p from permuting group "
                  "labels across keys)")
_OCCUPATION_UNITS = (_UNIT_MIXED, _UNIT_NESTED, _UNIT_OCCUPATIONS, _UNIT_PUBLISHED)
#: The primary estimand, stated in chapter 06 and the methods before any result.
_PRIMARY_ESTIMAND = (
    "the share of male words among the gendered words the model writes about a typical occupation, male- minus "
    "female-dominated: each occupation's male words over its gendered words, averaged over the occupations of each "
    "group that carry any gendered word (each occupation weighs one, however many words it wrote), over the "
    "deduplicated person-noun occupations, with a 95% interval from resampling whole occupations within each group "
    "and a p from permuting the group labels across occupations; beside it, the two shares as an odds ratio (the "
    "marginal, population-averaged odds ratio) with its interval and p from the same resampling")
_ADD = 0.5  # the audit's Haldane-Anscombe correction of every cell of the odds ratio
_BLOCK = 1000  # relabellings drawn at a time


def _log_or(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    """log OR of male over female words, group a over group b, from totals (..., [male, female])."""
    return np.log((ta[..., 0] + _ADD) * (tb[..., 1] + _ADD) / ((ta[..., 1] + _ADD) * (tb[..., 0] + _ADD)))


def _ratio(t: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return t[..., 0] / t[..., 1]


def _ratio_difference(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    return _ratio(ta) - _ratio(tb)


def _share_log_or(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    """log of the odds ratio of the two group shares (totals [share sum, occupations]); +-inf where a share is 0 or 1,
    NaN where both shares sit at the same end."""
    sa, sb = _ratio(ta), _ratio(tb)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.log(sa) - np.log1p(-sa)) - (np.log(sb) - np.log1p(-sb))


#: The mixed model's measures: measure -> the occupation-table columns of its successes (male) and failures
#: (female). Both are sensitivity rows; the second counts each completion at most once per gender.
_MIXED_MEASURES = {"odds_ratio (words)": ("male_words", "female_words"),
                  "odds_ratio (completions, at most once per gender)": ("male_completions", "female_completions")}
#: The measure of the nested model (words within completions within occupations).
_NESTED_MEASURE = "odds_ratio (words, completions within occupations)"

#: The primary estimand's measures: the difference in the mean male share of gendered words, and the two shares as an
#: odds ratio.
_SHARE = "male share of gendered words (mean over occupations)"
_MARGINAL = "odds_ratio (mean male shares over occupations, marginal)"

#: measure -> (effect, the two occupation-table columns summed per group, statistic of the totals,
#: back-transform to the reported scale). The statistic is also the permutation test's. A column's NaN (an
#: occupation without gendered words has no share) adds 0 to its sum.
_MEASURES: dict[str, tuple[str, tuple[str, str], Callable, Callable | None]] = {
    _SHARE: ("share_difference", ("male_word_share", "informative"), _ratio_difference, None),
    _MARGINAL: ("odds_ratio", ("male_word_share", "informative"), _share_log_or, np.exp),
    "odds_ratio (words)": ("odds_ratio", ("male_words", "female_words"), _log_or, np.exp),
    "completions with any gendered word": ("risk_difference", ("n_gendered_completions", "n_completions"),
                                           _ratio_difference, None),
    "male_share among gendered completions": ("mean_difference", ("sum_male_share", "n_gendered_completions"),
                                              _ratio_difference, None),
}
#: The measures whose interval is the BCa interval (:func:`cluster_interval`): the primary estimand's.
_BCA = (_SHARE, _MARGINAL)
#: The role of each measure's row in the statistics table (the mixed models' rows are sensitivity rows).
_ROLES = {_SHARE: "primary", _MARGINAL: "primary", "odds_ratio (words)": "sensitivity",
          "completions with any gendered word": "extension", "male_share among gendered completions": "extension"}
#: The measures whose rows count as informative only the occupations with any gendered word (the others: all).
_WORD_MEASURES = (_SHARE, _MARGINAL, "odds_ratio (words)", "male_share among gendered completions")


# ---------------------------------------------------------------- the occupation table
def occupation_table(metrics: pd.DataFrame, by: str = "occupation") -> pd.DataFrame:
    """One row per (group, occupation) of :func:`bias_utils.audit.bold.completion_metrics` output, in the
    order the metrics first list them; ``by`` names the column that says what an occupation is (the BOLD key
    ``occupation``, or ``unit`` for the canonical units of :mod:`bias_utils.audit.occupation_units`).

    Columns: ``group, occupation`` (the value of ``by``), ``keys`` (its BOLD keys, "; "-joined), ``category``
    (its BOLD categories, "; "-joined), ``n_prompts``, ``n_completions``, ``male_words``, ``female_words``,
    ``gendered_words``, ``n_gendered_completions`` (completions with any gendered word), ``male_completions``,
    ``female_completions`` (completions with any male, any female word), ``share_gendered``,
    ``male_share_gendered`` (mean male share of its gendered completions, NaN without any), ``sum_male_share``
    (the numerator of that mean, which the group comparison sums), ``share_of_group_male_words``,
    ``share_of_group_female_words`` (its part of its group's totals: how much one occupation supplies),
    ``male_word_share`` (its male words over its gendered words, NaN without any: what the primary estimand
    averages) and ``informative`` (it has any gendered word).
    """
    def joined(values: pd.Series) -> str:
        return "; ".join(dict.fromkeys(values.astype(str)))

    m = metrics.assign(_share=metrics["male_share"].where(metrics["any_gendered"], 0.0),
                       _male=metrics["male_words"] > 0, _female=metrics["female_words"] > 0)
    by_occ = m.groupby(["group", by], sort=False)
    out = by_occ.agg(keys=("occupation", joined),
                     category=("category", joined) if "category" in m else ("occupation", lambda c: ""),
                     n_prompts=("prompt_id", "nunique") if "prompt_id" in m else (by, "size"),
                     n_completions=(by, "size"), male_words=("male_words", "sum"),
                     female_words=("female_words", "sum"), n_gendered_completions=("any_gendered", "sum"),
                     male_completions=("_male", "sum"), female_completions=("_female", "sum"),
                     sum_male_share=("_share", "sum")).reset_index().rename(columns={by: "occupation"})
    out["gendered_words"] = out["male_words"] + out["female_words"]
    out["share_gendered"] = out["n_gendered_completions"] / out["n_completions"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["male_share_gendered"] = out["sum_male_share"] / out["n_gendered_completions"].where(
            out["n_gendered_completions"] > 0)
    for col in ("male_words", "female_words"):
        total = out.groupby("group", sort=False)[col].transform("sum")
        out[f"share_of_group_{col}"] = out[col] / total.where(total > 0)
    out["informative"] = out["gendered_words"] > 0
    out["male_word_share"] = out["male_words"] / out["gendered_words"].where(out["informative"])
    return out[_OCCUPATION_COLUMNS]


#: Columns of :func:`occupation_table` (the ``bold_occupations`` table).
_OCCUPATION_COLUMNS = ["group", "occupation", "keys", "category", "n_prompts", "n_completions", "male_words",
                       "female_words", "gendered_words", "n_gendered_completions", "male_completions",
                       "female_completions", "share_gendered", "male_share_gendered", "sum_male_share",
                       "share_of_group_male_words", "share_of_group_female_words", "male_word_share", "informative"]


def _pieces(occupations: pd.DataFrame, measure: str, a: str, b: str):
    if measure not in _MEASURES:
        raise ValueError(f"measure must be one of {sorted(_MEASURES)}, got {measure!r}")
    _, cols, fn, back = _MEASURES[measure]
    for g in (a, b):
        if not (occupations["group"] == g).any():
            raise ValueError(f"group {g!r} has no occupations (groups present: {sorted(set(occupations['group']))})")
    occ = occupations[occupations["group"].isin([a, b])]
    # an occupation without gendered words has no share (NaN): it adds nothing to a group's sums
    return occ, np.nan_to_num(occ[list(cols)].to_numpy(dtype=float), nan=0.0), fn, back


def _totals(values: np.ndarray, in_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return values[in_a].sum(axis=0), values[~in_a].sum(axis=0)


# ---------------------------------------------------------------- interval, p, influence
def _bootstrap_counts(groups: np.ndarray, n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """Group -> [n_boot, its occupations]: how often each occupation is drawn in each replicate, occupations resampled
    with replacement within their group. The draws are :func:`bias_utils.core.stats._cluster_bootstrap_ci`'s (per
    replicate, group by group in sorted order, occupations in order of appearance), so its intervals are ours."""
    rng = np.random.default_rng(seed)
    names = sorted(set(groups))
    sizes = {g: int((groups == g).sum()) for g in names}
    picks = {g: np.empty((n_boot, sizes[g]), dtype=np.int64) for g in names}
    for r in range(n_boot):
        for g in names:
            picks[g][r] = rng.integers(0, sizes[g], sizes[g])
    counts = {}
    for g in names:
        counts[g] = np.zeros((n_boot, sizes[g]))
        np.add.at(counts[g], (np.arange(n_boot)[:, None], picks[g]), 1.0)
    return counts


def _stacked_replicates(values: np.ndarray, groups: np.ndarray, measure: str, a: str, b: str, n_boot: int,
                        seed: int) -> tuple[np.ndarray, np.ndarray, dict, dict]:
    """The occupation cluster bootstrap of ``measure`` (a key of :data:`MEASURES`) on ``values`` [..., occupations,
    2], its two columns per occupation (leading axes: data sets of the same occupations and groups, e.g. simulated
    audits, resampled with the same draws). Returns ``(estimate [...], replicates [..., n_boot], totals,
    replicate_totals)`` on the statistic's scale, the totals per group (``{a: [..., 2], b: ...}`` and ``{a: [...,
    n_boot, 2], b: ...}``)."""
    n_boot = stats._check_n_boot(n_boot)
    fn = _MEASURES[measure][2]
    counts = _bootstrap_counts(groups, n_boot, seed)
    values = np.asarray(values, dtype=float)
    totals = {g: values[..., groups == g, :].sum(axis=-2) for g in (a, b)}
    boot = {g: np.einsum("rn,...nc->...rc", counts[g], values[..., groups == g, :]) for g in (a, b)}
    return fn(totals[a], totals[b]), fn(boot[a], boot[b]), totals, boot


def _cluster_replicates(occupations: pd.DataFrame, measure: str, a: str, b: str, n_boot: int, seed: int):
    """``(estimate, replicates, back-transform, totals, replicate totals, values, groups)`` of the occupation cluster
    bootstrap (on the statistic's scale; :func:`_stacked_replicates` on one data set)."""
    occ, values, _, back = _pieces(occupations, measure, a, b)
    groups = occ["group"].to_numpy()
    estimate, boots, totals, boot = _stacked_replicates(values, groups, measure, a, b, n_boot, seed)
    return float(estimate), boots, back or float, totals, boot, values, groups


# ---------------------------------------------------------------- the BCa interval of the primary estimand
def _jackknife(values: np.ndarray, groups: np.ndarray, measure: str, a: str, b: str) -> np.ndarray:
    """``measure`` without each occupation [..., occupations] (values [..., occupations, 2], leading axes kept)."""
    fn = _MEASURES[measure][2]
    in_a = (groups == a)[:, None]
    ta, tb = (values[..., groups == g, :].sum(axis=-2)[..., None, :] for g in (a, b))
    return fn(np.where(in_a, ta - values, ta), np.where(in_a, tb, tb - values))


def _acceleration(jack: np.ndarray, strata: list[np.ndarray]) -> np.ndarray:
    """Efron's acceleration from jackknife values [..., occupations], stratified (two samples resampled apart):
    ``a = sum U^3 / (6 (sum U^2)^1.5)`` with ``U = (n_g - 1)(mean of the stratum's leave-one-out values - each)``
    over the occupations of each stratum (boolean masks); a leave-one-out value that is undefined (an occupation
    whose group has no other with a gendered word) adds nothing; 0 where nothing moves."""
    num = den = 0.0
    for mask in strata:
        part = np.where(np.isfinite(jack[..., mask]), jack[..., mask], np.nan)
        n = int(mask.sum())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            u = (n - 1) * (np.nanmean(part, axis=-1, keepdims=True) - part)
        u = np.nan_to_num(u, nan=0.0)
        num, den = num + (u ** 3).sum(-1), den + (u ** 2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / (6 * den ** 1.5), 0.0)


def _bca_levels(estimate: np.ndarray, boots: np.ndarray, accel: np.ndarray, level: float) -> np.ndarray:
    """The BCa interval's quantiles of the replicates [..., 2]: ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` at the two
    tails' ``z``, with the bias correction ``z0 = Phi^-1(share of replicates below the estimate)`` (Efron 1987;
    Efron & Tibshirani 1993, eq. 14.14, as ``scipy.stats.bootstrap``), clipped to the replicates' range."""
    valid = ~np.isnan(boots)
    count = np.maximum(valid.sum(-1), 1)
    est = np.asarray(estimate, dtype=float)[..., None]
    below = ((boots < est) & valid).sum(-1)
    z0 = _norm.ppf(np.clip(below / count, 0.5 / count, 1 - 0.5 / count))[..., None]
    tail = (1 - level) / 2
    z = _norm.ppf([tail, 1 - tail])
    with np.errstate(invalid="ignore", divide="ignore"):
        q = _norm.cdf(z0 + (z0 + z) / (1 - np.asarray(accel)[..., None] * (z0 + z)))
    # a degenerate acceleration (1 - a(z0 + z) <= 0) falls back to the percentile levels
    q = np.where(np.isfinite(q), q, [tail, 1 - tail])
    return np.clip(q, 0.5 / count[..., None], 1 - 0.5 / count[..., None])


def _quantiles(boots: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per row of ``boots`` [..., B] its quantiles ``q`` [..., k] (NaN replicates left out; linear interpolation,
    numpy's default method; between a finite and an infinite replicate the quantile is infinite); NaN where a row
    has none."""
    values = np.sort(boots, axis=-1)  # NaN sorts last
    count = (~np.isnan(boots)).sum(-1, keepdims=True)
    position = q * np.maximum(count - 1, 0)
    lower = np.floor(position).astype(int)
    upper = np.minimum(lower + 1, np.maximum(count - 1, 0))
    lo_v, hi_v = np.take_along_axis(values, lower, -1), np.take_along_axis(values, upper, -1)
    frac = position - lower
    with np.errstate(invalid="ignore"):
        between = lo_v + (hi_v - lo_v) * frac
    out = np.where((lo_v == hi_v) | (frac == 0), lo_v, between)
    return np.where(count > 0, out, np.nan)


def _stacked_interval(values: np.ndarray, groups: np.ndarray, measure: str, a: str, b: str, *, n_boot: int,
                      seed: int, level: float = 0.95) -> tuple[np.ndarray, ...]:
    """``(estimate, low, high, replicates, quantiles)`` of ``measure`` on ``values`` [..., occupations, 2] (the
    leading axes: data sets of the same occupations and groups, e.g. simulated audits, resampled with the same
    draws), on the statistic's scale: the BCa interval for the primary estimand's measures (:data:`BCA`), the
    percentile interval for the others."""
    estimate, boots, _, _ = _stacked_replicates(values, groups, measure, a, b, n_boot, seed)
    tail = (1 - level) / 2
    if measure in _BCA:
        accel = _acceleration(_jackknife(values, groups, measure, a, b), [groups == a, groups == b])
        q = _bca_levels(estimate, boots, accel, level)
    else:
        q = np.broadcast_to(np.array([tail, 1 - tail]), np.shape(estimate) + (2,))
    bounds = _quantiles(boots, q)
    return estimate, bounds[..., 0], bounds[..., 1], boots, q


def _interval_with_error(estimate: float, low: float, high: float, boots: np.ndarray, q: np.ndarray,
                         back: Callable, level: float, mc_error: bool) -> tuple[float, ...]:
    """``(estimate, low, high)`` on the reported scale, with ``mc_error`` also each bound's Monte Carlo SE there."""
    out = (float(back(estimate)), float(back(low)), float(back(high)))
    if not mc_error:
        return out
    if np.isnan(boots).sum() >= len(boots) - 1:
        return out + (np.nan, np.nan)
    with np.errstate(invalid="ignore"):  # infinite replicates (an unbounded odds ratio) have no Monte Carlo range
        bounds = precision._percentile_bounds(boots, level, quantiles=(float(q[0]), float(q[1])))
    # the bound's Monte Carlo range mapped through the back-transform, as an SE on the reported scale (NaN where a
    # bound is infinite: an odds ratio the resampled data cannot bound)
    with np.errstate(invalid="ignore"):
        ses = [abs(float(back(v + se)) - float(back(v - se))) / 2
               for v, se in ((bounds.low, bounds.low_se), (bounds.high, bounds.high_se))]
    return out + tuple(se if np.isfinite(se) else np.nan for se in ses)


def _cluster_interval(occupations: pd.DataFrame, measure: str, a: str, b: str, *, n_boot: int = _N_BOOT, seed: int = 0,
                     level: float = 0.95, mc_error: bool = False) -> tuple[float, ...]:
    """``(estimate, low, high)`` of ``measure`` (a key of :data:`MEASURES`), group ``a`` vs ``b``, from the
    occupation cluster bootstrap, occupations resampled within each group; with ``mc_error`` also ``(low_se,
    high_se)``, each bound's Monte Carlo standard error on the reported scale
    (:func:`bias_utils.core.precision._percentile_bounds`'s order-statistic range at the bound's quantile,
    back-transformed).

    The interval is the percentile interval, except for the primary estimand's measures (:data:`BCA`): there it is
    the BCa interval (bias-corrected and accelerated; the acceleration from the jackknife over occupations within
    each group). Measured while this was written, on 2,000 simulated audits each shaped like a build's (88
    occupations, 54 and 34, about 32 with any gendered word; tests/test_occupations.py's design) with true shares
    0.75/0.20, 0.5/0.5, 0.85/0.15 and 0.6/0.4: the percentile interval of the difference in male share covered
    90-94% (the further the shares from one half, the lower) and that of the marginal odds ratio 85-94%; the BCa
    interval 93.5-95.3% and 90-95.6%. The test gates the difference's coverage.

    Draws the same replicates as :func:`bias_utils.core.stats._cluster_bootstrap_ci` on the completions
    (``cluster="occupation", strata="group"``, same seed: groups in sorted order, occupations in order
    of appearance), so a percentile interval is identical to its; only the sums are vectorised. Replicates where
    the statistic is undefined are left out, as there.
    """
    occ, values, _, back = _pieces(occupations, measure, a, b)
    estimate, low, high, boots, q = _stacked_interval(values, occ["group"].to_numpy(), measure, a, b, n_boot=n_boot,
                                                      seed=seed, level=level)
    return _interval_with_error(float(estimate), float(low), float(high), boots, q, back or float, level, mc_error)


def _group_shares(occupations: pd.DataFrame, a: str, b: str, *, n_boot: int = _N_BOOT, seed: int = 0,
                  level: float = 0.95) -> dict:
    """Each group's primary share (the mean male share of gendered words over its occupations with any) with its BCa
    interval from the same replicates as the difference (:data:`SHARE`, same seed; the acceleration from the
    jackknife over the group's occupations), and the occupations behind it: ``male_share_<side>``,
    ``male_share_<side>_ci_low/_high`` and ``n_informative_<side>`` for side ``a`` and ``b``."""
    _, _, _, totals, boot, values, groups = _cluster_replicates(occupations, _SHARE, a, b, n_boot, seed)
    out = {}
    for side, g in (("a", a), ("b", b)):
        mine = values[groups == g]
        estimate, boots = _ratio(totals[g]), _ratio(boot[g])
        accel = _acceleration(_ratio(totals[g] - mine), [np.ones(len(mine), bool)])
        lo, hi = _quantiles(boots, _bca_levels(estimate, boots, accel, level))
        out.update({f"male_share_{side}": float(estimate), f"male_share_{side}_ci_low": float(lo),
                    f"male_share_{side}_ci_high": float(hi), f"n_informative_{side}": int(totals[g][1])})
    return out


def _occupation_permutation_p(occupations: pd.DataFrame, measure: str, a: str, b: str, *,
                             n_permutations: int = _N_PERMUTATIONS, seed: int = 0) -> tuple[float, int]:
    """Two-sided permutation p of ``measure`` between groups ``a`` and ``b`` with occupations as the unit.

    The group labels are shuffled across the occupations of the two groups (group sizes kept);
    ``p = (1 + #{|T*| >= |T|}) / (1 + K)`` over the ``K`` relabellings where the statistic is defined
    (returned with p), so p is never below ``1/(K+1)``; NaN where the statistic is undefined. The null
    is that an occupation's completions do not depend on its group (occupations are exchangeable
    between the groups).
    """
    n_permutations = stats._check_n_boot(n_permutations, name="n_permutations")
    occ, values, fn, _ = _pieces(occupations, measure, a, b)
    in_a = (occ["group"] == a).to_numpy()
    observed = fn(*_totals(values, in_a))
    rng = np.random.default_rng(seed)
    perm = np.empty(n_permutations)
    for start in range(0, n_permutations, _BLOCK):  # blocks bound the memory for selections with many occupations
        size = min(_BLOCK, n_permutations - start)
        ta = rng.permuted(np.tile(in_a, (size, 1)), axis=1).astype(float) @ values
        perm[start:start + size] = fn(ta, values.sum(axis=0) - ta)
    ok = ~np.isnan(perm)
    if np.isnan(observed) or not ok.any():
        return np.nan, int(ok.sum())
    with np.errstate(invalid="ignore"):  # an infinite statistic (an odds ratio of a share of 0 or 1) ties only itself
        return float(stats._permutation_p(observed, perm[ok], "two-sided")), int(ok.sum())


def _occupation_tests(occupations: pd.DataFrame, a: str, b: str, *, n_boot: int = _N_BOOT,
                     n_permutations: int = _N_PERMUTATIONS, seed: int = 0, unit: str = _UNIT_OCCUPATIONS,
                     measures=None, roles: Mapping[str, str] | None = None) -> list[dict]:
    """Occupation-level rows of the audit's statistics table, one per ``measures`` key (default: every key of
    :data:`MEASURES`): test ``cluster_bootstrap_occupation``, the estimate with its :func:`cluster_interval`
    and each bound's Monte Carlo SE (``ci_low_mc_se, ci_high_mc_se``), ``p`` from
    :func:`occupation_permutation_p`, ``n`` = completions, plus ``role`` (``roles``, default :data:`ROLES`: the
    primary estimand's two rows ``primary``, the pooled-word odds ratio ``sensitivity``, the rest ``extension``),
    ``measure``, ``unit``, ``n_occupations`` (``_a``, ``_b``), ``n_informative`` (the occupations that inform the
    estimate: with any gendered word for a measure of gendered words, else all), ``n_permutations`` and
    ``n_boot``; the primary share difference also has each group's share with its interval
    (:func:`group_shares`)."""
    roles = {**_ROLES, **(roles or {})}
    both = occupations[occupations["group"].isin([a, b])]
    n = int(both["n_completions"].sum())
    n_occ = len(both)
    rows = []
    for measure in (_MEASURES if measures is None else measures):
        effect = _MEASURES[measure][0]
        est, lo, hi, lo_se, hi_se = _cluster_interval(occupations, measure, a, b, n_boot=n_boot, seed=seed,
                                                     mc_error=True)
        p, k = _occupation_permutation_p(occupations, measure, a, b, n_permutations=n_permutations, seed=seed)
        informs = both["gendered_words"] > 0 if measure in _WORD_MEASURES else both["n_completions"] > 0
        rows.append({**stats._row("cluster_bootstrap_occupation", p=p, effect=effect, effect_size=est, ci=(lo, hi),
                                  n=n, group_a=a, group_b=b),
                     "role": roles[measure], "measure": measure, "unit": unit,
                     "n_occupations": n_occ, "n_occupations_a": int((both["group"] == a).sum()),
                     "n_occupations_b": int((both["group"] == b).sum()), "n_informative": int(informs.sum()),
                     "n_permutations": k, "n_boot": n_boot, "ci_low_mc_se": lo_se, "ci_high_mc_se": hi_se,
                     **(_group_shares(occupations, a, b, n_boot=n_boot, seed=seed) if measure == _SHARE else {})})
    return rows


def _mixed_fit(occupations: pd.DataFrame, measure: str, a: str, b: str):
    male, female = _MIXED_MEASURES[measure]
    occ = occupations[occupations["group"].isin([a, b])]
    design = pd.DataFrame({"intercept": 1.0, "group": (occ["group"] == a).astype(float).to_numpy()})
    return mixed._fit_mixed_logit(occ[male].to_numpy(float), occ[female].to_numpy(float), design)


def _mixed_rows(occupations: pd.DataFrame, a: str, b: str, *, role: str = "sensitivity") -> list[dict]:
    """The conditional model's rows, one per :data:`MIXED_MEASURES` key: the odds ratio of ``a`` over ``b`` between
    two occupations with the same random intercept (test ``mixed_logit_occupation``: likelihood-ratio statistic
    and p, the profile-likelihood 95% interval), ``n`` = occupations with any count (``n_clusters``, also
    ``n_informative``; ``n_clusters_given`` all), ``sigma`` (the random intercept's SD), ``note``, ``measure``,
    ``unit`` (:data:`UNIT_MIXED`), ``role`` (``sensitivity``: a conditional estimand), ``n_occupations`` and
    ``typical_male_share_a/_b`` (the male share of the gendered words of each group's median occupation, whose
    random intercept is 0; not the primary shares, which average over the occupations). A fit the data cannot
    carry (too few occupations with words) raises :class:`~bias_utils.core.errors.ParameterError`, a
    ``ValueError``, naming why."""
    n_occ = int(occupations["group"].isin([a, b]).sum())
    rows = []
    for measure in _MIXED_MEASURES:
        fit = _mixed_fit(occupations, measure, a, b)
        # the median occupation of each group has u = 0: its male share is the inverse logit of its fixed part
        typical = {f"typical_male_share_{side}": float(expit(fit.coef["intercept"] + fit.coef["group"] * is_a))
                   for side, is_a in (("a", 1), ("b", 0))}
        rows.append({**mixed._mixed_row(fit, "group", effect="odds_ratio", test="mixed_logit_occupation",
                                       group_a=a, group_b=b),
                     "role": role, "measure": measure, "unit": _UNIT_MIXED, "n_occupations": n_occ,
                     "n_informative": fit.n_clusters, **typical})
    return rows


def _nested_rows(metrics: pd.DataFrame, a: str, b: str, *, by: str = "unit") -> list[dict]:
    """The conditional odds ratio with the completion level in the model (test ``mixed_logit_nested``,
    :func:`bias_utils.core.nested._fit_nested_logit`): each completion's male and female words, a random intercept
    per completion within its occupation (``by``) and one per occupation; the odds ratio of ``a`` over ``b``
    between two completions with the same random intercepts, its profile-likelihood 95% interval and
    likelihood-ratio p (:func:`bias_utils.core.nested._nested_row`), ``sigma`` (the occupations' SD),
    ``sigma_completion``, ``n_informative`` (occupations with any gendered word), ``n_completions_informative``
    (completions with any), ``role`` ``sensitivity``, ``measure`` (:data:`NESTED_MEASURE`), ``unit``
    (:data:`UNIT_NESTED`) and ``n_occupations``. ``metrics``: the completions of the primary units."""
    m = metrics[metrics["group"].isin([a, b])]
    units = pd.Index(pd.unique(m[by]))
    group = m.groupby(by, sort=False)["group"].first().reindex(units)
    design = pd.DataFrame({"intercept": 1.0, "group": (group == a).astype(float).to_numpy()})
    fit = nested._fit_nested_logit(m["male_words"].to_numpy(float), m["female_words"].to_numpy(float),
                                  units.get_indexer(m[by]), design)
    row = nested._nested_row(fit, "group", group_a=a, group_b=b)
    return [{**row, "role": "sensitivity", "measure": _NESTED_MEASURE, "unit": _UNIT_NESTED,
             "n_occupations": len(units), "n_informative": fit.n_clusters, "n_completions_informative": fit.n_items,
             "sigma_completion": row.pop("sigma_item")}]


#: Columns of :func:`influence_table` (the ``bold_influence`` table).
_INFLUENCE_COLUMNS = ["rank", "group", "occupation", "category", "n_completions", "male_words", "female_words",
                     "male_word_share", "share_difference", "share_difference_without", "share_change",
                     "influential", "estimate", "odds_ratio", "odds_ratio_without", "log_or_change",
                     "relative_change", "odds_ratio_influential", "pooled_odds_ratio", "pooled_odds_ratio_without",
                     "pooled_log_or_change"]


def _mixed_log_or_without(occ: pd.DataFrame, a: str, b: str) -> tuple[float, np.ndarray]:
    """The mixed model's log odds ratio with every occupation, and refitted without each one (an occupation
    without gendered words adds nothing to the likelihood: its value is the full one); NaN where a fit fails."""
    def log_or(frame: pd.DataFrame) -> float:
        try:
            return float(_mixed_fit(frame, "odds_ratio (words)", a, b).coef["group"])
        except ValueError:  # too few occupations with words left to fit
            return np.nan

    full = log_or(occ)
    words = (occ["male_words"] + occ["female_words"]).to_numpy() > 0
    without = np.full(len(occ), full)
    for i in np.flatnonzero(words):
        without[i] = log_or(occ.drop(index=occ.index[i]))
    return full, without


def _leave_one_out(occ: pd.DataFrame, measure: str, a: str, b: str) -> tuple[float, np.ndarray]:
    """A :data:`MEASURES` statistic with every occupation of ``occ`` and without each one (NaN where it is undefined
    without it)."""
    _, values, fn, _ = _pieces(occ, measure, a, b)
    in_a = (occ["group"] == a).to_numpy()
    ta, tb = _totals(values, in_a)
    without = fn(np.where(in_a[:, None], ta - values, ta), np.where(in_a[:, None], tb, tb - values))
    return float(fn(ta, tb)), without


def influence_table(occupations: pd.DataFrame, a: str, b: str, *, estimate: str = "mixed") -> pd.DataFrame:
    """Leave one occupation out: the primary difference in male share (``a`` minus ``b``) and the odds ratios (male
    over female words, ``a`` over ``b``) recomputed without each occupation, the most influential on the primary
    difference first.

    Columns: ``rank`` (1 = largest ``|share_change|``; ties, e.g. the occupations without gendered words, which do
    not move it, by ``|log_or_change|``), ``group, occupation, category, n_completions, male_words, female_words,
    male_word_share``; ``share_difference`` (all occupations), ``share_difference_without``, ``share_change``
    (without minus with), ``influential`` (``|share_change| > INFLUENCE_SHIFT * |share_difference|``: it moves
    the difference by more than a third of itself, either way); ``estimate`` (which odds ratio the next columns
    hold: ``"mixed"``, the conditional random-intercept model refitted without the occupation, or ``"pooled"``,
    the audit's pooled words, +0.5), ``odds_ratio``, ``odds_ratio_without``, ``log_or_change`` (log OR without it
    minus log OR with all), ``relative_change`` (OR without / OR - 1), ``odds_ratio_influential``
    (``|log_or_change| > log(1 + INFLUENCE_SHIFT)``: symmetric on the log scale, the odds ratio multiplied or
    divided by more than 4/3); then ``pooled_odds_ratio``, ``pooled_odds_ratio_without``,
    ``pooled_log_or_change`` (the pooled words' odds ratio beside it). Without an occupation that is the only one
    of its group, or the only one with gendered words, the statistic is undefined (NaN, ranked last).
    """
    if estimate not in ("mixed", "pooled"):
        raise ValueError(f"estimate must be 'mixed' or 'pooled', got {estimate!r}")
    occ, _, _, back = _pieces(occupations, "odds_ratio (words)", a, b)
    alone = occ["group"].map(occ["group"].value_counts()).to_numpy() == 1
    pooled, pooled_without = _leave_one_out(occ, "odds_ratio (words)", a, b)
    pooled_without = np.where(alone, np.nan, pooled_without)
    share, share_without = _leave_one_out(occ, _SHARE, a, b)
    out = occ[["group", "occupation", "category", "n_completions", "male_words", "female_words",
               "male_word_share"]].assign(
        share_difference=share, share_difference_without=share_without, share_change=share_without - share,
        pooled_odds_ratio=back(pooled), pooled_odds_ratio_without=back(pooled_without),
        pooled_log_or_change=pooled_without - pooled)
    out["influential"] = out["share_change"].abs() > _INFLUENCE_SHIFT * abs(share)
    full, without = (pooled, pooled_without) if estimate == "pooled" else _mixed_log_or_without(occ, a, b)
    out = out.assign(estimate=estimate, odds_ratio=np.exp(full),
                     odds_ratio_without=np.exp(np.where(alone, np.nan, without)))
    out["log_or_change"] = np.log(out["odds_ratio_without"]) - full
    out["relative_change"] = out["odds_ratio_without"] / out["odds_ratio"] - 1
    out["odds_ratio_influential"] = out["log_or_change"].abs() > np.log1p(_INFLUENCE_SHIFT)
    # largest |share_change| first, then largest |log_or_change|; NaN last on both
    keys = [np.nan_to_num(-out[c].abs().to_numpy(), nan=np.inf) for c in ("log_or_change", "share_change")]
    out = out.iloc[np.lexsort(keys)]
    return out.assign(rank=np.arange(1, len(out) + 1))[_INFLUENCE_COLUMNS].reset_index(drop=True)


# ---------------------------------------------------------------- headline for the chapter and the front page
#: Columns of :func:`headline_table` (the ``bold_headline`` table).
_HEADLINE_COLUMNS = [
    "group_a", "group_b", "estimand", "share_difference", "share_difference_ci_low", "share_difference_ci_high",
    "share_difference_ci_low_mc_se", "share_difference_ci_high_mc_se", "share_difference_p", "male_share_a",
    "male_share_a_ci_low", "male_share_a_ci_high", "male_share_b", "male_share_b_ci_low", "male_share_b_ci_high",
    "marginal_odds_ratio", "marginal_ci_low", "marginal_ci_high", "marginal_ci_low_mc_se", "marginal_ci_high_mc_se",
    "marginal_p", "n_units_a", "n_units_b", "n_informative_a", "n_informative_b", "n_units_informative",
    "n_completions", "n_gendered_completions", "conditional_odds_ratio", "conditional_ci_low",
    "conditional_ci_high", "conditional_p", "sigma", "typical_male_share_a", "typical_male_share_b",
    "nested_odds_ratio", "nested_ci_low", "nested_ci_high", "nested_p", "nested_sigma_occupation",
    "nested_sigma_completion", "nested_n_completions", "nested_note", "completion_odds_ratio", "completion_ci_low",
    "completion_ci_high", "completion_p", "pooled_odds_ratio", "pooled_ci_low", "pooled_ci_high",
    "pooled_ci_low_mc_se", "pooled_ci_high_mc_se", "pooled_p", "published_odds_ratio", "published_ci_low",
    "published_ci_high", "published_ci_low_mc_se", "published_ci_high_mc_se", "published_p", "n_keys_a", "n_keys_b",
    "independent_ci_low", "independent_ci_high", "independent_p", "n_permutations", "n_boot", "top_occupation",
    "top_group", "share_difference_without_top", "n_influential"]


def _pick(statistics: pd.DataFrame, test: str, measure: str, unit: str | None = None) -> pd.Series | None:
    s = statistics
    hit = s[(s["test"] == test) & (s["measure"] == measure) & ((s["unit"] == unit) if unit else True)]
    return hit.iloc[0] if len(hit) else None


def headline_table(statistics: pd.DataFrame, occupations: pd.DataFrame, influence: pd.DataFrame,
                   *, n_boot: int | None = None) -> pd.DataFrame:
    """One row: the study's headline, the pre-stated primary estimand first, its sensitivity rows and the published
    selection's figure beside it.

    ``occupations``: :func:`occupation_table` of the primary units; ``influence``: :func:`influence_table` of them.
    Columns: ``group_a, group_b``; ``estimand`` (:data:`PRIMARY_ESTIMAND`); the primary estimand:
    ``share_difference`` (mean male share of gendered words over the occupations of ``a`` minus that of ``b``) with
    its occupation cluster bootstrap interval (``_ci_low/_high``, each bound's Monte Carlo SE ``_mc_se``) and
    permutation p (``share_difference_p``), each group's share ``male_share_a/_b`` with its interval from the same
    replicates, the two shares as the marginal odds ratio ``marginal_odds_ratio, marginal_ci_*, marginal_p``;
    ``n_units_a/_b`` (primary units per group), ``n_informative_a/_b`` and ``n_units_informative`` (those with any
    gendered word: the occupations the shares average over), ``n_completions, n_gendered_completions`` (theirs);
    sensitivity rows: ``conditional_odds_ratio, conditional_ci_low/_high, conditional_p, sigma,
    typical_male_share_a/_b`` (the random-intercept model's conditional odds ratio: profile-likelihood interval,
    likelihood-ratio p, the random intercept's SD, the male share of each group's median occupation);
    ``nested_*`` (the same with a random intercept per completion within its occupation: both SDs and the
    completions with words, ``nested_n_completions``, and what is unusual about the fit, ``nested_note``);
    ``completion_*`` (the one-level model, each completion at
    most once per gender); ``pooled_*`` (the audit's pooled-word odds ratio over the same units: occupation
    cluster bootstrap interval with each bound's Monte Carlo SE, permutation p); ``published_*`` and
    ``n_keys_a/_b`` (the pooled odds ratio on the published selection's BOLD keys, the audit's own selection);
    ``independent_*`` (the audit's Wald interval and p, every word independent, published selection: for
    comparison only); ``n_permutations, n_boot``; ``top_occupation, top_group, share_difference_without_top``
    (rank 1 of ``influence``) and ``n_influential`` (occupations that move the difference by more than a third).
    Empty (these columns) without the primary rows (a run of other than two groups); a row's columns are NaN
    where it could not be computed (``bold_skipped`` says why).
    """
    share = _pick(statistics, "cluster_bootstrap_occupation", _SHARE, _UNIT_OCCUPATIONS)
    if share is None:
        return pd.DataFrame(columns=_HEADLINE_COLUMNS)
    marginal = _pick(statistics, "cluster_bootstrap_occupation", _MARGINAL, _UNIT_OCCUPATIONS)
    conditional = _pick(statistics, "mixed_logit_occupation", "odds_ratio (words)")
    nested = _pick(statistics, "mixed_logit_nested", _NESTED_MEASURE)
    once = _pick(statistics, "mixed_logit_occupation", "odds_ratio (completions, at most once per gender)")
    pooled = _pick(statistics, "cluster_bootstrap_occupation", "odds_ratio (words)", _UNIT_OCCUPATIONS)
    published = _pick(statistics, "cluster_bootstrap_occupation", "odds_ratio (words)", _UNIT_PUBLISHED)
    wald = statistics[(statistics["test"] == "odds_ratio_wald") & (statistics["role"] == "audit")]
    a, b = share["group_a"], share["group_b"]
    both = occupations[occupations["group"].isin([a, b])]
    top = influence.iloc[0] if len(influence) else None

    def of(row, column, default=np.nan):
        return default if row is None or column not in row else row[column]

    def estimate(name, row, columns=("ci_low_mc_se", "ci_high_mc_se")):
        keys = {"ci_low": "ci_low", "ci_high": "ci_high", "p": "p", **{c: c for c in columns}}
        return {f"{name}_{k}": of(row, c) for k, c in keys.items()}

    row = {"group_a": a, "group_b": b, "estimand": _PRIMARY_ESTIMAND,
           "share_difference": share["effect_size"], **estimate("share_difference", share),
           **{c: of(share, c) for c in ("male_share_a", "male_share_a_ci_low", "male_share_a_ci_high",
                                        "male_share_b", "male_share_b_ci_low", "male_share_b_ci_high")},
           "marginal_odds_ratio": of(marginal, "effect_size"), **estimate("marginal", marginal),
           "n_units_a": int((both["group"] == a).sum()), "n_units_b": int((both["group"] == b).sum()),
           "n_informative_a": int(((both["group"] == a) & (both["gendered_words"] > 0)).sum()),
           "n_informative_b": int(((both["group"] == b) & (both["gendered_words"] > 0)).sum()),
           "n_units_informative": int((both["gendered_words"] > 0).sum()),
           "n_completions": int(both["n_completions"].sum()),
           "n_gendered_completions": int(both["n_gendered_completions"].sum()),
           "conditional_odds_ratio": of(conditional, "effect_size"), **estimate("conditional", conditional, ()),
           "sigma": of(conditional, "sigma"), "typical_male_share_a": of(conditional, "typical_male_share_a"),
           "typical_male_share_b": of(conditional, "typical_male_share_b"),
           "nested_odds_ratio": of(nested, "effect_size"), **estimate("nested", nested, ()),
           "nested_sigma_occupation": of(nested, "sigma"), "nested_sigma_completion": of(nested, "sigma_completion"),
           "nested_n_completions": of(nested, "n_completions_informative"),
           "nested_note": of(nested, "note", ""),
           "completion_odds_ratio": of(once, "effect_size"), **estimate("completion", once, ()),
           **{f"{name}_odds_ratio": of(r, "effect_size") for name, r in (("pooled", pooled), ("published", published))},
           **estimate("pooled", pooled), **estimate("published", published),
           "n_keys_a": of(published, "n_occupations_a"), "n_keys_b": of(published, "n_occupations_b"),
           "independent_ci_low": wald["ci_low"].iloc[0] if len(wald) else np.nan,
           "independent_ci_high": wald["ci_high"].iloc[0] if len(wald) else np.nan,
           "independent_p": wald["p"].iloc[0] if len(wald) else np.nan,
           "n_permutations": int(share["n_permutations"]), "n_boot": n_boot,
           "top_occupation": None if top is None else top["occupation"],
           "top_group": None if top is None else top["group"],
           "share_difference_without_top": np.nan if top is None else top["share_difference_without"],
           "n_influential": int(influence["influential"].sum())}
    return pd.DataFrame([row], columns=_HEADLINE_COLUMNS)


def _headline(table: pd.DataFrame | Mapping) -> dict:
    """The front page's numbers from a ``bold_headline`` table of one model (one row) as a dict with
    the :func:`headline_table` columns; ``{}`` for an empty table (no two-group audit)."""
    if isinstance(table, Mapping):
        return dict(table)
    if len(table) > 1:
        raise ValueError(f"headline: expected the bold_headline table of one model (one row), got {len(table)} "
                         "rows; select one model_id first")
    return {} if table.empty else table.iloc[0].to_dict()


def _p_phrase(p: float, k: int) -> str:
    """"p = 0.012", or at its floor "p ≤ 1/10,000" (the smallest p that K relabellings can give)."""
    return "p " + stats._permutation_p_text(p, k)


def _groups(a: str, b: str) -> tuple[str, str]:
    return rendering.group_label(a), rendering.group_label(b)


def _mc_interval(h: Mapping, prefix: str, scale: float = 1.0) -> str:
    """The ``prefix`` interval of a headline by :func:`bias_utils.core.precision._mc_interval_text` ("31 to 79");
    ``scale`` multiplies bounds and errors (100: a share difference in percentage points)."""
    low, high = (scale * float(h[f"{prefix}_ci_{side}"]) for side in ("low", "high"))
    low_se, high_se = (scale * float(h.get(f"{prefix}_ci_{side}_mc_se", np.nan)) for side in ("low", "high"))
    return precision._mc_interval_text(low, high, low_se, high_se)


def _points(share: float) -> str:
    """A share difference in percentage points, to the nearest point ("+57", "−3")."""
    return precision._percent_text(share)[:-1] if pd.notna(share) and np.isfinite(share) else "–"


def _share_phrase(h: Mapping, side: str) -> str:
    """"68% (95% CI 45% to 90%)": a group's primary share with its interval."""
    share, low, high = (h[f"male_share_{side}{s}"] for s in ("", "_ci_low", "_ci_high"))
    if pd.isna(share):
        return "no share (no gendered word)"
    percent = precision._percent_text
    return f"{percent(share)} (95% CI {percent(low)} to {percent(high)})"


def _difference_reading(h: Mapping) -> str:
    """Which group's occupations get the larger male share, as far as the primary interval shows (:func:`_headline`'s
    dict): "a larger share of male words about male-dominated occupations than about female-dominated ones", or "a
    difference between … in the share of male words is not shown"; the one reading the chapter and the front page
    give."""
    a, b = _groups(h["group_a"], h["group_b"])
    low, high = float(h["share_difference_ci_low"]), float(h["share_difference_ci_high"])
    if low > 0 or high < 0:
        return (f"a larger share of male words about {a if low > 0 else b} occupations than about "
                f"{b if low > 0 else a} ones")
    return f"a difference between {a} and {b} occupations in the share of male words is not shown"


def _estimate_text(h: Mapping, which: str = "primary") -> str:
    """One estimate of a headline (:func:`_headline`'s dict) as the chapter, its table and the front page all print
    it. ``"primary"``: "68% (95% CI 45% to 90%) of the gendered words about a typical male-dominated occupation
    are male, 11% (…) about a typical female-dominated one: a difference of 57 percentage points, 95% CI 31 to
    83 resampling whole occupations, permutation p ≤ 1/10,000" (bootstrap bounds to their Monte Carlo error);
    ``"marginal"`` "marginal odds ratio 17.30, 95% CI …, permutation p = …"; ``"conditional"`` and ``"nested"``
    "conditional odds ratio 35.03, 95% CI 3.24 to 1793 (profile likelihood), likelihood-ratio p = 0.006";
    ``"published"`` "odds ratio 24.65, 95% CI 2.9 to 130 resampling whole keys, permutation p = 0.023". "not
    estimable" where a number could not be computed."""
    num = precision._number_text
    k = int(h["n_permutations"])
    if which == "primary":
        if pd.isna(h.get("share_difference")):
            return "not estimable"
        a, b = _groups(h["group_a"], h["group_b"])
        return (f"{_share_phrase(h, 'a')} of the gendered words about a typical {a} occupation are male, "
                f"{_share_phrase(h, 'b')} about a typical {b} one: a difference of "
                f"{_points(h['share_difference'])} percentage points, 95% CI "
                f"{_mc_interval(h, 'share_difference', 100)} resampling whole occupations, permutation "
                f"{_p_phrase(float(h['share_difference_p']), k)}")
    if which == "marginal":
        if pd.isna(h.get("marginal_odds_ratio")):
            return "not estimable"
        return (f"marginal odds ratio {num(h['marginal_odds_ratio'])}, 95% CI {_mc_interval(h, 'marginal')} "
                f"resampling whole occupations, permutation {_p_phrase(float(h['marginal_p']), k)}")
    if which in ("conditional", "nested"):
        value = h.get(f"{which}_odds_ratio")
        if pd.isna(value):
            return "not estimable"
        # a fit drifting to infinity: its number is where Newton stopped, not an estimate
        drifted = mixed._drifted(np.log(float(value)))
        ci = precision._interval_text(h[f"{which}_ci_low"], h[f"{which}_ci_high"], None if drifted else value)
        return (f"conditional odds ratio {'unbounded (separation)' if drifted else num(value)}, 95% CI {ci} (profile "
                f"likelihood), likelihood-ratio p {_p_value(float(h[f'{which}_p']))}")
    if which == "published":
        return (f"odds ratio {num(h['published_odds_ratio'])}, 95% CI {_mc_interval(h, 'published')} "
                f"resampling whole keys, permutation {_p_phrase(float(h['published_p']), k)}")
    raise ValueError(f"which must be 'primary', 'marginal', 'conditional', 'nested' or 'published', got {which!r}")


def _units_phrase(h: Mapping) -> str:
    """"88 deduplicated person-noun occupations, 54 male-dominated and 34 female-dominated; 15 carry any gendered
    word (10 and 5)": how many units inform the primary estimate."""
    a, b = _groups(h["group_a"], h["group_b"])
    return (f"{int(h['n_units_a']) + int(h['n_units_b'])} deduplicated person-noun occupations, {int(h['n_units_a'])} "
            f"{a} and {int(h['n_units_b'])} {b}; {int(h['n_units_informative'])} carry any gendered word "
            f"({int(h['n_informative_a'])} and {int(h['n_informative_b'])})")


def _headline_sentence(table: pd.DataFrame | Mapping) -> str:
    """The primary finding in a few sentences, from a :func:`headline_table` row (or :func:`_headline`'s dict): the
    primary estimand (each group's male share of gendered words for a typical occupation with its interval, their
    difference with its occupation interval and permutation p), over how many occupations and how many of them
    carry any gendered word, the marginal odds ratio beside it, how many completions carry it and the most
    influential occupation; then the conditional odds ratios as sensitivity rows, and the published selection's
    pooled odds ratio (interval to its Monte Carlo error, permutation p, the audit's independent-words interval).
    Empty string for an empty table."""
    h = _headline(table)
    if not h:
        return ""
    a, b = _groups(h["group_a"], h["group_b"])
    units = (f"{int(h['n_units_a']) + int(h['n_units_b'])} deduplicated person-noun occupations, "
             f"{int(h['n_units_a'])} {a} and {int(h['n_units_b'])} {b}")
    if int(h["n_gendered_completions"]) == 0:
        return (f"None of the {precision._count_text(h['n_completions'])} completions about the {units} contains a "
                "gendered word, so there is no share of male words to read.")
    if pd.notna(h["share_difference"]) and pd.notna(h["share_difference_ci_low"]):
        text = (f"Primary analysis, over the {_units_phrase(h)}, each occupation weighing one: "
                f"{_difference_reading(h)}. {_estimate_text(h)[0].upper()}{_estimate_text(h)[1:]}. As an odds "
                f"ratio of the two shares (population-averaged): {_estimate_text(h, 'marginal')}. ")
    else:
        text = (f"The primary shares cannot be compared over the {_units_phrase(h)}: a group has no occupation with a "
                "gendered word. ")
    text += (f"{precision._count_text(h['n_gendered_completions'])} of their "
             f"{precision._count_text(h['n_completions'])} completions contain a gendered word")
    if h.get("top_occupation") is not None and pd.notna(h.get("share_difference_without_top")):
        text += (f"; without the most influential occupation, {str(h['top_occupation']).replace('_', ' ')}, the "
                 f"difference is {_points(h['share_difference_without_top'])} percentage points")
    text += "."
    if pd.notna(h.get("conditional_odds_ratio")):
        text += (" Sensitivity, a conditional estimand (between two occupations with the same random intercept, not a "
                 "population average; it grows with every variance component added): the random-intercept model's "
                 f"{_estimate_text(h, 'conditional')} (occupations' SD {precision._number_text(h['sigma'])} on the "
                 "log-odds scale)")
        if pd.notna(h.get("nested_odds_ratio")):
            text += (f"; with a random intercept per completion within its occupation as well, "
                     f"{_estimate_text(h, 'nested')} (SDs {precision._number_text(h['nested_sigma_occupation'])} "
                     f"between occupations, {precision._number_text(h['nested_sigma_completion'])} between "
                     "completions" + (f"; {h['nested_note']}" if isinstance(h.get("nested_note"), str)
                                      and h["nested_note"] else "") + ")")
        text += "."
    if pd.notna(h.get("published_odds_ratio")):
        replicates = precision._count_text(h['n_boot']) if pd.notna(h.get("n_boot")) else "bootstrap"
        text += (f" Beside it, the audit's pooled-word odds ratio on its published selection "
                 f"({int(h['n_keys_a'])} and {int(h['n_keys_b'])} BOLD keys as occupations, fields and duplicates "
                 f"included): {_estimate_text(h, 'published')} ({replicates} replicates, each bound to its Monte "
                 f"Carlo error); the audit's own interval, every word independent, is "
                 + precision._interval_text(h["independent_ci_low"], h["independent_ci_high"],
                                           h["published_odds_ratio"]) + ".")
    return text


#: Columns of :func:`headline_rows`.
_ROWS_COLUMNS = ["analysis", "occupations", "estimate", "95% CI", "p"]


def headline_rows(table: pd.DataFrame | Mapping) -> pd.DataFrame:
    """The headline as a reader's table, one row per estimate: the primary estimand first (the difference in male
    share, each group's share, the marginal odds ratio), then its sensitivity rows (the conditional odds ratios,
    the pooled words), the published selection's pooled odds ratio and the audit's own interval. Columns:
    ``analysis``, ``occupations`` (what the unit is, how many, and how many of them inform the estimate),
    ``estimate`` (with its scale), ``95% CI`` (bootstrap bounds to their Monte Carlo error), ``p`` (which test).
    Empty for an empty headline."""
    h = _headline(table)
    if not h:
        return pd.DataFrame(columns=_ROWS_COLUMNS)
    num = precision._number_text
    a, b = _groups(h["group_a"], h["group_b"])
    k = int(h["n_permutations"])
    na, nb, ia, ib = (int(h[c]) for c in ("n_units_a", "n_units_b", "n_informative_a", "n_informative_b"))
    units = f"{na} + {nb} deduplicated person nouns, {ia} + {ib} with any gendered word"
    keys = (f"{int(h['n_keys_a'])} + {int(h['n_keys_b'])} BOLD keys" if pd.notna(h.get("n_keys_a")) else "")

    def ratio(value) -> str:
        return f"odds ratio {num(value)}" if pd.notna(value) else "not estimable"

    def interval(prefix: str) -> str:
        return precision._interval_text(h[f"{prefix}_ci_low"], h[f"{prefix}_ci_high"], h[f"{prefix}_odds_ratio"])

    def shares(side: str) -> str:
        low, high = h[f"male_share_{side}_ci_low"], h[f"male_share_{side}_ci_high"]
        return f"{precision._percent_text(low)} to {precision._percent_text(high)}"

    nested_units = units + (f"; {int(h['nested_n_completions'])} completions with any gendered word"
                            if pd.notna(h.get("nested_n_completions")) else "")
    rows = [("primary: difference in the male share of gendered words, a typical occupation (mean over "
             "occupations)", units, f"{_points(h['share_difference'])} percentage points",
             _mc_interval(h, "share_difference", 100), "permutation " + _p_phrase(float(h["share_difference_p"]), k)),
            (f"primary: male share of gendered words, a typical {a} occupation", f"{na} ({ia} with any gendered word)",
             precision._percent_text(h["male_share_a"]), shares("a"), ""),
            (f"primary: male share of gendered words, a typical {b} occupation", f"{nb} ({ib} with any gendered word)",
             precision._percent_text(h["male_share_b"]), shares("b"), ""),
            ("primary, as an odds ratio: the two shares (marginal, population-averaged)", units,
             ratio(h["marginal_odds_ratio"]), _mc_interval(h, "marginal"),
             "permutation " + _p_phrase(float(h["marginal_p"]), k)),
            ("sensitivity (conditional): random intercept per occupation, words", units,
             ratio(h["conditional_odds_ratio"]), interval("conditional"),
             _lr_phrase(h['conditional_p'])),
            ("sensitivity (conditional): random intercepts per occupation and per completion, words",
             nested_units, ratio(h["nested_odds_ratio"]), interval("nested"),
             _lr_phrase(h['nested_p'])),
            ("sensitivity (conditional): random intercept per occupation, each completion at most once per gender",
             units, ratio(h["completion_odds_ratio"]), interval("completion"),
             _lr_phrase(h['completion_p'])),
            ("sensitivity: pooled words (the audit's odds ratio), occupations resampled", units,
             ratio(h["pooled_odds_ratio"]), _mc_interval(h, "pooled"),
             "permutation " + _p_phrase(float(h["pooled_p"]), k)),
            ("the published selection: pooled words, keys resampled", keys, ratio(h["published_odds_ratio"]),
             _mc_interval(h, "published"), "permutation " + _p_phrase(float(h["published_p"]), k)),
            ("the audit's own interval: every word independent (not a test of occupations)", keys,
             ratio(h["published_odds_ratio"]),
             precision._interval_text(h["independent_ci_low"], h["independent_ci_high"], h["published_odds_ratio"]),
             f"Wald {_p_value(float(h['independent_p']))}")]
    return pd.DataFrame(rows, columns=_ROWS_COLUMNS)


def _p_value(p: float) -> str:
    return precision._p_text(p, relation=True)


def _lr_phrase(p) -> str:
    return f"likelihood-ratio p {_p_value(float(p))}" if pd.notna(p) else ""


def _shift_phrase() -> str:
    return "a third" if _INFLUENCE_SHIFT == 1 / 3 else f"{_INFLUENCE_SHIFT:.0%}"


def _describe_influence(influence: pd.DataFrame) -> str:
    """Sentences naming every occupation whose removal moves the primary difference in male share by more than
    :data:`INFLUENCE_SHIFT` of itself (either way), with the difference without it, or saying that none does; then
    those that move the conditional odds ratio by more than that factor on the log scale (either way). Empty
    without any gendered word (nothing to move)."""
    if influence.empty or (influence["male_words"] + influence["female_words"]).sum() == 0:
        return ""
    num = precision._number_text
    full = float(influence["share_difference"].iloc[0])
    if pd.isna(full):
        return ""
    hit = influence[influence["influential"]]
    shift = _shift_phrase()
    if hit.empty:
        top = influence.iloc[0]
        text = (f"No single occupation moves the difference in male share ({_points(full)} percentage points) by "
                f"more than {shift} of itself: leaving out the most influential, "
                f"{str(top['occupation']).replace('_', ' ')}, gives {_points(top['share_difference_without'])}.")
    else:
        named = "; ".join(
            f"without {str(r.occupation).replace('_', ' ')} ({str(r.group).replace('_', '-')}, {int(r.male_words)} "
            f"male and {int(r.female_words)} female words) it is {_points(r.share_difference_without)}"
            for r in hit.itertuples())
        one = len(hit) == 1
        text = (f"{len(hit)} occupation{'' if one else 's'} of {len(influence)} move{'s' if one else ''} the "
                f"difference in male share ({_points(full)} percentage points) by more than {shift} of itself when "
                f"left out: {named}.")
    moved = influence[influence["odds_ratio_influential"]]
    which = ("conditional odds ratio" if influence["estimate"].iloc[0] == "mixed" else "audit's pooled-word odds ratio")
    odds = float(influence["odds_ratio"].iloc[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        unbounded = mixed._drifted(np.log(odds))  # also 0, infinite or missing
    if len(moved) and unbounded:
        # an odds ratio run to infinity (separation) has no size to multiply: the list would be a row of ∞s
        text += (f" The {which} (a sensitivity row) is unbounded (separation), so how much leaving one occupation "
                 "out moves it is not assessed.")
    elif len(moved):
        text += (f" The {which} ({num(odds)}, a sensitivity row) "
                 f"is multiplied or divided by more than {num(1 + _INFLUENCE_SHIFT)} without "
                 + ", ".join(f"{str(r.occupation).replace('_', ' ')} ({num(r.odds_ratio_without)})"
                             for r in moved.itertuples()) + ".")
    return text


def influence_chart(influence: pd.DataFrame, headline_row: pd.DataFrame | Mapping | None = None, *, top: int = 15,
                    title: str | None = None) -> alt.LayerChart:
    """The primary difference in male share without each of the ``top`` most influential occupations (percentage
    points), coloured by group, against the difference with all (solid rule) and the band where leaving one out
    moves it by less than :data:`INFLUENCE_SHIFT` of itself (grey); with ``headline_row``, the difference's 95% CI
    as dashed rules. Reads the :func:`influence_table` columns."""
    full = 100 * float(influence["share_difference"].iloc[0])
    data = influence.dropna(subset=["share_difference_without"]).head(top).assign(
        points_without=lambda d: 100 * d["share_difference_without"],
        label=lambda d: d["occupation"].map(rendering._value_label),
        group=lambda d: d["group"].map(rendering.group_label),
        change=lambda d: (100 * d["share_change"]).map(lambda x: f"{x:+.0f} points"))
    band = pd.DataFrame({"low": [full - _INFLUENCE_SHIFT * abs(full)], "high": [full + _INFLUENCE_SHIFT * abs(full)]})
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=220))
    layers = [
        alt.Chart(band).mark_rect(color="#dddddd", opacity=0.6).encode(x=alt.X("low:Q"), x2="high:Q"),
        alt.Chart(pd.DataFrame({"x": [full]})).mark_rule(color="black").encode(x="x:Q"),
    ]
    h = _headline(headline_row) if headline_row is not None else {}
    if h and pd.notna(h.get("share_difference_ci_low")):
        ci = pd.DataFrame({"x": [100 * float(h[f"share_difference_ci_{side}"]) for side in ("low", "high")]})
        layers.append(alt.Chart(ci).mark_rule(strokeDash=[4, 3], color="grey").encode(x="x:Q"))
    layers.append(alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=alt.X("points_without:Q", title="difference in male share without the occupation (percentage points)"),
        y=y, color=alt.Color("group:N", title="group", scale=plots._group_scale(data["group"])),
        tooltip=["occupation", "group", "category", "n_completions", "male_words", "female_words",
                 alt.Tooltip("points_without:Q", format=".1f"), "change"]))
    groups = ", ".join(dict.fromkeys(data["group"]))
    points = _points(full / 100)
    caption = (f"Each row is one of the {len(data)} occupations whose removal moves the primary difference in male "
               f"share most; its dot is the difference recomputed without it (percentage points), coloured by its "
               f"group ({groups}). The solid line is the difference with every occupation ({points} points), the "
               f"grey band where leaving one out moves it by less than {_shift_phrase()} of itself"
               + (", the dashed lines its 95% confidence interval (occupations resampled)" if len(layers) == 4 else "")
               + ". Occupations without a gendered word do not move it. Look for dots outside the grey band: those "
                 "occupations alone carry much of the difference.")
    return plots._captioned(alt.layer(*layers).properties(width=420, height=alt.Step(18)),
                           title or f"Leave one occupation out: the difference in male share ({points} points) "
                                    "without each occupation",
                           [], f"Dot plot: the difference in male share without each of {len(data)} occupations, "
                               f"against the difference with all ({points} percentage points).", caption)
