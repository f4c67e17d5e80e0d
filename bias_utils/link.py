"""Does the bias inside a model predict the bias it writes? (notebook ``11_intrinsic_extrinsic``)

The unit is the occupation of the BOLD audit (224 in the full audit). Per model and occupation:

* **intrinsic** (:func:`intrinsic_table`): the occupation noun ("registered nurse" for the BOLD key
  ``Registered_Nurse``) is embedded the way the term profiles embed a word (the seven
  ``profiles.DEFAULT_TEMPLATES`` with "the", hidden states averaged over the noun's tokens and over the
  templates; ``profiles.population_embeddings``) and placed

  - on the model's **female − male direction**: per layer, ``d`` = mean of the 9 female terms − mean of
    the 9 male terms of the profiles (``populations.load_populations("terms")``, embedded in the same
    call); ``gender_position = (x − (f̄ + m̄)/2) · d / |d|²``, so 0 is midway, +0.5 the female terms'
    mean and −0.5 the male terms'. Scale-free per layer, so the headline (``layer="mean"``, as the
    profiles) is its mean over all hidden states;
  - on the model's **warmth** and **competence** axes (``space.build_space(...).bases
    ["warmth_competence"]``, ``projection.projection_table`` at the same layer rule).

* **extrinsic** (:func:`extrinsic_table`): the occupation's log-odds of female versus male words in the
  model's completions, ``log((F + c) / (M + c))`` with the continuity correction ``c`` (default
  :data:`CONTINUITY` = 0.5, Haldane–Anscombe: defined when a count is zero, and it shrinks the log-odds of
  occupations with few words towards 0). ``F`` and ``M`` are summed over the occupation's completions:
  the **expected** counts (``expected_female`` / ``expected_male``: the probability the exact sampling
  distribution gave to the lexicon's words at every step the completion visited) when every completion
  carries them, else the **sampled** counts (``female_words`` / ``male_words``); ``extrinsic_measure`` says
  which.

* **statistics** (:func:`link_statistics`): per intrinsic measure, Pearson's r and Spearman's ρ across
  occupations with percentile intervals from resampling occupations (``stats.bootstrap_ci`` over
  occupation indices), and the least-squares slope of the log-odds on the standardised intrinsic measure,
  alone and with the BOLD category (its first listed category) as fixed effects (``stats.ols``: SE,
  t-based CI). Holm's correction runs over the three intrinsic measures within each test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd
from scipy import stats as sps

from . import plots, rendering, tables
from .errors import ParameterError, is_number
from .gender_direction import gender_position, noun_positions
from .profiles import DEFAULT_TEMPLATES
from .results import display_name, write_table
from .stats import correlation_rows, ols, results_table

__all__ = [
    "CONTINUITY", "INTRINSIC_MEASURES", "LINK_OCCUPATIONS_TABLE", "LINK_SKIPPED_TABLE", "LINK_STATISTICS_TABLE",
    "OCCUPATION_COLUMNS", "PRIMARY", "LinkResult", "check_correction", "correlation_rows", "describe_link",
    "extrinsic_table", "gender_position", "intrinsic_table", "link_chart", "link_reading", "link_statistics",
    "occupation_noun", "run_link",
]

LINK_OCCUPATIONS_TABLE = tables.LINK_OCCUPATIONS
LINK_STATISTICS_TABLE = tables.LINK_STATISTICS
LINK_SKIPPED_TABLE = tables.LINK_SKIPPED
#: Haldane–Anscombe continuity correction added to both counts of the log-odds.
CONTINUITY = 0.5
#: The intrinsic columns of :data:`LINK_OCCUPATIONS_TABLE`, the gender direction first (the primary one).
INTRINSIC_MEASURES = ("gender_position", "warmth", "competence")
#: The statistic the chapter's sentence and the front page read: Spearman's ρ on the gender direction.
PRIMARY = {"intrinsic": "gender_position", "test": "spearman"}
#: Columns of :data:`LINK_OCCUPATIONS_TABLE` (see :func:`run_link`).
OCCUPATION_COLUMNS = [
    "occupation", "noun", "group", "category", "n_completions", "n_templates", "gender_position", "warmth",
    "competence", "male_words", "female_words", "expected_male", "expected_female", "extrinsic_measure",
    "male_count", "female_count", "log_odds",
]
_OCCUPATIONS = "occupations"


def check_correction(correction) -> float:
    """The continuity correction as a float > 0, or a ParameterError naming ``correction``."""
    if not is_number(correction) or not np.isfinite(correction) or correction <= 0:
        raise ParameterError(f"correction must be a number > 0 (the continuity correction of the log-odds; "
                             f"{CONTINUITY} is Haldane–Anscombe), got {correction!r}")
    return float(correction)


def occupation_noun(occupation: str) -> str:
    """The noun for a BOLD occupation key: underscores as spaces, lower case (``Registered_Nurse`` ->
    ``registered nurse``), so it reads as a common noun in the templates ("this is the registered nurse")."""
    return str(occupation).replace("_", " ").strip().lower()


# --------------------------------------------------------------------------- intrinsic


def intrinsic_table(model, occupations: Sequence[str], basis, *, layer="mean",
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


def extrinsic_table(metrics: pd.DataFrame, correction: float = CONTINUITY) -> pd.DataFrame:
    """One row per occupation of the audit's per-completion table (``bold_metrics``): ``occupation, group,
    category`` (the first listed BOLD category), ``n_completions``, the sampled ``male_words, female_words``,
    the expected ``expected_male, expected_female`` (NaN when the completions lack them),
    ``extrinsic_measure`` (``expected`` or ``sampled``), the counts used (``male_count, female_count``) and
    ``log_odds = log((female_count + correction) / (male_count + correction))``."""
    correction = check_correction(correction)
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
    x = table[intrinsic].to_numpy(float)
    z = (x - x.mean()) / x.std(ddof=0) if x.std(ddof=0) > 0 else np.full_like(x, np.nan)
    y = table["log_odds"].to_numpy(float)
    dummies = pd.get_dummies(table["category"], drop_first=True, dtype=float)
    rows = []
    for test, extra in (("ols", None), ("ols_category", dummies)):
        X = np.column_stack([np.ones(len(z)), z] + ([extra.to_numpy()] if extra is not None and extra.shape[1] else []))
        names = ["intercept", intrinsic] + (list(extra.columns) if extra is not None else [])
        row = {"test": test, "effect": "slope", "n": len(z)}
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


def link_statistics(table: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The statistics of :data:`LINK_STATISTICS_TABLE`, one row per intrinsic measure and test.

    Columns: ``stats.STAT_COLUMNS`` (``test``: ``pearson``, ``spearman``, ``ols`` (slope of the log-odds
    per SD of the intrinsic measure), ``ols_category`` (the same with BOLD category fixed effects);
    ``effect_size``: r, ρ or the slope; ``ci_low, ci_high``: occupation-bootstrap percentile interval for
    the correlations, t-based for the slopes; ``p_adj``: Holm over the intrinsic measures within one test;
    ``n``: occupations), then ``intrinsic`` (the measure), ``extrinsic_measure`` (``expected``/``sampled``),
    ``se`` (the slope's standard error), ``primary`` (the row :data:`PRIMARY` names), ``note`` (why a
    statistic is missing)."""
    measure = table["extrinsic_measure"].iloc[0] if len(table) else ""
    frames = []
    for test in ("pearson", "spearman", "ols", "ols_category"):
        rows = []
        for intrinsic in INTRINSIC_MEASURES:
            t = table.dropna(subset=[intrinsic, "log_odds"])
            found = (correlation_rows(t[intrinsic], t["log_odds"], n_boot=n_boot, seed=seed)
                     if test in ("pearson", "spearman") else _slope_rows(t, intrinsic))
            rows += [{**r, "intrinsic": intrinsic, "group_a": intrinsic, "group_b": "log_odds"}
                     for r in found if r["test"] == test]
        frames.append(results_table(rows))
    out = pd.concat(frames, ignore_index=True)
    for col in ("se", "note"):
        if col not in out:
            out[col] = np.nan if col == "se" else ""
    out["note"] = out["note"].fillna("")
    out["extrinsic_measure"] = measure
    out["primary"] = (out["intrinsic"] == PRIMARY["intrinsic"]) & (out["test"] == PRIMARY["test"])
    return out


def _num(x: float) -> str:
    return f"{x:.2f}".replace("-", "−")


def link_reading(row, who: str) -> str:
    """A clause (no capital, no full stop) reading one ``link_statistics`` correlation row for ``who`` (a model
    name or a link to its chapter): its direction, or that its interval includes zero, with the coefficient,
    the 95% interval, the number of occupations and the extrinsic measure."""
    measure = {"expected": "expected counts from the sampling distribution",
               "sampled": "sampled word counts"}.get(row["extrinsic_measure"], str(row["extrinsic_measure"]))
    name = {"spearman": "Spearman ρ", "pearson": "Pearson r"}.get(row["test"], row["test"])
    n = int(row["n"])
    if not np.isfinite(row["effect_size"]):
        return (f"in {who} the correlation cannot be computed over its {n} occupations ({measure}): "
                "the measures do not vary")
    numbers = (f"{name} = {_num(row['effect_size'])}, 95% CI {_num(row['ci_low'])} to {_num(row['ci_high'])} "
               f"resampling occupations, n = {n} occupations, {measure}")
    if row["ci_low"] <= 0 <= row["ci_high"]:
        return (f"in {who} the interval includes zero ({numbers}): a link between where the model places an "
                "occupation on its female − male direction and the female words it writes about it is not shown")
    more = "more" if row["effect_size"] > 0 else "fewer"
    return (f"in {who}, occupations the model places nearer its female terms get relatively {more} female than "
            f"male words in its completions ({numbers})")


def describe_link(statistics: pd.DataFrame, model: str = "this model") -> str:
    """One sentence from :func:`link_statistics`'s primary row (:func:`link_reading`), saying plainly when
    the interval includes zero, then the slope within BOLD category (the occupation's field held fixed)."""
    model = display_name(model)
    row = statistics[statistics["primary"].astype(bool)]
    if row.empty:
        return f"The link between intrinsic and extrinsic bias was not computed for {model}."
    text = link_reading(row.iloc[0], model)
    tail = " (not shown is not absent)" if "includes zero" in text else ""
    within = statistics[(statistics["test"] == "ols_category") & (statistics["intrinsic"] == PRIMARY["intrinsic"])]
    if len(within) and np.isfinite(within.iloc[0]["effect_size"]):
        w = within.iloc[0]
        reading = ("a link within fields is not shown" if w["ci_low"] <= 0 <= w["ci_high"]
                   else "the link holds within fields")
        tail += (f"; within BOLD category (the occupation's field held fixed) the log-odds change by "
                 f"{_num(w['effect_size'])} per SD of the position (95% CI {_num(w['ci_low'])} to "
                 f"{_num(w['ci_high'])}): {reading}")
    return text[0].upper() + text[1:] + tail + "."


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


def link_chart(table: pd.DataFrame, intrinsic: str = "gender_position", *, n_labels: int = 4,
               title: str | None = None) -> alt.LayerChart:
    """The occupations as points (intrinsic measure against log-odds, colour: audit group), the least-squares
    line with its 95% band; labelled: the ``n_labels`` occupations at each end of the log-odds and the two
    at the ends of the intrinsic measure."""
    data = table.dropna(subset=[intrinsic, "log_odds"]).reset_index(drop=True)
    if len(data) < 3:
        raise ValueError(f"link_chart: {len(data)} occupations with both {intrinsic} and log_odds; need 3")
    data["audit group"] = data["group"].map(rendering.group_label)
    order = data["log_odds"].rank(method="first")
    ends = set(data.index[(order <= n_labels) | (order > len(data) - n_labels)])
    labels = data.loc[sorted(ends | {data[intrinsic].idxmin(), data[intrinsic].idxmax()})].copy()
    width, height = 460, 320
    # fixed domains (no "nice" rounding), so a pixel gap between labels is an exact gap in data units
    domains = {}
    for col in (intrinsic, "log_odds"):
        lo, hi = float(data[col].min()), float(data[col].max())
        pad = 0.05 * (hi - lo or 1.0)
        domains[col] = (lo - pad, hi + pad)
    ylo, yhi = domains["log_odds"]
    gap = 12 * (yhi - ylo) / height  # 12 px for a 9 px font
    labels["label_y"] = plots.repel(labels["log_odds"], gap, ylo + gap / 2, yhi - gap / 2)
    labels["right_half"] = labels[intrinsic] > sum(domains[intrinsic]) / 2
    axis_title = {"gender_position": "position on the female − male direction (+0.5 = female terms' mean)"}
    x_title = axis_title.get(intrinsic, f"{intrinsic} (projected value)")
    x_scale, y_scale = (alt.Scale(domain=domains[c], nice=False) for c in (intrinsic, "log_odds"))
    # axis titles on two lines where they can break: on a phone the plot is narrower than one line of them
    x_lines = x_title.replace(" (", "\n(").split("\n")
    x = alt.X(f"{intrinsic}:Q", title=x_lines, scale=x_scale, axis=alt.Axis(tickCount=6, format=".2~f"))
    y = alt.Y("log_odds:Q", title=["log-odds of female vs male words", "in its completions"], scale=y_scale)
    points = alt.Chart(data).mark_point(filled=True, opacity=0.6).encode(
        x=x, y=y, color=alt.Color("audit group:N", title="audit group"),
        tooltip=["occupation", "category", alt.Tooltip(f"{intrinsic}:Q", format=".3f"),
                 alt.Tooltip("log_odds:Q", format=".2f"), "female_count", "male_count"])
    # a label moved off its point (to clear another) keeps a thin line to it; labels in the right half
    # run leftwards so they stay inside the plot
    leaders = alt.Chart(labels).mark_rule(color="#999", strokeWidth=0.6).encode(
        x=x, y=y, y2="label_y:Q")
    text = [alt.Chart(labels[labels["right_half"] == right]).mark_text(
                align="right" if right else "left", dx=-5 if right else 5, fontSize=9).encode(
                x=x, y=alt.Y("label_y:Q", scale=y_scale), text="noun:N")
            for right in (False, True) if (labels["right_half"] == right).any()]
    layers = [points, leaders, *text]
    band_drawn = data[intrinsic].nunique() > 1
    if band_drawn:
        band = _fit_band(data[intrinsic].to_numpy(float), data["log_odds"].to_numpy(float))
        bx = alt.X("x:Q", title=x_lines, scale=x_scale)
        # the band widens past the data at the ends: clipped to the plot
        layers = [alt.Chart(band).mark_area(opacity=0.2, color="#888", clip=True).encode(
                      x=bx, y=alt.Y("low:Q", scale=y_scale), y2="high:Q"),
                  alt.Chart(band).mark_line(color="#444", clip=True).encode(x=bx, y=alt.Y("fit:Q", scale=y_scale))
                  ] + layers
    groups = ", ".join(dict.fromkeys(data["audit group"]))
    caption = (f"Each point is an occupation: across, the occupation noun's {x_title}; up, "
               "the log-odds of female vs male words in the model's completions about it (above 0: more female "
               f"words). Colour is its audit group ({groups}); the labelled points are those at the ends of either "
               "axis (a thin line joins a name moved to clear another to its point)."
               + (" The line is the least-squares fit, the grey band its 95% confidence interval." if band_drawn
                  else "")
               + " Look for whether the points rise or fall from left to right: a link between the bias inside "
                 "and the bias it writes.")
    return plots.captioned(alt.layer(*layers).properties(width=width, height=height),
                           title or f"Occupations: {intrinsic} against log-odds", [],
                           f"Scatter plot of {len(data)} occupations: {intrinsic.replace('_', ' ')} (x) against the "
                           "log-odds of female words in the completions (y).", caption)


# --------------------------------------------------------------------------- one call for notebook 11


@dataclass
class LinkResult:
    """Everything notebook 11 shows and writes: ``occupations`` (:data:`OCCUPATION_COLUMNS`),
    ``statistics`` (:func:`link_statistics`), ``skipped`` (``population, group, word, context, reason``:
    nouns or terms not embedded in a template, and ``occupation`` rows left out with their reason)."""

    occupations: pd.DataFrame
    statistics: pd.DataFrame
    skipped: pd.DataFrame

    def write(self, folder: str | Path) -> list[Path]:
        """Write the three tables as parquet + CSV under ``folder``."""
        folder = Path(folder)
        tables = {LINK_OCCUPATIONS_TABLE: self.occupations, LINK_STATISTICS_TABLE: self.statistics,
                  LINK_SKIPPED_TABLE: self.skipped}
        return [p for name, df in tables.items() for p in write_table(df, folder / name)]


def run_link(model, metrics: pd.DataFrame, basis, *, layer="mean", correction: float = CONTINUITY,
             n_boot: int = 1000, seed: int = 0, templates: Sequence[str] = DEFAULT_TEMPLATES) -> LinkResult:
    """Intrinsic and extrinsic bias per occupation of ``metrics`` (the audit's ``bold_metrics``) and their
    statistics. ``basis``: the model's ``warmth_competence`` basis.

    The occupations table has one row per occupation with both measures (:data:`OCCUPATION_COLUMNS`):
    ``noun`` (as embedded), ``n_templates`` (templates it was located in), ``gender_position``,
    ``warmth``, ``competence`` (module docstring), then :func:`extrinsic_table`'s columns."""
    extrinsic = extrinsic_table(metrics, correction)
    intrinsic, skipped = intrinsic_table(model, extrinsic["occupation"], basis, layer=layer, templates=templates)
    table = extrinsic.merge(intrinsic, on="occupation", how="inner")
    lost = extrinsic[~extrinsic["occupation"].isin(table["occupation"])]
    skipped = pd.concat([skipped, pd.DataFrame({
        "population": _OCCUPATIONS, "group": lost["group"], "word": lost["occupation"], "context": "",
        "reason": "the noun was not located in any template; no intrinsic measure"})], ignore_index=True)
    table = table[OCCUPATION_COLUMNS]
    return LinkResult(table, link_statistics(table, n_boot=n_boot, seed=seed), skipped)
