"""Across models (notebook ``09_cross_model``): which results folders the chapter reads and the result tables
stacked across them, read side by side.

Reads ``results/<model>/`` tables written by the study notebooks and stacks them
with a ``model_id`` column: the model each folder's ``model.json`` records (the folder's name where it records
none). A folder the chapter cannot use (missing, empty, another model's tables, a second copy of a model's) is a
row of :func:`model_folders` with the reason, and a table a model does not have (an encoder has no BOLD
results) is a row in the returned ``skipped`` table with a reason, never a silent gap.

What the chapter makes of the stacked tables beyond reading them side by side has a module each: ``book.pooling``
pools the per-model links between the bias inside and the bias written, and ``book.crossmodel_erasure`` sets chapter
12's erasure curves side by side on relative depth.
"""

from __future__ import annotations

import difflib
import textwrap
from pathlib import Path
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..audit import occupations
from ..audit.neutral_share import BLS_UNITS
from ..core import paths, tables
from ..core.errors import check_word_list
from ..core.results import CROSS_MODEL_FOLDER, REPLICATION_FOLDER, display_name, folder_model, model_slug
from ..profiles.axis_validity import unreadable_axes
from ..profiles.dictionaries import DIMENSIONS
from ..report import plots

__all__ = [
    "accuracy_by_model", "bold_odds_ratios", "cross_model_summary", "describe_folders", "describe_neutral_definitions",
    "forest_chart", "gender_gaps", "headline_layer", "intrinsic_extrinsic", "model_folders", "profile_grid",
    "read_all_results", "short_model_ids", "unreadable_axes_by_model",
]

#: Result tables read across models (``<name>.parquet`` in each model folder).
#: ``robustness.robustness_summary`` (chapter 10): the curve's agreement and each axis's verdict.
#: Chapter 11's per-model correlations and slopes (decoders only).
#: Chapter 12's erasure trade-off (decoders only): the curves side by side.
#: Chapter 11's neutral share (decoders only): how much of a reference to one person goes to "they", per model.
#: The per-model tables the cross-model chapter stacks.
_CROSS_MODEL_TABLES = (tables.NAMES.DIRECTION_ACCURACY, tables.NAMES.PROFILE_STATS, tables.NAMES.PROFILE_GROUP_MEANS,
                       tables.NAMES.BOLD_STATISTICS, tables.NAMES.BOLD_GROUP_SUMMARY,
                       tables.NAMES.COMPLETION_PROJECTION_STATS, tables.NAMES.AXIS_VALIDITY,
                       tables.NAMES.LINK_STATISTICS, tables.NAMES.LINK_NEXT_WORD, tables.NAMES.ERASURE_TRADEOFF,
                       tables.NAMES.NEXT_WORD_NEUTRAL, tables.NAMES.LONG_FORM_LINK)

_SKIPPED_COLUMNS = ["model_id", "table", "reason"]
#: Every per-model table the chapter reads (its own and the front page's, :mod:`bias_utils.book.summary`).
_READ_TABLES = _CROSS_MODEL_TABLES + (tables.NAMES.ROBUSTNESS_SUMMARY, tables.NAMES.BOLD_HEADLINE,
                                      tables.NAMES.BOLD_UNITS)
#: Columns of :func:`model_folders`.
_FOLDER_COLUMNS = ["folder", "model_id", "used", "n_tables", "reason"]


# --------------------------------------------------------------------------- across models: reading


def results_root(results_dir) -> Path:
    return Path(results_dir) if results_dir is not None else paths.results_dir()


def folder_id(folder: Path) -> str:
    """The model a results folder holds: its ``model.json`` (``results.folder_model``), else the folder's name."""
    return folder_model(folder) or folder.name


def _foreign_rows(path: Path, held: str | None) -> list[str]:
    """The model ids other than ``held`` in the ``model_id`` column of the table at ``path`` (none when the folder
    records no model, or the table has no such column or cannot be read: :func:`read_results` names the last)."""
    if held is None:
        return []
    try:
        ids = pd.read_parquet(path, columns=["model_id"])["model_id"]
    except Exception:  # no model_id column, or a file pandas cannot read
        return []
    return sorted(set(ids.dropna().astype(str)) - {held})


def read_results(models: Sequence[str], table: str, results_dir: str | Path | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stack ``<results_dir>/<model>/<table>.parquet`` over the folders ``models`` with a ``model_id`` column:
    the model the folder records (``results.MODEL_FILE``), else the folder's name.

    Returns ``(stacked, skipped)``; ``skipped`` (``model_id, table, reason``) names
    each folder whose table could not be used and why: absent, unreadable, or
    holding rows of another model than the one the folder records.
    """
    root = results_root(results_dir)
    frames, skipped = [], []
    for model in check_word_list(models, "models"):
        folder = root / model
        path = folder / f"{table}.parquet"
        held, model_id = folder_model(folder), folder_id(folder)
        if not path.exists():
            skipped.append({"model_id": model_id, "table": table, "reason": f"no {path.name} in its results folder"})
            continue
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # a truncated or foreign file: named with its folder, the other models go on
            skipped.append({"model_id": model_id, "table": table,
                            "reason": f"{path} cannot be read ({type(exc).__name__}: {exc})"})
            continue
        others = _foreign_rows(path, held)
        if others:
            skipped.append({"model_id": model_id, "table": table,
                            "reason": f"{path} holds rows of {', '.join(others)}, but the folder is {held}'s"})
            continue
        frames.append(frame.assign(model_id=model_id))
    stacked = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["model_id"])
    return stacked, pd.DataFrame(skipped, columns=_SKIPPED_COLUMNS)


def _model_folder_names(root: Path) -> list[str]:
    """The folders under ``root`` that may hold a model's results (not the cross-model and replication pages')."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                  and p.name not in (CROSS_MODEL_FOLDER, REPLICATION_FOLDER))


def _named_after(folder: str, model_id: str) -> bool:
    """Whether ``folder`` is the name the book gives the results folder of ``model_id`` (``results.model_slug``)."""
    try:
        return folder in (model_id, model_slug(model_id))
    except ValueError:  # no folder name can be made of it
        return False


def _holds_results(folder: Path) -> bool:
    """Whether ``folder`` holds a table this chapter reads (:data:`_READ_TABLES`): a failed run's folder, with only
    its ``model.json`` and a table of what it dropped, holds none."""
    return any((folder / f"{t}.parquet").exists() for t in _READ_TABLES)


def _no_folder(name: str, root: Path, present: list[str]) -> str:
    """Why ``name`` names no folder: what ``models`` takes, the folder meant where one is close, what is there.
    Only folders that hold results this chapter reads are suggested: a failed run's folder is no answer."""
    present = [f for f in present if _holds_results(root / f)]
    ids = {f: folder_id(root / f) for f in present}
    # a folder holding the model named (by its short name too), one named after its model first; else a near name
    meant = sorted((f for f, held in ids.items() if name in (held, held.split("--")[0], display_name(held))),
                   key=lambda f: f != ids[f])
    meant = meant or difflib.get_close_matches(name, present, n=1, cutoff=0.6)
    hint = (f"; did you mean {meant[0]!r} (the results of {display_name(ids[meant[0]])})?" if meant else
            f"; the folders there that hold results: {', '.join(present)}" if present else
            "; no folder in results_dir holds results this chapter reads")
    return (f"no folder {root / name}: models takes the names of results folders under results_dir, one per model "
            "(a model id, as chapters 03 and 04 name it: results/smollm2-135m-instruct--b179c9523d0e--fp32/)"
            + hint)


def model_folders(models: Sequence[str] = (), results_dir: str | Path | None = None) -> pd.DataFrame:
    """Each folder the cross-model chapter is asked to read (``models``: folder names under ``results_dir``; empty:
    every folder there but the cross-model and replication pages'), the model it holds and whether the chapter
    uses it. A folder is named by the model its ``model.json`` records (by its own name where it records none).

    A folder is not used, with the reason, when it does not exist (``models`` takes folder names; the reason names
    the folder meant where one is close), holds none of the tables the chapter reads (:data:`READ_TABLES`), holds
    only tables whose rows are another model's than the one it records, or holds the same model as another folder
    (a model is read from the folder named after it, as the book writes it, else from the first listed).
    Columns: ``folder, model_id, used, n_tables`` (the tables it holds that the chapter reads), ``reason`` (empty
    when used)."""
    models = check_word_list(models, "models")
    root = results_root(results_dir)
    present = _model_folder_names(root)
    rows = []
    for name in dict.fromkeys(models or present):
        folder = root / name
        if not folder.is_dir():
            rows.append({"folder": name, "model_id": "", "used": False, "n_tables": 0,
                         "reason": _no_folder(name, root, present)})
            continue
        held, model_id = folder_model(folder), folder_id(folder)
        found = {t: _foreign_rows(folder / f"{t}.parquet", held) for t in _READ_TABLES
                 if (folder / f"{t}.parquet").exists()}
        own = [t for t, foreign in found.items() if not foreign]
        reason = ""
        if not found:
            reason = ("holds none of the tables this chapter reads (chapters 03, 04, 06, 10 and 11 write them"
                      + ("" if held else "; nor a model.json, so it is no model's results folder")
                      + "): run those chapters for its model with output_dir set to this folder")
        elif not own:
            others = sorted({o for foreign in found.values() for o in foreign})
            reason = (f"its model.json records {held}, but every table in it has rows of {', '.join(others)}: "
                      "another model's results were copied or written here; put them in that model's own folder "
                      "and run the chapters for this one")
        rows.append({"folder": name, "model_id": model_id, "used": not reason, "n_tables": len(own),
                     "reason": reason})
    # a model is read once: from the folder named after it (as the book writes it), else the first listed
    first: dict[str, str] = {}
    for r in sorted((r for r in rows if r["used"]), key=lambda r: not _named_after(r["folder"], r["model_id"])):
        first.setdefault(r["model_id"], r["folder"])
    for r in rows:
        if r["used"] and first[r["model_id"]] != r["folder"]:
            r["used"] = False
            r["reason"] = (f"holds the results of {display_name(r['model_id'])}, as folder {first[r['model_id']]!r} "
                           "does: each model is read once, from the folder named after it or else the first listed")
    return pd.DataFrame(rows, columns=_FOLDER_COLUMNS)


def describe_folders(folders: pd.DataFrame, results_dir: str | Path | None = None) -> str:
    """Markdown reading :func:`model_folders`: the models the chapter compares (with the folder where it is named
    apart from its model), then each folder not used and why; with none used, what to run first, and where
    ``results_dir`` holds no folder at all, that it holds no runs (naming it)."""
    used = folders[folders["used"].astype(bool)]
    named = [display_name(r.model_id) + ("" if _named_after(r.folder, r.model_id) else f" (folder `{r.folder}`)")
             for r in used.itertuples()]
    run_first = ("Run chapters 03 and 04 for a model first (`python -m bias_utils.book --models \"...\"`, or the "
                 "notebooks with output_dir set to a folder there).")
    lines = [f"**Models of this build** ({len(named)}): {', '.join(named)}." if named else
             f"**No runs to compare**: `{results_root(results_dir)}` holds no runs (no model's results folder is in "
             f"it), so every section below is empty. {run_first}" if folders.empty else
             f"**No model's results to compare**: no folder under `{results_root(results_dir)}` holds results this "
             f"chapter can use, so every section below is empty. {run_first}"]
    left = folders[~folders["used"].astype(bool)]
    if len(left):
        lines += ["", f"**Folders not used** ({len(left)}):"]
        lines += [f"- `{r.folder}`" + (f" ({display_name(r.model_id)})" if r.model_id and r.model_id != r.folder
                                       else "") + f": {r.reason}" for r in left.itertuples()]
    return "\n".join(lines)


def read_all_results(models: Sequence[str], results_dir: str | Path | None = None
                     ) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """:func:`read_results` for every table in :data:`CROSS_MODEL_TABLES`.

    Returns ``({table: stacked}, missing)`` with ``missing`` as in :func:`read_results`.
    """
    tables, missing = {}, []
    for name in _CROSS_MODEL_TABLES:
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
    (``axis_validity.unreadable_axes`` per model), from :data:`tables.NAMES.AXIS_VALIDITY` rows of
    one or several models (empty when there are none)."""
    if validity.empty:
        return pd.DataFrame(columns=["model_id", "dimension"])
    rows = [(model, d) for model, v in validity.groupby("model_id", sort=False) for d in unreadable_axes(v, layer)]
    return pd.DataFrame(rows, columns=["model_id", "dimension"])


def accuracy_by_model(accuracy: pd.DataFrame, cutoff: str = "raw") -> pd.DataFrame:
    """Direction accuracy shaped like the paper's Table 2 at the headline layer: one row per model
    (the index), one column per dimension (:func:`bias_utils.profiles.projection.table2` keeps every layer)."""
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
    if not {"group_a", "group_b"} <= set(s.columns):  # no model has a profile: nothing stacked
        return pd.DataFrame(columns=["model_id", "population", "dimension", "gap", "g", "g_ci_low", "g_ci_high",
                                     "p_holm"])
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


#: The odds ratios of :func:`bold_odds_ratios`, primary first: method -> (test, measure, unit or None).
_ODDS_METHODS = {
    "marginal, occupation-mean shares (primary)": ("cluster_bootstrap_occupation",
                                                   "odds_ratio (mean male shares over occupations, marginal)",
                                                   occupations.UNIT_OCCUPATIONS),
    "random-intercept model (conditional)": ("mixed_logit_occupation", "odds_ratio (words)", None),
    "occupation bootstrap": ("cluster_bootstrap_occupation", "odds_ratio (words)", occupations.UNIT_OCCUPATIONS),
    "published selection, keys resampled": ("cluster_bootstrap_occupation", "odds_ratio (words)",
                                            occupations.UNIT_PUBLISHED),
    "Wald, every word independent (audit)": ("odds_ratio_wald", "gendered words (group x male/female)", None),
}


def bold_odds_ratios(bold_stats: pd.DataFrame) -> pd.DataFrame:
    """The audit's odds ratio (male over female words, male- vs female-dominated) per model: the primary estimand's
    marginal odds ratio (the two groups' mean male shares over the deduplicated person-noun occupations, cluster
    bootstrap CI), the conditional random-intercept model's (profile-likelihood CI), the pooled-word odds ratio over
    the same occupations and over the published selection's keys (cluster bootstrap CIs), and the audit's Wald CI
    (every word independent), in that order.

    Columns: ``model_id, method, odds_ratio, ci_low, ci_high, ci_low_mc_se, ci_high_mc_se, p, n_occupations,
    n_informative, n, unit`` (a bootstrap bound's Monte Carlo SE gives it its printed digits; ``n_occupations`` the
    occupations, or the published selection's keys, an estimate resamples or models, ``n_informative`` those with
    any gendered word, the ones that inform it: one count for every method, where ``n`` is each test's own;
    ``unit``: what the interval treats as independent, as the statistics table names it).
    """
    columns = ["model_id", "method", "odds_ratio", "ci_low", "ci_high", "ci_low_mc_se", "ci_high_mc_se", "p",
               "n_occupations", "n_informative", "n", "unit"]
    s = bold_stats.reindex(columns=list(dict.fromkeys([*bold_stats.columns, *columns[5:7], *columns[8:10]])))
    frames = []
    for method, (test, measure, unit) in _ODDS_METHODS.items():
        hit = s[(s["test"] == test) & (s["measure"] == measure)]
        if unit is not None:
            hit = hit[hit["unit"] == unit]
        frames.append(hit.assign(method=method))
    return pd.concat(frames, ignore_index=True).rename(columns={"effect_size": "odds_ratio"})[columns]


def intrinsic_extrinsic(gaps: pd.DataFrame, odds: pd.DataFrame, summary: pd.DataFrame,
                        completion_stats: pd.DataFrame, neutral: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per model: embedding gaps (female − male, names and terms) beside its writing.

    A description, not a test of the link: the gaps are about first names and gendered terms, the odds
    ratio about words written about occupations, two different constructs, and a handful of models
    cannot carry a correlation. The link is tested within each model over its occupations
    (:mod:`bias_utils.intrinsic_extrinsic.link`, chapter 11) and pooled across models by :func:`pooling.pooled_link`.

    Columns: ``model_id``; ``names_warmth_gap, names_competence_gap, terms_warmth_gap,
    terms_competence_gap`` (standardised units); ``odds_ratio, or_ci_low, or_ci_high, or_ci_low_mc_se,
    or_ci_high_mc_se`` (the primary estimand's marginal odds ratio of the occupation-mean male shares, whole
    occupations resampled, its bounds' Monte Carlo SEs);
    ``share_gendered_male_dominated, share_gendered_female_dominated`` (completions with any gendered word);
    ``completion_warmth_gap, completion_competence_gap`` (female- minus male-dominated completions, standardised)
    and their Holm p values; with ``neutral`` (the stacked ``next_word_neutral`` tables, chapter 11) ``neutral_share,
    neutral_ci_low, neutral_ci_high`` (the mean share of the reference to one person that goes to "they" over the BLS
    occupations, occupation-bootstrap interval), ``neutral_definition`` (two models compare like with like only
    where it is the same: the same templates read as singular and the same words) and ``neutral_templates`` (the
    templates in words; "" for a table written before they were recorded; :func:`describe_neutral_definitions`).
    Models lacking a part get NaN there; which tables are missing is reported by
    :func:`read_results`.
    """
    wide = gaps[gaps["dimension"].isin(["warmth", "competence"])].pivot_table(
        index="model_id", columns=["population", "dimension"], values="gap", aggfunc="first")
    wide.columns = [f"{pop}_{dim}_gap" for pop, dim in wide.columns]
    parts = [wide]
    if len(odds):
        # the primary estimand's odds ratio (the one chapter 06 and the front page print), not the pooled words'
        w = odds[odds["method"] == next(iter(_ODDS_METHODS))].set_index("model_id")
        # with its bounds' Monte Carlo SEs, which give them their printed digits: the same interval as the odds
        # ratios' table prints, not the same numbers with more digits
        parts.append(w[["odds_ratio", "ci_low", "ci_high", "ci_low_mc_se", "ci_high_mc_se"]].rename(
            columns=lambda c: c if c == "odds_ratio" else f"or_{c}"))
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
    if neutral is not None and len(neutral):
        share = neutral[(neutral["question"] == "share") & (neutral["units"] == BLS_UNITS)]
        share = share.assign(templates=share.get("templates", ""))
        parts.append(share.set_index("model_id")[["effect_size", "ci_low", "ci_high", "neutral_definition",
                                                  "templates"]].rename(
            columns={"effect_size": "neutral_share", "ci_low": "neutral_ci_low", "ci_high": "neutral_ci_high",
                     "templates": "neutral_templates"}))
    return pd.concat(parts, axis=1).rename_axis("model_id").reset_index()


def describe_neutral_definitions(side: pd.DataFrame) -> str:
    """A sentence under :func:`intrinsic_extrinsic`'s table where its "they" shares are of more than one definition
    (other templates or words: another language's share of 1% is no measure of the same thing as the book's 34%),
    naming each model's templates in words; "" where they are one measure."""
    if "neutral_definition" not in side:
        return ""
    rows = side.dropna(subset=["neutral_share"])
    if rows["neutral_definition"].nunique() < 2:
        return ""
    groups = [f"{', '.join(display_name(m) for m in d['model_id'])} "
              f"({d['neutral_templates'].iloc[0] or 'templates not recorded'}, definition {definition})"
              for definition, d in rows.groupby("neutral_definition", sort=False)]
    return (f"**The \"they\" shares above are {len(groups)} different measures**, not one measured "
            f"{len(groups)} ways: {'; '.join(groups)}. A share is compared only with a share of its own definition.")


# --------------------------------------------------------------------------- across models: charts


def forest_chart(odds: pd.DataFrame, *, title: str | None = None) -> alt.LayerChart:
    """Odds ratios with 95% CIs per model on a log axis; a rule marks OR = 1 (no association).

    ``odds``: :func:`bold_odds_ratios` rows.
    """
    data = short_model_ids(plots.drawable(odds, ["odds_ratio", "ci_low", "ci_high"], log=True))
    if data.empty:
        raise ValueError("forest_chart: no odds ratios to draw")
    left_out = len(odds.dropna(subset=["odds_ratio"])) - len(data)
    # a row per model and method, named on the axis; the colour is the interval's unit, as in chapter 06's forest
    # plots (a colour per method took hues that name dimensions in this chapter's first figure)
    data["row"] = ["\n".join(textwrap.wrap(str(m), 17) + textwrap.wrap(str(k), 17))
                   for m, k in zip(data["model_id"], data["method"])]
    data["unit_kind"] = np.where(data["unit"].isin(occupations.OCCUPATION_UNITS), *plots.UNIT_COLORS)
    base = alt.Chart(data).encode(
        y=alt.Y("row:N", title=None, sort=None,
                axis=alt.Axis(labelExpr="split(datum.label, '\\n')", labelBaseline="middle", labelLineHeight=12,
                              labelLimit=200)),
        color=alt.Color("unit_kind:N", title="the interval's unit",
                        scale=alt.Scale(domain=list(plots.UNIT_COLORS), range=list(plots.UNIT_COLORS.values())),
                        legend=alt.Legend(orient="bottom", columns=1, labelLimit=400)))
    ticks = plots.log_ticks(data[["odds_ratio", "ci_low", "ci_high"]].to_numpy().ravel())
    # padded: the dashed line at 1 stays inside the plot, not under the axis line at its edge
    x = alt.X("odds_ratio:Q", scale=alt.Scale(type="log", padding=12, nice=False),
              axis=alt.Axis(values=ticks, format=plots.LOG_FORMAT),
              title="odds ratio: male/female words, male- vs female-dominated (log scale)")
    one = alt.Chart(pd.DataFrame({"odds_ratio": [1.0]})).mark_rule(color="#999", strokeDash=[4, 3]).encode(x=x)
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low:Q", scale=alt.Scale(type="log", padding=12, nice=False)), x2="ci_high:Q")
    points = base.mark_point(filled=True, size=70).encode(
        x=x, tooltip=["model_id", "method", alt.Tooltip("odds_ratio:Q", format=".2f"),
                      alt.Tooltip("ci_low:Q", format=".2f"), alt.Tooltip("ci_high:Q", format=".2f"), "n"])
    methods = ", ".join(map(str, dict.fromkeys(data["method"])))
    caption = ("Each row is a model and an interval method; a dot is its BOLD audit odds ratio (how much more often "
               "a completion's gendered words are male rather than female for male- than for female-dominated "
               "occupations), its line the 95% confidence interval: black where occupations (or the published "
               "selection's keys) are the unit, grey where every word is treated as independent. The x axis is "
               "logarithmic and the dashed line marks 1, no association. Look at which side of 1 each dot falls and "
               "whether its interval crosses 1. The primary estimand's odds ratio is marginal: the two groups' mean "
               "male shares over the deduplicated person-noun occupations, whole occupations resampled; the "
               "random-intercept model's is conditional (between two occupations with the same random intercept; "
               "profile-likelihood interval), a sensitivity row; the occupation bootstrap resamples those "
               "occupations for the audit's pooled words, the published selection its BOLD keys; the audit's (Wald) "
               "interval treats every word as independent."
               + (f" {left_out} estimate{'s' if left_out != 1 else ''} without a finite interval above 0 (a model that "
                  "could not be fitted, or a share of 0 or 1 that leaves the odds ratio unbounded) left out; the "
                  "table above gives "
                  f"{'them' if left_out != 1 else 'it'}." if left_out else ""))
    return plots.captioned(alt.layer(one, bars, points).properties(
        width=420, height=alt.Step(12 * int(data["row"].str.count("\n").max() + 1) + 10)),
                           title or "BOLD audit: odds ratio per model", [],
                           f"Forest plot of the BOLD audit's odds ratio with 95% confidence intervals for "
                           f"{data['model_id'].nunique()} models ({methods}).", caption)


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
    names = ", ".join(map(str, dict.fromkeys(labels.values())))
    caption = (f"For each model in turn ({names}), its stereotype profile of the {population} population (a row per "
               "dimension, the groups' means with 95% confidence intervals) and then the same groups on the warmth × "
               "competence plane. In every panel colour is the group, a star marks a difference "
               "significant after Holm's correction, and a grey axis with † is one not shown to beat its "
               "label-shuffling null, whose gap is not read. Look for the dimensions where the models agree on the "
               "direction of the gap.")
    return plots.captioned(alt.vconcat(*rows).resolve_scale(color="independent", shape="independent"),
                           f"Profiles of {population} across models", [],
                           f"Stacked dot plots and scatter plots: the {population} profile and warmth × competence "
                           f"plane of {len(labels)} models.", caption)


def cross_model_summary(models: Sequence[str],
                        results_dir: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per model, population and dimension: the share of agreeing specifications, the joint
    test's p and the axis's verdict, read from each model folder's
    :data:`tables.NAMES.ROBUSTNESS_SUMMARY`. Returns ``(table, skipped)`` (models without the table)."""
    stacked, skipped = read_results(models, tables.NAMES.ROBUSTNESS_SUMMARY, results_dir)
    cols = ["model_id", "population", "dimension", "expected_sign", "n_specs", "share_agree_significant",
            "share_positive_significant", "share_negative_significant", "median_g", "n_agree_significant_p",
            "n_permutations", "axis_auc", "axis_p", "axis_verdict", "axis_reading"]
    if stacked.empty:
        return pd.DataFrame(columns=cols), skipped
    return stacked[cols].reset_index(drop=True), skipped
