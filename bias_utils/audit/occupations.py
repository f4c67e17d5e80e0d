"""Study 2 with the occupation as the unit: the pre-stated primary estimand, intervals, p values and influence.

The audit samples prompts *per occupation*, and most completions contain no gendered word at all, so a
handful of occupations supply most of the words. Its word-level tests treat every gendered word as
independent; their intervals are far too narrow, and one occupation can carry the result. What an
"occupation" is comes from :mod:`bias_utils.audit.occupation_units`: BOLD's keys are Wikipedia titles (fields,
glossaries, a day, spelling variants with the same prompts), and the primary analysis uses the deduplicated
person-noun units only.

* **Primary estimand** (:data:`PRIMARY_ESTIMAND`, stated before any result): the odds that a gendered word is
  male rather than female, male- over female-dominated occupations, *for a typical occupation*: a binomial
  logistic model of each occupation's male and female word counts with a random intercept per occupation
  (:mod:`bias_utils.core.mixed`; maximum likelihood with the boundary-avoiding log σ penalty of Chung et al. 2013,
  adaptive Gauss–Hermite), its 95% profile-likelihood interval
  and likelihood-ratio p (:func:`mixed_rows`). An occupation is one draw of its random intercept however many
  words it wrote, so one talkative occupation cannot make or break the estimate the way it carries a pooled
  count; the simulation tests of :mod:`bias_utils.core.mixed` check coverage and level with one dominant cluster.
* **Sensitivity** (role ``sensitivity``): the same model with each completion counted at most once per
  gender (a talkative completion weighs as one); the audit's pooled-word odds ratio (first group over second,
  +0.5 in every cell) over the same units with a 95% percentile interval from the occupation cluster bootstrap
  (whole occupations resampled within each group, :func:`cluster_interval`: the replicates of
  :func:`bias_utils.core.stats.cluster_bootstrap_ci`, vectorised; :data:`N_BOOT` replicates, each bound with its
  Monte Carlo error, :mod:`bias_utils.core.precision`) and a two-sided **permutation p** (group labels shuffled
  across occupations, group sizes kept; ``(1 + hits) / (1 + K)``, so its floor is ``1/(K+1)``); and both on
  the published selection as it is (its 224 BOLD keys, :data:`UNIT_PUBLISHED`), the figure the audit's
  numbers are comparable with.
* **Extension**: the share of completions with any gendered word and the male share among gendered
  completions, compared the same way over the primary units.
* **Robustness.** :func:`influence_table`: the primary odds ratio (and the pooled one) without each
  occupation, ranked by how far it moves.
* The audit's own intervals (Wald on independent words, independent completions) stay in the statistics
  table, labelled in its ``unit`` column, and are never the headline.

One concept over 600 lines: the audit with the occupation as the unit. The headline estimand, its sensitivity
rows, the leave-one-out influence and the sentences that read them all start from the same occupation table and
primary fit; split apart, each part would rebuild them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Callable, Mapping

import altair as alt
import numpy as np
import pandas as pd
from scipy.special import expit

from ..core import mixed, precision, stats
from ..report import plots, rendering

__all__ = [
    "HEADLINE_COLUMNS", "UNIT_OCCUPATIONS", "UNIT_PUBLISHED", "estimate_text", "headline", "headline_rows",
    "headline_sentence", "headline_table", "influence_chart", "influence_table", "occupation_table",
]

#: Tables written by :meth:`bias_utils.audit.bold.AuditResult.write` (``<name>.parquet`` + CSV).
#: Relabellings for the permutation p (its floor is 1/(N_PERMUTATIONS + 1) = 0.0001).
_N_PERMUTATIONS = 9999
#: An occupation is named as driving the result when leaving it out moves the odds ratio by more
#: than this fraction of itself, up or down.
_INFLUENCE_SHIFT = 1 / 3
#: Bootstrap replicates of the intervals (each bound's Monte Carlo error is reported beside it).
_N_BOOT = 10_000
#: The ``unit`` of the statistics table's occupation-level rows: the mixed model, the cluster bootstrap over the
#: primary units, and the same over the published selection's keys.
_UNIT_MIXED = ("deduplicated person-noun occupations (random intercept per occupation; profile-likelihood CI, "
              "likelihood-ratio p)")
UNIT_OCCUPATIONS = "occupations (cluster bootstrap CI; p from permuting group labels across occupations)"
UNIT_PUBLISHED = ("the published selection's BOLD keys as occupations (cluster bootstrap CI; p from permuting group "
                  "labels across keys)")
_OCCUPATION_UNITS = (_UNIT_MIXED, UNIT_OCCUPATIONS, UNIT_PUBLISHED)
#: The primary estimand, stated in chapter 06 and the methods before any result.
_PRIMARY_ESTIMAND = (
    "the odds that a gendered word in a completion is male rather than female, for male- over female-dominated "
    "occupations, for a typical occupation: a logistic model of each occupation's male and female word counts with "
    "a random intercept per occupation (maximum likelihood with a weak penalty that keeps the intercepts' spread off "
    "zero), over the deduplicated person-noun occupations, with its 95% profile-likelihood interval and "
    "likelihood-ratio p")
_ADD = 0.5  # the audit's Haldane-Anscombe correction of every cell of the odds ratio
_BLOCK = 1000  # relabellings drawn at a time


def _log_or(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    """log OR of male over female words, group a over group b, from totals (..., [male, female])."""
    return np.log((ta[..., 0] + _ADD) * (tb[..., 1] + _ADD) / ((ta[..., 1] + _ADD) * (tb[..., 0] + _ADD)))


def _ratio_difference(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return ta[..., 0] / ta[..., 1] - tb[..., 0] / tb[..., 1]


#: The mixed model's measures: measure -> the occupation-table columns of its successes (male) and failures
#: (female). The first is primary; the second counts each completion at most once per gender.
_MIXED_MEASURES = {"odds_ratio (words)": ("male_words", "female_words"),
                  "odds_ratio (completions, at most once per gender)": ("male_completions", "female_completions")}

#: measure -> (effect, the two occupation-table columns summed per group, statistic of the totals,
#: back-transform to the reported scale). The statistic is also the permutation test's.
_MEASURES: dict[str, tuple[str, tuple[str, str], Callable, Callable | None]] = {
    "odds_ratio (words)": ("odds_ratio", ("male_words", "female_words"), _log_or, np.exp),
    "completions with any gendered word": ("risk_difference", ("n_gendered_completions", "n_completions"),
                                           _ratio_difference, None),
    "male_share among gendered completions": ("mean_difference", ("sum_male_share", "n_gendered_completions"),
                                              _ratio_difference, None),
}


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
    ``share_of_group_female_words`` (its part of its group's totals: how much one occupation supplies).
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
    return out[["group", "occupation", "keys", "category", "n_prompts", "n_completions", "male_words",
                "female_words", "gendered_words", "n_gendered_completions", "male_completions",
                "female_completions", "share_gendered", "male_share_gendered", "sum_male_share",
                "share_of_group_male_words", "share_of_group_female_words"]]


def _pieces(occupations: pd.DataFrame, measure: str, a: str, b: str):
    if measure not in _MEASURES:
        raise ValueError(f"measure must be one of {sorted(_MEASURES)}, got {measure!r}")
    _, cols, fn, back = _MEASURES[measure]
    for g in (a, b):
        if not (occupations["group"] == g).any():
            raise ValueError(f"group {g!r} has no occupations (groups present: {sorted(set(occupations['group']))})")
    occ = occupations[occupations["group"].isin([a, b])]
    return occ, occ[list(cols)].to_numpy(dtype=float), fn, back


def _totals(values: np.ndarray, in_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return values[in_a].sum(axis=0), values[~in_a].sum(axis=0)


# ---------------------------------------------------------------- interval, p, influence
def _cluster_replicates(occupations: pd.DataFrame, measure: str, a: str, b: str, n_boot: int, seed: int):
    """``(estimate, replicates, back-transform)`` of the occupation cluster bootstrap (on the statistic's scale)."""
    n_boot = stats.check_n_boot(n_boot)
    occ, values, fn, back = _pieces(occupations, measure, a, b)
    in_a = (occ["group"] == a).to_numpy()
    rng = np.random.default_rng(seed)
    strata = [values[(occ["group"] == g).to_numpy()] for g in sorted({a, b})]
    picks = [np.empty((n_boot, len(s)), dtype=np.int64) for s in strata]
    for r in range(n_boot):  # the draw order of stats.cluster_bootstrap_ci: per replicate, stratum by stratum
        for s, pick in zip(strata, picks):
            pick[r] = rng.integers(0, len(s), len(s))
    totals = {g: s[pick].sum(axis=1) for g, s, pick in zip(sorted({a, b}), strata, picks)}
    return float(fn(*_totals(values, in_a))), fn(totals[a], totals[b]), back or float


def _cluster_interval(occupations: pd.DataFrame, measure: str, a: str, b: str, *, n_boot: int = _N_BOOT, seed: int = 0,
                     level: float = 0.95, mc_error: bool = False) -> tuple[float, ...]:
    """``(estimate, low, high)`` of ``measure`` (a key of :data:`MEASURES`), group ``a`` vs ``b``: percentile
    interval of the occupation cluster bootstrap, occupations resampled within each group; with ``mc_error``
    also ``(low_se, high_se)``, each bound's Monte Carlo standard error on the reported scale
    (:func:`bias_utils.core.precision.percentile_bounds`'s order-statistic range, back-transformed).

    Draws the same replicates as :func:`bias_utils.core.stats.cluster_bootstrap_ci` on the completions
    (``cluster="occupation", strata="group"``, same seed: groups in sorted order, occupations in order
    of appearance), so the numbers are identical; only the sums are vectorised. Replicates where the
    statistic is undefined are left out, as there.
    """
    estimate, boots, back = _cluster_replicates(occupations, measure, a, b, n_boot, seed)
    if np.isnan(boots).all():
        return (float(back(estimate)), np.nan, np.nan) + ((np.nan, np.nan) if mc_error else ())
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(boots, [tail, 100 - tail])
    out = (float(back(estimate)), float(back(lo)), float(back(hi)))
    if not mc_error:
        return out
    bounds = precision.percentile_bounds(boots, level)
    # the bound's Monte Carlo range mapped through the back-transform, as an SE on the reported scale
    ses = [abs(float(back(v + se)) - float(back(v - se))) / 2
           for v, se in ((bounds.low, bounds.low_se), (bounds.high, bounds.high_se))]
    return out + tuple(ses)


def _occupation_permutation_p(occupations: pd.DataFrame, measure: str, a: str, b: str, *,
                             n_permutations: int = _N_PERMUTATIONS, seed: int = 0) -> tuple[float, int]:
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
    return float(stats.permutation_p(observed, perm[ok], "two-sided")), int(ok.sum())


def _occupation_tests(occupations: pd.DataFrame, a: str, b: str, *, n_boot: int = _N_BOOT,
                     n_permutations: int = _N_PERMUTATIONS, seed: int = 0, unit: str = UNIT_OCCUPATIONS,
                     measures=None, role: str = "extension") -> list[dict]:
    """Occupation-level rows of the audit's statistics table, one per ``measures`` key (default: every key of
    :data:`MEASURES`): test ``cluster_bootstrap_occupation``, the estimate with its :func:`cluster_interval`
    and each bound's Monte Carlo SE (``ci_low_mc_se, ci_high_mc_se``), ``p`` from
    :func:`occupation_permutation_p`, ``n`` = completions, plus ``role`` (the odds ratio's is ``sensitivity``: the
    primary estimand is :func:`mixed_rows`'; the others ``role``), ``measure``, ``unit``, ``n_occupations``,
    ``n_permutations`` and ``n_boot``."""
    n = int(occupations.loc[occupations["group"].isin([a, b]), "n_completions"].sum())
    n_occ = int(occupations["group"].isin([a, b]).sum())
    rows = []
    for measure in (_MEASURES if measures is None else measures):
        effect = _MEASURES[measure][0]
        est, lo, hi, lo_se, hi_se = _cluster_interval(occupations, measure, a, b, n_boot=n_boot, seed=seed,
                                                     mc_error=True)
        p, k = _occupation_permutation_p(occupations, measure, a, b, n_permutations=n_permutations, seed=seed)
        rows.append({**stats._row("cluster_bootstrap_occupation", p=p, effect=effect, effect_size=est, ci=(lo, hi),
                                  n=n, group_a=a, group_b=b),
                     "role": "sensitivity" if effect == "odds_ratio" else role, "measure": measure, "unit": unit,
                     "n_occupations": n_occ, "n_occupations_a": int((occupations["group"] == a).sum()),
                     "n_occupations_b": int((occupations["group"] == b).sum()),
                     "n_permutations": k, "n_boot": n_boot, "ci_low_mc_se": lo_se,
                     "ci_high_mc_se": hi_se})
    return rows


def _mixed_fit(occupations: pd.DataFrame, measure: str, a: str, b: str):
    male, female = _MIXED_MEASURES[measure]
    occ = occupations[occupations["group"].isin([a, b])]
    design = pd.DataFrame({"intercept": 1.0, "group": (occ["group"] == a).astype(float).to_numpy()})
    return mixed.fit_mixed_logit(occ[male].to_numpy(float), occ[female].to_numpy(float), design)


def _mixed_rows(occupations: pd.DataFrame, a: str, b: str, *, role: str = "primary") -> list[dict]:
    """The mixed model's rows, one per :data:`MIXED_MEASURES` key: the odds ratio of ``a`` over ``b`` (test
    ``mixed_logit_occupation``: likelihood-ratio statistic and p, the profile-likelihood 95% interval), ``n`` =
    occupations with any count (``n_clusters``; ``n_clusters_given`` all), ``sigma`` (the random intercept's SD),
    ``note``, ``measure``, ``unit`` (:data:`UNIT_MIXED`), ``n_occupations`` and ``typical_male_share_a/_b`` (the
    male share of the gendered words of each group's median occupation, whose random intercept is 0: the odds
    ratio in words a reader can picture). The words row has ``role`` (primary by default); the completion row
    is ``sensitivity``. A fit the data cannot carry (too few occupations with words)
    raises :class:`~bias_utils.core.errors.ParameterError`, a ``ValueError``, naming why."""
    n_occ = int(occupations["group"].isin([a, b]).sum())
    rows = []
    for i, measure in enumerate(_MIXED_MEASURES):
        fit = _mixed_fit(occupations, measure, a, b)
        # the median occupation of each group has u = 0: its male share is the inverse logit of its fixed part
        typical = {f"typical_male_share_{side}": float(expit(fit.coef["intercept"] + fit.coef["group"] * is_a))
                   for side, is_a in (("a", 1), ("b", 0))}
        rows.append({**mixed.mixed_row(fit, "group", effect="odds_ratio", test="mixed_logit_occupation",
                                       group_a=a, group_b=b),
                     "role": role if i == 0 else "sensitivity", "measure": measure, "unit": _UNIT_MIXED,
                     "n_occupations": n_occ, **typical})
    return rows


#: Columns of :func:`influence_table` (the ``bold_influence`` table).
_INFLUENCE_COLUMNS = ["rank", "group", "occupation", "category", "n_completions", "male_words", "female_words",
                     "odds_ratio", "odds_ratio_without", "log_or_change", "relative_change", "influential",
                     "estimate", "pooled_odds_ratio", "pooled_odds_ratio_without", "pooled_log_or_change"]


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


def influence_table(occupations: pd.DataFrame, a: str, b: str, *, estimate: str = "mixed") -> pd.DataFrame:
    """Leave one occupation out: the odds ratio (male over female words, ``a`` over ``b``) recomputed without each
    occupation, most influential first.

    ``estimate`` says which odds ratio ranks and flags: ``"mixed"`` (the primary estimand, :func:`mixed_rows`'
    model refitted without the occupation) or ``"pooled"`` (the audit's pooled words, +0.5). Columns: ``rank`` (1 =
    largest ``|log_or_change|``), ``group, occupation, category, n_completions, male_words, female_words``;
    ``odds_ratio`` (all occupations), ``odds_ratio_without``, ``log_or_change`` (log OR without it minus log OR
    with all), ``relative_change`` (OR without / OR - 1), ``influential`` (``|relative_change| >
    INFLUENCE_SHIFT``), all of the ``estimate`` named in ``estimate``; then ``pooled_odds_ratio``,
    ``pooled_odds_ratio_without``, ``pooled_log_or_change`` (the pooled words' odds ratio beside it, whichever
    ranks). An occupation that is the only one of its group has no odds ratio without it (NaN, ranked last).
    """
    if estimate not in ("mixed", "pooled"):
        raise ValueError(f"estimate must be 'mixed' or 'pooled', got {estimate!r}")
    occ, values, fn, back = _pieces(occupations, "odds_ratio (words)", a, b)
    in_a = (occ["group"] == a).to_numpy()
    ta, tb = _totals(values, in_a)
    full = float(fn(ta, tb))
    without = fn(np.where(in_a[:, None], ta - values, ta), np.where(in_a[:, None], tb, tb - values))
    alone = occ["group"].map(occ["group"].value_counts()).to_numpy() == 1
    out = occ[["group", "occupation", "category", "n_completions", "male_words", "female_words"]].assign(
        pooled_odds_ratio=back(full), pooled_odds_ratio_without=back(np.where(alone, np.nan, without)),
        pooled_log_or_change=np.where(alone, np.nan, without) - full)
    if estimate == "mixed":
        full, without = _mixed_log_or_without(occ, a, b)
    out = out.assign(estimate=estimate, odds_ratio=np.exp(full), odds_ratio_without=np.exp(np.where(alone, np.nan,
                                                                                                    without)))
    out["log_or_change"] = np.log(out["odds_ratio_without"]) - full
    out["relative_change"] = out["odds_ratio_without"] / out["odds_ratio"] - 1
    out["influential"] = out["relative_change"].abs() > _INFLUENCE_SHIFT
    out = out.sort_values("log_or_change", key=np.abs, ascending=False, na_position="last", kind="stable")
    return out.assign(rank=np.arange(1, len(out) + 1))[_INFLUENCE_COLUMNS].reset_index(drop=True)


# ---------------------------------------------------------------- headline for the chapter and the front page
#: Columns of :func:`headline_table` (the ``bold_headline`` table).
HEADLINE_COLUMNS = [
    "group_a", "group_b", "estimand", "odds_ratio", "ci_low", "ci_high", "p", "sigma", "typical_male_share_a",
    "typical_male_share_b", "n_units_a", "n_units_b",
    "n_units_informative", "n_completions", "n_gendered_completions", "completion_odds_ratio", "completion_ci_low",
    "completion_ci_high", "completion_p", "pooled_odds_ratio", "pooled_ci_low", "pooled_ci_high",
    "pooled_ci_low_mc_se", "pooled_ci_high_mc_se", "pooled_p", "published_odds_ratio", "published_ci_low",
    "published_ci_high", "published_ci_low_mc_se", "published_ci_high_mc_se", "published_p", "n_keys_a", "n_keys_b",
    "independent_ci_low", "independent_ci_high", "independent_p", "n_permutations", "n_boot", "top_occupation",
    "top_group", "odds_ratio_without_top", "n_influential"]


def _pick(statistics: pd.DataFrame, test: str, measure: str, unit: str | None = None) -> pd.Series | None:
    s = statistics
    hit = s[(s["test"] == test) & (s["measure"] == measure) & ((s["unit"] == unit) if unit else True)]
    return hit.iloc[0] if len(hit) else None


def headline_table(statistics: pd.DataFrame, occupations: pd.DataFrame, influence: pd.DataFrame,
                   *, n_boot: int | None = None) -> pd.DataFrame:
    """One row: the study's headline, the pre-stated primary estimand with the published selection's figure beside it.

    ``occupations``: :func:`occupation_table` of the primary units; ``influence``: :func:`influence_table` of them.
    Columns: ``group_a, group_b``; ``estimand`` (:data:`PRIMARY_ESTIMAND`); ``odds_ratio, ci_low, ci_high, p,
    sigma, typical_male_share_a/_b`` (the primary mixed model: profile-likelihood interval, likelihood-ratio p, the
    random intercept's SD, the male share of each group's median occupation);
    ``n_units_a/_b`` (primary units per group), ``n_units_informative`` (with any gendered word),
    ``n_completions, n_gendered_completions`` (theirs); ``completion_*`` (the same model, each completion at most
    once per gender); ``pooled_*`` (the audit's pooled-word odds ratio over the same units: occupation cluster
    bootstrap interval with each bound's Monte Carlo SE, permutation p); ``published_*`` and ``n_keys_a/_b`` (the
    pooled odds ratio on the published selection's BOLD keys, the audit's own selection); ``independent_*`` (the
    audit's Wald interval and p, every word independent, published selection: for comparison only);
    ``n_permutations, n_boot``; ``top_occupation, top_group, odds_ratio_without_top`` (rank 1 of ``influence``)
    and ``n_influential``. Empty (these columns) without the pooled odds-ratio rows (a run of other than two
    groups); the mixed columns are NaN where the model could not be fitted (``bold_skipped`` says why).
    """
    primary = _pick(statistics, "mixed_logit_occupation", "odds_ratio (words)")
    once = _pick(statistics, "mixed_logit_occupation", "odds_ratio (completions, at most once per gender)")
    pooled = _pick(statistics, "cluster_bootstrap_occupation", "odds_ratio (words)", UNIT_OCCUPATIONS)
    published = _pick(statistics, "cluster_bootstrap_occupation", "odds_ratio (words)", UNIT_PUBLISHED)
    wald = statistics[(statistics["test"] == "odds_ratio_wald") & (statistics["role"] == "audit")]
    if pooled is None:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    a, b = pooled["group_a"], pooled["group_b"]
    both = occupations[occupations["group"].isin([a, b])]
    top = influence.iloc[0] if len(influence) else None

    def of(row, column, default=np.nan):
        return default if row is None else row[column]

    row = {"group_a": a, "group_b": b, "estimand": _PRIMARY_ESTIMAND,
           "odds_ratio": of(primary, "effect_size"), "ci_low": of(primary, "ci_low"), "ci_high": of(primary, "ci_high"),
           "p": of(primary, "p"), "sigma": of(primary, "sigma"),
           "typical_male_share_a": of(primary, "typical_male_share_a"),
           "typical_male_share_b": of(primary, "typical_male_share_b"),
           "n_units_a": int((both["group"] == a).sum()), "n_units_b": int((both["group"] == b).sum()),
           "n_units_informative": int((both["gendered_words"] > 0).sum()),
           "n_completions": int(both["n_completions"].sum()),
           "n_gendered_completions": int(both["n_gendered_completions"].sum()),
           "completion_odds_ratio": of(once, "effect_size"), "completion_ci_low": of(once, "ci_low"),
           "completion_ci_high": of(once, "ci_high"), "completion_p": of(once, "p"),
           **{f"{name}_{k}": of(r, c) for name, r in (("pooled", pooled), ("published", published))
              for k, c in (("odds_ratio", "effect_size"), ("ci_low", "ci_low"), ("ci_high", "ci_high"),
                           ("ci_low_mc_se", "ci_low_mc_se"), ("ci_high_mc_se", "ci_high_mc_se"), ("p", "p"))},
           "n_keys_a": of(published, "n_occupations_a"), "n_keys_b": of(published, "n_occupations_b"),
           "independent_ci_low": wald["ci_low"].iloc[0] if len(wald) else np.nan,
           "independent_ci_high": wald["ci_high"].iloc[0] if len(wald) else np.nan,
           "independent_p": wald["p"].iloc[0] if len(wald) else np.nan,
           "n_permutations": int(pooled["n_permutations"]), "n_boot": n_boot,
           "top_occupation": None if top is None else top["occupation"],
           "top_group": None if top is None else top["group"],
           "odds_ratio_without_top": np.nan if top is None else top["odds_ratio_without"],
           "n_influential": int(influence["influential"].sum())}
    return pd.DataFrame([row], columns=HEADLINE_COLUMNS)


def headline(table: pd.DataFrame | Mapping) -> dict:
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
    return "p " + stats.permutation_p_text(p, k)


def _groups(a: str, b: str) -> tuple[str, str]:
    return rendering.group_label(a), rendering.group_label(b)


def _mc_interval(h: Mapping, prefix: str) -> str:
    """"3.2 to 58" with each bound rounded to its Monte Carlo error (:func:`bias_utils.core.precision.mc_round`)."""
    bounds = []
    for side in ("low", "high"):
        value, se = float(h[f"{prefix}_ci_{side}"]), h.get(f"{prefix}_ci_{side}_mc_se", np.nan)
        bounds.append(format(Decimal(precision.mc_round(value, float(se))), ",f") if pd.notna(se)
                      and np.isfinite(value) else precision.number_text(value))
    return " to ".join(bounds)


def _direction(low: float, high: float, a: str, b: str) -> str:
    if low > 1 or high < 1:
        return f"{'more' if low > 1 else 'less'} often male about {a} than about {b} occupations"
    return f"not shown to be more or less often male about {a} than about {b} occupations"


def estimate_text(h: Mapping, which: str = "primary") -> str:
    """One estimate of a headline (:func:`headline`'s dict) as the chapter, its table and the front page all print
    it: ``"primary"`` "odds ratio 35.03, 95% CI 3.24 to 1793 (profile likelihood), likelihood-ratio p = 0.006",
    ``"published"`` "odds ratio 24.65, 95% CI 2.9 to 130 resampling whole keys, permutation p = 0.023" (bootstrap
    bounds to their Monte Carlo error). "not estimable" where the model could not be fitted."""
    num = precision.number_text
    if which == "primary":
        if pd.isna(h.get("odds_ratio")):
            return "not estimable"
        # a fit drifting to infinity: its number is where Newton stopped, not an estimate
        drifted = mixed.drifted(np.log(float(h["odds_ratio"])))
        ci = precision.interval_text(h["ci_low"], h["ci_high"], None if drifted else h["odds_ratio"])
        estimate = "unbounded (separation)" if drifted else num(h["odds_ratio"])
        return (f"odds ratio {estimate}, 95% CI {ci} (profile likelihood), likelihood-ratio p "
                f"{_p_value(float(h['p']))}")
    if which == "published":
        return (f"odds ratio {num(h['published_odds_ratio'])}, 95% CI {_mc_interval(h, 'published')} "
                f"resampling whole keys, permutation {_p_phrase(float(h['published_p']), int(h['n_permutations']))}")
    raise ValueError(f"which must be 'primary' or 'published', got {which!r}")


def headline_sentence(table: pd.DataFrame | Mapping) -> str:
    """The primary finding in a few sentences, from a :func:`headline_table` row (or :func:`headline`'s dict):
    the primary estimand (odds ratio, profile-likelihood interval, likelihood-ratio p) over the primary units,
    how many completions carry it, the published selection's pooled odds ratio beside it (interval to its Monte
    Carlo error, permutation p, the audit's independent-words interval), and the most influential occupation.
    Empty string for an empty table."""
    h = headline(table)
    if not h:
        return ""
    num = precision.number_text
    a, b = _groups(h["group_a"], h["group_b"])
    units = (f"{int(h['n_units_a']) + int(h['n_units_b'])} deduplicated person-noun occupations, "
             f"{int(h['n_units_a'])} {a} and {int(h['n_units_b'])} {b}")
    if int(h["n_gendered_completions"]) == 0:
        return (f"None of the {precision.count_text(h['n_completions'])} completions about the {units} contains a "
                "gendered word, "
                f"so there is no odds ratio to read.")
    if pd.notna(h["odds_ratio"]):
        lo, hi = float(h["ci_low"]), float(h["ci_high"])
        text = (f"Primary analysis, over the {units} ({int(h['n_units_informative'])} with any gendered word): "
                f"gendered words are {_direction(lo, hi, a, b)} for a typical occupation: "
                f"{estimate_text(h)}, random intercept per occupation. The gendered words of the median {a} "
                f"occupation are {precision.percent_text(h['typical_male_share_a'])} male, of the median {b} one "
                f"{precision.percent_text(h['typical_male_share_b'])}; occupations differ widely around them "
                "(random-intercept "
                f"SD {num(h['sigma'])} on the log-odds scale), which is why the odds "
                "ratio of a typical occupation is far from the pooled one and its interval wide. ")
    else:
        text = f"The primary model could not be fitted over the {units} (the skipped tests say why). "
    text += (f"{precision.count_text(h['n_gendered_completions'])} of their "
             f"{precision.count_text(h['n_completions'])} completions contain a "
             "gendered word")
    if h.get("top_occupation") is not None and pd.notna(h.get("odds_ratio_without_top")):
        text += (f"; without the most influential occupation, {str(h['top_occupation']).replace('_', ' ')}, the "
                 f"odds ratio is {num(h['odds_ratio_without_top'])}")
    text += "."
    if pd.notna(h.get("published_odds_ratio")):
        replicates = precision.count_text(h['n_boot']) if pd.notna(h.get("n_boot")) else "bootstrap"
        text += (f" Beside it, the audit's pooled-word odds ratio on its published selection "
                 f"({int(h['n_keys_a'])} and {int(h['n_keys_b'])} BOLD keys as occupations, fields and duplicates "
                 f"included): {estimate_text(h, 'published')} ({replicates} replicates, each bound to its Monte "
                 f"Carlo error); the audit's own interval, every word independent, is "
                 + precision.interval_text(h["independent_ci_low"], h["independent_ci_high"],
                                           h["published_odds_ratio"]) + ".")
    return text


def headline_rows(table: pd.DataFrame | Mapping) -> pd.DataFrame:
    """The headline as a reader's table, one row per estimate: the primary estimand first, its sensitivity rows,
    the published selection's pooled odds ratio and the audit's own interval. Columns: ``analysis``,
    ``occupations`` (what the unit is and how many), ``odds ratio``, ``95% CI`` (bootstrap bounds to their Monte
    Carlo error), ``p`` (which test). Empty for an empty headline."""
    h = headline(table)
    if not h:
        return pd.DataFrame(columns=["analysis", "occupations", "odds ratio", "95% CI", "p"])
    num = precision.number_text
    units = f"{int(h['n_units_a'])} + {int(h['n_units_b'])} deduplicated person nouns"
    keys = (f"{int(h['n_keys_a'])} + {int(h['n_keys_b'])} BOLD keys" if pd.notna(h.get("n_keys_a")) else "")
    k = int(h["n_permutations"])
    rows = [("primary: random-intercept model, words", units, h["odds_ratio"],
             precision.interval_text(h["ci_low"], h["ci_high"], h["odds_ratio"]),
             f"likelihood ratio {_p_value(float(h['p']))}"),
            ("sensitivity: the same, each completion at most once per gender", units, h["completion_odds_ratio"],
             precision.interval_text(h["completion_ci_low"], h["completion_ci_high"], h["completion_odds_ratio"]),
             f"likelihood ratio {_p_value(float(h['completion_p']))}"),
            ("sensitivity: pooled words (the audit's odds ratio), occupations resampled", units,
             h["pooled_odds_ratio"], _mc_interval(h, "pooled"), "permutation " + _p_phrase(float(h["pooled_p"]), k)),
            ("the published selection: pooled words, keys resampled", keys, h["published_odds_ratio"],
             _mc_interval(h, "published"), "permutation " + _p_phrase(float(h["published_p"]), k)),
            ("the audit's own interval: every word independent (not a test of occupations)", keys,
             h["published_odds_ratio"],
             precision.interval_text(h["independent_ci_low"], h["independent_ci_high"], h["published_odds_ratio"]),
             f"Wald {_p_value(float(h['independent_p']))}")]
    out = pd.DataFrame(rows, columns=["analysis", "occupations", "odds ratio", "95% CI", "p"])
    out["odds ratio"] = [num(v) if pd.notna(v) else "not estimable" for v in out["odds ratio"]]
    return out


def _p_value(p: float) -> str:
    return precision.p_text(p, relation=True)


def _describe_influence(influence: pd.DataFrame) -> str:
    """A sentence naming every occupation whose removal moves the odds ratio by more than
    :data:`INFLUENCE_SHIFT` (either way), with the odds ratio without it; or saying that none does.
    Empty without any gendered word (nothing to move)."""
    if influence.empty or (influence["male_words"] + influence["female_words"]).sum() == 0:
        return ""
    num = precision.number_text
    full = float(influence["odds_ratio"].iloc[0])
    hit = influence[influence["influential"]]
    share = f"{_INFLUENCE_SHIFT:.0%}" if _INFLUENCE_SHIFT != 1 / 3 else "a third"
    if hit.empty:
        top = influence.iloc[0]
        return (f"No single occupation moves the odds ratio ({num(full)}) by more than {share}: leaving out the "
                f"most influential, {str(top['occupation']).replace('_', ' ')}, gives "
                f"{num(top['odds_ratio_without'])}.")
    named = "; ".join(
        f"without {str(r.occupation).replace('_', ' ')} ({str(r.group).replace('_', '-')}, {int(r.male_words)} male "
        f"and {int(r.female_words)} female words) it is {num(r.odds_ratio_without)} "
        f"({float(r.relative_change):+.0%})" for r in hit.itertuples())
    one = len(hit) == 1
    return (f"{len(hit)} occupation{'' if one else 's'} of {len(influence)} move{'s' if one else ''} the odds ratio "
            f"({num(full)}) by more than {share} when left out: {named}.")


def influence_chart(influence: pd.DataFrame, headline_row: pd.DataFrame | Mapping | None = None, *, top: int = 15,
                    title: str | None = None) -> alt.LayerChart:
    """The odds ratio without each of the ``top`` most influential occupations (log axis), coloured by
    group, against the odds ratio with all (solid rule) and the band where leaving one out moves it by
    less than :data:`INFLUENCE_SHIFT` (grey); with ``headline_row``, the occupation 95% CI as dashed rules.
    Reads the :func:`influence_table` columns."""
    full = float(influence["odds_ratio"].iloc[0])
    # a primary fit drifting to infinity (separation, in a small build) has no value to move: the pooled words' odds
    # ratio, which every row also carries, is drawn instead and the caption says so
    drifted = mixed.drifted(np.log(full))
    if drifted:
        influence = influence.assign(odds_ratio=influence["pooled_odds_ratio"],
                                     odds_ratio_without=influence["pooled_odds_ratio_without"],
                                     relative_change=np.expm1(influence["pooled_log_or_change"]))
        influence = influence.iloc[np.argsort(-influence["pooled_log_or_change"].abs().to_numpy(), kind="stable")]
        full, headline_row = float(influence["odds_ratio"].iloc[0]), None
    data = plots.drawable(influence, ["odds_ratio_without"], log=True).head(top).assign(
        label=lambda d: d["occupation"].map(rendering.value_label),
        group=lambda d: d["group"].map(rendering.group_label),
        change=lambda d: d["relative_change"].map(lambda x: f"{x:+.0%}"))
    band = pd.DataFrame({"low": [full * (1 - _INFLUENCE_SHIFT)], "high": [full * (1 + _INFLUENCE_SHIFT)]})
    log_x = alt.Scale(type="log", nice=False)
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=220))
    layers = [
        alt.Chart(band).mark_rect(color="#dddddd", opacity=0.6).encode(x=alt.X("low:Q", scale=log_x), x2="high:Q"),
        alt.Chart(pd.DataFrame({"x": [full]})).mark_rule(color="black").encode(x="x:Q"),
    ]
    h = headline(headline_row) if headline_row is not None else {}
    if h and pd.notna(h.get("ci_low")):
        ci = pd.DataFrame({"x": [float(h["ci_low"]), float(h["ci_high"])]})
        layers.append(alt.Chart(ci).mark_rule(strokeDash=[4, 3], color="grey").encode(x="x:Q"))
    layers.append(alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=alt.X("odds_ratio_without:Q", scale=log_x, title="odds ratio without the occupation (log scale)"), y=y,
        color=alt.Color("group:N", title="group", scale=plots.group_scale(data["group"])),
        tooltip=["occupation", "group", "category", "n_completions", "male_words", "female_words",
                 alt.Tooltip("odds_ratio_without:Q", format=".2f"), "change"]))
    groups = ", ".join(dict.fromkeys(data["group"]))
    caption = (f"Each row is one of the {len(data)} occupations whose removal moves the odds ratio most; its dot is "
               f"the odds ratio recomputed without it (log scale), coloured by its group ({groups}). The solid line is "
               f"the odds ratio with every occupation ({precision.number_text(full)}), the grey band where leaving "
               "one out moves it by "
               f"less than {_INFLUENCE_SHIFT:.0%}"
               + (", the dashed lines its 95% confidence interval (profile likelihood)" if len(layers) == 4 else "")
               + ". Look for dots outside the grey band: those occupations alone carry much of the odds ratio."
               + (" The primary model's odds ratio is unbounded in this build (separation), so this chart shows the "
                  "pooled words' odds ratio instead." if drifted else ""))
    return plots.captioned(alt.layer(*layers).properties(width=420, height=alt.Step(18)),
                           title or f"Leave one occupation out: the odds ratio ({precision.number_text(full)}) "
                                    "without each occupation",
                           [], f"Dot plot: the BOLD odds ratio without each of {len(data)} occupations, against "
                               f"the odds ratio with all ({precision.number_text(full)}).", caption)
