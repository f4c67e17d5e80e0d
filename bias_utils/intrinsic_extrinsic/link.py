"""Does the bias inside a model predict the bias it writes? (notebook ``11_intrinsic_extrinsic``)

Two measures of each side, two sets of occupations. The link between the two sides: its primary analysis (here) and
the BOLD-based analysis it keeps as a robustness row (:mod:`bias_utils.intrinsic_extrinsic.bold_link`) share their
intrinsic measure, their readability rule and their chapter; the chart of the occupations (:func:`link_chart`) draws
either.

**The primary analysis, stated before the results** (:func:`next_word_link`, :data:`NEXT_WORD_PRIMARY`): across
Rudinger et al.'s 60 occupations with a U.S. Bureau of Labor Statistics share of women, Spearman's ρ between the
occupation noun's position on the model's female − male direction (``gender_position``, chapter 04) and the exact
**next-word log-ratio** of female to male words after neutral sentences about it (``audit.next_word``), with a 95%
interval from resampling occupations. Both sides are checked against the same share of women by one engine
(``core.criterion_validity``), so the link can be asked on the occupations where both are validated. Beside it:

* the same association **beyond the BLS share** (partial Spearman ρ with the share partialled out, t-test p and
  occupation-bootstrap interval; ``stats.partial_correlation_rows``): does the inside predict the writing beyond what
  the world's statistics predict? Two measures that each track the share correlate through it alone; only this row
  says the model's inside carries what its writing does. Its false-positive rate is 0.05 on data shaped like the 60
  occupations (``tests/test_link.py``), and lenient (0.07) where both sides follow the share almost perfectly;
* the association over the audit's primary units (the BOLD person-noun occupations, their noun on both sides);
* Pearson's r beside each ρ.

The **BOLD-based link** (:func:`bias_utils.intrinsic_extrinsic.bold_link.run_link`, ``bold_link.PRIMARY``: the
pre-stated test of that analysis) stays as a robustness row, labelled by its units (the BOLD primary units) and its
measure (word counts in sampled BOLD completions): with a few gendered words per occupation it can hardly show a link.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
from scipy import stats as sps

from ..audit import next_word, next_word_prompts
from ..core import stats, tables
from ..core.criterion_validity import VALIDITY_VERDICTS
from ..core.errors import ParameterError, check_seed
from ..core.precision import interval_text, number_text, p_text
from ..core.results import display_name, first_row, write_tables
from ..core.stats import check_n_boot, correlation_rows, results_table
from ..profiles.gender_direction import describe_placement
from ..report import plots, rendering
from .bold_link import MEASURE_WORDS, PRIMARY

__all__ = [
    "describe_next_word_link", "link_chart", "next_word_link",
]

# --------------------------------------------------------------------------- the link on the same occupations

#: The pre-stated primary analysis (module docstring): across the 60 BLS occupations, Spearman's ρ between the
#: position on the female − male direction and the exact next-word log-ratio.
NEXT_WORD_PRIMARY = {"analysis": "primary", "test": "spearman"}
_SHARE = "bls_pct_female"
#: The analyses of :data:`tables.NAMES.LINK_NEXT_WORD` in order: (role, units, what the extrinsic side is).
_NEXT_WORD_MEASURE = "next-word log-ratio (exact)"
_ANALYSES = {
    "primary": ("primary", "BLS occupations", _NEXT_WORD_MEASURE),
    "beyond the BLS share": ("beside", "BLS occupations", _NEXT_WORD_MEASURE),
    "BOLD primary units": ("beside", "BOLD primary units", _NEXT_WORD_MEASURE),
    "BOLD link": ("robustness", "BOLD primary units", "gendered word counts in sampled BOLD completions"),
}
#: Columns of :data:`tables.NAMES.LINK_NEXT_WORD_OCCUPATIONS` (:func:`next_word_link`).
_NEXT_WORD_OCCUPATION_COLUMNS = ["units", "occupation", "noun", "group", _SHARE, "gender_position", "log_ratio",
                                 "gendered_mass", next_word_prompts.DEFINITION]
_NEXT_WORD_LINK_COLUMNS = ["analysis", "role", "units", "intrinsic", "extrinsic_measure", "controls",
                           "direction_verdict", "readable", "primary", "note", next_word_prompts.DEFINITION,
                           "coverage", "low_coverage"]


def _next_word_occupations(values: pd.DataFrame, exact: pd.DataFrame, units: pd.DataFrame | None) -> pd.DataFrame:
    """One row per occupation of each set (:data:`_NEXT_WORD_OCCUPATION_COLUMNS`): the BLS occupations of
    ``values`` and the primary units of ``units`` (``bold_link.run_link``'s occupations: ``occupation, noun, group,
    gender_position``), each with the next-word measure of its noun from ``exact`` (``next_word.next_word_table``'s
    occupations, NaN where the noun lacks it)."""
    measure = exact.reindex(columns=["occupation", "log_ratio", "gendered_mass", next_word_prompts.DEFINITION]).rename(
        columns={"occupation": "noun"})
    bls = values[["occupation", "group", _SHARE, "gender_position"]].assign(noun=values["occupation"],
                                                                          units=_ANALYSES["primary"][1])
    frames = [bls]
    if units is not None:
        frames.append(units[["occupation", "noun", "group", "gender_position"]].assign(
            **{_SHARE: np.nan, "units": _ANALYSES["BOLD primary units"][1]}))
    table = pd.concat(frames, ignore_index=True).merge(measure, on="noun", how="left")
    return table[_NEXT_WORD_OCCUPATION_COLUMNS]


def counted_units(row) -> str:
    """The units of a BOLD-based link's row (``bold_link._link_statistics``): the BOLD primary units, and how many of
    them have a count above 0 where not all do ("BOLD primary units with a count above 0 (75 of 88)")."""
    total = row.get("n_occupations")
    units = _ANALYSES["BOLD link"][1]
    if total is None or pd.isna(total) or int(total) == int(row["n"]):
        return units
    return f"{units} with a count above 0 ({int(row['n'])} of {int(total)})"


def _bold_row(bold_statistics: pd.DataFrame | None) -> dict | None:
    """The BOLD-based link's pre-stated row (:data:`bold_link.PRIMARY`) of a :data:`tables.NAMES.LINK_STATISTICS`, as a
    row of the next-word link, labelled by its units and its measure."""
    if bold_statistics is None:
        return None
    hit = bold_statistics[(bold_statistics["test"] == PRIMARY["test"])
                          & (bold_statistics["intrinsic"] == PRIMARY["intrinsic"])]
    if hit.empty:
        return None
    row = hit.iloc[0]
    measure = MEASURE_WORDS.get(row.get("extrinsic_measure", ""), "word counts")
    return {**{c: row[c] for c in stats.STAT_COLUMNS}, "analysis": "BOLD link", "units": counted_units(row),
            "extrinsic_measure": f"log-odds of gendered words in sampled BOLD completions ({measure})",
            "note": row.get("note", "") or ""}


def _next_word_link_statistics(occupations: pd.DataFrame, bold_statistics: pd.DataFrame | None = None, *,
                               direction_verdict: str | None = None, n_boot: int = 1000,
                               seed: int = 0) -> pd.DataFrame:
    """The statistics of :data:`tables.NAMES.LINK_NEXT_WORD`, one row per analysis and test.

    Columns: ``stats.STAT_COLUMNS`` (``test``: ``spearman`` and ``pearson`` for ``primary`` and ``BOLD primary
    units``, ``partial_spearman`` and ``partial_pearson`` for ``beyond the BLS share`` (``df`` = n − 3; t-test p),
    the BOLD link's own test for ``BOLD link``; ``effect_size``: ρ, r, the partial coefficient or the BOLD slope;
    ``ci_low, ci_high``: 95% percentile intervals resampling occupations (the BOLD row: its own); ``p_adj``: p, each
    analysis a question of its own (the BOLD row: its own table's); ``n``: occupations with both measures), then
    ``analysis``, ``role`` (``primary``, ``beside``, ``robustness``), ``units`` (``BLS occupations``, ``BOLD primary
    units``), ``intrinsic`` (``gender_position``), ``extrinsic_measure`` (a next-word measure of other templates or
    words than the built-in ones names its definition), ``controls`` (``bls_pct_female`` on the
    partial rows), ``direction_verdict`` (the direction's check against the BLS share, "" when not given),
    ``readable`` (False unless that verdict is ``supported`` or not given), ``primary`` (the row
    :data:`NEXT_WORD_PRIMARY` names), ``note``, and on the next-word rows (the BOLD row: "", NaN, False)
    ``measure_definition`` (``next_word_prompts.measure_definition``: what chapter 09 pools by), ``coverage`` (the
    counted words' share of the next word for the median BLS occupation) and ``low_coverage`` (under
    ``next_word.MIN_COVERAGE``: the link rests on a small part of what the model writes next; ``note`` says so)."""
    check_n_boot(n_boot)
    check_seed(seed)
    if direction_verdict is not None and direction_verdict not in VALIDITY_VERDICTS:
        raise ParameterError(f"direction_verdict must be one of {VALIDITY_VERDICTS} or None, got "
                             f"{direction_verdict!r}")
    found: list[dict] = []
    bls = occupations[occupations["units"] == _ANALYSES["primary"][1]].dropna(subset=["gender_position", "log_ratio"])
    definition = next_word.definition_of(occupations.dropna(subset=["log_ratio"]))
    coverage = next_word.gendered_coverage(bls)
    found += [{**r, "analysis": "primary"} for r in correlation_rows(bls["gender_position"], bls["log_ratio"],
                                                                     n_boot=n_boot, seed=seed)[::-1]]
    t = bls.dropna(subset=[_SHARE])
    found += [{**r, "analysis": "beyond the BLS share", "controls": _SHARE}
              for r in stats.partial_correlation_rows(t["gender_position"], t["log_ratio"], t[[_SHARE]].to_numpy(),
                                                      n_boot=n_boot, seed=seed)[::-1]]
    units = occupations[occupations["units"] == _ANALYSES["BOLD primary units"][1]].dropna(
        subset=["gender_position", "log_ratio"])
    if len(units):
        found += [{**r, "analysis": "BOLD primary units"} for r in correlation_rows(
            units["gender_position"], units["log_ratio"], n_boot=n_boot, seed=seed)[::-1]]
    bold = _bold_row(bold_statistics)
    frames = [results_table([{**r, "group_a": "gender_position", "group_b": "log_ratio"}]) for r in found]
    if bold is not None:
        frames.append(pd.DataFrame([bold]))
    out = pd.concat(frames, ignore_index=True)
    out["role"] = out["analysis"].map(lambda a: _ANALYSES[a][0])
    # the BOLD link's units say how many of the primary units its count reaches (_bold_row)
    units = out["analysis"].map(lambda a: _ANALYSES[a][1])
    out["units"] = out["units"].fillna(units) if "units" in out else units
    out["intrinsic"] = "gender_position"
    if "extrinsic_measure" not in out:
        out["extrinsic_measure"] = np.nan
    out["extrinsic_measure"] = out["extrinsic_measure"].fillna(out["analysis"].map(lambda a: _ANALYSES[a][2]))
    for col in ("controls", "note"):
        out[col] = out[col].fillna("") if col in out else ""
    exact = out["analysis"] != "BOLD link"
    if definition and definition != next_word_prompts.DEFAULT_DEFINITION:
        out.loc[exact, "extrinsic_measure"] = (f"{_NEXT_WORD_MEASURE[:-1]}; its own templates or words, definition "
                                               f"{definition})")
    out[next_word_prompts.DEFINITION] = np.where(exact, definition, "")
    out["coverage"] = np.where(exact, coverage, np.nan)
    out["low_coverage"] = exact & bool(coverage < next_word.MIN_COVERAGE)
    if out["low_coverage"].any():
        out.loc[out["low_coverage"], "note"] = (f"low coverage: the counted words take "
                                                f"{next_word_prompts.percent(coverage)} "
                                                "of the next word for the median BLS occupation")
    out["direction_verdict"] = direction_verdict or ""
    out["readable"] = direction_verdict in (None, VALIDITY_VERDICTS[0])
    out["primary"] = (out["analysis"] == NEXT_WORD_PRIMARY["analysis"]) & (out["test"] == NEXT_WORD_PRIMARY["test"])
    return out[stats.STAT_COLUMNS + _NEXT_WORD_LINK_COLUMNS]


def pick_analysis(statistics: pd.DataFrame, analysis: str, test: str):
    return first_row(statistics, analysis=analysis, test=test)


def _rho_text(row) -> str:
    if row is None or not np.isfinite(row["effect_size"]):
        return "not computable"
    name = {"spearman": "Spearman ρ", "partial_spearman": "partial Spearman ρ"}.get(row["test"], row["test"])
    return (f"{name} = {number_text(row['effect_size'])}, 95% CI "
            f"{interval_text(row['ci_low'], row['ci_high'], row['effect_size'])}, "
            f"p {p_text(row['p'], relation=True)},"
            f" n = {int(row['n'])}")


def _next_word_link_reading(statistics: pd.DataFrame, who: str) -> str:
    """A clause (no capital, no full stop) reading one model's :func:`next_word_link` statistics for ``who``: the
    primary ρ across the BLS occupations and the partial ρ beyond the BLS share; when the direction is not validated
    against the BLS share, says so and reads no number of it."""
    row = pick_analysis(statistics, **NEXT_WORD_PRIMARY)
    if row is None:
        return f"in {who} the next-word link was not computed"
    if not bool(row["readable"]):
        return (f"in {who} the female − male direction is {row['direction_verdict']} against the BLS share of women "
                "(chapter 04), so its link with the next word is not read")
    shown = np.isfinite(row["ci_low"]) and (row["ci_low"] > 0 or row["ci_high"] < 0)
    if shown:
        way = "nearer its female terms" if row["effect_size"] > 0 else "nearer its male terms"
        text = (f"in {who}, across the {int(row['n'])} BLS occupations, the occupations the model places {way} are "
                f"continued more often with a female word ({_rho_text(row)})")
    else:
        text = (f"in {who}, across the {int(row['n'])} BLS occupations, a link between where the model places an "
                f"occupation on its female − male direction and how it continues a sentence about it is not shown "
                f"({_rho_text(row)})")
    beyond = pick_analysis(statistics, "beyond the BLS share", "partial_spearman")
    if beyond is not None and np.isfinite(beyond["effect_size"]):
        carried = np.isfinite(beyond["ci_low"]) and beyond["ci_low"] > 0
        text += ("; beyond the BLS share of women, " + (
            "the inside still predicts the writing" if carried else
            "that the inside predicts the writing is not shown (the two may agree only through the share both track)")
            + f" ({_rho_text(beyond)})")
    return text


def describe_next_word_link(statistics: pd.DataFrame, model: str = "this model") -> str:
    """The chapter's reading of :func:`next_word_link`: the primary and the partial (:func:`_next_word_link_reading`),
    then the association over the BOLD primary units and the BOLD-based link as a robustness row, saying plainly
    when an interval includes zero ("not shown is not absent"); a note in bold where the counted words take little
    of the next word (``low_coverage``: ``next_word.coverage_note``)."""
    model = display_name(model)
    text = _next_word_link_reading(statistics, model)
    row = pick_analysis(statistics, **NEXT_WORD_PRIMARY)
    if row is not None and bool(row["readable"]):
        units = pick_analysis(statistics, "BOLD primary units", "spearman")
        if units is not None:
            text += f". Over the audit's BOLD primary units (their noun on both sides): {_rho_text(units)}"
        bold = statistics[statistics["analysis"] == "BOLD link"]
        if len(bold) and np.isfinite(bold["effect_size"].iloc[0]):
            b = bold.iloc[0]
            text += (f". Robustness, the BOLD-based link ({b['units']}; {b['extrinsic_measure']}): "
                     f"{number_text(b['effect_size'])} log-odds per SD within BOLD category and group, 95% CI "
                     f"{interval_text(b['ci_low'], b['ci_high'], b['effect_size'])}, n = {int(b['n'])}")
        intervals = statistics.loc[statistics["readable"] & np.isfinite(statistics["ci_low"].astype(float)),
                                   ["ci_low", "ci_high"]]
        if ((intervals["ci_low"] <= 0) & (intervals["ci_high"] >= 0)).any():
            text += " (not shown is not absent)"
    text = text[0].upper() + text[1:] + "."
    if row is not None and bool(row.get("low_coverage", False)):
        text += " " + next_word.coverage_note(float(row["coverage"]), "the link")
    return text


@dataclass
class _NextWordLink:
    """What :func:`next_word_link` finds: ``occupations`` (:data:`_NEXT_WORD_OCCUPATION_COLUMNS`) and
    ``statistics`` (:func:`_next_word_link_statistics`)."""

    occupations: pd.DataFrame
    statistics: pd.DataFrame

    def write(self, folder: str | Path) -> list[Path]:
        """Write both tables as parquet + CSV under ``folder``."""
        return write_tables(folder, {tables.NAMES.LINK_NEXT_WORD_OCCUPATIONS: self.occupations,
                                     tables.NAMES.LINK_NEXT_WORD: self.statistics})


def next_word_link(values: pd.DataFrame, exact: pd.DataFrame, units: pd.DataFrame | None = None,
                   bold_statistics: pd.DataFrame | None = None, *, direction_verdict: str | None = None,
                   n_boot: int = 1000, seed: int = 0) -> _NextWordLink:
    """The link on the same occupations (module docstring): ``values`` (``gender_direction.occupation_validity``'s: the
    60 BLS occupations with ``occupation, group, bls_pct_female, gender_position``), ``exact``
    (``next_word.next_word_table``'s ``occupations``, by noun; the BLS nouns and the units' nouns), ``units``
    (:func:`bold_link.run_link`'s ``occupations``: the BOLD primary units with their ``noun`` and ``gender_position``;
    None leaves out their row) and ``bold_statistics`` (:func:`bold_link.run_link`'s ``statistics``: its pre-stated row
    becomes the labelled robustness row; None leaves it out); ``direction_verdict``: the direction's check against the
    BLS share, which decides whether the rows are read."""
    table = _next_word_occupations(values, exact, units)
    return _NextWordLink(table, _next_word_link_statistics(table, bold_statistics, direction_verdict=direction_verdict,
                                                          n_boot=n_boot, seed=seed))


# --------------------------------------------------------------------------- chart


def _fit_band(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> pd.DataFrame:
    """The least-squares line of ``y`` on ``x`` with the pointwise interval of its mean, on a grid."""
    n = len(x)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    s = np.sqrt(resid @ resid / (n - 2))
    grid = np.linspace(x.min(), x.max(), 50)
    half = sps.t.ppf((1 + level) / 2, n - 2) * s * np.sqrt(1 / n + (grid - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum())
    fit = intercept + slope * grid
    return pd.DataFrame({"x": grid, "fit": fit, "low": fit - half, "high": fit + half})


#: What the chart says of each extrinsic measure: axis title lines, caption phrase, alt-text phrase.
_Y_TEXTS = {
    "log_odds": (["log-odds of female vs male words", "in its completions"],
                 "the log-odds of female vs male words in the model's completions about it (above 0: more female "
                 "words)", "the log-odds of female words in the completions"),
    "log_ratio": (["next-word log-ratio of female", "to male words"],
                  "the log-ratio of the probability that the next word is a female rather than a male word, after "
                  "neutral sentences about it (above 0: a female word is the likelier)",
                  "the next-word log-ratio of female to male words"),
}


def link_chart(table: pd.DataFrame, intrinsic: str = "gender_position", *, y: str = "log_odds", n_labels: int = 4,
               title: str | None = None) -> alt.LayerChart:
    """The occupations as points (intrinsic measure against the extrinsic ``y``: ``log_odds`` of the BOLD
    completions, or ``log_ratio``, the next-word measure; colour: the occupation's group), for ``log_ratio`` the
    least-squares line with its 95% band (for ``log_odds`` none: its pre-stated test is within BOLD category and
    group, and a pooled line would draw the group difference); labelled: the ``n_labels`` occupations at each end of
    ``y`` and the two at the ends of the intrinsic measure."""
    if y not in _Y_TEXTS:
        raise ValueError(f"link_chart: y must be one of {sorted(_Y_TEXTS)}, got {y!r}")
    y_lines, y_caption, y_alt = _Y_TEXTS[y]
    data = table.dropna(subset=[intrinsic, y]).reset_index(drop=True)
    if len(data) < 3:
        raise ValueError(f"link_chart: {len(data)} occupations with both {intrinsic} and {y}; need 3")
    data["audit group"] = data["group"].map(rendering.group_label)
    order = data[y].rank(method="first")
    ends = set(data.index[(order <= n_labels) | (order > len(data) - n_labels)])
    labels = data.loc[sorted(ends | {data[intrinsic].idxmin(), data[intrinsic].idxmax()})].copy()
    width, height, column = 460, 320, 140
    # fixed domains (no "nice" rounding), so a pixel gap between labels is an exact gap in data units
    domains = {}
    for col in (intrinsic, y):
        lo, hi = float(data[col].min()), float(data[col].max())
        pad = 0.05 * (hi - lo or 1.0)
        domains[col] = (lo - pad, hi + pad)
    ylo, yhi = domains[y]
    gap = 14 * (yhi - ylo) / height  # 14 px for an 11 px font
    labels["label_y"] = plots.repel(labels[y], gap, ylo + gap / 2, yhi - gap / 2)
    # the names stand in a column right of the points, where no point lies, each joined to its point by a line
    # (a name beside its point covered the points near it): the x scale runs on past the data by that column
    xlo, xhi = domains[intrinsic]
    ticks = plots.linear_ticks(xlo, xhi)  # only under the points
    domains[intrinsic] = (xlo, xhi + (xhi - xlo) * column / (width - column))
    labels["label_x"] = xhi + (xhi - xlo) * 8 / (width - column)
    axis_title = {"gender_position": "position on the female − male direction (+0.5 = female terms' mean)"}
    x_title = axis_title.get(intrinsic, f"{intrinsic} (projected value)")
    x_scale, y_scale = (alt.Scale(domain=domains[c], nice=False) for c in (intrinsic, y))
    # axis titles on two lines where they can break: on a phone the plot is narrower than one line of them
    x_lines = x_title.replace(" (", "\n(").split("\n")
    x = alt.X(f"{intrinsic}:Q", title=x_lines, scale=x_scale, axis=alt.Axis(values=ticks, format=".2~f"))
    y_axis = alt.Y(f"{y}:Q", title=y_lines, scale=y_scale)
    points = alt.Chart(data).mark_point(filled=True, opacity=0.6).encode(
        x=x, y=y_axis, color=alt.Color("audit group:N", title="group", scale=plots.group_scale(data["audit group"])),
        tooltip=[c for c in ("occupation", "category") if c in data] + [
            alt.Tooltip(f"{intrinsic}:Q", format=".3f"), alt.Tooltip(f"{y}:Q", format=".2f")]
        + [c for c in ("female_count", "male_count", "bls_pct_female") if c in data])
    leaders = alt.Chart(labels).mark_rule(color="#999", strokeWidth=0.6).encode(
        x=x, y=y_axis, x2="label_x:Q", y2="label_y:Q")
    text = alt.Chart(labels).mark_text(align="left", dx=3, fontSize=11).encode(
        x=alt.X("label_x:Q", scale=x_scale), y=alt.Y("label_y:Q", scale=y_scale), text="noun:N")
    layers = [points, leaders, text]
    # the BOLD-based link's pre-stated test is within BOLD category and group: a line through all the occupations
    # would draw mostly the difference between the groups, which that test sets aside
    within = y == "log_odds"
    band_drawn = data[intrinsic].nunique() > 1 and not within
    if band_drawn:
        band = _fit_band(data[intrinsic].to_numpy(float), data[y].to_numpy(float))
        bx = alt.X("x:Q", title=x_lines, scale=x_scale)
        # the band widens past the data at the ends: clipped to the plot
        layers = [alt.Chart(band).mark_area(opacity=0.2, color="#888", clip=True).encode(
                      x=bx, y=alt.Y("low:Q", scale=y_scale), y2="high:Q"),
                  alt.Chart(band).mark_line(color="#444", clip=True).encode(x=bx, y=alt.Y("fit:Q", scale=y_scale))
                  ] + layers
    groups = ", ".join(dict.fromkeys(data["audit group"]))
    # where the points lie against the terms' means, from the data: far from +0.5 needs saying why
    placed = describe_placement(data) if intrinsic == "gender_position" else ""
    caption = (f"Each point is an occupation: across, the occupation noun's {x_title}; up, {y_caption}. "
               + (f"{placed} " if placed else "")
               + f"Colour is its group ({groups}); the labelled points are those at the ends of either "
               "axis, their names in a column on the right, each joined to its point by a thin line."
               + (" The line is the least-squares fit, the grey band its 95% confidence interval." if band_drawn
                  else "")
               + (" No line is drawn: the pre-stated test compares occupations within a BOLD category and group (the "
                  "statistics beside it), and a line through all of them would mostly show the difference between "
                  "the groups. Look for whether, within one colour, the points rise or fall from left to right."
                  if within else " Look for whether the points rise or fall from left to right: a link between the "
                  "bias inside and the bias it writes."))
    return plots.captioned(alt.layer(*layers).properties(width=width, height=height),
                           title or f"Occupations: {intrinsic} against {y.replace('_', '-')}", [],
                           f"Scatter plot of {len(data)} occupations: {intrinsic.replace('_', ' ')} (x) against "
                           f"{y_alt} (y).", caption)
