"""The audit's headline, read for a reader: the pre-stated primary estimate as one table row (``bold_headline``),
the sentences the chapter and the front page print from it, the rows of its sensitivity table, and the chart of
the occupations that move it most.

Everything here reads what :mod:`bias_utils.audit.occupations` computed (the statistics table, the occupation
table, the leave-one-out influence); nothing is estimated again.
"""

from __future__ import annotations

from typing import Mapping

import altair as alt
import numpy as np
import pandas as pd

from ..core import mixed, precision, stats
from ..core.results import first_row
from ..report import plots, rendering
from .occupations import (
    INFLUENCE_SHIFT,
    MARGINAL,
    NESTED_MEASURE,
    PRIMARY_ESTIMAND,
    SHARE,
    UNIT_OCCUPATIONS,
    UNIT_PUBLISHED,
)

__all__ = ["headline_rows", "headline_table", "influence_chart"]

#: What each odds-ratio interval of the audit treats as independent, its name wherever it is printed (issue 57: one
#: estimate printed with two intervals names both, the occupation-level one the headline).
CI_OCCUPATIONS = "resampling whole occupations"
CI_KEYS = "resampling whole keys"
CI_INDEPENDENT_WORDS = "every word independent"
CI_NAMES = (CI_OCCUPATIONS, CI_KEYS, CI_INDEPENDENT_WORDS)

#: Columns of :func:`headline_table` (the ``bold_headline`` table).
HEADLINE_COLUMNS = [
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
    return first_row(statistics, test=test, measure=measure, unit=unit or None)


def headline_table(statistics: pd.DataFrame, occupations: pd.DataFrame, influence: pd.DataFrame,
                   *, n_boot: int | None = None) -> pd.DataFrame:
    """One row: the study's headline, the pre-stated primary estimand first, its sensitivity rows and the published
    selection's figure beside it.

    ``occupations``: :func:`~bias_utils.audit.occupations.occupation_table` of the primary units; ``influence``: its
    :func:`~bias_utils.audit.occupations.influence_table`.
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
    share = _pick(statistics, "cluster_bootstrap_occupation", SHARE, UNIT_OCCUPATIONS)
    if share is None:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    marginal = _pick(statistics, "cluster_bootstrap_occupation", MARGINAL, UNIT_OCCUPATIONS)
    conditional = _pick(statistics, "mixed_logit_occupation", "odds_ratio (words)")
    nested = _pick(statistics, "mixed_logit_nested", NESTED_MEASURE)
    once = _pick(statistics, "mixed_logit_occupation", "odds_ratio (completions, at most once per gender)")
    pooled = _pick(statistics, "cluster_bootstrap_occupation", "odds_ratio (words)", UNIT_OCCUPATIONS)
    published = _pick(statistics, "cluster_bootstrap_occupation", "odds_ratio (words)", UNIT_PUBLISHED)
    wald = statistics[(statistics["test"] == "odds_ratio_wald") & (statistics["role"] == "audit")]
    a, b = share["group_a"], share["group_b"]
    both = occupations[occupations["group"].isin([a, b])]
    top = influence.iloc[0] if len(influence) else None

    def of(row, column, default=np.nan):
        return default if row is None or column not in row else row[column]

    def estimate(name, row, columns=("ci_low_mc_se", "ci_high_mc_se")):
        keys = {"ci_low": "ci_low", "ci_high": "ci_high", "p": "p", **{c: c for c in columns}}
        return {f"{name}_{k}": of(row, c) for k, c in keys.items()}

    row = {"group_a": a, "group_b": b, "estimand": PRIMARY_ESTIMAND,
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


def mc_interval(h: Mapping, prefix: str, scale: float = 1.0) -> str:
    """The ``prefix`` interval of a headline by :func:`bias_utils.core.precision.mc_interval_text` ("31 to 79");
    ``scale`` multiplies bounds and errors (100: a share difference in percentage points)."""
    low, high = (scale * float(h[f"{prefix}_ci_{side}"]) for side in ("low", "high"))
    low_se, high_se = (scale * float(h.get(f"{prefix}_ci_{side}_mc_se", np.nan)) for side in ("low", "high"))
    return precision.mc_interval_text(low, high, low_se, high_se)


def percentage_points(share: float) -> str:
    """A share difference in percentage points, to the nearest point ("+57", "−3")."""
    return precision.percent_text(share)[:-1] if pd.notna(share) and np.isfinite(share) else "–"


def _share_phrase(h: Mapping, side: str) -> str:
    """"68% (95% CI 45% to 90%)": a group's primary share with its interval."""
    share, low, high = (h[f"male_share_{side}{s}"] for s in ("", "_ci_low", "_ci_high"))
    if pd.isna(share):
        return "no share (no gendered word)"
    percent = precision.percent_text
    return f"{percent(share)} (95% CI {percent(low)} to {percent(high)})"


def difference_reading(h: Mapping) -> str:
    """Which group's occupations get the larger male share, as far as the primary interval shows (:func:`headline`'s
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
    """One estimate of a headline (:func:`headline`'s dict) as the chapter, its table and the front page all print
    it. ``"primary"``: "68% (95% CI 45% to 90%) of the gendered words about a typical male-dominated occupation
    are male, 11% (…) about a typical female-dominated one: a difference of 57 percentage points, 95% CI
    resampling whole occupations 31 to 83, permutation p ≤ 1/10,000" (bootstrap bounds to their Monte Carlo error);
    ``"marginal"`` "marginal odds ratio 17.30, 95% CI …, permutation p = …"; ``"conditional"`` and ``"nested"``
    "conditional odds ratio 35.03, 95% CI 3.24 to 1793 (profile likelihood), likelihood-ratio p = 0.006";
    ``"published"`` "odds ratio 24.65, 95% CI resampling whole keys 2.9 to 130, permutation p = 0.023". "not
    estimable" where a number could not be computed. Each interval's name (:data:`CI_NAMES`) comes before its
    bounds, as in a table's row, so the same estimate printed with another interval reads as another quantity."""
    num = precision.number_text
    k = int(h["n_permutations"])
    if which == "primary":
        if pd.isna(h.get("share_difference")):
            return "not estimable"
        a, b = _groups(h["group_a"], h["group_b"])
        return (f"{_share_phrase(h, 'a')} of the gendered words about a typical {a} occupation are male, "
                f"{_share_phrase(h, 'b')} about a typical {b} one: a difference of "
                f"{percentage_points(h['share_difference'])} percentage points, 95% CI {CI_OCCUPATIONS} "
                f"{mc_interval(h, 'share_difference', 100)}, permutation "
                f"{_p_phrase(float(h['share_difference_p']), k)}")
    if which == "marginal":
        if pd.isna(h.get("marginal_odds_ratio")):
            return "not estimable"
        return (f"marginal odds ratio {num(h['marginal_odds_ratio'])}, 95% CI {CI_OCCUPATIONS} "
                f"{mc_interval(h, 'marginal')}, permutation {_p_phrase(float(h['marginal_p']), k)}")
    if which in ("conditional", "nested"):
        value = h.get(f"{which}_odds_ratio")
        if pd.isna(value):
            return "not estimable"
        # a fit drifting to infinity: its number is where Newton stopped, not an estimate
        drifted = mixed.drifted(np.log(float(value)))
        ci = precision.interval_text(h[f"{which}_ci_low"], h[f"{which}_ci_high"], None if drifted else value)
        return (f"conditional odds ratio {'unbounded (separation)' if drifted else num(value)}, 95% CI {ci} (profile "
                f"likelihood), likelihood-ratio p {_p_value(float(h[f'{which}_p']))}")
    if which == "published":
        return (f"odds ratio {num(h['published_odds_ratio'])}, 95% CI {CI_KEYS} {mc_interval(h, 'published')}, "
                f"permutation {_p_phrase(float(h['published_p']), k)}")
    raise ValueError(f"which must be 'primary', 'marginal', 'conditional', 'nested' or 'published', got {which!r}")


def _units_phrase(h: Mapping) -> str:
    """"88 deduplicated person-noun occupations, 54 male-dominated and 34 female-dominated; 15 carry any gendered
    word (10 and 5)": how many units inform the primary estimate."""
    a, b = _groups(h["group_a"], h["group_b"])
    return (f"{int(h['n_units_a']) + int(h['n_units_b'])} deduplicated person-noun occupations, {int(h['n_units_a'])} "
            f"{a} and {int(h['n_units_b'])} {b}; {int(h['n_units_informative'])} carry any gendered word "
            f"({int(h['n_informative_a'])} and {int(h['n_informative_b'])})")


def headline_sentence(table: pd.DataFrame | Mapping) -> str:
    """The primary finding in a few sentences, from a :func:`headline_table` row (or :func:`headline`'s dict): the
    primary estimand (each group's male share of gendered words for a typical occupation with its interval, their
    difference with its occupation interval and permutation p), over how many occupations and how many of them
    carry any gendered word, the marginal odds ratio beside it, how many completions carry it and the most
    influential occupation; then the conditional odds ratios as sensitivity rows, and the published selection's
    pooled odds ratio (interval to its Monte Carlo error, permutation p, the audit's independent-words interval).
    Empty string for an empty table."""
    h = headline(table)
    if not h:
        return ""
    a, b = _groups(h["group_a"], h["group_b"])
    units = (f"{int(h['n_units_a']) + int(h['n_units_b'])} deduplicated person-noun occupations, "
             f"{int(h['n_units_a'])} {a} and {int(h['n_units_b'])} {b}")
    if int(h["n_gendered_completions"]) == 0:
        return (f"None of the {precision.count_text(h['n_completions'])} completions about the {units} contains a "
                "gendered word, so there is no share of male words to read.")
    if pd.notna(h["share_difference"]) and pd.notna(h["share_difference_ci_low"]):
        text = (f"Primary analysis, over the {_units_phrase(h)}, each occupation weighing one: "
                f"{difference_reading(h)}. {_estimate_text(h)[0].upper()}{_estimate_text(h)[1:]}. As an odds "
                f"ratio of the two shares (population-averaged): {_estimate_text(h, 'marginal')}. ")
    else:
        text = (f"The primary shares cannot be compared over the {_units_phrase(h)}: a group has no occupation with a "
                "gendered word. ")
    text += (f"{precision.count_text(h['n_gendered_completions'])} of their "
             f"{precision.count_text(h['n_completions'])} completions contain a gendered word")
    if h.get("top_occupation") is not None and pd.notna(h.get("share_difference_without_top")):
        text += (f"; without the most influential occupation, {str(h['top_occupation']).replace('_', ' ')}, the "
                 f"difference is {percentage_points(h['share_difference_without_top'])} percentage points")
    text += "."
    if pd.notna(h.get("conditional_odds_ratio")):
        text += (" Sensitivity, a conditional estimand (between two occupations with the same random intercept, not a "
                 "population average; it grows with every variance component added): the random-intercept model's "
                 f"{_estimate_text(h, 'conditional')} (occupations' SD {precision.number_text(h['sigma'])} on the "
                 "log-odds scale)")
        if pd.notna(h.get("nested_odds_ratio")):
            text += (f"; with a random intercept per completion within its occupation as well, "
                     f"{_estimate_text(h, 'nested')} (SDs {precision.number_text(h['nested_sigma_occupation'])} "
                     f"between occupations, {precision.number_text(h['nested_sigma_completion'])} between "
                     "completions" + (f"; {h['nested_note']}" if isinstance(h.get("nested_note"), str)
                                      and h["nested_note"] else "") + ")")
        text += "."
    if pd.notna(h.get("published_odds_ratio")):
        replicates = precision.count_text(h['n_boot']) if pd.notna(h.get("n_boot")) else "bootstrap"
        text += (f" Beside it, the audit's pooled-word odds ratio on its published selection "
                 f"({int(h['n_keys_a'])} and {int(h['n_keys_b'])} BOLD keys as occupations, fields and duplicates "
                 f"included): {_estimate_text(h, 'published')} ({replicates} replicates, each bound to its Monte "
                 f"Carlo error); the audit's own interval, not the headline: 95% CI {CI_INDEPENDENT_WORDS} "
                 + precision.interval_text(h["independent_ci_low"], h["independent_ci_high"],
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
    h = headline(table)
    if not h:
        return pd.DataFrame(columns=_ROWS_COLUMNS)
    num = precision.number_text
    a, b = _groups(h["group_a"], h["group_b"])
    k = int(h["n_permutations"])
    na, nb, ia, ib = (int(h[c]) for c in ("n_units_a", "n_units_b", "n_informative_a", "n_informative_b"))
    units = f"{na} + {nb} deduplicated person nouns, {ia} + {ib} with any gendered word"
    keys = (f"{int(h['n_keys_a'])} + {int(h['n_keys_b'])} BOLD keys" if pd.notna(h.get("n_keys_a")) else "")

    def ratio(value) -> str:
        return f"odds ratio {num(value)}" if pd.notna(value) else "not estimable"

    def interval(prefix: str) -> str:
        return precision.interval_text(h[f"{prefix}_ci_low"], h[f"{prefix}_ci_high"], h[f"{prefix}_odds_ratio"])

    def shares(side: str) -> str:
        low, high = h[f"male_share_{side}_ci_low"], h[f"male_share_{side}_ci_high"]
        return f"{precision.percent_text(low)} to {precision.percent_text(high)}"

    nested_units = units + (f"; {int(h['nested_n_completions'])} completions with any gendered word"
                            if pd.notna(h.get("nested_n_completions")) else "")
    rows = [("primary: difference in the male share of gendered words, a typical occupation (mean over "
             "occupations)", units, f"{percentage_points(h['share_difference'])} percentage points",
             mc_interval(h, "share_difference", 100), "permutation " + _p_phrase(float(h["share_difference_p"]), k)),
            (f"primary: male share of gendered words, a typical {a} occupation", f"{na} ({ia} with any gendered word)",
             precision.percent_text(h["male_share_a"]), shares("a"), ""),
            (f"primary: male share of gendered words, a typical {b} occupation", f"{nb} ({ib} with any gendered word)",
             precision.percent_text(h["male_share_b"]), shares("b"), ""),
            ("primary, as an odds ratio: the two shares (marginal, population-averaged)", units,
             ratio(h["marginal_odds_ratio"]), mc_interval(h, "marginal"),
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
             ratio(h["pooled_odds_ratio"]), mc_interval(h, "pooled"),
             "permutation " + _p_phrase(float(h["pooled_p"]), k)),
            ("the published selection: pooled words, keys resampled", keys, ratio(h["published_odds_ratio"]),
             f"{CI_KEYS} {mc_interval(h, 'published')}", "permutation " + _p_phrase(float(h["published_p"]), k)),
            ("the audit's own interval (not a test of occupations, not the headline)", keys,
             ratio(h["published_odds_ratio"]),
             f"{CI_INDEPENDENT_WORDS} " + precision.interval_text(h["independent_ci_low"], h["independent_ci_high"],
                                                                  h["published_odds_ratio"]),
             f"unadjusted Wald p {_p_value(float(h['independent_p']))}")]
    return pd.DataFrame(rows, columns=_ROWS_COLUMNS)


def _p_value(p: float) -> str:
    return precision.p_text(p, relation=True)


def _lr_phrase(p) -> str:
    return f"likelihood-ratio p {_p_value(float(p))}" if pd.notna(p) else ""


def _shift_phrase() -> str:
    return "a third" if INFLUENCE_SHIFT == 1 / 3 else f"{INFLUENCE_SHIFT:.0%}"


def describe_influence(influence: pd.DataFrame) -> str:
    """Sentences naming every occupation whose removal moves the primary difference in male share by more than
    :data:`INFLUENCE_SHIFT` of itself (either way), with the difference without it, or saying that none does; then
    those that move the conditional odds ratio by more than that factor on the log scale (either way). Empty
    without any gendered word (nothing to move)."""
    if influence.empty or (influence["male_words"] + influence["female_words"]).sum() == 0:
        return ""
    num = precision.number_text
    full = float(influence["share_difference"].iloc[0])
    if pd.isna(full):
        return ""
    hit = influence[influence["influential"]]
    shift = _shift_phrase()
    if hit.empty:
        top = influence.iloc[0]
        text = (f"No single occupation moves the difference in male share ({percentage_points(full)} percentage "
                f"points) by more than {shift} of itself: leaving out the most influential, "
                f"{str(top['occupation']).replace('_', ' ')}, gives "
                f"{percentage_points(top['share_difference_without'])}.")
    else:
        named = "; ".join(
            f"without {str(r.occupation).replace('_', ' ')} ({str(r.group).replace('_', '-')}, {int(r.male_words)} "
            f"male and {int(r.female_words)} female words) it is {percentage_points(r.share_difference_without)}"
            for r in hit.itertuples())
        one = len(hit) == 1
        text = (f"{len(hit)} occupation{'' if one else 's'} of {len(influence)} move{'s' if one else ''} the "
                f"difference in male share ({percentage_points(full)} percentage points) by more than {shift} of "
                f"itself when left out: {named}.")
    moved = influence[influence["odds_ratio_influential"]]
    which = ("conditional odds ratio" if influence["estimate"].iloc[0] == "mixed" else "audit's pooled-word odds ratio")
    odds = float(influence["odds_ratio"].iloc[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        unbounded = mixed.drifted(np.log(odds))  # also 0, infinite or missing
    if len(moved) and unbounded:
        # an odds ratio run to infinity (separation) has no size to multiply: the list would be a row of ∞s
        text += (f" The {which} (a sensitivity row) is unbounded (separation), so how much leaving one occupation "
                 "out moves it is not assessed.")
    elif len(moved):
        text += (f" The {which} ({num(odds)}, a sensitivity row) "
                 f"is multiplied or divided by more than {num(1 + INFLUENCE_SHIFT)} without "
                 + ", ".join(f"{str(r.occupation).replace('_', ' ')} ({num(r.odds_ratio_without)})"
                             for r in moved.itertuples()) + ".")
    return text


def influence_chart(influence: pd.DataFrame, headline_row: pd.DataFrame | Mapping | None = None, *, top: int = 15,
                    title: str | None = None) -> alt.LayerChart:
    """The primary difference in male share without each of the ``top`` most influential occupations (percentage
    points), coloured by group, against the difference with all (solid rule) and the band where leaving one out
    moves it by less than :data:`INFLUENCE_SHIFT` of itself (grey); with ``headline_row``, the difference's 95% CI
    as dashed rules. Reads the :func:`~bias_utils.audit.occupations.influence_table` columns."""
    full = 100 * float(influence["share_difference"].iloc[0])
    data = influence.dropna(subset=["share_difference_without"]).head(top).assign(
        points_without=lambda d: 100 * d["share_difference_without"],
        label=lambda d: d["occupation"].map(rendering.value_label),
        group=lambda d: d["group"].map(rendering.group_label),
        change=lambda d: (100 * d["share_change"]).map(lambda x: f"{x:+.0f} points"))
    band = pd.DataFrame({"low": [full - INFLUENCE_SHIFT * abs(full)], "high": [full + INFLUENCE_SHIFT * abs(full)]})
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=220))
    # padded so that a dashed interval bound at the data's extreme is drawn inside the plot, not under its edge
    scale = alt.Scale(padding=12)
    layers = [
        alt.Chart(band).mark_rect(color="#dddddd", opacity=0.6).encode(x=alt.X("low:Q", scale=scale), x2="high:Q"),
        alt.Chart(pd.DataFrame({"x": [full]})).mark_rule(color="black").encode(x=alt.X("x:Q", scale=scale)),
    ]
    h = headline(headline_row) if headline_row is not None else {}
    if h and pd.notna(h.get("share_difference_ci_low")):
        ci = pd.DataFrame({"x": [100 * float(h[f"share_difference_ci_{side}"]) for side in ("low", "high")]})
        layers.append(alt.Chart(ci).mark_rule(strokeDash=[4, 3], color="grey").encode(x=alt.X("x:Q", scale=scale)))
    layers.append(alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=alt.X("points_without:Q", title="difference in male share without the occupation (percentage points)",
                scale=scale),
        y=y, color=alt.Color("group:N", title="group", scale=plots.group_scale(data["group"])),
        tooltip=["occupation", "group", "category", "n_completions", "male_words", "female_words",
                 alt.Tooltip("points_without:Q", format=".1f"), "change"]))
    groups = ", ".join(dict.fromkeys(data["group"]))
    points = percentage_points(full / 100)
    caption = (f"Each row is one of the {len(data)} occupations whose removal moves the primary difference in male "
               f"share most; its dot is the difference recomputed without it (percentage points), coloured by its "
               f"group ({groups}). The solid line is the difference with every occupation ({points} points), the "
               f"grey band where leaving one out moves it by less than {_shift_phrase()} of itself"
               + (", the dashed lines its 95% confidence interval (occupations resampled)" if len(layers) == 4 else "")
               + ". Occupations without a gendered word do not move it. Look for dots outside the grey band: those "
                 "occupations alone carry much of the difference.")
    return plots.captioned(alt.layer(*layers).properties(width=420, height=alt.Step(18)),
                           title or f"Leave one occupation out: the difference in male share ({points} points) "
                                    "without each occupation",
                           [], f"Dot plot: the difference in male share without each of {len(data)} occupations, "
                               f"against the difference with all ({points} percentage points).", caption)
