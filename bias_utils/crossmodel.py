"""Across models (notebook ``09_cross_model``): stacked result tables, and the link
between intrinsic and extrinsic bias.

Reads ``results/<model>/`` tables written by the study notebooks and stacks them
with a ``model_id`` column. A table a model does not have (an encoder has no BOLD
results) is a row in the returned ``skipped`` table with a reason, never a silent gap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from . import bold, completions, paths, plots
from .axis_validity import AXIS_VALIDITY_TABLE, unreadable_axes
from .dictionaries import DIMENSIONS

__all__ = [
    "ACCURACY_TABLE", "BOLD_STATS_TABLE", "BOLD_SUMMARY_TABLE", "COMPLETION_STATS_TABLE", "CROSS_MODEL_TABLES",
    "PROFILE_MEANS_TABLE", "PROFILE_STATS_TABLE", "ROBUSTNESS_SUMMARY_TABLE", "SKIPPED_COLUMNS", "accuracy_by_model",
    "bold_odds_ratios", "cross_model_summary", "forest_chart", "gender_gaps", "headline_layer", "intrinsic_extrinsic",
    "link_chart", "models_with_results", "profile_grid", "read_all_results", "read_results", "short_model_ids",
    "unreadable_axes_by_model",
]

#: Result tables read across models (``<name>.parquet`` in each model folder).
ACCURACY_TABLE = "direction_accuracy"
PROFILE_STATS_TABLE = "profile_stats"
PROFILE_MEANS_TABLE = "profile_group_means"
BOLD_STATS_TABLE = bold.STATISTICS_TABLE
BOLD_SUMMARY_TABLE = bold.SUMMARY_TABLE
COMPLETION_STATS_TABLE = completions.COMPLETION_STATS_TABLE
#: ``robustness.robustness_summary`` (chapter 10): the curve's agreement and each axis's verdict.
ROBUSTNESS_SUMMARY_TABLE = "robustness_summary"
#: The per-model tables the cross-model chapter stacks.
CROSS_MODEL_TABLES = (ACCURACY_TABLE, PROFILE_STATS_TABLE, PROFILE_MEANS_TABLE, BOLD_STATS_TABLE,
                      BOLD_SUMMARY_TABLE, COMPLETION_STATS_TABLE, AXIS_VALIDITY_TABLE)

SKIPPED_COLUMNS = ["model_id", "table", "reason"]


# --------------------------------------------------------------------------- across models: reading


def read_results(models: Sequence[str], table: str, results_dir: str | Path | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stack ``<results_dir>/<model>/<table>.parquet`` over ``models`` with a ``model_id`` column.

    Returns ``(stacked, skipped)``; ``skipped`` (``model_id, table, reason``) lists
    the models without that table.
    """
    root = Path(results_dir) if results_dir is not None else paths.results_dir()
    frames, skipped = [], []
    for model in models:
        path = root / model / f"{table}.parquet"
        if not path.exists():
            skipped.append({"model_id": model, "table": table, "reason": f"no {path.name} in its results folder"})
            continue
        frames.append(pd.read_parquet(path).assign(model_id=model))
    stacked = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["model_id"])
    return stacked, pd.DataFrame(skipped, columns=SKIPPED_COLUMNS)


def models_with_results(results_dir: str | Path | None = None) -> list[str]:
    """Model folders under ``results_dir`` that hold a Study 1 profile (the book's per-model runs)."""
    root = Path(results_dir) if results_dir is not None else paths.results_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / f"{PROFILE_STATS_TABLE}.parquet").exists())


def read_all_results(models: Sequence[str], results_dir: str | Path | None = None
                     ) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """:func:`read_results` for every table in :data:`CROSS_MODEL_TABLES`.

    Returns ``({table: stacked}, missing)`` with ``missing`` as in :func:`read_results`.
    """
    tables, missing = {}, []
    for name in CROSS_MODEL_TABLES:
        tables[name], skipped = read_results(models, name, results_dir)
        missing.append(skipped)
    return tables, pd.concat(missing, ignore_index=True)


def short_model_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``model_id`` shortened for chart labels: the model name without the
    weight hash and dtype (``smollm2-135m-instruct--b179c9523d0e--fp32`` -> ``smollm2-135m-instruct``),
    unless two models would then share a label."""
    ids = list(dict.fromkeys(frame["model_id"]))
    short = {m: str(m).split("--")[0] for m in ids}
    if len(set(short.values())) < len(ids):
        return frame
    return frame.assign(model_id=frame["model_id"].map(short))


def headline_layer(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the headline layer (the mean over layers) when the table has several."""
    if "layer" in frame and frame["layer"].astype(str).eq("mean").any():
        return frame[frame["layer"].astype(str) == "mean"]
    return frame


def unreadable_axes_by_model(validity: pd.DataFrame, layer: str = "mean") -> pd.DataFrame:
    """``model_id, dimension`` of every axis whose verdict at ``layer`` is not ``supported``
    (``axis_validity.unreadable_axes`` per model), from :data:`AXIS_VALIDITY_TABLE` rows of
    one or several models (empty when there are none)."""
    if validity.empty:
        return pd.DataFrame(columns=["model_id", "dimension"])
    rows = [(model, d) for model, v in validity.groupby("model_id", sort=False) for d in unreadable_axes(v, layer)]
    return pd.DataFrame(rows, columns=["model_id", "dimension"])


def accuracy_by_model(accuracy: pd.DataFrame, cutoff: str = "raw") -> pd.DataFrame:
    """Direction accuracy shaped like the paper's Table 2 at the headline layer: one row per model
    (the index), one column per dimension (:func:`bias_utils.projection.table2` keeps every layer)."""
    acc = headline_layer(accuracy)
    acc = acc[acc["cutoff"] == cutoff]
    if acc.empty:
        raise ValueError(f"accuracy_by_model: no accuracy rows with cutoff {cutoff!r}")
    wide = acc.pivot_table(index="model_id", columns="dimension", values="accuracy", aggfunc="first")
    order = [d for d in ("warmth", "competence", *DIMENSIONS) if d in wide.columns]
    return wide[order + [c for c in wide.columns if c not in order]].rename_axis(columns=None)


def gender_gaps(profile_stats: pd.DataFrame, female: str = "female", male: str = "male") -> pd.DataFrame:
    """Female − male difference per model, population and dimension, from ``profile_stats`` rows.

    Columns: ``model_id, population, dimension, gap, g, g_ci_low, g_ci_high, p_holm``; the
    sign is flipped where a table lists male as ``group_a``. Rows of other group pairs are dropped
    (they are not female/male contrasts).
    """
    s = headline_layer(profile_stats)
    pair = s["group_a"].isin([female, male]) & s["group_b"].isin([female, male]) & (s["group_a"] != s["group_b"])
    s = s[pair]
    sign = np.where(s["group_a"] == female, 1.0, -1.0)
    out = pd.DataFrame({
        "model_id": s["model_id"], "population": s["population"], "dimension": s["dimension"],
        "gap": sign * (s["mean_a"] - s["mean_b"]), "g": sign * s["g"],
        "g_ci_low": np.where(sign > 0, s["g_ci_low"], -s["g_ci_high"]),
        "g_ci_high": np.where(sign > 0, s["g_ci_high"], -s["g_ci_low"]),
        "p_holm": s["p_holm"],
    })
    return out.reset_index(drop=True)


def bold_odds_ratios(bold_stats: pd.DataFrame) -> pd.DataFrame:
    """The audit's odds ratio (male over female words, male- vs female-dominated) per model, with the
    occupation-cluster bootstrap CI (the primary interval) and the audit's Wald CI (every word independent).

    Columns: ``model_id, method, odds_ratio, ci_low, ci_high, p, n``.
    """
    s = bold_stats
    wald = s[s["test"].astype(str).str.startswith("odds_ratio") & (s["role"] == "audit")]
    boot = s[(s["test"] == "cluster_bootstrap_occupation") & (s["effect"] == "odds_ratio")]
    frames = [
        wald.assign(method="Wald (audit)"),
        boot.assign(method="occupation bootstrap"),
    ]
    out = pd.concat(frames, ignore_index=True)
    return out.rename(columns={"effect_size": "odds_ratio"})[
        ["model_id", "method", "odds_ratio", "ci_low", "ci_high", "p", "n"]].reset_index(drop=True)


def intrinsic_extrinsic(gaps: pd.DataFrame, odds: pd.DataFrame, summary: pd.DataFrame,
                        completion_stats: pd.DataFrame) -> pd.DataFrame:
    """One row per model: embedding gaps (female − male, names and terms) beside its writing.

    Columns: ``model_id``; ``names_warmth_gap, names_competence_gap, terms_warmth_gap,
    terms_competence_gap`` (standardised units); ``odds_ratio, or_ci_low, or_ci_high`` (occupation interval)
    (Wald, the audit's); ``share_gendered_male_dominated, share_gendered_female_dominated``
    (completions with any gendered word); ``completion_warmth_gap, completion_competence_gap``
    (female- minus male-dominated completions, standardised) and their Holm p values.
    Models lacking a part get NaN there; which tables are missing is reported by
    :func:`read_results`.
    """
    wide = gaps[gaps["dimension"].isin(["warmth", "competence"])].pivot_table(
        index="model_id", columns=["population", "dimension"], values="gap", aggfunc="first")
    wide.columns = [f"{pop}_{dim}_gap" for pop, dim in wide.columns]
    parts = [wide]
    if len(odds):
        w = odds[odds["method"] == "occupation bootstrap"].set_index("model_id")
        parts.append(w[["odds_ratio", "ci_low", "ci_high"]].rename(columns={"ci_low": "or_ci_low",
                                                                             "ci_high": "or_ci_high"}))
    if len(summary):
        share = summary.pivot_table(index="model_id", columns="group", values="share_gendered", aggfunc="first")
        share.columns = [f"share_gendered_{g}" for g in share.columns]
        parts.append(share)
    if len(completion_stats):
        # Chapter 08's primary analysis only (occupation means); older tables without the column had one Welch row
        primary = completion_stats["primary"].astype(bool) if "primary" in completion_stats else True
        c = completion_stats[(completion_stats["test"] == "welch_t") & primary]
        gap = c.assign(gap=c["mean_a"] - c["mean_b"]).pivot_table(
            index="model_id", columns="dimension", values=["gap", "p_adj"], aggfunc="first")
        gap.columns = [f"completion_{dim}_{'gap' if v == 'gap' else 'p_holm'}" for v, dim in gap.columns]
        parts.append(gap)
    return pd.concat(parts, axis=1).rename_axis("model_id").reset_index()


# --------------------------------------------------------------------------- across models: charts


def forest_chart(odds: pd.DataFrame, *, title: str | None = None) -> alt.LayerChart:
    """Odds ratios with 95% CIs per model on a log axis; a rule marks OR = 1 (no association).

    ``odds``: :func:`bold_odds_ratios` rows.
    """
    data = short_model_ids(odds.dropna(subset=["odds_ratio"]))
    if data.empty:
        raise ValueError("forest_chart: no odds ratios to draw")
    base = alt.Chart(data).encode(
        y=alt.Y("model_id:N", title=None), yOffset=alt.YOffset("method:N"),
        color=alt.Color("method:N", title="confidence interval"))
    x = alt.X("odds_ratio:Q", scale=alt.Scale(type="log"),
              title="odds ratio: male/female words, male- vs female-dominated (log scale)")
    one = alt.Chart(pd.DataFrame({"odds_ratio": [1.0]})).mark_rule(color="#999", strokeDash=[4, 3]).encode(x=x)
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low:Q", scale=alt.Scale(type="log")), x2="ci_high:Q")
    points = base.mark_point(filled=True, size=70).encode(
        x=x, tooltip=["model_id", "method", alt.Tooltip("odds_ratio:Q", format=".2f"),
                      alt.Tooltip("ci_low:Q", format=".2f"), alt.Tooltip("ci_high:Q", format=".2f"), "n"])
    return alt.layer(one, bars, points).properties(
        title=title or "BOLD audit: odds ratio per model", width=420, height=alt.Step(22))


def link_chart(link: pd.DataFrame, x: str = "names_warmth_gap", y: str = "odds_ratio", *,
               title: str | None = None) -> alt.LayerChart:
    """Scatter of one intrinsic against one extrinsic measure, one labelled point per model."""
    data = short_model_ids(link.dropna(subset=[x, y]))
    if data.empty:
        raise ValueError(f"link_chart: no model has both {x} and {y}")
    log_y = y == "odds_ratio"
    base = alt.Chart(data).encode(
        x=alt.X(f"{x}:Q", title=x.replace("_", " ")),
        y=alt.Y(f"{y}:Q", title=y.replace("_", " "), scale=alt.Scale(type="log" if log_y else "linear")))
    points = base.mark_point(filled=True, size=90).encode(tooltip=["model_id", alt.Tooltip(f"{x}:Q", format=".2f"),
                                                                   alt.Tooltip(f"{y}:Q", format=".2f")])
    labels = base.mark_text(align="left", dx=7, fontSize=10).encode(text="model_id:N")
    return alt.layer(points, labels).properties(title=title or f"{y} against {x}", width=360, height=260)


def profile_grid(means: pd.DataFrame, profile_stats: pd.DataFrame, population: str = "names",
                 validity: pd.DataFrame | None = None) -> alt.VConcatChart:
    """Per model, its 7D profile above its warmth × competence plane for ``population``;
    the axes :func:`unreadable_axes_by_model` finds in ``validity`` are greyed.

    Stacked rather than side by side: a book page is too narrow for both."""
    failed = unreadable_axes_by_model(validity if validity is not None else pd.DataFrame())
    rows = []
    labels = dict(zip(means["model_id"], short_model_ids(means)["model_id"]))
    for model, m in means.groupby("model_id", sort=False):
        m = headline_layer(m)
        s = profile_stats[profile_stats["model_id"] == model]
        pop = m[m["population"] == population]
        seven = pop[pop["space"] == "dimensions"].drop(columns=["model_id"])
        two = pop[pop["space"] == "warmth_competence"].drop(columns=["model_id"])
        invalid = list(failed.loc[failed["model_id"] == model, "dimension"])
        charts = []
        if len(seven):
            charts.append(plots.profile_chart(seven, s, title=f"{labels[model]}: 7D profile ({population})",
                                              invalid_axes=invalid))
        if len(two):
            charts.append(plots.warmth_competence_chart(two, stats=s, title=f"{labels[model]}: warmth × competence",
                                                        invalid_axes=invalid))
        rows += charts
    if not rows:
        raise ValueError(f"profile_grid: no group means for population {population!r}")
    return alt.vconcat(*rows).resolve_scale(color="independent", shape="independent")


def cross_model_summary(models: Sequence[str],
                        results_dir: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per model, population and dimension: the share of agreeing specifications, the joint
    test's p and the axis's verdict, read from each model folder's
    :data:`ROBUSTNESS_SUMMARY_TABLE`. Returns ``(table, skipped)`` (models without the table)."""
    stacked, skipped = read_results(models, ROBUSTNESS_SUMMARY_TABLE, results_dir)
    cols = ["model_id", "population", "dimension", "expected_sign", "n_specs", "share_agree_significant",
            "share_positive_significant", "share_negative_significant", "median_g", "n_agree_significant_p",
            "n_permutations", "axis_auc", "axis_p", "axis_verdict", "axis_reading"]
    if stacked.empty:
        return pd.DataFrame(columns=cols), skipped
    return stacked[cols].reset_index(drop=True), skipped
