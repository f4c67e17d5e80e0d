"""The front page of one book build, read from the models' results tables: the findings with their numbers, the
primary specification they were read at, the table of each model's reading and the figure.

The findings themselves are registered in :mod:`bias_utils.book.findings`, one per chapter: each gives a bullet of the
findings list (which model shows what, in plain words, with its estimate and interval) and a clause of each model's
reading (the table of readings, :func:`summary_table`; the same clauses open the chapter, :func:`chapter_findings`).
This module reads the tables they share (:func:`read_summary`: the name gaps at the primary specification,
:data:`_PRIMARY_SPECIFICATION`, with their axes' verdicts, and the audit's headline), links a term a reader may not
know to its definition in the front page's glossary at its first use in each finding ("How to read the numbers" in
``book/index.md``, :data:`_TERMS`), draws the figure (:func:`summary_chart`) and writes the Markdown page that
``book/index.md`` includes (:func:`write_summary_page`) and the methods chapter's paragraph on what the audit calls
an occupation (:func:`write_units_page`). Nothing here is typed by hand: a model without a table says so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

import altair as alt
import pandas as pd

from ..audit import occupation_headline, occupation_units
from ..core import cache, tables
from ..profiles.axis_validity import VERDICTS, verdict_phrase
from ..report import plots, rendering
from .crossmodel import cross_model_summary, gender_gaps, read_results, short_model_ids
from .findings import CHAPTERS, FINDINGS, HEADLINE, PAPER, caveat_bullet, model_names, model_reading, read_page

_POPULATIONS = ("names", "terms")
#: The one specification each profile is read at; the robustness chapter's curve only checks it.
_PRIMARY_SPECIFICATION = {"context_source": "generated", "layer": "mean", "templates": 7, "test": "welch_t",
                         "adjustment": "holm"}
#: Folder of a page's static figure images; the book's Sphinx extension copies every such folder into the site.
_FIGURES = "figures"
#: The page of this build's counts that the methods' section on what the audit counts as an occupation includes.
UNITS_PAGE = "units.md"

#: The ``bold_headline`` columns the summary table carries: the primary shares and their difference, the marginal
#: odds ratio, the published selection's pooled odds ratio and the completions behind them.
_AUDIT_COLUMNS = ["male_share_a", "male_share_b", "share_difference", "share_difference_ci_low",
                  "share_difference_ci_high", "share_difference_p", "marginal_odds_ratio", "marginal_ci_low",
                  "marginal_ci_high", "published_odds_ratio", "published_ci_low", "published_ci_high", "published_p",
                  "n_units_informative", "n_gendered_completions", "n_completions"]
#: Columns of :func:`summary_table` (``<population>_<dimension>_{g,ci_low,ci_high,p_holm,verdict}`` for each
#: population and headline dimension, then the audit's primary estimand and the published selection's figure).
_SUMMARY_COLUMNS = (["model_id"]
                   + [f"{pop}_{dim}_{v}" for pop in _POPULATIONS for dim in HEADLINE
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
    primary context source, one of ``axis_validity.VERDICTS``; None without a verdict),
    ``axis_valid`` (verdict ``supported``; NA without a verdict), ``axis_reading``
    (``axis_validity.verdict_phrase``) and, from the robustness chapter when it ran,
    ``n_specs, share_agree_significant, joint_p, n_permutations``. ``headline``: the
    ``bold_headline`` rows (``occupation_headline.HEADLINE_COLUMNS``; encoders have none).
    """
    stats, _ = read_results(models, tables.NAMES.PROFILE_STATS, results_dir)
    stats = _primary(stats)
    gaps = gender_gaps(stats) if len(stats) else pd.DataFrame(
        columns=["model_id", "population", "dimension", "gap", "g", "g_ci_low", "g_ci_high", "p_holm"])
    gaps = gaps[gaps["dimension"].isin(list(HEADLINE))].reset_index(drop=True)
    validity, _ = read_results(models, tables.NAMES.AXIS_VALIDITY, results_dir)
    verdict, reading = {}, {}
    if len(validity):
        v = validity[validity["layer"].astype(str) == _PRIMARY_SPECIFICATION["layer"]]
        if "context_source" in v:
            v = v[v["context_source"] == _PRIMARY_SPECIFICATION["context_source"]]
        for _, r in v.iterrows():
            verdict[(r["model_id"], r["dimension"])] = r["verdict"]
            reading[(r["model_id"], r["dimension"])] = verdict_phrase(r)
    keys = list(zip(gaps["model_id"], gaps["dimension"]))
    gaps["axis_verdict"] = [verdict.get(k) for k in keys]
    gaps["axis_valid"] = pd.array([None if k not in verdict else verdict[k] == VERDICTS[0] for k in keys],
                                  dtype="boolean")
    gaps["axis_reading"] = [reading.get(k) for k in keys]
    robust, _ = cross_model_summary(models, results_dir)
    robust = robust.rename(columns={"n_agree_significant_p": "joint_p"})[
        ["model_id", "population", "dimension", "n_specs", "share_agree_significant", "joint_p", "n_permutations"]]
    gaps = gaps.merge(robust, on=["model_id", "population", "dimension"], how="left")
    head, _ = read_results(models, tables.NAMES.BOLD_HEADLINE, results_dir)
    return gaps, head.reindex(columns=["model_id", *occupation_headline.HEADLINE_COLUMNS])


# --------------------------------------------------------------------------- the terms the findings use

#: The words of the front page a reader may not know, each linked to its entry in the front page's glossary ("How to
#: read the numbers" in ``book/index.md``): (the pattern as it is printed, case aside; the glossary's term). A longer
#: term comes before a term it contains ("partial ρ" before "ρ"): a span linked once is not linked again.
_TERMS = [
    (r"\bg(?= = )", "Hedges' g"), (r"\bstandard deviations?\b", "standard deviations"), (r"95% CI", "95% CI"),
    (r"\bwarm end\b", "warm end"), (r"\bcompetent end\b", "competent end"), (r"\bnot validated\b", "validated"),
    (r"\bnot shown\b", "not shown"), (r"\bnot read\b", "not read"), (r"\bfemale share\b", "female share"),
    (r"\bmale share\b", "male share"), (r"\bpoints\b", "points"), (r"\bgendered words?\b", "gendered word"),
    (r"\bpartial ρ", "partial ρ"), (r"ρ", "Spearman's ρ"), (r"\bfemale − male direction\b", "direction"),
    (r"\bbuild\b", "build"), (r"\bcompletions?\b", "completion"), (r"\bencoders?\b", "encoder"),
    (r"\b(?:fe)?male terms\b", "female terms"), (r"\bgender concept\b", "gender concept"),
    (r"\beras(?:ing|ed|ure)\b", "erasing"), (r"\bhidden states?\b", "hidden state"), (r"\blayers?\b", "layer"),
    (r"\bnext[ -]word\b", "next word"), (r"\btemplates?\b", "templates"),
    (r"\bprimary specification\b", "primary specification"), (r"\bWelch's t-test\b", "Welch's t-test"),
    (r"\bHolm's correction\b|\bHolm-adjusted\b", "Holm's correction"), (r"\blittle cost\b", "little cost"),
    (r"\bcross-entropy\b", "cross-entropy"),
]


def _with_terms(text: str) -> str:
    """``text`` (MyST) with the first use of each glossary term (:data:`_TERMS`) linked to its definition, outside
    roles already there and outside a span another term links."""
    done = set()
    pieces = re.split(r"(\{\w+\}`[^`]*`)", text)
    for i, piece in enumerate(pieces):
        if piece.startswith("{"):
            continue
        spans: list[tuple[int, int, str]] = []
        for pattern, term in _TERMS:
            if term in done:
                continue
            m = next((m for m in re.finditer(pattern, piece, re.I)
                      if not any(a < m.end() and m.start() < b for a, b, _ in spans)), None)
            if m:
                done.add(term)
                spans.append((m.start(), m.end(), term))
        for a, b, term in sorted(spans, reverse=True):
            piece = f"{piece[:a]}{{term}}`{piece[a:b]} <{term}>`{piece[b:]}"
        pieces[i] = piece
    return "".join(pieces)



def chapter_findings(stem: str, results: str | Path | None) -> list[str]:
    """The sentences that open a chapter (``stem``, a notebook's) for the model whose results folder is
    ``results``: the opening of each finding registered for that chapter (its clause of the front page's reading, or
    its own ``opening``: chapter 12's largest effect); [] for a chapter without one, or without results."""
    chapter = {stem_: key for key, stem_ in CHAPTERS.items()}.get(stem)
    found = [f for f in FINDINGS if f.chapter == chapter]
    if not found or results is None or not Path(results).is_dir():
        return []
    folder, root = Path(results).name, Path(results).parent
    gaps, head = read_summary([folder], root)
    link_stats, _ = read_results([folder], tables.NAMES.LINK_NEXT_WORD, root)
    page = read_page([folder], root, None, gaps, head, link_stats)
    return [f"{clause}." for f in found if (clause := f.opens(page, page.models[0])) is not None]


def _findings_bullets(gaps: pd.DataFrame, headline: pd.DataFrame, models: Sequence[str],
                      can_generate: dict[str, bool] | None = None,
                      link_stats: pd.DataFrame | None = None, results_dir: str | Path | None = None) -> list[str]:
    """The findings that open the front page, in plain words, one per registered finding (:data:`FINDINGS`: the
    warmth and the competence of first names, writing about occupations, whether the bias inside predicts the bias
    written), each linking each model to its chapter, then what "not shown" means. ``gaps`` and ``headline`` are
    :func:`read_summary`'s, ``link_stats`` the stacked ``link_next_word`` rows."""
    if not list(models):
        return []
    page = read_page(models, results_dir, can_generate, gaps, headline, link_stats)
    bullets = [f"**{f.title}** {text}" for f in FINDINGS if (text := f.bullet(page)) is not None]
    return bullets + [caveat_bullet()]


def summary_table(models: Sequence[str], results_dir: str | Path | None = None,
                  can_generate: dict[str, bool] | None = None) -> pd.DataFrame:
    """One row per model (:data:`SUMMARY_COLUMNS`), the model id shortened for reading; ``sentence`` is the model's
    reading (:func:`bias_utils.book.findings.model_reading`: each registered finding's primary estimate with its
    interval).

    ``can_generate`` (by model folder name) words the reading of a model
    without audit results; unknown models are inferred from the tables. A row is named by the model its
    folder records (``crossmodel.model_folders``).
    """
    gaps, head = read_summary(models, results_dir)
    link_stats, _ = read_results(models, tables.NAMES.LINK_NEXT_WORD, results_dir)
    page = read_page(models, results_dir, can_generate, gaps, head, link_stats)
    rows = []
    for model in page.models:
        g, h = page.rows(gaps, model), page.rows(head, model)
        row = {"model_id": model}
        for r in g.itertuples(index=False):
            key = f"{r.population}_{r.dimension}"
            row.update({f"{key}_g": r.g, f"{key}_ci_low": r.g_ci_low, f"{key}_ci_high": r.g_ci_high,
                        f"{key}_p_holm": r.p_holm, f"{key}_verdict": r.axis_verdict})
        if len(h):
            row.update(h.iloc[0][_AUDIT_COLUMNS].to_dict())
        row["sentence"] = model_reading(page, model)
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=_SUMMARY_COLUMNS)
    return short_model_ids(table) if len(table) else table


def _primary_sentence() -> str:
    """The one sentence naming the primary specification (the methods chapters state it before any result)."""
    spec = _PRIMARY_SPECIFICATION
    return (f"Each profile above is read at one primary specification: the {spec['context_source']} "
            f"example sentences of {PAPER} for the ends of each axis, the {spec['layer']} over all layers, the "
            f"original's {spec['templates']} sentence templates, and Welch's t-test with "
            f"{spec['adjustment'].capitalize()}'s correction; the robustness chapter varies these choices only to "
            "check it.")


def _units_paragraph(models: Sequence[str], results_dir) -> str:
    """What the audit calls an occupation in this build, from the first decoder's ``bold_units`` (one selection for
    all), for the methods chapter (:func:`write_units_page`); "" without an audit."""
    units, _ = read_results(models, tables.NAMES.BOLD_UNITS, results_dir)
    if units.empty:
        return ""
    model = units["model_id"].iloc[0]
    first = units[units["model_id"] == model].drop(columns="model_id")
    return occupation_units.describe_units(first)


# --------------------------------------------------------------------------- the figure and the page


#: The headline dimensions' colours, by name.
_DIMENSION_COLORS = {"warmth": plots.OTHER_COLORS[0], "competence": plots.OTHER_COLORS[1]}


#: The height of one model's row in every panel of the summary chart: a fixed height per panel (not a step) keeps
#: the shared y scale one range in panels with and without a per-dimension offset (Vega warned of two).
_ROW_HEIGHT = 40


def _gap_panel(gaps: pd.DataFrame, population: str, first: bool, height: int) -> alt.LayerChart:
    """One population's gaps, its rows labelled with the models (every panel: on a phone they stack); the first
    panel carries the legend."""
    data = gaps[gaps["population"] == population]
    base = alt.Chart(data).encode(
        y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=160)),
        yOffset=alt.YOffset("dimension:N", sort=list(HEADLINE)),
        color=alt.Color("dimension:N", sort=list(HEADLINE), title="dimension",
                        scale=alt.Scale(domain=list(HEADLINE), range=[_DIMENSION_COLORS[d] for d in HEADLINE]),
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
        title=f"{population}: female − male", width=150, height=height)


def summary_chart(gaps: pd.DataFrame, headline: pd.DataFrame) -> alt.HConcatChart:
    """Warmth and competence gaps (Hedges' g, 95% CI) per model for names and terms at the primary
    specification, beside the audit's primary estimate per decoder: the difference in the male share of gendered
    words between a typical male- and female-dominated occupation (percentage points) with its 95% CI from
    resampling whole occupations (``headline``: :func:`read_summary`'s)."""
    name = model_names([*gaps["model_id"], *(headline["model_id"] if len(headline) else [])])
    gaps = gaps.dropna(subset=["g"])
    gaps = gaps.assign(model_id=gaps["model_id"].map(name))
    if gaps.empty:
        raise ValueError("summary_chart: no profile gaps to draw")
    height = _ROW_HEIGHT * len(set(gaps["model_id"]) | {name[m] for m in (headline["model_id"] if len(headline)
                                                                           else [])})
    panels = [_gap_panel(gaps, pop, first=i == 0, height=height)
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
        bars = base.mark_rule(strokeWidth=2, color=plots.OTHER_COLORS[2]).encode(
            x=alt.X("share_difference_ci_low_points:Q"), x2="share_difference_ci_high_points:Q")
        points = base.mark_point(filled=True, size=60, color=plots.OTHER_COLORS[2]).encode(
            x=x, tooltip=["model_id", alt.Tooltip("male_share_a:Q", format=".0%"),
                          alt.Tooltip("male_share_b:Q", format=".0%"),
                          alt.Tooltip("share_difference_points:Q", format=".0f"),
                          alt.Tooltip("share_difference_ci_low_points:Q", format=".0f"),
                          alt.Tooltip("share_difference_ci_high_points:Q", format=".0f"), "n_units_informative",
                          "n_gendered_completions", "n_completions"])
        panels.append(alt.layer(zero, bars, points).properties(
            title="BOLD audit: male share of gendered words", width=150, height=height))
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
    return plots.captioned(
        alt.hconcat(*panels).resolve_scale(color="independent", y="shared", yOffset="independent"),
        "Female − male gaps and the BOLD audit, per model", [],
        f"Dot plots of the female − male gaps on warmth and competence for {' and '.join(pops)} per model"
        + (", beside the BOLD audit's difference in male share per model that writes" if len(head) else "")
        + ", with 95% confidence intervals.", caption)


def _markdown_table(table: pd.DataFrame) -> str:
    name = model_names(table["model_id"])
    lines = ["| model | reading |", "|---|---|"]
    lines += [f"| {name[r.model_id]} | {_with_terms(r.sentence)} |" for r in table.itertuples(index=False)]
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
    link_stats, _ = read_results(models, tables.NAMES.LINK_NEXT_WORD, results_dir)
    lines += [f"- {_with_terms(b)}" for b in _findings_bullets(gaps, head, models, can_generate, link_stats,
                                                                results_dir)] + [""]
    lines += [_with_terms(_primary_sentence()), ""]
    if note:
        lines += [note, ""]
    lines += ["### The numbers per model", "", _markdown_table(table), ""]
    if len(gaps.dropna(subset=["g"])):
        spec = summary_chart(gaps, head).to_dict()
        image = None
        if figures is not None:
            name = f"{cache.stable_hash(spec, length=16)}.svg"
            if not (Path(figures) / name).exists():
                import vl_convert as vlc  # deferred: a large native library, needed only to draw the image

                cache.atomic_write_text(Path(figures) / name, vlc.vegalite_to_svg(spec))
            image = f"{figures_url}/{name}"
        lines += ["```{raw} html", rendering.figure_html(spec, 1, "bias-summary-chart", image), "```", ""]
    lines += ["Each model's chapters show how these numbers were measured, and the *Across models* "
              "chapter sets them side by side.", ""]
    return "\n".join(lines)


def write_units_page(page: str | Path, models: Sequence[str], results_dir: str | Path | None = None) -> Path:
    """Write this build's counts of what the audit calls an occupation (:func:`units_paragraph`) to ``page``, which
    the methods chapter includes under its section on units (only when the text changed)."""
    paragraph = _units_paragraph(models, results_dir)
    text = (f"In this build: {paragraph}" if paragraph else
            "No model of this build wrote an audit, so no selection of BOLD keys was sorted into units.") + "\n"
    page = Path(page)
    if not page.exists() or page.read_text(encoding="utf-8") != text:
        cache.atomic_write_text(page, text)
    return page


def write_summary_page(page: str | Path, models: Sequence[str], results_dir: str | Path | None = None,
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
        cache.atomic_write_text(page, text)
    return page
