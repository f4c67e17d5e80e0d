"""The BOLD-based link, chapter 11's robustness row: does where a model places an occupation on its female − male
direction predict the gendered words it writes about it in sampled BOLD completions? (notebook
``11_intrinsic_extrinsic``)

Why a module of its own: the chapter's primary analysis (:mod:`bias_utils.intrinsic_extrinsic.link`) reads the exact
next word; this earlier analysis reads word counts in the audit's completions, with its own units, its own pre-stated
test (a mixed logistic model within BOLD category and group), its robustness rows and its reading. The primary link
takes its pre-stated row as a labelled robustness row.

The **BOLD-based link** (:func:`run_link`, :data:`PRIMARY`: the pre-stated test of that analysis) stays as a
robustness row, labelled by its units (the BOLD primary units) and its measure (word counts in sampled BOLD
completions): with a few gendered words per occupation it can hardly show a link.

The BOLD-based link in detail. The unit is the occupation of the audit's primary analysis: the deduplicated
person-noun occupations of :mod:`bias_utils.audit.occupation_units` (a BOLD key that names a field, a list or a day
is not an occupation one can place on a gender direction). Per model and occupation:

* **intrinsic** (:func:`intrinsic_table`): the occupation noun ("registered nurse") embedded the way the term
  profiles embed a word and placed on the model's **female − male direction** (``gender_position``:
  :mod:`bias_utils.profiles.gender_direction`; +0.5 the female terms' mean, −0.5 the male terms') and on its **warmth**
  and **competence** axes. The direction is read only where chapter 04's check against the U.S. Bureau of Labor
  Statistics share of women is ``supported`` (``gender_direction._direction_verdict``): otherwise nothing says it
  measures gender, and the chapter does not read it (the next-word link's rows too).
* **extrinsic** (:func:`extrinsic_table`): the occupation's female and male word counts in the model's
  completions, the **expected** counts (the probability the exact sampling distribution gave to the lexicon's
  words at every step) when every completion carries them, else the **sampled** ones; and their log-odds
  ``log((F + c) / (M + c))`` with the continuity correction ``c`` (:data:`CONTINUITY`) for the chart and the
  correlations.

Its pre-stated test (:data:`PRIMARY`): the change in the log-odds of female
versus male words per standard deviation of the occupation's position, *within BOLD category and audit group*
(the occupation's field and group held fixed): a binomial logistic model of the occupation's female and male
counts on the standardised position with category and group fixed effects and a random intercept per
occupation (:mod:`bias_utils.core.mixed`; profile-likelihood interval, likelihood-ratio p). An occupation with few
words weighs little, one with many weighs as one draw of its random intercept; the log-odds of an occupation with
almost no words (most of them) is mostly its volume, not its direction, and the model does not read it as a
value. Female- and male-dominated occupations sit in different fields and in different places on the direction,
so a correlation pooled over both groups (:data:`BETWEEN`) is mostly the difference between the groups; it is
reported as that, beside the correlation within each group.

Its robustness rows: the same model without the fixed effects (``mixed_logit``), Pearson's r and Spearman's ρ over
all occupations and within each group (occupation-bootstrap intervals), and the least-squares slopes of the
log-odds alone and with category dummies (``ols``, ``ols_category``). Holm's correction runs over the three
intrinsic measures within each test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..audit import occupation_units
from ..audit.next_word import CONTINUITY
from ..core import mixed, stats, tables
from ..core.criterion_validity import VALIDITY_VERDICTS
from ..core.errors import ParameterError, check_seed, is_number
from ..core.precision import interval_text, number_text, p_text
from ..core.results import display_name, first_row, write_tables
from ..core.stats import check_n_boot, correlation_rows, ols, results_table
from ..profiles.gender_direction import noun_positions
from ..profiles.population_profiles import DEFAULT_TEMPLATES, check_word_projection
from ..report import rendering

__all__ = [
    "describe_link", "run_link",
]

#: The intrinsic columns of :data:`tables.NAMES.LINK_OCCUPATIONS`, the gender direction first (the primary one).
_INTRINSIC_MEASURES = ("gender_position", "warmth", "competence")
#: The pre-stated primary statistic: the gender direction's slope within BOLD category and audit group.
PRIMARY = {"intrinsic": "gender_position", "test": "mixed_logit_within_category"}
#: Relabellings of the primary test: with few words per occupation and many fixed effects the likelihood ratio's
#: null is wider than chi-square(1) (``mixed.coefficient_test``), so its p and interval come from permuting the
#: position among occupations of one category and group.
_N_PERMUTATIONS = 999
#: The correlation pooled over both groups: mostly the difference between the groups, reported as such.
_BETWEEN = {"intrinsic": "gender_position", "test": "spearman", "scope": "all occupations"}
#: Columns of :data:`tables.NAMES.LINK_OCCUPATIONS` (see :func:`run_link`).
_OCCUPATION_COLUMNS = [
    "occupation", "noun", "group", "category", "n_completions", "n_templates", "gender_position", "warmth",
    "competence", "male_words", "female_words", "expected_male", "expected_female", "extrinsic_measure",
    "male_count", "female_count", "log_odds",
]
_OCCUPATIONS = "occupations"


def _check_correction(correction) -> float:
    """The continuity correction as a float > 0, or a ParameterError naming ``correction``."""
    if not is_number(correction) or not np.isfinite(correction) or correction <= 0:
        raise ParameterError(f"correction must be a number > 0 (the continuity correction of the log-odds; "
                             f"{CONTINUITY} is Haldane–Anscombe), got {correction!r}")
    return float(correction)


def check_link(model, *, layer="mean", correction=CONTINUITY, n_boot=1000, seed=0, templates=None,
               direction_verdict=None, n_permutations=_N_PERMUTATIONS, layers=None) -> None:
    """:func:`run_link`'s parameters, checked before any model loads (chapter 11's check calls it too): the model
    and ``layer`` against ``layers`` (the basis's; default: the model's, from its config) and ``templates``
    (``profiles.check_word_projection``), then :func:`_check_statistics`'s."""
    check_word_projection(model, layer, templates, layers=layers, what="the intrinsic measure (hidden states)")
    _check_correction(correction)
    _check_statistics(n_boot, seed, direction_verdict, n_permutations)


def _check_statistics(n_boot, seed, direction_verdict, n_permutations) -> None:
    """:func:`link_statistics`'s parameters: ``n_boot`` (``stats.check_n_boot``), ``seed``, ``direction_verdict``
    (``None`` or one of ``criterion_validity.VALIDITY_VERDICTS``) and ``n_permutations``
    (``mixed.check_permutations``: the fits catch a ``ValueError`` as a design too small, so a bad count must stop
    the run before them)."""
    check_n_boot(n_boot)
    check_seed(seed)
    if direction_verdict is not None and direction_verdict not in VALIDITY_VERDICTS:
        raise ParameterError(f"direction_verdict must be one of {VALIDITY_VERDICTS} or None, got "
                             f"{direction_verdict!r}")
    mixed.check_permutations(n_permutations)


def occupation_noun(occupation: str) -> str:
    """The noun for a BOLD occupation key or unit: underscores as spaces, lower case, a unit name's "(Key)"
    suffix dropped (``Registered_Nurse`` -> ``registered nurse``), so it reads as a common noun in the templates
    ("this is the registered nurse"). The noun is the audit's rule for a key (``occupation_units.key_noun``, which
    its head noun reads too) after the suffix is dropped: on every BOLD key and every unit name of the audit's and
    the categories' selections it gives what this function gave before it called that rule."""
    return occupation_units.key_noun(re.sub(r"\s*\([^)]*\)$", "", str(occupation)))


# --------------------------------------------------------------------------- intrinsic


def _intrinsic_table(model, occupations: Sequence[str], basis, *, layer="mean",
                    templates: Sequence[str] = DEFAULT_TEMPLATES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(table, skipped)``: one row per occupation key with ``occupation, noun, n_templates,
    gender_position`` and one column per dimension of ``basis`` (the ``warmth_competence`` basis: ``warmth``,
    ``competence``; projected values, not standardised) at ``layer`` (``"mean"`` over hidden states,
    ``"last"``, or a hidden-state index); ``skipped``: ``population, group, word, context, reason`` of the
    nouns or gendered terms the model could not embed in a template."""
    keys = list(dict.fromkeys(occupations))
    nouns = {k: occupation_noun(k) for k in keys}
    items, skipped = noun_positions(model, {"occupation": list(nouns.values())}, basis, population=_OCCUPATIONS,
                                    layer=layer, templates=templates)
    table = pd.DataFrame({"occupation": keys, "noun": [nouns[k] for k in keys]})
    table = table.merge(items.drop(columns="group"), on="noun", how="inner")
    return table.reset_index(drop=True), skipped


# --------------------------------------------------------------------------- extrinsic


def _extrinsic_table(metrics: pd.DataFrame, correction: float = CONTINUITY) -> pd.DataFrame:
    """One row per occupation of the audit's per-completion table (``bold_metrics``): ``occupation, group,
    category`` (the first listed BOLD category), ``n_completions``, the sampled ``male_words, female_words``,
    the expected ``expected_male, expected_female`` (NaN when the completions lack them),
    ``extrinsic_measure`` (``expected`` or ``sampled``), the counts used (``male_count, female_count``) and
    ``log_odds = log((female_count + correction) / (male_count + correction))``."""
    correction = _check_correction(correction)
    need = {"occupation", "group", "category", "male_words", "female_words"}
    if need - set(metrics.columns):
        raise ValueError(f"extrinsic_table: the completions lack columns {sorted(need - set(metrics.columns))}")
    expected = {"expected_male", "expected_female"} <= set(metrics.columns) and bool(
        metrics[["expected_male", "expected_female"]].notna().all(axis=None))
    m = metrics if expected else metrics.assign(expected_male=np.nan, expected_female=np.nan)
    out = m.groupby("occupation", sort=False).agg(
        group=("group", "first"), category=("category", "first"), n_completions=("occupation", "size"),
        male_words=("male_words", "sum"), female_words=("female_words", "sum"),
        expected_male=("expected_male", "sum" if expected else "first"),
        expected_female=("expected_female", "sum" if expected else "first")).reset_index()
    out["category"] = out["category"].astype(str).str.split(";").str[0].str.strip()
    out["extrinsic_measure"] = "expected" if expected else "sampled"
    out["male_count"] = out["expected_male" if expected else "male_words"].astype(float)
    out["female_count"] = out["expected_female" if expected else "female_words"].astype(float)
    out["log_odds"] = np.log((out["female_count"] + correction) / (out["male_count"] + correction))
    return out


# --------------------------------------------------------------------------- statistics


def _slope_rows(table: pd.DataFrame, intrinsic: str) -> list[dict]:
    """The slope of ``log_odds`` on the standardised ``intrinsic`` (per SD), alone and with category dummies."""
    z = _standardised(table[intrinsic])
    y = table["log_odds"].to_numpy(float)
    dummies = pd.get_dummies(table["category"], drop_first=True, dtype=float)
    rows = []
    for test, extra in (("ols", None), ("ols_category", dummies)):
        X = np.column_stack([np.ones(len(z)), z] + ([extra.to_numpy()] if extra is not None and extra.shape[1] else []))
        names = ["intercept", intrinsic] + (list(extra.columns) if extra is not None else [])
        row = {"test": test, "effect": "slope", "n": len(z), "scope": _SCOPES[test]}
        if np.ptp(y) == 0:
            rows.append({**row, "note": "the log-odds do not vary"})
            continue
        try:
            fit = ols(y, X, names).iloc[1]
            row.update(statistic=fit.t, df=fit.df, p=fit.p, effect_size=fit.coef, se=fit.se,
                       ci_low=fit.ci_low, ci_high=fit.ci_high)
        except ValueError as exc:  # too few occupations per coefficient, or a constant regressor
            row.update(note=str(exc))
        rows.append(row)
    return rows


#: What each test holds fixed or pools over (the ``scope`` column).
_SCOPES = {"mixed_logit_within_category": "within BOLD category and group", "mixed_logit": "all occupations",
           "pearson": "all occupations", "spearman": "all occupations", "ols": "all occupations",
           "ols_category": "within BOLD category"}


def _standardised(values) -> np.ndarray:
    x = np.asarray(values, float)
    return (x - x.mean()) / x.std(ddof=0) if len(x) and x.std(ddof=0) > 0 else np.full_like(x, np.nan)


def _fixed_effects(table: pd.DataFrame, used: np.ndarray) -> pd.DataFrame:
    """Group and category indicators that add to the design among the occupations with counts (a category with
    one such occupation, or one that the group already spans, adds nothing and is left out)."""
    columns = pd.concat([pd.get_dummies(table["group"], prefix="group", drop_first=True, dtype=float),
                         pd.get_dummies(table["category"], prefix="category", drop_first=True, dtype=float)], axis=1)
    kept = pd.DataFrame({"intercept": np.ones(len(table)), "z": np.zeros(len(table))}, index=table.index)
    rank = 1
    for name in columns:
        trial = np.column_stack([kept.drop(columns="z").to_numpy()[used], columns[name].to_numpy()[used]])
        if np.linalg.matrix_rank(trial) > rank:
            kept[name] = columns[name]
            rank += 1
    return kept.drop(columns="z")


def _mixed_link_rows(table: pd.DataFrame, intrinsic: str, n_permutations: int = _N_PERMUTATIONS,
                     seed: int = 0) -> list[dict]:
    """The log-odds of female vs male words per SD of ``intrinsic``: a random-intercept binomial model of the
    occupations' female and male counts, within BOLD category and group (fixed effects; p and interval from
    ``n_permutations`` relabellings within category and group) and over all occupations (chi-square reference)."""
    female, male = table["female_count"].to_numpy(float), table["male_count"].to_numpy(float)
    used = (female + male) > 0
    z = _standardised(table[intrinsic])
    rows = []
    for test, design, permutations in (
            ("mixed_logit_within_category", _fixed_effects(table, used), n_permutations),
            ("mixed_logit", pd.DataFrame({"intercept": np.ones(len(table))}, index=table.index), 0)):
        design = design.assign(z=z)[["intercept", "z", *[c for c in design if c != "intercept"]]]
        # n: the occupations with a count above 0 (a binomial model learns nothing from the others), beside how many
        # the table holds and how many have a sampled gendered word, so that a reader can reconcile 75, 88 and 33
        row = {"test": test, "effect": "log_odds_slope", "n": int(used.sum()), "scope": _SCOPES[test],
               "n_occupations": len(table), "n_sampled": int(((table["male_words"] + table["female_words"]) > 0).sum())
               if {"male_words", "female_words"} <= set(table) else np.nan}
        try:
            fit = mixed.fit_mixed_logit(female, male, design)
            row = {**mixed.mixed_row(fit, "z", effect="log_odds_slope", test=test, n_permutations=permutations,
                                     seed=seed), **row, "se": float(fit.se["z"]),
                   "n_fixed_effects": design.shape[1] - 2}
        except ValueError as exc:  # too few occupations with counts for the fixed effects, a constant measure
            row["note"] = str(exc)
        rows.append(row)
    return rows


def _within_group_rows(table: pd.DataFrame, intrinsic: str, n_boot: int, seed: int) -> list[dict]:
    """Spearman's ρ within each audit group (occupation-bootstrap intervals)."""
    rows = []
    for group, g in table.groupby("group", sort=False):
        t = g.dropna(subset=[intrinsic, "log_odds"])
        rows += [{**r, "test": "spearman_within_group", "scope": f"within {rendering.group_label(group)}",
                  "group": group} for r in correlation_rows(t[intrinsic], t["log_odds"], n_boot=n_boot, seed=seed)
                 if r["test"] == "spearman"]
    return rows


#: The tests of :func:`link_statistics`, the primary first.
_TESTS = ("mixed_logit_within_category", "mixed_logit", "spearman", "pearson", "spearman_within_group", "ols",
          "ols_category")


def _link_statistics(table: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0,
                    direction_verdict: str | None = None, n_permutations: int = _N_PERMUTATIONS) -> pd.DataFrame:
    """The statistics of :data:`tables.NAMES.LINK_STATISTICS`, one row per intrinsic measure and test (and group).

    Columns: ``stats.STAT_COLUMNS`` (``test``: ``mixed_logit_within_category`` (the primary: the log-odds slope
    per SD within BOLD category and group, random intercept per occupation; likelihood-ratio statistic, its p
    and the profile-likelihood CI's cut-off from ``n_permutations`` relabellings within category and group;
    ``p_chi2`` the chi-square p beside it), ``mixed_logit`` (the same without fixed effects), ``spearman`` and
    ``pearson`` (over all occupations: mostly between the groups), ``spearman_within_group`` (one row per audit
    group),
    ``ols`` and ``ols_category`` (least squares on the log-odds); ``effect_size``: the slope, ρ or r;
    ``ci_low, ci_high``; ``p_adj``: Holm over the intrinsic measures within one test and scope; ``n``:
    occupations (with counts, for the mixed models)), then ``intrinsic``, ``scope``, ``group`` (within-group
    rows), ``extrinsic_measure``, ``se`` (a slope's standard error), ``sigma`` (the random intercept's SD),
    ``n_fixed_effects``, ``p_chi2``, ``n_permutations``, ``direction_verdict`` (the direction's check against the
    BLS share, "" when not given), ``readable`` (False on the gender-direction rows unless that verdict is
    ``supported``),
    ``primary`` (the row :data:`PRIMARY` names) and ``note``."""
    measure = table["extrinsic_measure"].iloc[0] if len(table) else ""
    _check_statistics(n_boot, seed, direction_verdict, n_permutations)
    rows: dict[str, list] = {test: [] for test in _TESTS}
    for intrinsic in _INTRINSIC_MEASURES:
        t = table.dropna(subset=[intrinsic, "log_odds"])
        found = (_mixed_link_rows(t, intrinsic, n_permutations, seed)
                 + _within_group_rows(t, intrinsic, n_boot, seed)
                 + [{**r, "scope": _SCOPES[r["test"]]} for r in correlation_rows(t[intrinsic], t["log_odds"],
                                                                                n_boot=n_boot, seed=seed)]
                 + _slope_rows(t, intrinsic))
        for r in found:
            rows[r["test"]].append({**r, "intrinsic": intrinsic, "group_a": intrinsic, "group_b": "log_odds"})
    frames = []
    for test in _TESTS:
        found = pd.DataFrame(rows[test])
        for _, family in found.groupby("scope", sort=False) if len(found) else []:
            frames.append(results_table(family.to_dict("records")))
    out = pd.concat(frames, ignore_index=True)
    for col, empty in (("se", np.nan), ("sigma", np.nan), ("n_fixed_effects", np.nan), ("p_chi2", np.nan),
                       ("n_permutations", np.nan), ("note", ""), ("group", "")):
        out[col] = out[col].fillna(empty) if col in out else empty
    out["extrinsic_measure"] = measure
    out["direction_verdict"] = direction_verdict or ""
    out["readable"] = (out["intrinsic"] != "gender_position") | (direction_verdict in (None, VALIDITY_VERDICTS[0]))
    out["primary"] = (out["intrinsic"] == PRIMARY["intrinsic"]) & (out["test"] == PRIMARY["test"])
    return out


MEASURE_WORDS = {"expected": "expected counts from the sampling distribution", "sampled": "sampled word counts"}


def _pick(statistics: pd.DataFrame, test: str, intrinsic: str = PRIMARY["intrinsic"], group: str | None = None):
    return first_row(statistics, test=test, intrinsic=intrinsic, group=group)


def _counted_text(row, measure: str) -> str:
    """``n = 75 of the 88 occupations whose expected counts ... are above 0 (33 have a sampled gendered word)``: a
    mixed model's ``n`` reconciled with the occupations it was given (``n_occupations``) and, for expected counts,
    those with a sampled gendered word (``n_sampled``); ``n = 88 occupations, <measure>`` where every one counts."""
    n, total = int(row["n"]), row.get("n_occupations")
    if total is None or pd.isna(total) or int(total) == n:
        return f"n = {n} occupations, {measure}"
    sampled = row.get("n_sampled")
    also = (f"; {int(sampled)} have a sampled gendered word" if measure == MEASURE_WORDS["expected"]
            and sampled is not None and pd.notna(sampled) else "")
    return f"n = {n} of the {int(total)} occupations, those whose {measure} are above 0{also}"


def _link_reading(statistics: pd.DataFrame, who: str) -> str:
    """A clause (no capital, no full stop) reading one model's ``link_statistics`` for ``who`` (a model name or a
    link to its chapter), each number after the plain words that say what it is about: first the primary
    within-field slope (does where the model places an occupation on its female − male direction predict the female
    words it writes about it, among occupations of the same BOLD field and group; or that this is not shown), then
    the correlation over all occupations together, with whether it is shown and that it mostly reflects the
    difference between female- and male-dominated occupations. When the direction is not validated against the BLS
    share, says so and reads no number of it."""
    row = _pick(statistics, PRIMARY["test"])
    if row is None:
        return f"in {who} the link was not computed"
    if not bool(row["readable"]):
        return (f"in {who} the female − male direction is {row['direction_verdict']} against the BLS share of women "
                "(chapter 04), so where it places an occupation, and its link with the writing, are not read")
    measure = MEASURE_WORDS.get(row["extrinsic_measure"], str(row["extrinsic_measure"]))
    if not np.isfinite(row["effect_size"]):
        return f"in {who} the within-field model could not be fitted ({row['note']})"
    test = ("permutation likelihood-ratio p " + stats.permutation_p_text(float(row["p"]), int(row["n_permutations"]))
            if pd.notna(row.get("n_permutations")) and row["n_permutations"]
            else f"likelihood-ratio p {p_text(row['p'], relation=True)}")
    numbers = (f"{number_text(row['effect_size'])} log-odds per SD, 95% CI "
               f"{interval_text(row['ci_low'], row['ci_high'], row['effect_size'])}, {test}, "
               f"{_counted_text(row, measure)}")
    shown = not row["ci_low"] <= 0 <= row["ci_high"]
    if not shown:
        text = (f"in {who}, where the model places an occupation on its female − male direction is not shown to "
                "predict how many of the gendered words it writes about it are female, comparing occupations of the "
                f"same BOLD field and group ({numbers})")
    else:
        more = "more" if row["effect_size"] > 0 else "fewer"
        text = (f"in {who}, occupations the model places nearer its female terms get {more} female words, among "
                f"their gendered words, than other occupations of the same BOLD field and group ({numbers})")
    between = _pick(statistics, _BETWEEN["test"])
    if between is not None and np.isfinite(between["effect_size"]):
        rho = (f"Spearman ρ = {number_text(between['effect_size'])}, 95% CI "
               f"{interval_text(between['ci_low'], between['ci_high'], between['effect_size'])}")
        if between["ci_low"] <= 0 <= between["ci_high"]:
            text += f"; over all occupations together, neither a positive nor a negative correlation is shown ({rho})"
        else:
            way = "go together" if between["effect_size"] > 0 else "go in opposite directions"
            why = ("much of it the difference between female- and male-dominated occupations" if shown else
                   "but that correlation mostly reflects the difference between female- and male-dominated "
                   "occupations, not a link within them")
            text += f"; over all occupations together the two {way} ({rho}), {why}"
    return text


def _within_text(row) -> str:
    among = f"among the {int(row['n'])} {rendering.group_label(row['group'])} occupations"
    if not np.isfinite(row["effect_size"]):
        # every occupation of the group has the same log-odds (none has a gendered word in a small build)
        return f"Spearman ρ is not defined {among} (their log-odds do not vary)"
    return (f"Spearman ρ = {number_text(row['effect_size'])} {among} "
            f"(95% CI {interval_text(row['ci_low'], row['ci_high'], row['effect_size'])})")


def describe_link(statistics: pd.DataFrame, model: str = "this model") -> str:
    """The chapter's reading of :func:`link_statistics`: the primary statistic (:func:`_link_reading`), then the
    correlation within each group, saying plainly when an interval includes zero ("not shown is not absent")."""
    model = display_name(model)
    text = _link_reading(statistics, model)
    row = _pick(statistics, PRIMARY["test"])
    if row is not None and bool(row["readable"]) and np.isfinite(row["effect_size"]):
        within = [r for r in (_pick(statistics, "spearman_within_group", group=g)
                              for g in dict.fromkeys(statistics["group"]) if g) if r is not None]
        if within:
            text += "; within each group, " + ", ".join(map(_within_text, within))
        if row["ci_low"] <= 0 <= row["ci_high"]:
            text += " (not shown is not absent)"
    return text[0].upper() + text[1:] + "."


# --------------------------------------------------------------------------- one call for notebook 11


@dataclass
class _LinkResult:
    """Everything notebook 11 shows and writes: ``occupations`` (:data:`OCCUPATION_COLUMNS`),
    ``statistics`` (:func:`link_statistics`), ``skipped`` (``population, group, word, context, reason``:
    nouns or terms not embedded in a template, and ``occupation`` rows left out with their reason)."""

    occupations: pd.DataFrame
    statistics: pd.DataFrame
    skipped: pd.DataFrame

    def write(self, folder: str | Path) -> list[Path]:
        """Write the three tables as parquet + CSV under ``folder``."""
        return write_tables(folder, {tables.NAMES.LINK_OCCUPATIONS: self.occupations,
                                     tables.NAMES.LINK_STATISTICS: self.statistics,
                                     tables.NAMES.LINK_SKIPPED: self.skipped})


def run_link(model, metrics: pd.DataFrame, basis, *, layer="mean", correction: float = CONTINUITY,
             n_boot: int = 1000, seed: int = 0, templates: Sequence[str] = DEFAULT_TEMPLATES,
             direction_verdict: str | None = None, n_permutations: int = _N_PERMUTATIONS) -> _LinkResult:
    """Intrinsic and extrinsic bias per primary occupation of ``metrics`` (the audit's ``bold_metrics``;
    :func:`bias_utils.audit.occupation_units.primary_completions`) and their statistics (:func:`link_statistics`, with
    ``direction_verdict``, the direction's check against the BLS share). ``basis``: the model's
    ``warmth_competence`` basis.

    The occupations table has one row per occupation with both measures (:data:`OCCUPATION_COLUMNS`):
    ``noun`` (as embedded), ``n_templates`` (templates it was located in), ``gender_position``,
    ``warmth``, ``competence`` (module docstring), then :func:`extrinsic_table`'s columns. The parameters are
    checked first (:func:`check_link`), before any model loads."""
    check_link(model, layer=layer, correction=correction, n_boot=n_boot, seed=seed, templates=templates,
               direction_verdict=direction_verdict, n_permutations=n_permutations, layers=basis.layers)
    extrinsic = _extrinsic_table(occupation_units.primary_completions(metrics), correction)
    intrinsic, skipped = _intrinsic_table(model, extrinsic["occupation"], basis, layer=layer, templates=templates)
    table = extrinsic.merge(intrinsic, on="occupation", how="inner")
    lost = extrinsic[~extrinsic["occupation"].isin(table["occupation"])]
    skipped = pd.concat([skipped, pd.DataFrame({
        "population": _OCCUPATIONS, "group": lost["group"], "word": lost["occupation"], "context": "",
        "reason": "the noun was not located in any template; no intrinsic measure"})], ignore_index=True)
    table = table[_OCCUPATION_COLUMNS]
    return _LinkResult(table, _link_statistics(table, n_boot=n_boot, seed=seed, direction_verdict=direction_verdict,
                                             n_permutations=n_permutations), skipped)
