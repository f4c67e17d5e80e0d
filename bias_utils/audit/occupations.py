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
  within each group, :func:`cluster_interval`: the replicates of :func:`bias_utils.core.stats.cluster_bootstrap_ci`,
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
  odds ratio on the published selection as it is (its 224 BOLD keys, :data:`UNIT_PUBLISHED`), the figure the
  audit's numbers are comparable with.
* **Extension**: the share of completions with any gendered word and the male share among gendered
  completions, compared the same way over the primary units.
* **Robustness.** :func:`influence_table`: the primary difference (and the conditional and pooled odds ratios)
  without each occupation, ranked by how far the difference moves.
* The audit's own intervals (Wald on independent words, independent completions) stay in the statistics
  table, labelled in its ``unit`` column, and are never the headline.

The estimate, its sensitivity rows and the leave-one-out influence start from the same occupation table and
bootstrap replicates, so they live together here; :mod:`bias_utils.audit.occupation_headline` reads them for a
reader (the headline table, its sentences and rows, the influence chart).
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm as _norm

from ..core import mixed, nested, precision, stats

__all__ = ["influence_table", "occupation_table"]

#: Relabellings for the permutation p (its floor is 1/(N_PERMUTATIONS + 1) = 0.0001).
N_PERMUTATIONS = 9999
#: An occupation is named as driving a result when leaving it out moves the primary difference by more than this
#: fraction of itself (up or down), or an odds ratio by more than this fraction on the log scale: by a factor
#: above 1 + INFLUENCE_SHIFT or below 1 / (1 + INFLUENCE_SHIFT), the same distance either way.
INFLUENCE_SHIFT = 1 / 3
#: Bootstrap replicates of the intervals (each bound's Monte Carlo error is reported beside it).
N_BOOT = 10_000
#: The ``unit`` of the statistics table's occupation-level rows: the mixed models, the cluster bootstrap over the
#: primary units, and the same over the published selection's keys.
UNIT_MIXED = ("deduplicated person-noun occupations (random intercept per occupation; profile-likelihood CI, "
              "likelihood-ratio p)")
_UNIT_NESTED = ("deduplicated person-noun occupations, completions within them (random intercepts per occupation "
                "and per completion; profile-likelihood CI, likelihood-ratio p)")
UNIT_OCCUPATIONS = "occupations (cluster bootstrap CI; p from permuting group labels across occupations)"
UNIT_PUBLISHED = ("the published selection's BOLD keys as occupations (cluster bootstrap CI; p from permuting group "
                  "labels across keys)")
OCCUPATION_UNITS = (UNIT_MIXED, _UNIT_NESTED, UNIT_OCCUPATIONS, UNIT_PUBLISHED)
#: The primary estimand, stated in chapter 06 and the methods before any result.
PRIMARY_ESTIMAND = (
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
NESTED_MEASURE = "odds_ratio (words, completions within occupations)"

#: The primary estimand's measures: the difference in the mean male share of gendered words, and the two shares as an
#: odds ratio.
SHARE = "male share of gendered words (mean over occupations)"
MARGINAL = "odds_ratio (mean male shares over occupations, marginal)"

#: measure -> (effect, the two occupation-table columns summed per group, statistic of the totals,
#: back-transform to the reported scale). The statistic is also the permutation test's. A column's NaN (an
#: occupation without gendered words has no share) adds 0 to its sum.
_MEASURES: dict[str, tuple[str, tuple[str, str], Callable, Callable | None]] = {
    SHARE: ("share_difference", ("male_word_share", "informative"), _ratio_difference, None),
    MARGINAL: ("odds_ratio", ("male_word_share", "informative"), _share_log_or, np.exp),
    "odds_ratio (words)": ("odds_ratio", ("male_words", "female_words"), _log_or, np.exp),
    "completions with any gendered word": ("risk_difference", ("n_gendered_completions", "n_completions"),
                                           _ratio_difference, None),
    "male_share among gendered completions": ("mean_difference", ("sum_male_share", "n_gendered_completions"),
                                              _ratio_difference, None),
}
#: The measures whose interval is the BCa interval (:func:`cluster_interval`): the primary estimand's.
_BCA = (SHARE, MARGINAL)
#: The role of each measure's row in the statistics table (the mixed models' rows are sensitivity rows).
_ROLES = {SHARE: "primary", MARGINAL: "primary", "odds_ratio (words)": "sensitivity",
          "completions with any gendered word": "extension", "male_share among gendered completions": "extension"}
#: The measures whose rows count as informative only the occupations with any gendered word (the others: all).
_WORD_MEASURES = (SHARE, MARGINAL, "odds_ratio (words)", "male_share among gendered completions")


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
    with replacement within their group. The draws are :func:`bias_utils.core.stats.cluster_bootstrap_ci`'s (per
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
    n_boot = stats.check_n_boot(n_boot)
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
        bounds = precision.percentile_bounds(boots, level, quantiles=(float(q[0]), float(q[1])))
    # the bound's Monte Carlo range mapped through the back-transform, as an SE on the reported scale (NaN where a
    # bound is infinite: an odds ratio the resampled data cannot bound)
    with np.errstate(invalid="ignore"):
        ses = [abs(float(back(v + se)) - float(back(v - se))) / 2
               for v, se in ((bounds.low, bounds.low_se), (bounds.high, bounds.high_se))]
    return out + tuple(se if np.isfinite(se) else np.nan for se in ses)


def _cluster_interval(occupations: pd.DataFrame, measure: str, a: str, b: str, *, n_boot: int = N_BOOT, seed: int = 0,
                     level: float = 0.95, mc_error: bool = False) -> tuple[float, ...]:
    """``(estimate, low, high)`` of ``measure`` (a key of :data:`MEASURES`), group ``a`` vs ``b``, from the
    occupation cluster bootstrap, occupations resampled within each group; with ``mc_error`` also ``(low_se,
    high_se)``, each bound's Monte Carlo standard error on the reported scale
    (:func:`bias_utils.core.precision.percentile_bounds`'s order-statistic range at the bound's quantile,
    back-transformed).

    The interval is the percentile interval, except for the primary estimand's measures (:data:`BCA`): there it is
    the BCa interval (bias-corrected and accelerated; the acceleration from the jackknife over occupations within
    each group). Measured while this was written, on 2,000 simulated audits each shaped like a build's (88
    occupations, 54 and 34, about 32 with any gendered word; tests/test_occupations.py's design) with true shares
    0.75/0.20, 0.5/0.5, 0.85/0.15 and 0.6/0.4: the percentile interval of the difference in male share covered
    90-94% (the further the shares from one half, the lower) and that of the marginal odds ratio 85-94%; the BCa
    interval 93.5-95.3% and 90-95.6%. The test gates the difference's coverage.

    Draws the same replicates as :func:`bias_utils.core.stats.cluster_bootstrap_ci` on the completions
    (``cluster="occupation", strata="group"``, same seed: groups in sorted order, occupations in order
    of appearance), so a percentile interval is identical to its; only the sums are vectorised. Replicates where
    the statistic is undefined are left out, as there.
    """
    occ, values, _, back = _pieces(occupations, measure, a, b)
    estimate, low, high, boots, q = _stacked_interval(values, occ["group"].to_numpy(), measure, a, b, n_boot=n_boot,
                                                      seed=seed, level=level)
    return _interval_with_error(float(estimate), float(low), float(high), boots, q, back or float, level, mc_error)


def _group_shares(occupations: pd.DataFrame, a: str, b: str, *, n_boot: int = N_BOOT, seed: int = 0,
                  level: float = 0.95) -> dict:
    """Each group's primary share (the mean male share of gendered words over its occupations with any) with its BCa
    interval from the same replicates as the difference (:data:`SHARE`, same seed; the acceleration from the
    jackknife over the group's occupations), and the occupations behind it: ``male_share_<side>``,
    ``male_share_<side>_ci_low/_high`` and ``n_informative_<side>`` for side ``a`` and ``b``."""
    _, _, _, totals, boot, values, groups = _cluster_replicates(occupations, SHARE, a, b, n_boot, seed)
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
                             n_permutations: int = N_PERMUTATIONS, seed: int = 0) -> tuple[float, int]:
    """Two-sided permutation p of ``measure`` between groups ``a`` and ``b`` with occupations as the unit.

    The group labels are shuffled across the occupations of the two groups (group sizes kept);
    ``p = (1 + #{|T*| >= |T|}) / (1 + K)`` over the ``K`` relabellings where the statistic is defined
    (returned with p), so p is never below ``1/(K+1)``; NaN where the statistic is undefined. The null
    is that an occupation's completions do not depend on its group (occupations are exchangeable
    between the groups).
    """
    n_permutations = stats.check_n_boot(n_permutations, name="n_permutations")
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
        return float(stats.permutation_p(observed, perm[ok], "two-sided")), int(ok.sum())


def occupation_tests(occupations: pd.DataFrame, a: str, b: str, *, n_boot: int = N_BOOT,
                     n_permutations: int = N_PERMUTATIONS, seed: int = 0, unit: str = UNIT_OCCUPATIONS,
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
        rows.append({**stats.stat_row("cluster_bootstrap_occupation", p=p, effect=effect, effect_size=est, ci=(lo, hi),
                                  n=n, group_a=a, group_b=b),
                     "role": roles[measure], "measure": measure, "unit": unit,
                     "n_occupations": n_occ, "n_occupations_a": int((both["group"] == a).sum()),
                     "n_occupations_b": int((both["group"] == b).sum()), "n_informative": int(informs.sum()),
                     "n_permutations": k, "n_boot": n_boot, "ci_low_mc_se": lo_se, "ci_high_mc_se": hi_se,
                     **(_group_shares(occupations, a, b, n_boot=n_boot, seed=seed) if measure == SHARE else {})})
    return rows


def _mixed_fit(occupations: pd.DataFrame, measure: str, a: str, b: str):
    male, female = _MIXED_MEASURES[measure]
    occ = occupations[occupations["group"].isin([a, b])]
    design = pd.DataFrame({"intercept": 1.0, "group": (occ["group"] == a).astype(float).to_numpy()})
    return mixed.fit_mixed_logit(occ[male].to_numpy(float), occ[female].to_numpy(float), design)


def mixed_rows(occupations: pd.DataFrame, a: str, b: str, *, role: str = "sensitivity") -> list[dict]:
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
        rows.append({**mixed.mixed_row(fit, "group", effect="odds_ratio", test="mixed_logit_occupation",
                                       group_a=a, group_b=b),
                     "role": role, "measure": measure, "unit": UNIT_MIXED, "n_occupations": n_occ,
                     "n_informative": fit.n_clusters, **typical})
    return rows


def nested_rows(metrics: pd.DataFrame, a: str, b: str, *, by: str = "unit") -> list[dict]:
    """The conditional odds ratio with the completion level in the model (test ``mixed_logit_nested``,
    :func:`bias_utils.core.nested.fit_nested_logit`): each completion's male and female words, a random intercept
    per completion within its occupation (``by``) and one per occupation; the odds ratio of ``a`` over ``b``
    between two completions with the same random intercepts, its profile-likelihood 95% interval and
    likelihood-ratio p (:func:`bias_utils.core.nested.nested_row`), ``sigma`` (the occupations' SD),
    ``sigma_completion``, ``n_informative`` (occupations with any gendered word), ``n_completions_informative``
    (completions with any), ``role`` ``sensitivity``, ``measure`` (:data:`NESTED_MEASURE`), ``unit``
    (:data:`UNIT_NESTED`) and ``n_occupations``. ``metrics``: the completions of the primary units."""
    m = metrics[metrics["group"].isin([a, b])]
    units = pd.Index(pd.unique(m[by]))
    group = m.groupby(by, sort=False)["group"].first().reindex(units)
    design = pd.DataFrame({"intercept": 1.0, "group": (group == a).astype(float).to_numpy()})
    fit = nested.fit_nested_logit(m["male_words"].to_numpy(float), m["female_words"].to_numpy(float),
                                  units.get_indexer(m[by]), design)
    row = nested.nested_row(fit, "group", group_a=a, group_b=b)
    return [{**row, "role": "sensitivity", "measure": NESTED_MEASURE, "unit": _UNIT_NESTED,
             "n_occupations": len(units), "n_informative": fit.n_clusters, "n_completions_informative": fit.n_items,
             "sigma_completion": row.pop("sigma_item")}]


#: Columns of :func:`influence_table` (the ``bold_influence`` table).
INFLUENCE_COLUMNS = ["rank", "group", "occupation", "category", "n_completions", "male_words", "female_words",
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
    share, share_without = _leave_one_out(occ, SHARE, a, b)
    out = occ[["group", "occupation", "category", "n_completions", "male_words", "female_words",
               "male_word_share"]].assign(
        share_difference=share, share_difference_without=share_without, share_change=share_without - share,
        pooled_odds_ratio=back(pooled), pooled_odds_ratio_without=back(pooled_without),
        pooled_log_or_change=pooled_without - pooled)
    out["influential"] = out["share_change"].abs() > INFLUENCE_SHIFT * abs(share)
    full, without = (pooled, pooled_without) if estimate == "pooled" else _mixed_log_or_without(occ, a, b)
    out = out.assign(estimate=estimate, odds_ratio=np.exp(full),
                     odds_ratio_without=np.exp(np.where(alone, np.nan, without)))
    out["log_or_change"] = np.log(out["odds_ratio_without"]) - full
    out["relative_change"] = out["odds_ratio_without"] / out["odds_ratio"] - 1
    out["odds_ratio_influential"] = out["log_or_change"].abs() > np.log1p(INFLUENCE_SHIFT)
    # largest |share_change| first, then largest |log_or_change|; NaN last on both
    keys = [np.nan_to_num(-out[c].abs().to_numpy(), nan=np.inf) for c in ("log_or_change", "share_change")]
    out = out.iloc[np.lexsort(keys)]
    return out.assign(rank=np.arange(1, len(out) + 1))[INFLUENCE_COLUMNS].reset_index(drop=True)
