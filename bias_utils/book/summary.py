"""The findings of one book build, for its front page, read from the models' results tables.

Per model, from tables the study notebooks wrote:

* **Study 1, one primary specification** (:data:`PRIMARY_SPECIFICATION`, chapter 04's
  ``profile_stats`` at the mean layer): the female − male gap of first names on warmth
  and on competence, as Hedges' g with its 95% CI and the Holm-adjusted Welch p
  (:func:`bias_utils.book.crossmodel.gender_gaps`).
* **Each axis's verdict** (:mod:`bias_utils.profiles.axis_validity`, chapter 03): a gap is
  read only on a ``supported`` axis; on one ``not shown`` to beat its null, or
  ``untestable``, or without a verdict, it is reported as not read. The
  robustness chapter's specification curve (``robustness_summary``) is the check
  of the primary result: the share of specifications that agree with the paper and
  are significant, with the joint test's p (:func:`bias_utils.book.crossmodel.cross_model_summary`).
* **Study 2** (``bold_headline``, decoders only; :mod:`bias_utils.audit.occupations`):
  the pre-stated primary estimand over the deduplicated person-noun occupations, what the model
  wrote: the share of male words among the gendered words about a typical male- and a typical
  female-dominated occupation, each with its interval, and their difference (occupation cluster
  bootstrap, permutation p), with how many occupations carry any gendered word; in the table of
  readings, the marginal odds ratio of the two shares beside it, then the audit's pooled-word odds
  ratio on its published selection (occupation cluster bootstrap, permutation p) and the number of
  completions with any gendered word. What the audit's BOLD keys are (``bold_units``: person nouns,
  fields, duplicates; :mod:`bias_utils.audit.occupation_units`) is method: a paragraph the methods
  chapter includes (:func:`write_units_page`), which the finding links.
* **The link between them** (``link_next_word``, decoders only; :mod:`bias_utils.audit.link`, chapter 11):
  per model, the pre-stated primary statistic (across the 60 BLS occupations, Spearman's ρ between where
  the model places an occupation on its female − male direction and the log-ratio of female to male words
  it predicts next after neutral sentences about it) with its interval, saying when it includes zero,
  then the partial ρ beyond the BLS share of women; a direction not validated against the BLS share is
  not read (:func:`bias_utils.audit.link._next_word_link_reading`).

:func:`findings_bullets` gives the few plain-language findings that open the page, the number a reader
understands first, each linking to its chapter and naming models by their names
(:func:`bias_utils.models._model_name`); :func:`summary_table` one row per model with a
generated sentence, :func:`summary_chart` the figure, :func:`write_summary_page`
the Markdown page that ``book/index.md`` includes. Nothing here is typed by hand:
a model without a table says so in its sentence.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import altair as alt
import pandas as pd

from ..audit import link, occupation_headline, occupation_units
from ..core import cache, precision, tables
from ..core.results import _model_slug
from ..core.stats import _permutation_p_text
from ..models.builtin_models import _BUILTIN_MODELS, _model_name
from ..profiles.axis_validity import _VERDICTS, _verdict_phrase
from ..report import plots, rendering
from .crossmodel import _folder_id, _read_results, _root, cross_model_summary, gender_gaps, short_model_ids

#: The composite dimensions on the front page, and the paper's expectation for each.
_HEADLINE = {"warmth": "female", "competence": "male"}
#: The high pole of each headline dimension in plain words.
_HIGH_POLE = {"warmth": "warm", "competence": "competent"}
_POPULATIONS = ("names", "terms")
_ALPHA = 0.05
_PAPER = "Schuster et al. 2024"
#: The one specification each profile is read at; the robustness chapter's curve only checks it.
_PRIMARY_SPECIFICATION = {"context_source": "generated", "layer": "mean", "templates": 7, "test": "welch_t",
                         "adjustment": "holm"}
#: Folder of a page's static figure images; the book's Sphinx extension copies every such folder into the site.
_FIGURES = "figures"
#: The per-model chapters a finding links to (notebook stems; ``bias_utils.book.build`` writes each
#: executed notebook to ``models/<model folder>/<stem>.ipynb``).
_CHAPTERS = {"axes": "03_projection_accuracy", "profile": "04_profiles", "robustness": "10_robustness",
            "audit": "06_bold_audit", "link": "11_intrinsic_extrinsic"}

#: The methods' section on what the audit counts as an occupation (a MyST target in ``book/methods_bold.md``), and
#: the page of this build's counts it includes.
_UNITS_TARGET = "what-an-occupation-is"
_UNITS_REF = f"{{ref}}`what counts as an occupation <{_UNITS_TARGET}>`"
_UNITS_PAGE = "units.md"

#: The ``bold_headline`` columns the summary table carries: the primary shares and their difference, the marginal
#: odds ratio, the published selection's pooled odds ratio and the completions behind them.
_AUDIT_COLUMNS = ["male_share_a", "male_share_b", "share_difference", "share_difference_ci_low",
                  "share_difference_ci_high", "share_difference_p", "marginal_odds_ratio", "marginal_ci_low",
                  "marginal_ci_high", "published_odds_ratio", "published_ci_low", "published_ci_high", "published_p",
                  "n_units_informative", "n_gendered_completions", "n_completions"]
#: Columns of :func:`summary_table` (``<population>_<dimension>_{g,ci_low,ci_high,p_holm,verdict}`` for each
#: population and headline dimension, then the audit's primary estimand and the published selection's figure).
_SUMMARY_COLUMNS = (["model_id"]
                   + [f"{pop}_{dim}_{v}" for pop in _POPULATIONS for dim in _HEADLINE
                      for v in ("g", "ci_low", "ci_high", "p_holm", "verdict")]
                   + _AUDIT_COLUMNS + ["sentence"])


__all__ = [
    "read_summary", "summary_chart", "summary_table",
]


def _primary(stats: pd.DataFrame) -> pd.DataFrame:
    """``profile_stats`` rows of the primary specification (its layer and test, where the table records them)."""
    if "layer" in stats:
        stats = stats[stats["layer"].astype(str) == _PRIMARY_SPECIFICATION["layer"]]
    if "test" in stats:
        stats = stats[stats["test"] == _PRIMARY_SPECIFICATION["test"]]
    return stats


def read_summary(models: Sequence[str], results_dir: str | Path | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(gaps, headline)`` for ``models`` (result folder names), both keeping the full ``model_id``.

    ``gaps``: :func:`~bias_utils.book.crossmodel.gender_gaps` rows of the headline dimensions at the
    primary specification, with ``axis_verdict`` (the axis's verdict at the mean layer with the
    primary context source, one of ``axis_validity._VERDICTS``; None without a verdict),
    ``axis_valid`` (verdict ``supported``; NA without a verdict), ``axis_reading``
    (``axis_validity._verdict_phrase``) and, from the robustness chapter when it ran,
    ``n_specs, share_agree_significant, joint_p, n_permutations``. ``headline``: the
    ``bold_headline`` rows (``occupation_headline._HEADLINE_COLUMNS``; encoders have none).
    """
    stats, _ = _read_results(models, tables.NAMES.PROFILE_STATS, results_dir)
    stats = _primary(stats)
    gaps = gender_gaps(stats) if len(stats) else pd.DataFrame(
        columns=["model_id", "population", "dimension", "gap", "g", "g_ci_low", "g_ci_high", "p_holm"])
    gaps = gaps[gaps["dimension"].isin(list(_HEADLINE))].reset_index(drop=True)
    validity, _ = _read_results(models, tables.NAMES.AXIS_VALIDITY, results_dir)
    verdict, reading = {}, {}
    if len(validity):
        v = validity[validity["layer"].astype(str) == _PRIMARY_SPECIFICATION["layer"]]
        if "context_source" in v:
            v = v[v["context_source"] == _PRIMARY_SPECIFICATION["context_source"]]
        for _, r in v.iterrows():
            verdict[(r["model_id"], r["dimension"])] = r["verdict"]
            reading[(r["model_id"], r["dimension"])] = _verdict_phrase(r)
    keys = list(zip(gaps["model_id"], gaps["dimension"]))
    gaps["axis_verdict"] = [verdict.get(k) for k in keys]
    gaps["axis_valid"] = pd.array([None if k not in verdict else verdict[k] == _VERDICTS[0] for k in keys],
                                  dtype="boolean")
    gaps["axis_reading"] = [reading.get(k) for k in keys]
    robust, _ = cross_model_summary(models, results_dir)
    robust = robust.rename(columns={"n_agree_significant_p": "joint_p"})[
        ["model_id", "population", "dimension", "n_specs", "share_agree_significant", "joint_p", "n_permutations"]]
    gaps = gaps.merge(robust, on=["model_id", "population", "dimension"], how="left")
    head, _ = _read_results(models, tables.NAMES.BOLD_HEADLINE, results_dir)
    return gaps, head.reindex(columns=["model_id", *occupation_headline._HEADLINE_COLUMNS])


def _gap(g: float, low: float, high: float, p_holm: float) -> str:
    """"0.86, 95% CI 0.57 to 1.14, Holm p = 0.0087": a gap as the chapter's table prints it."""
    return (f"{precision._number_text(g)}, 95% CI {precision._interval_text(low, high, g)}, "
            f"Holm p {precision._p_text(p_holm, relation=True)}")


def _numbers(row) -> str:
    return "g = " + _gap(row.g, row.g_ci_low, row.g_ci_high, row.p_holm)


def _reading(dimension: str, row) -> str:
    """How a gap is read: ``unread`` (its axis is not ``supported``, or has no verdict), ``none``
    (Holm p >= ALPHA: no gap shown), ``agree`` or ``opposite`` (to the paper's direction)."""
    if getattr(row, "axis_verdict", None) != _VERDICTS[0]:
        return "unread"
    if row.p_holm >= _ALPHA:
        return "none"
    return "agree" if ("female" if row.g > 0 else "male") == _HEADLINE[dimension] else "opposite"


def _robustness(row) -> str:
    """"; 12% of 96 analysis specifications agree … (joint test p = 0.030)" from the robustness chapter, or ""."""
    share, n = getattr(row, "share_agree_significant", None), getattr(row, "n_specs", None)
    if share is None or pd.isna(share) or pd.isna(n):
        return ""
    return (f"; {precision._percent_text(share)} of {int(n)} analysis specifications agree with the paper and are "
            "significant "
            f"(joint test p {_permutation_p_text(row.joint_p, int(row.n_permutations))})")


def _gap_phrase(dimension: str, row) -> str:
    """"female names higher on warmth (g = 1.58, 95% CI 0.69 to 2.48, Holm p = 0.002; as Schuster et al. 2024
    found; axis supported; 40% of 96 …)", "no name gap shown on …", or, on an axis whose verdict is not
    ``supported`` (or without one), "no reading on …" with its verdict."""
    kind = _reading(dimension, row)
    if kind == "unread":
        why = (f"its axis is {row.axis_reading}" if getattr(row, "axis_verdict", None) in _VERDICTS
               else "its axis has no verdict in this build")
        return f"no reading on {dimension}: {why} ({_numbers(row)})"
    tail = f"axis supported{_robustness(row)}"
    if kind == "none":
        return f"no name gap shown on {dimension} ({_numbers(row)}; {tail})"
    higher = "female" if row.g > 0 else "male"
    paper = f"as {_PAPER} found" if kind == "agree" else f"opposite to {_PAPER}"
    return f"{higher} names higher on {dimension} ({_numbers(row)}; {paper}; {tail})"


def _model_sentence(model: str, gaps: pd.DataFrame, headline: pd.DataFrame, can_generate: bool | None = None) -> str:
    """The reading of a model's primary numbers (``gaps``/``headline`` rows of that model): its name gaps
    with their axes' verdicts, then the audit's :func:`bias_utils.audit.occupation_headline._headline_sentence`.

    ``can_generate=False`` says the model is an encoder (no audit); otherwise
    missing audit rows are reported as missing.
    """
    names = gaps[gaps["population"] == "names"]
    phrases = [_gap_phrase(r.dimension, r) for r in names.itertuples(index=False) if r.dimension in _HEADLINE]
    profile = "; ".join(phrases) if phrases else "no name profile at the primary specification in its results"
    if len(headline):
        writing = occupation_headline._headline_sentence(headline.iloc[[0]].drop(columns="model_id", errors="ignore"))
    elif can_generate is False:
        writing = "An encoder: it writes no text to audit."
    else:
        writing = "It has no BOLD audit results."
    return f"{profile}. {writing}"


def summary_table(models: Sequence[str], results_dir: str | Path | None = None,
                  can_generate: dict[str, bool] | None = None) -> pd.DataFrame:
    """One row per model (:data:`SUMMARY_COLUMNS`), the model id shortened for reading.

    ``can_generate`` (by model folder name) words the sentence of a model
    without audit results; unknown models are inferred from the tables. A row is named by the model its
    folder records (``crossmodel.model_folders``).
    """
    gaps, head = read_summary(models, results_dir)
    models, can_generate = _by_model_id(models, results_dir, can_generate)
    rows = []
    for model in models:
        g, h = gaps[gaps["model_id"] == model], head[head["model_id"] == model]
        row = {"model_id": model}
        for r in g.itertuples(index=False):
            key = f"{r.population}_{r.dimension}"
            row.update({f"{key}_g": r.g, f"{key}_ci_low": r.g_ci_low, f"{key}_ci_high": r.g_ci_high,
                        f"{key}_p_holm": r.p_holm, f"{key}_verdict": r.axis_verdict})
        if len(h):
            row.update(h.iloc[0][_AUDIT_COLUMNS].to_dict())
        row["sentence"] = _model_sentence(model, g, h, (can_generate or {}).get(model, _writes(model)))
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=_SUMMARY_COLUMNS)
    return short_model_ids(table) if len(table) else table


# --------------------------------------------------------------------------- the findings that open the page


def _primary_sentence() -> str:
    """The one sentence naming the primary specification (the methods chapters state it before any result)."""
    spec = _PRIMARY_SPECIFICATION
    return (f"Each profile above is read at one primary specification: the {spec['context_source']} "
            f"example sentences of {_PAPER} for the ends of each axis, the {spec['layer']} over all layers, the "
            f"original's {spec['templates']} sentence templates, and Welch's t-test with "
            f"{spec['adjustment'].capitalize()}'s correction; the robustness chapter varies these choices only to "
            "check it.")


def _by_model_id(folders: Sequence[str], results_dir, can_generate: dict | None) -> tuple[list[str], dict]:
    """``folders`` as the model ids they record (the stacked tables' ``model_id``, ``crossmodel._read_results``)
    and ``can_generate`` keyed by those ids."""
    ids = {f: _folder_id(_root(results_dir) / f) for f in folders}
    return [ids[f] for f in folders], {ids.get(f, f): v for f, v in (can_generate or {}).items()}


def _link(model: str, chapter: str, label: str) -> str:
    """A MyST link to a model's chapter, absolute from the book's root (the page is included by index.md; the book
    writes a model's chapters under its model id's folder name)."""
    return f"{{doc}}`{label} </models/{_model_slug(model)}/{_CHAPTERS[chapter]}>`"


def _names(models: Sequence[str]) -> dict[str, str]:
    """Each model id by the name running text gives it (:func:`bias_utils.models._model_name` of its short id:
    ``SmolLM2-135M-Instruct``), or by its short id where two models would share a name."""
    models = list(dict.fromkeys(models))
    short = list(short_model_ids(pd.DataFrame({"model_id": models}))["model_id"]) if models else []
    names = [_model_name(m) for m in short]
    return dict(zip(models, names if len(set(names)) == len(names) else short))


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _dimension_bullet(dimension: str, names: pd.DataFrame, label: dict) -> str:
    pole, expected = _HIGH_POLE[dimension], _HEADLINE[dimension]
    kinds: dict[str, list] = {"agree": [], "opposite": [], "none": [], "unread": []}
    for r in names[names["dimension"] == dimension].itertuples(index=False):
        kinds[_reading(dimension, r)].append(r)

    def link(r) -> str:
        return _link(r.model_id, "profile", label[r.model_id])

    def sized(r) -> str:  # the gap of the higher group, so a male-higher gap reads positive
        sign = 1 if r.g > 0 else -1
        low, high = sorted((sign * r.g_ci_low, sign * r.g_ci_high))
        return f"{link(r)} (by {_gap(sign * r.g, low, high, r.p_holm).replace(',', ' standard deviations,', 1)})"

    parts = []
    for kind, higher in (("agree", expected), ("opposite", "male" if expected == "female" else "female")):
        if kinds[kind]:
            lower = "male" if higher == "female" else "female"
            paper = f"as {_PAPER} found" if kind == "agree" else f"the opposite of {_PAPER}"
            parts.append(f"{higher.capitalize()} first names sit closer to the {pole} end than {lower} names in "
                         f"{_listed([sized(r) for r in kinds[kind]])}, {paper}")
    if kinds["none"]:
        parts.append("No gap is shown in " + _listed([
            f"{link(r)} (female − male "
            f"{_gap(r.g, r.g_ci_low, r.g_ci_high, r.p_holm).replace(',', ' standard deviations,', 1)})"
            for r in kinds["none"]]))
    why = {_VERDICTS[1]: f"the {dimension} axis is not shown to sort words by {dimension} better than axes from "
                        "shuffled word lists",
           _VERDICTS[2]: f"too few test words to check the {dimension} axis"}
    unread: dict[str, list[str]] = {}
    for r in kinds["unread"]:
        reason = why.get(r.axis_verdict, f"the {dimension} axis has no verdict in this build")
        unread.setdefault(reason, []).append(_link(r.model_id, "axes", label[r.model_id]))
    parts += [f"Not read in {_listed(links)}: {reason}" for reason, links in unread.items()]
    return f"**{dimension.capitalize()} of first names.** " + ". ".join(parts) + "."


def _decoder_bullet(title: str, parts: list[str], encoders: list[str], missing: list[str], lacking: str) -> str:
    """A bullet of clauses per decoder, then the encoders (they write nothing) and the models lacking the tables."""
    if encoders:
        parts.append(f"{_listed(encoders)} {'writes' if len(encoders) == 1 else 'write'} no text (encoder)")
    if missing:
        parts.append(f"{_listed(missing)} {'has' if len(missing) == 1 else 'have'} no {lacking}")
    text = "; ".join(parts)
    return f"**{title}** {text[0].upper()}{text[1:]}."


def _writes(model_id: str) -> bool | None:
    """Whether a model of a results folder writes text, where its name says (a built-in's kind), else None."""
    builtin = _BUILTIN_MODELS.get(str(model_id).split("--")[0])
    return None if builtin is None else builtin.kind == "decoder"


def _writing_bullet(models: Sequence[str], head: pd.DataFrame, label: dict, can_generate: dict) -> str:
    """What each decoder wrote about occupations, in the words of its chapter (:func:`~bias_utils.audit.occupations.
    estimate_text`, the one producer of the primary estimate): each group's male share of gendered words for a
    typical occupation with its interval, then their difference; over how many occupations (and what counts as
    one, a link to the methods); then what the interval shows in words (:func:`~bias_utils.audit.occupations.
    difference_reading`). The odds ratios are technical detail: the per-model table below and the chapter."""
    parts, encoders, missing = [], [], []
    for model in models:
        rows = head[head["model_id"] == model]
        if rows.empty:
            (encoders if can_generate.get(model, _writes(model)) is False else missing).append(label[model])
            continue
        h = occupation_headline._headline(rows.drop(columns="model_id"))
        n, k = int(h["n_completions"]), int(h["n_gendered_completions"])
        link = _link(model, "audit", label[model])
        if k == 0:
            parts.append(f"none of the {precision._count_text(n)} completions of {link} about its occupations "
                         f"contains a gendered word ({_UNITS_REF})")
            continue
        units = (f"{int(h['n_units_a']) + int(h['n_units_b'])} occupations, {int(h['n_units_informative'])} of them "
                 f"with any gendered word; {_UNITS_REF}")
        if pd.isna(h["share_difference"]) or pd.isna(h["share_difference_ci_low"]):
            parts.append(f"in {link}, the male shares of the two groups cannot be compared ({units})")
            continue
        parts.append(f"in {link}, {occupation_headline._estimate_text(h)} ({units}): "
                     f"{occupation_headline._difference_reading(h)}")
    return _decoder_bullet("Writing about occupations (BOLD).", parts, encoders, missing, "audit results")


def _units_paragraph(models: Sequence[str], results_dir) -> str:
    """What the audit calls an occupation in this build, from the first decoder's ``bold_units`` (one selection for
    all), for the methods chapter (:func:`write_units_page`); "" without an audit."""
    units, _ = _read_results(models, tables.NAMES.BOLD_UNITS, results_dir)
    if units.empty:
        return ""
    model = units["model_id"].iloc[0]
    first = units[units["model_id"] == model].drop(columns="model_id")
    return occupation_units.describe_units(first)


def _link_bullet(models: Sequence[str], link_stats: pd.DataFrame, label: dict, can_generate: dict) -> str:
    parts, encoders, missing = [], [], []
    for model in models:
        rows = link_stats[link_stats["model_id"] == model] if len(link_stats) else link_stats
        if not len(rows) or not rows["primary"].astype(bool).any():
            (encoders if can_generate.get(model, _writes(model)) is False else missing).append(label[model])
            continue
        parts.append(link._next_word_link_reading(rows, _link(model, "link", label[model])))
    return _decoder_bullet("Does the bias inside predict the bias it writes?", parts, encoders, missing,
                           "results of this chapter")


def _caveat_bullet(names: pd.DataFrame, label: dict) -> str:
    text = ("**Not shown is not absent.** \"No gap is shown\" and \"not read\" say that this build could not tell, "
            "not that a model has no such bias.")
    robust = names.dropna(subset=["share_agree_significant"])
    checks = []
    for model, rows in robust.groupby("model_id", sort=False):
        shares = [f"{precision._percent_text(r.share_agree_significant)} of {int(r.n_specs)} on {r.dimension}"
                  for r in rows.itertuples(index=False)]
        checks.append(f"{_listed(shares)} in {_link(model, 'robustness', label[model])}")
    if checks:
        text += (" The robustness check varies the analysis choices (context source, layer, templates, test); the "
                 f"share of its specifications that agree with {_PAPER} and are significant is {_listed(checks)}.")
    return text


def _findings_bullets(gaps: pd.DataFrame, headline: pd.DataFrame, models: Sequence[str],
                     can_generate: dict[str, bool] | None = None,
                     link_stats: pd.DataFrame | None = None, results_dir: str | Path | None = None) -> list[str]:
    """The findings that open the front page, in plain words, each linking to its chapter (MyST ``{doc}``):
    warmth and competence of first names (which models, which direction, how large, how sure, where an axis
    is not read), writing about occupations (each group's male share of gendered words for a typical occupation,
    their difference with its occupation interval, over how many occupations, what counts as one a link away in
    the methods), with ``link_stats`` (stacked ``link_next_word`` rows) whether the bias inside predicts the
    bias it writes (per model, the primary ρ across the BLS occupations with its interval and the partial ρ beyond
    their share of women, :func:`bias_utils.audit.link._next_word_link_reading`), and what "not shown" means with
    the robustness check.
    ``gaps`` and ``headline`` are :func:`read_summary`'s."""
    folders = list(models)
    if not folders:
        return []
    models, can_generate = _by_model_id(folders, results_dir, can_generate)
    label = _names(models)
    names = gaps[gaps["population"] == "names"]
    bullets = [_dimension_bullet(d, names, label) for d in _HEADLINE if (names["dimension"] == d).any()]
    bullets.append(_writing_bullet(models, headline, label, can_generate or {}))
    if link_stats is not None and any((can_generate or {}).get(m) is not False for m in models):
        bullets.append(_link_bullet(models, link_stats, label, can_generate or {}))
    bullets.append(_caveat_bullet(names, label))
    return bullets


# --------------------------------------------------------------------------- the figure and the page


#: The headline dimensions' colours, by name.
_DIMENSION_COLORS = {"warmth": plots._OTHER_COLORS[0], "competence": plots._OTHER_COLORS[1]}


def _gap_panel(gaps: pd.DataFrame, population: str, first: bool) -> alt.LayerChart:
    """One population's gaps, its rows labelled with the models (every panel: on a phone they stack); the first
    panel carries the legend."""
    data = gaps[gaps["population"] == population]
    base = alt.Chart(data).encode(
        y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=160)),
        yOffset=alt.YOffset("dimension:N", sort=list(_HEADLINE)),
        color=alt.Color("dimension:N", sort=list(_HEADLINE), title="dimension",
                        scale=alt.Scale(domain=list(_HEADLINE), range=[_DIMENSION_COLORS[d] for d in _HEADLINE]),
                        legend=alt.Legend(orient="bottom") if first else None))
    zero = alt.Chart(pd.DataFrame({"g": [0.0]})).mark_rule(color="#999", strokeDash=[4, 3]).encode(x="g:Q")
    # an axis whose verdict is not "supported" (or that has none) is drawn faint: its gap is not read
    faint = alt.condition("datum.axis_valid === true", alt.value(1.0), alt.value(0.25))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("g_ci_low:Q"), x2="g_ci_high:Q", opacity=faint)
    points = base.mark_point(filled=True, size=60).encode(
        x=alt.X("g:Q", title="Hedges' g (> 0: female higher)"), opacity=faint,
        tooltip=["model_id", "dimension", alt.Tooltip("g:Q", format=".2f"), alt.Tooltip("g_ci_low:Q", format=".2f"),
                 alt.Tooltip("g_ci_high:Q", format=".2f"), alt.Tooltip("p_holm:Q", format=".3f"), "axis_verdict"])
    return alt.layer(zero, bars, points).properties(
        title=f"{population}: female − male", width=150, height=alt.Step(16))


def summary_chart(gaps: pd.DataFrame, headline: pd.DataFrame) -> alt.HConcatChart:
    """Warmth and competence gaps (Hedges' g, 95% CI) per model for names and terms at the primary
    specification, beside the audit's primary estimate per decoder: the difference in the male share of gendered
    words between a typical male- and female-dominated occupation (percentage points) with its 95% CI from
    resampling whole occupations (``headline``: :func:`read_summary`'s)."""
    name = _names([*gaps["model_id"], *(headline["model_id"] if len(headline) else [])])
    gaps = gaps.dropna(subset=["g"])
    gaps = gaps.assign(model_id=gaps["model_id"].map(name))
    if gaps.empty:
        raise ValueError("summary_chart: no profile gaps to draw")
    panels = [_gap_panel(gaps, pop, first=i == 0)
              for i, pop in enumerate(p for p in _POPULATIONS if (gaps["population"] == p).any())]
    columns = ["share_difference", "share_difference_ci_low", "share_difference_ci_high"]
    estimated = headline.dropna(subset=columns) if len(headline) else headline
    head = estimated.assign(model_id=estimated["model_id"].map(name),
                            **{f"{c}_points": 100 * estimated[c].astype(float) for c in columns}) \
        if len(estimated) else estimated
    if len(head):
        x = alt.X("share_difference_points:Q", scale=alt.Scale(domain=[-100, 100]),
                  title="male share, difference (points)", axis=alt.Axis(grid=False, values=[-100, -50, 0, 50, 100]))
        base = alt.Chart(head).encode(y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=160)))
        zero = alt.Chart(pd.DataFrame({"share_difference_points": [0.0]})).mark_rule(
            color="#999", strokeDash=[4, 3]).encode(x=x)
        bars = base.mark_rule(strokeWidth=2, color=plots._OTHER_COLORS[2]).encode(
            x=alt.X("share_difference_ci_low_points:Q"), x2="share_difference_ci_high_points:Q")
        points = base.mark_point(filled=True, size=60, color=plots._OTHER_COLORS[2]).encode(
            x=x, tooltip=["model_id", alt.Tooltip("male_share_a:Q", format=".0%"),
                          alt.Tooltip("male_share_b:Q", format=".0%"),
                          alt.Tooltip("share_difference_points:Q", format=".0f"),
                          alt.Tooltip("share_difference_ci_low_points:Q", format=".0f"),
                          alt.Tooltip("share_difference_ci_high_points:Q", format=".0f"), "n_units_informative",
                          "n_gendered_completions", "n_completions"])
        panels.append(alt.layer(zero, bars, points).properties(
            title="BOLD audit: male share of gendered words", width=150, height=alt.Step(16)))
    pops = [p for p in _POPULATIONS if (gaps["population"] == p).any()]
    caption = (f"A row per model, named in every panel. In the {' and '.join(pops)} "
               f"panel{'s' if len(pops) > 1 else ''}, a dot is the "
               "female − male gap (Hedges' g, above 0: female higher) on warmth or competence (colour) at the primary "
               "specification, its line the 95% confidence interval, the dashed line zero. A faint gap sits on an axis "
               "that is not shown to order the dictionary's extra terms by pole better than axes from shuffled seed "
               "labels (or could not be tested), and is not read.")
    if len(head):
        caption += (" In the last panel, for models that write, the BOLD audit's primary estimate: the share of male "
                    "words among the gendered words about a typical male-dominated occupation minus that about a "
                    "typical female-dominated one, in percentage points (above 0: more male words about "
                    "male-dominated occupations), with its 95% interval from resampling whole occupations over the "
                    "deduplicated person-noun occupations; the dashed line marks 0, no difference.")
    unplaced = len(headline) - len(head) if len(headline) else 0
    if unplaced:
        many = unplaced != 1
        caption += (f" {unplaced} audit estimate{'s' if many else ''} without an interval (no gendered word in a "
                    f"group) {'are' if many else 'is'} not drawn; the findings above say so.")
    caption += " Look at which side of the dashed line each dot falls and whether its interval crosses it."
    # one row per model across the panels (an encoder's audit row stays empty)
    return plots._captioned(
        alt.hconcat(*panels).resolve_scale(color="independent", y="shared", yOffset="independent"),
        "Female − male gaps and the BOLD audit, per model", [],
        f"Dot plots of the female − male gaps on warmth and competence for {' and '.join(pops)} per model"
        + (", beside the BOLD audit's difference in male share per model that writes" if len(head) else "")
        + ", with 95% confidence intervals.", caption)


def _markdown_table(table: pd.DataFrame) -> str:
    name = _names(table["model_id"])
    lines = ["| model | reading |", "|---|---|"]
    lines += [f"| {name[r.model_id]} | {r.sentence} |" for r in table.itertuples(index=False)]
    return "\n".join(lines)


def _summary_markdown(models: Sequence[str], results_dir: str | Path | None = None,
                     can_generate: dict[str, bool] | None = None, note: str = "", figures: str | Path | None = None,
                     figures_url: str = _FIGURES) -> str:
    """The front page's findings (MyST Markdown): the findings (:func:`findings_bullets`), the primary
    specification they were read at in one sentence, then the figure (numbered, with its caption and alt
    text, as a chapter's) and one sentence per model.

    ``figures``: the folder the figure's static SVG is written to (``<spec hash>.svg``, drawn only when
    missing) for readers without scripts, reached from the page as ``figures_url/<name>``; None: no image."""
    table = summary_table(models, results_dir, can_generate)
    gaps, head = read_summary(models, results_dir)
    lines = ["## Findings", ""]
    if not len(table):
        return "\n".join(lines + ["No model was built in this run." + (f" {note}" if note else ""), ""])
    # the findings fill the first screen; the specification they were read at follows at once
    link_stats, _ = _read_results(models, tables.NAMES.LINK_NEXT_WORD, results_dir)
    lines += [f"- {b}" for b in _findings_bullets(gaps, head, models, can_generate, link_stats, results_dir)] + [""]
    lines += [_primary_sentence(), ""]
    if note:
        lines += [note, ""]
    lines += ["### The numbers per model", ""]
    if len(gaps.dropna(subset=["g"])):
        spec = summary_chart(gaps, head).to_dict()
        image = None
        if figures is not None:
            name = f"{cache._stable_hash(spec, length=16)}.svg"
            if not (Path(figures) / name).exists():
                import vl_convert as vlc  # deferred: a large native library, needed only to draw the image

                cache._atomic_write_text(Path(figures) / name, vlc.vegalite_to_svg(spec))
            image = f"{figures_url}/{name}"
        lines += ["```{raw} html", rendering._figure_html(spec, 1, "bias-summary-chart", image), "```", ""]
    lines += [_markdown_table(table), ""]
    lines += ["Each model's chapters show how these numbers were measured, and the *Across models* "
              "chapter sets them side by side.", ""]
    return "\n".join(lines)


def _write_units_page(page: str | Path, models: Sequence[str], results_dir: str | Path | None = None) -> Path:
    """Write this build's counts of what the audit calls an occupation (:func:`units_paragraph`) to ``page``, which
    the methods chapter includes under its section on units (only when the text changed)."""
    paragraph = _units_paragraph(models, results_dir)
    text = (f"In this build: {paragraph}" if paragraph else
            "No model of this build wrote an audit, so no selection of BOLD keys was sorted into units.") + "\n"
    page = Path(page)
    if not page.exists() or page.read_text(encoding="utf-8") != text:
        cache._atomic_write_text(page, text)
    return page


def _write_summary_page(page: str | Path, models: Sequence[str], results_dir: str | Path | None = None,
                       can_generate: dict[str, bool] | None = None, note: str = "",
                       included_from: str | Path | None = None) -> Path:
    """Write :func:`summary_markdown` to ``page`` (only when it changed, so Sphinx sees no edit), its
    figure's static image in ``figures/`` beside it, linked from ``included_from``, the folder of the page
    that includes this one (default: the folder above, as ``book/index.md`` includes
    ``book/_generated/summary.md``)."""
    page = Path(page)
    figures = page.parent / _FIGURES
    root = Path(included_from) if included_from is not None else page.parent.parent
    text = _summary_markdown(models, results_dir, can_generate, note, figures,
                            Path(os.path.relpath(figures, root)).as_posix())
    if not page.exists() or page.read_text(encoding="utf-8") != text:
        cache._atomic_write_text(page, text)
    return page
