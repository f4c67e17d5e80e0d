"""The findings of one book build, for its front page, read from the models' results tables.

Two numbers per model, both from tables the study notebooks wrote:

* **Study 1** (``profile_stats``): the female − male gap on warmth and on
  competence, as Hedges' g with its 95% CI and the Holm-adjusted p value
  (:func:`bias_utils.crossmodel.gender_gaps`), for names and for gendered terms.
* **How far to trust each gap**: the axis's verdict against its label-shuffling null
  (:mod:`bias_utils.axis_validity`, chapter 03; a gap on an axis whose verdict is not
  ``supported`` is not read), and from the robustness chapter (``robustness_summary``)
  the share of specifications that agree with the paper and are significant, with
  the joint test's p (:func:`bias_utils.crossmodel.cross_model_summary`).
* **Study 2** (``bold_statistics``, decoders only): the audit's odds ratio that
  a completion's gendered words are male rather than female for male- rather
  than female-dominated occupations, with the Wald CI the audit reports and
  the occupation-cluster bootstrap CI (:func:`bias_utils.crossmodel.bold_odds_ratios`).

:func:`summary_table` gives one row per model with a generated sentence,
:func:`summary_chart` the figure, :func:`write_summary_page` the Markdown page
that ``book/index.md`` includes. Nothing here is typed by hand: a model
without a table says so in its sentence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import altair as alt
import pandas as pd

from . import cache, plots, rendering
from .axis_validity import AXIS_VALIDITY_TABLE, unreadable_axes, verdict_phrase
from .crossmodel import (
    BOLD_STATS_TABLE,
    PROFILE_STATS_TABLE,
    bold_odds_ratios,
    cross_model_summary,
    gender_gaps,
    read_results,
    short_model_ids,
)
from .stats import permutation_p_text

#: The composite dimensions on the front page, and the paper's expectation for each.
HEADLINE = {"warmth": "female", "competence": "male"}
POPULATIONS = ("names", "terms")
AUDIT_METHOD = "Wald (audit)"
ALPHA = 0.05

#: Columns of :func:`summary_table` (``<population>_<dimension>_{g,ci_low,ci_high,p_holm}`` for each
#: population and headline dimension, then the audit's odds ratio and its Wald CI).
SUMMARY_COLUMNS = (["model_id"]
                   + [f"{pop}_{dim}_{v}" for pop in POPULATIONS for dim in HEADLINE
                      for v in ("g", "ci_low", "ci_high", "p_holm")]
                   + ["odds_ratio", "or_ci_low", "or_ci_high", "or_p", "sentence"])


__all__ = ["model_sentence", "read_summary", "summary_chart", "summary_markdown", "summary_table", "write_summary_page"]


def read_summary(models: Sequence[str], results_dir: str | Path | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(gaps, odds)`` for ``models`` (result folder names): headline gaps and odds ratios.

    ``gaps``: :func:`~bias_utils.crossmodel.gender_gaps` rows of the headline
    dimensions, with ``axis_valid`` (False when the axis's verdict at the mean layer is not
    ``supported``, NA without ``axis_validity``), ``axis_reading``
    (``axis_validity.verdict_phrase``) and, from the robustness chapter when it ran,
    ``n_specs, share_agree_significant, joint_p, n_permutations``; ``odds``:
    :func:`~bias_utils.crossmodel.bold_odds_ratios` rows (encoders have none).
    Both keep the full ``model_id``.
    """
    stats, _ = read_results(models, PROFILE_STATS_TABLE, results_dir)
    gaps = gender_gaps(stats) if len(stats) else pd.DataFrame(
        columns=["model_id", "population", "dimension", "gap", "g", "g_ci_low", "g_ci_high", "p_holm"])
    gaps = gaps[gaps["dimension"].isin(list(HEADLINE))].reset_index(drop=True)
    validity, _ = read_results(models, AXIS_VALIDITY_TABLE, results_dir)
    valid, reading = {}, {}
    for model, v in (validity.groupby("model_id", sort=False) if len(validity) else ()):
        unread = set(unreadable_axes(v))
        for _, r in v[v["layer"].astype(str) == "mean"].iterrows():
            valid[(model, r["dimension"])] = r["dimension"] not in unread
            reading[(model, r["dimension"])] = verdict_phrase(r)
    keys = list(zip(gaps["model_id"], gaps["dimension"]))
    gaps["axis_valid"] = pd.array([valid.get(k) for k in keys], dtype="boolean")
    gaps["axis_reading"] = [reading.get(k) for k in keys]
    robust, _ = cross_model_summary(models, results_dir)
    robust = robust.rename(columns={"n_agree_significant_p": "joint_p"})[
        ["model_id", "population", "dimension", "n_specs", "share_agree_significant", "joint_p", "n_permutations"]]
    gaps = gaps.merge(robust, on=["model_id", "population", "dimension"], how="left")
    bold, _ = read_results(models, BOLD_STATS_TABLE, results_dir)
    odds = bold_odds_ratios(bold) if len(bold) else pd.DataFrame(
        columns=["model_id", "method", "odds_ratio", "ci_low", "ci_high", "p", "n"])
    return gaps, odds


def _num(x: float) -> str:
    return f"{x:.2f}".replace("-", "−")


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def _robustness(row) -> str:
    """", robust in 12% of 96 specifications (joint test p = 0.030)" from the robustness chapter, or ""."""
    share, n = getattr(row, "share_agree_significant", None), getattr(row, "n_specs", None)
    if share is None or pd.isna(share) or pd.isna(n):
        return ""
    return (f"; {share:.0%} of {int(n)} analysis specifications agree with the paper and are significant "
            f"(joint test p {permutation_p_text(row.joint_p, int(row.n_permutations))})")


def _gap_phrase(dimension: str, row) -> str:
    """"female names higher on warmth (g = 1.58, 95% CI 0.69 to 2.48, Holm p = 0.002; 40% of 96 …)",
    "no clear …", or, on an axis whose verdict is not ``supported``, "no reading on …"."""
    numbers = f"g = {_num(row.g)}, 95% CI {_num(row.g_ci_low)} to {_num(row.g_ci_high)}, Holm p {_p(row.p_holm)}"
    valid = getattr(row, "axis_valid", None)
    if valid is not None and not pd.isna(valid) and not valid:
        return f"no reading on {dimension}: its axis is {row.axis_reading} ({numbers})"
    robust = _robustness(row)
    if row.p_holm >= ALPHA:
        return f"no clear name gap on {dimension} ({numbers}{robust})"
    higher = "female" if row.g > 0 else "male"
    against = "" if higher == HEADLINE[dimension] else "; opposite to the paper"
    return f"{higher} names higher on {dimension} ({numbers}{against}{robust})"


def model_sentence(model: str, gaps: pd.DataFrame, odds: pd.DataFrame, can_generate: bool | None = None) -> str:
    """One sentence reading a model's headline numbers (``gaps``/``odds`` rows of that model).

    ``can_generate=False`` says the model is an encoder (no audit); otherwise
    missing audit rows are reported as missing.
    """
    parts = []
    names = gaps[gaps["population"] == "names"].set_index("dimension")
    if names.empty:
        parts.append("no name profile in its results")
    else:
        parts += [_gap_phrase(d, names.loc[d]) for d in HEADLINE if d in names.index]
    audit = odds[odds["method"] == AUDIT_METHOD]
    if len(audit):
        r = audit.iloc[0]
        odds_ratio, low, high = (rendering.readable_number(float(v)) for v in (r.odds_ratio, r.ci_low, r.ci_high))
        numbers = f"odds ratio {odds_ratio}, 95% CI {low} to {high}"
        tendency = "its completions use male rather than female words {} for male-dominated occupations ({})"
        if r.ci_low > 1:
            parts.append(tendency.format("more", numbers))
        elif r.ci_high < 1:
            parts.append(tendency.format("less", numbers))
        else:
            parts.append(f"its completions show no clear occupational gender association ({numbers})")
    elif can_generate is False:
        parts.append("an encoder: it writes no text to audit")
    else:
        parts.append("it has no BOLD audit results")
    return "; ".join(parts) + "."


def summary_table(models: Sequence[str], results_dir: str | Path | None = None,
                  can_generate: dict[str, bool] | None = None) -> pd.DataFrame:
    """One row per model (:data:`SUMMARY_COLUMNS`), the model id shortened for reading.

    ``can_generate`` (by model folder name) words the sentence of a model
    without audit results; unknown models are inferred from the tables.
    """
    gaps, odds = read_summary(models, results_dir)
    rows = []
    for model in models:
        g, o = gaps[gaps["model_id"] == model], odds[odds["model_id"] == model]
        row = {"model_id": model}
        for r in g.itertuples(index=False):
            key = f"{r.population}_{r.dimension}"
            row.update({f"{key}_g": r.g, f"{key}_ci_low": r.g_ci_low, f"{key}_ci_high": r.g_ci_high,
                        f"{key}_p_holm": r.p_holm})
        audit = o[o["method"] == AUDIT_METHOD]
        if len(audit):
            a = audit.iloc[0]
            row.update({"odds_ratio": a.odds_ratio, "or_ci_low": a.ci_low, "or_ci_high": a.ci_high, "or_p": a.p})
        row["sentence"] = model_sentence(model, g, o, (can_generate or {}).get(model))
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)
    return short_model_ids(table) if len(table) else table


def _gap_panel(gaps: pd.DataFrame, population: str, first: bool) -> alt.LayerChart:
    """One population's gaps; only the first panel labels the models and carries the legend."""
    data = gaps[gaps["population"] == population]
    base = alt.Chart(data).encode(
        y=alt.Y("model_id:N", title=None, axis=alt.Axis(labels=first, ticks=first)),
        yOffset=alt.YOffset("dimension:N", sort=list(HEADLINE)),
        color=alt.Color("dimension:N", sort=list(HEADLINE), scale=alt.Scale(range=plots.OTHER_COLORS[:2]),
                        title="dimension", legend=alt.Legend(orient="bottom") if first else None))
    zero = alt.Chart(pd.DataFrame({"g": [0.0]})).mark_rule(color="#999", strokeDash=[4, 3]).encode(x="g:Q")
    # an axis whose verdict is not "supported" is drawn faint: its gap is not read
    faint = alt.condition("datum.axis_valid === false", alt.value(0.25), alt.value(1.0))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("g_ci_low:Q"), x2="g_ci_high:Q", opacity=faint)
    points = base.mark_point(filled=True, size=60).encode(
        x=alt.X("g:Q", title="Hedges' g (> 0: female higher)"), opacity=faint,
        tooltip=["model_id", "dimension", alt.Tooltip("g:Q", format=".2f"), alt.Tooltip("g_ci_low:Q", format=".2f"),
                 alt.Tooltip("g_ci_high:Q", format=".2f"), alt.Tooltip("p_holm:Q", format=".3f"), "axis_valid"])
    return alt.layer(zero, bars, points).properties(
        title=f"{population}: female − male", width=150, height=alt.Step(16))


def summary_chart(gaps: pd.DataFrame, odds: pd.DataFrame) -> alt.HConcatChart:
    """Warmth and competence gaps (Hedges' g, 95% CI) per model for names and terms, beside the
    audit's odds ratio (log scale, Wald and occupation-bootstrap CIs) per decoder."""
    gaps = short_model_ids(gaps.dropna(subset=["g"]))
    if gaps.empty:
        raise ValueError("summary_chart: no profile gaps to draw")
    panels = [_gap_panel(gaps, pop, first=i == 0)
              for i, pop in enumerate(p for p in POPULATIONS if (gaps["population"] == p).any())]
    odds = short_model_ids(odds.dropna(subset=["odds_ratio"])) if len(odds) else odds
    if len(odds):
        x = alt.X("odds_ratio:Q", scale=alt.Scale(type="log"), title="odds ratio (log)", axis=alt.Axis(grid=False))
        base = alt.Chart(odds).encode(
            y=alt.Y("model_id:N", title=None, axis=alt.Axis(labels=False, ticks=False)),
            yOffset=alt.YOffset("method:N"),
            color=alt.Color("method:N", title="odds ratio CI", scale=alt.Scale(range=plots.OTHER_COLORS[2:4]),
                            legend=alt.Legend(orient="bottom", direction="vertical")))
        one = alt.Chart(pd.DataFrame({"odds_ratio": [1.0]})).mark_rule(color="#999", strokeDash=[4, 3]).encode(x=x)
        bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low:Q", scale=alt.Scale(type="log")), x2="ci_high:Q")
        points = base.mark_point(filled=True, size=60).encode(
            x=x, tooltip=["model_id", "method", alt.Tooltip("odds_ratio:Q", format=".2f"),
                          alt.Tooltip("ci_low:Q", format=".2f"), alt.Tooltip("ci_high:Q", format=".2f"), "n"])
        panels.append(alt.layer(one, bars, points).properties(
            title="BOLD audit: odds ratio", width=150, height=alt.Step(16)))
    # one row per model across the panels (an encoder's audit row stays empty), labelled once
    return alt.hconcat(*panels).resolve_scale(color="independent", y="shared", yOffset="independent")


def _markdown_table(table: pd.DataFrame) -> str:
    lines = ["| model | reading |", "|---|---|"]
    lines += [f"| {r.model_id} | {r.sentence} |" for r in table.itertuples(index=False)]
    return "\n".join(lines)


def summary_markdown(models: Sequence[str], results_dir: str | Path | None = None,
                     can_generate: dict[str, bool] | None = None, note: str = "") -> str:
    """The front page's findings section: a figure and one sentence per model (MyST Markdown)."""
    table = summary_table(models, results_dir, can_generate)
    lines = ["## What this build found", ""]
    gaps, odds = read_summary(models, results_dir)
    if len(gaps.dropna(subset=["g"])):
        lines += [
            "Female − male gaps on warmth and competence (Hedges' g, 95% CI) for first names and gendered "
            "terms; for models that write, the BOLD audit's odds ratio (above 1: male words more often for "
            "male-dominated occupations). A faint gap sits on an axis that is not shown to order the "
            "dictionary's extra terms by pole better than axes from shuffled seed labels (or could not be "
            "tested), and is not read. Each sentence says how many of the "
            "robustness chapter's analysis specifications agree with the paper." + (f" {note}" if note else ""), "",
            "```{raw} html", rendering.chart_html(summary_chart(gaps, odds).to_dict(), "bias-summary-chart"), "```", "",
        ]
    if len(table):
        lines += [_markdown_table(table), ""]
    else:
        lines += ["No model was built in this run." + (f" {note}" if note else ""), ""]
    lines += ["Each model's chapters show how these numbers were measured, and the *Across models* "
              "chapter sets them side by side.", ""]
    return "\n".join(lines)


def write_summary_page(page: str | Path, models: Sequence[str], results_dir: str | Path | None = None,
                       can_generate: dict[str, bool] | None = None, note: str = "") -> Path:
    """Write :func:`summary_markdown` to ``page`` (only when it changed, so Sphinx sees no edit)."""
    page = Path(page)
    text = summary_markdown(models, results_dir, can_generate, note)
    if not page.exists() or page.read_text(encoding="utf-8") != text:
        cache.atomic_write_text(page, text)
    return page
