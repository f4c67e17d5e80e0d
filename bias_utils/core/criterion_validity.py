"""A measure checked against the world: one engine for every side of the book.

A measure of a model's occupational gender (the position of an occupation noun on the model's female − male
direction, chapter 04; the next-word log-ratio of female to male words after a neutral sentence about it,
chapter 11) is read only once it tracks an external criterion: the U.S. Bureau of Labor Statistics share of women
among the occupation's workers (Rudinger et al. 2018's 60 occupations). :func:`validity_statistics` runs the same
check for every measure, so the two sides of chapter 11 are held to one rule:

* **Criterion rows.** Per measure, Spearman's ρ and Pearson's r against the criterion (``stats.correlation_rows``:
  scipy's p, a 95% percentile interval from resampling occupations), Holm over the measures within a test, and
  ``detectable``: the correlation the check finds 80% of the time at its n (:func:`_detectable_correlation`).
* **The discriminant row** (psychometrics' *discriminant validity*). A measure can follow the share of women for a
  reason other than gender: the direction built from 18 words may carry warmth, and warmth itself tracks the share
  of women (SmolLM2: ρ 0.55 against the direction's 0.40, the two correlating 0.58). So the measure the verdict is
  about gets the partial Spearman ρ and Pearson r with the criterion **beyond** the named controls (default:
  the occupation nouns' ``warmth`` and ``competence``; ``stats.partial_correlation_rows``: the correlation of the
  residuals on the ranked controls, t-test p with n − 2 − k df, occupation-bootstrap interval), with its own
  verdict by the same rule.

**The verdicts, stated before the results** (:func:`_verdict`), of the first measure named:

* ``supported``: the 95% interval of Spearman's ρ (of the partial ρ, for the discriminant row) lies above 0;
* ``untestable``: fewer than :data:`MIN_ITEMS` occupations carry the measure (for the discriminant row: or no
  control has values, as for a dictionary without warmth and competence);
* ``not shown``: otherwise. Not shown is not absent: ``detectable`` says which ρ the check would have found;
* ``low coverage``: set by a measure that knows how much of what it reads its words cover (the next word,
  ``audit.next_word.next_word_validity``) where they cover too little: the check ran and is not read.

The criterion verdict gates what the book reads (chapter 11 reads the direction only where it is ``supported``);
the discriminant verdict qualifies it: where it is not ``supported`` the text says that the measure's order is
not shown to be gender's rather than warmth's or competence's (:func:`describe_discriminant`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from .precision import interval_text, number_text, p_text
from .results import first_row
from .stats import correlation_rows, partial_correlation_rows, results_table

__all__: list[str] = []

VALIDITY_VERDICTS = ("supported", "not shown", "untestable", "low coverage")
#: The verdict of a check whose measure covers too little of what it reads (module docstring).
LOW_COVERAGE = VALIDITY_VERDICTS[3]
#: Fewer occupations with the measure than this leave it ``untestable``.
MIN_ITEMS = 10
#: The power ``detectable`` is stated at.
POWER = 0.8
#: The criterion: the U.S. BLS share of women among an occupation's workers (percent).
_CRITERION = "bls_pct_female"
#: The controls of the discriminant row.
_BEYOND = ("warmth", "competence")
#: The two tests of the criterion rows and of the discriminant rows; the verdict reads the Spearman one.
_CRITERION_TESTS = ("pearson", "spearman")
_DISCRIMINANT_TESTS = ("partial_pearson", "partial_spearman")


def _detectable_correlation(n: int, method: str = "spearman", power: float = POWER, alpha: float = 0.05,
                            k: int = 0) -> float:
    """The correlation a two-sided level-``alpha`` test over ``n`` pairs (``k`` controls partialled out) finds with
    probability ``power``: Fisher's z with variance 1/(n − 3 − k) for Pearson's r, and Fieller, Hartley &
    Pearson's 1.06/(n − 3 − k) for Spearman's ρ; NaN below k + 4 pairs."""
    if method not in ("pearson", "spearman"):
        raise ValueError(f"detectable_correlation: method must be 'pearson' or 'spearman', got {method!r}")
    if n < k + 4:
        return float("nan")
    variance = (1.06 if method == "spearman" else 1.0) / (n - 3 - k)
    z = (sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)) * np.sqrt(variance)
    return float(np.tanh(z))


def _verdict(ci_low: float, n: int, min_items: int = MIN_ITEMS) -> str:
    """The pre-stated rule (module docstring): ``untestable`` below ``min_items`` occupations (or without an
    interval), ``supported`` when the Spearman interval's lower end is above 0, else ``not shown``."""
    if n < min_items or not np.isfinite(ci_low):
        return "untestable"
    return "supported" if ci_low > 0 else "not shown"


def validity_statistics(values: pd.DataFrame, measures: Sequence[str], *, criterion: str = _CRITERION,
                        beyond: Sequence[str] = _BEYOND, n_boot: int = 1000, seed: int = 0,
                        min_items: int = MIN_ITEMS) -> pd.DataFrame:
    """The check of ``measures`` (columns of ``values``, one row per occupation; the verdict is about the first)
    against ``criterion``, and the first measure's discriminant rows beyond the ``beyond`` columns (module
    docstring). Occupations without a value (NaN) are left out of a row; a measure other than the first that no
    occupation has gives no rows; a control no occupation has is left out of the discriminant rows, and with none
    left they are NaN and ``untestable``.

    Columns: ``stats.STAT_COLUMNS`` (``test``: ``pearson``, ``spearman``, ``partial_pearson``, ``partial_spearman``;
    ``group_a``: the measure, ``group_b``: the criterion; ``effect_size``: r, ρ or the partial coefficient;
    ``ci_low, ci_high``: 95% percentile interval resampling occupations ``n_boot`` times; ``p``: scipy's (the
    partial rows: Student's t with ``df`` = n − 2 − k); ``p_adj``: Holm over the measures within a test; ``n``:
    occupations), then ``measure``, ``controls`` (the controls partialled out, comma-separated; "" on the criterion
    rows), ``detectable`` (:func:`_detectable_correlation` at this ``n`` and number of controls) and ``verdict``
    (:func:`_verdict`: on both criterion rows of the first measure from its Spearman row, on both discriminant rows
    from the partial Spearman row; "" on the other measures' rows)."""
    measures = list(measures)
    if not measures or any(m not in values for m in measures) or criterion not in values:
        raise ValueError(f"validity_statistics: values need the criterion {criterion!r} and the measures {measures}, "
                         f"found columns {list(values.columns)}")
    first = measures[0]
    frames = []
    for test in _CRITERION_TESTS:
        rows = []
        for measure in [m for m in measures if m == first or values[m].notna().any()]:
            t = values.dropna(subset=[measure, criterion])
            rows += [{**r, "measure": measure, "group_a": measure, "group_b": criterion, "controls": ""}
                     for r in correlation_rows(t[measure], t[criterion], n_boot=n_boot, seed=seed)
                     if r["test"] == test]
        frames.append(results_table(rows))
    controls = [c for c in beyond if c in values and values[c].notna().any()]
    t = values.dropna(subset=[first, criterion, *controls])
    if controls:
        found = partial_correlation_rows(t[first], t[criterion], t[controls].to_numpy(float), n_boot=n_boot,
                                         seed=seed)
    else:
        found = [{"test": test, "effect": "partial rho" if "spearman" in test else "partial r", "n": len(t)}
                 for test in _DISCRIMINANT_TESTS]
    frames += [results_table([{**r, "measure": first, "group_a": first, "group_b": criterion,
                               "controls": ", ".join(controls)}]) for r in found]
    out = pd.concat(frames, ignore_index=True)
    out["effect_size"] = out["effect_size"].astype(float)
    k = out["controls"].map(lambda c: len(c.split(", ")) if c else 0)
    out["detectable"] = [_detectable_correlation(int(n), test.removeprefix("partial_"), k=int(kk))
                         for n, test, kk in zip(out["n"], out["test"], k)]
    out["verdict"] = ""
    for tests, read in ((_CRITERION_TESTS, "spearman"), (_DISCRIMINANT_TESTS, "partial_spearman")):
        row = statistic_row(out, first, read)
        verdict = _verdict(row["ci_low"], int(row["n"]), min_items)
        out.loc[(out["measure"] == first) & out["test"].isin(tests), "verdict"] = verdict
    return out


def statistic_row(statistics: pd.DataFrame, measure: str, test: str) -> pd.Series | None:
    """The row of ``measure`` and ``test`` in a :func:`validity_statistics` table, or None."""
    return first_row(statistics, measure=measure, test=test)


def _one_verdict(statistics: pd.DataFrame, measure: str, tests: Sequence[str], what: str) -> str:
    found = set(statistics.loc[(statistics["measure"] == measure) & statistics["test"].isin(tests), "verdict"])
    if len(found) != 1 or not found <= set(VALIDITY_VERDICTS):
        raise ValueError(f"{what}: expected one verdict of {VALIDITY_VERDICTS} for {measure}, found {sorted(found)}")
    return found.pop()


def measure_verdict(statistics: pd.DataFrame, measure: str) -> str:
    """The criterion verdict of ``measure`` in a :func:`validity_statistics` table (one of
    :data:`VALIDITY_VERDICTS`)."""
    return _one_verdict(statistics, measure, _CRITERION_TESTS, "measure_verdict")


def _discriminant_verdict(statistics: pd.DataFrame, measure: str) -> str:
    """The verdict of ``measure`` beyond the controls (the discriminant rows); ``untestable`` for a table written
    before the discriminant rows existed."""
    if not statistics["test"].isin(_DISCRIMINANT_TESTS).any():
        return "untestable"
    return _one_verdict(statistics, measure, _DISCRIMINANT_TESTS, "discriminant_verdict")


_TEST_NAMES = {"spearman": "Spearman ρ", "pearson": "Pearson r", "partial_spearman": "partial Spearman ρ",
               "partial_pearson": "partial Pearson r"}


def correlation_text(row) -> str:
    """One row of :func:`validity_statistics` (or any correlation row) in words: the coefficient, its 95% interval
    and p."""
    name = _TEST_NAMES[row["test"]]
    if not np.isfinite(row["effect_size"]):
        return f"{name} not computable"
    return (f"{name} = {number_text(row['effect_size'])}, 95% CI "
            f"{interval_text(row['ci_low'], row['ci_high'], row['effect_size'])}, "
            f"p {p_text(row['p'], relation=True)}")


def describe_discriminant(statistics: pd.DataFrame, measure: str, what: str = "the measure") -> str:
    """A sentence reading the discriminant rows of ``measure`` (``what`` names it): beyond which controls, the
    partial Spearman ρ with its interval and p, the verdict in words and, where it is not ``supported``, what that
    means for the criterion verdict; "" for a table without the rows."""
    row = statistic_row(statistics, measure, "partial_spearman")
    if row is None:
        return ""
    verdict = _discriminant_verdict(statistics, measure)
    if verdict == "untestable" and not row["controls"]:
        return (f"Whether {what} carries the share of women beyond warmth and competence is untestable here: "
                "the nouns have no warmth and competence values.")
    controls = " and ".join(row["controls"].split(", "))
    numbers = f"{correlation_text(row)}, n = {int(row['n'])}"
    if verdict == "supported":
        return (f"Beyond the nouns' {controls}, {what} still follows the share of women ({numbers}): it carries "
                "gender, not only what those axes carry (discriminant verdict: supported).")
    if verdict == "untestable":
        return f"Beyond the nouns' {controls}, the check is untestable ({numbers}; fewer than {MIN_ITEMS} nouns)."
    if verdict == LOW_COVERAGE:
        return (f"Beyond the nouns' {controls}, the check ran ({numbers}) and is not read, as the criterion is not "
                "(discriminant verdict: low coverage).")
    return (f"Beyond the nouns' {controls}, that {what} follows the share of women is **not shown** ({numbers}; "
            f"the check finds a partial ρ of {number_text(row['detectable'])} {int(POWER * 100)}% of the time): "
            f"its order may be carried by {controls} rather than by gender (discriminant verdict: not shown).")
