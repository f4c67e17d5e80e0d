"""The findings of one book build, for its front page, read from the models' results tables.

The page's findings are registered, one per chapter (:class:`_Finding`, :func:`_register`): each gives a bullet of
the findings list in plain words (which model shows what, each model linked to its chapter, no estimate) and a
clause of each model's reading, the chapter's primary estimate with its interval (the table of readings, at most
:data:`_READING_WORDS` words a model; the same clauses open the chapter, :func:`chapter_findings`). Every
sensitivity estimand lives in its chapter. A term a reader may not know is linked to its definition in the front
page's glossary ("How to read the numbers", :data:`_TERMS`). One concept over 600 lines: the front page, one
registry of findings that share the page's word budget per model and its glossary; a finding is a registration, so
splitting them by chapter would split the budget's one check. The findings registered here:

* **Warmth and competence of first names** (Study 1, chapter 04's ``profile_stats`` at the primary specification,
  :data:`_PRIMARY_SPECIFICATION`): the female − male gap as Hedges' g with its 95% CI
  (:func:`bias_utils.book.crossmodel.gender_gaps`), read only on an axis whose verdict
  (:mod:`bias_utils.profiles.axis_validity`, chapter 03) is ``supported``; otherwise "not read".
* **Writing about occupations** (Study 2, ``bold_headline``, decoders only; :mod:`bias_utils.audit.occupations`):
  the pre-stated primary estimand, the difference in the male share of gendered words between a typical male- and
  a typical female-dominated occupation (percentage points, whole occupations resampled), with how many
  completions carry a gendered word. What the audit's BOLD keys are is method: a paragraph the methods chapter
  includes (:func:`write_units_page`).
* **The link between them** (``link_next_word``, decoders only; :mod:`bias_utils.intrinsic_extrinsic.link`,
  chapter 11): the pre-stated Spearman ρ across the BLS occupations with its interval; a direction not validated
  against the BLS share is not read.
* **"They" about one person** (``next_word_neutral``, decoders only; :mod:`bias_utils.audit.neutral_share`, chapter 11):
  in plain words, that the decoder writes "they" about one person, more or less where an occupation's workers are
  about half women when that is shown; its reading, the mean share of the reference to one person that goes to
  "they" over the BLS occupations with its interval.
* **The next word and the long form** (``long_form_link``, decoders only; :mod:`bias_utils.audit.long_form`, chapter
  11): whether the next word predicts the female share of what the decoder writes at length, said plainly either way;
  its estimates stay in its chapter.
* **Erasing the concept** (``erasure_tradeoff``, decoders only; :mod:`bias_utils.intrinsic_extrinsic.erasure`,
  chapter 12): in plain words, the curve's largest effect (where in the model, ρ before and after, the cost in nats
  per token and as a share of the cross-entropy, the share of the fact removed, what the controls did there), the
  state the rule stated in advance names where it is another, and whether erasing it at every layer loses the
  facts. Its intervals stay in its chapter: the trade-off is a curve, not one number for the reading.

:func:`summary_table` gives one row per model with its reading, :func:`summary_chart` the figure,
:func:`write_summary_page` the Markdown page that ``book/index.md`` includes. Nothing here is typed by hand: a
model without a table says so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..audit import long_form, neutral_share, next_word_prompts, occupation_headline, occupation_units
from ..core import cache, precision, tables
from ..core.results import model_slug
from ..intrinsic_extrinsic import erasure_reading, erasure_statistics, link
from ..models.builtin_models import BUILTIN_MODELS, model_name
from ..profiles.axis_validity import VERDICTS, verdict_phrase
from ..report import plots, rendering
from .crossmodel import cross_model_summary, folder_id, gender_gaps, read_results, results_root, short_model_ids

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
            "audit": "06_bold_audit", "link": "11_intrinsic_extrinsic", "erasure": "12_erasure"}

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
    gaps = gaps[gaps["dimension"].isin(list(_HEADLINE))].reset_index(drop=True)
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


def _reading(dimension: str, row) -> str:
    """How a gap is read: ``unread`` (its axis is not ``supported``, or has no verdict), ``none``
    (Holm p >= ALPHA: no gap shown), ``agree`` or ``opposite`` (to the paper's direction)."""
    if getattr(row, "axis_verdict", None) != VERDICTS[0]:
        return "unread"
    if row.p_holm >= _ALPHA:
        return "none"
    return "agree" if ("female" if row.g > 0 else "male") == _HEADLINE[dimension] else "opposite"


def _writes(model_id: str) -> bool | None:
    """Whether a model of a results folder writes text, where its name says (a built-in's kind), else None."""
    builtin = BUILTIN_MODELS.get(str(model_id).split("--")[0])
    return None if builtin is None else builtin.kind == "decoder"


def _by_model_id(folders: Sequence[str], results_dir, can_generate: dict | None) -> tuple[list[str], dict]:
    """``folders`` as the model ids they record (the stacked tables' ``model_id``, ``crossmodel.read_results``)
    and ``can_generate`` keyed by those ids."""
    ids = {f: folder_id(results_root(results_dir) / f) for f in folders}
    return [ids[f] for f in folders], {ids.get(f, f): v for f, v in (can_generate or {}).items()}


def _link(model: str, chapter: str, label: str) -> str:
    """A MyST link to a model's chapter, absolute from the book's root (the page is included by index.md; the book
    writes a model's chapters under its model id's folder name)."""
    return f"{{doc}}`{label} </models/{model_slug(model)}/{_CHAPTERS[chapter]}>`"


def _names(models: Sequence[str]) -> dict[str, str]:
    """Each model id by the name running text gives it (:func:`bias_utils.models.builtin_models.model_name` of its
    short id: ``SmolLM2-135M-Instruct``), or by its short id where two models would share a name."""
    models = list(dict.fromkeys(models))
    short = list(short_model_ids(pd.DataFrame({"model_id": models}))["model_id"]) if models else []
    names = [model_name(m) for m in short]
    return dict(zip(models, names if len(set(names)) == len(names) else short))


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --------------------------------------------------------------------------- the findings, one registration each


@dataclass(frozen=True)
class _Page:
    """What the findings read, for the models of one build: ``models`` (model ids, in the build's order), their
    ``label`` (running text's names), ``can_generate`` (by model id; a missing model: its built-in kind), the name
    ``gaps`` and audit ``headline`` (:func:`read_summary`) and the stacked ``link_next_word`` rows."""
    models: list
    label: dict
    can_generate: dict
    gaps: pd.DataFrame
    headline: pd.DataFrame
    link_stats: pd.DataFrame
    #: the stacked ``erasure_tradeoff`` rows (chapter 12)
    erasure: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["model_id"]))
    #: the stacked ``next_word_neutral`` rows (chapter 11, beyond the binary)
    neutral: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["model_id"]))
    #: the stacked ``long_form_link`` rows (chapter 11, the long form)
    long_form: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["model_id"]))

    def writes(self, model: str) -> bool | None:
        return self.can_generate.get(model, _writes(model))

    def rows(self, frame: pd.DataFrame, model: str) -> pd.DataFrame:
        return frame[frame["model_id"] == model] if len(frame) else frame


@dataclass(frozen=True)
class _Finding:
    """One finding of the front page, from one chapter (``chapter``, a key of :data:`_CHAPTERS`; its reading opens
    that chapter too, :func:`chapter_findings`): ``title`` heads its line in the findings list, ``bullet``
    says in plain words (no estimate) what each model shows, linking each model to its chapter (None: nothing to say
    in this build), and ``reading`` gives a model's clause of the per-model reading: the chapter's primary estimate
    with its interval (None: the model has none). A new chapter's finding is one :func:`_register` call."""
    key: str
    chapter: str
    title: str
    bullet: Callable[[_Page], str | None]
    reading: Callable[[_Page, str], str | None]


#: The front page's findings in reading order (:func:`_register`).
_FINDINGS: list[_Finding] = []


def _register(finding: _Finding) -> _Finding:
    """Add a finding to the front page (its bullet and its clause of every model's reading); one per chapter."""
    if any(f.key == finding.key for f in _FINDINGS):
        raise ValueError(f"a front-page finding {finding.key!r} is registered already")
    _FINDINGS.append(finding)
    return finding


def _number(value: float) -> str:
    return precision.number_text(value)


def _interval(low: float, high: float, estimate: float) -> str:
    return f"95% CI {precision.interval_text(low, high, estimate)}"


# Study 1: the name gap on each headline dimension (chapter 04), read only on a validated axis (chapter 03)


def _gap_reading(dimension: str) -> Callable[[_Page, str], str | None]:
    def reading(page: _Page, model: str) -> str | None:
        names = page.rows(page.gaps, model)
        rows = names[(names["population"] == "names") & (names["dimension"] == dimension)] if len(names) else names
        if not len(rows):
            return None
        r = next(rows.itertuples(index=False))
        kind, title = _reading(dimension, r), dimension.capitalize()
        if kind == "unread":
            return f"{title}: not read (its axis is not validated)"
        # printed as the chapters print an estimate with its interval ("0.86, 95% CI 0.57 to 1.14")
        numbers = f"g = {_number(r.g)}, {_interval(r.g_ci_low, r.g_ci_high, r.g)}"
        if kind == "none":
            return f"{title}: no gap shown, {numbers}"
        return f"{title}: {'female' if r.g > 0 else 'male'} names nearer the {_HIGH_POLE[dimension]} end, {numbers}"
    return reading


def _gap_bullet(dimension: str) -> Callable[[_Page], str | None]:
    def bullet(page: _Page) -> str | None:
        names = page.gaps[page.gaps["population"] == "names"] if len(page.gaps) else page.gaps
        names = names[names["dimension"] == dimension] if len(names) else names
        if not len(names):
            return None
        kinds: dict[str, list[str]] = {"agree": [], "opposite": [], "none": [], "unread": []}
        for r in names.itertuples(index=False):
            chapter = "axes" if _reading(dimension, r) == "unread" else "profile"
            kinds[_reading(dimension, r)].append(_link(r.model_id, chapter, page.label[r.model_id]))
        pole, expected = _HIGH_POLE[dimension], _HEADLINE[dimension]
        other = "male" if expected == "female" else "female"
        parts = []
        if kinds["agree"]:
            parts.append(f"{expected.capitalize()} first names sit nearer the {pole} end than {other} names in "
                         f"{_listed(kinds['agree'])}, as {_PAPER} found")
        if kinds["opposite"]:
            parts.append(f"{other.capitalize()} first names sit nearer the {pole} end than {expected} names in "
                         f"{_listed(kinds['opposite'])}, the opposite of {_PAPER}")
        if kinds["none"]:
            parts.append(f"no gap is shown in {_listed(kinds['none'])}")
        if kinds["unread"]:
            parts.append(f"not read in {_listed(kinds['unread'])}, whose {dimension} axis is not validated")
        return " ".join(f"{p[0].upper()}{p[1:]}." for p in parts)
    return bullet


for _dimension in _HEADLINE:
    _register(_Finding(_dimension, "profile", f"{_dimension.capitalize()} of first names.", _gap_bullet(_dimension),
                       _gap_reading(_dimension)))


# Study 2: what a decoder wrote about occupations (chapter 06)


def _audit(page: _Page, model: str) -> dict | None:
    rows = page.rows(page.headline, model)
    return None if rows.empty else occupation_headline.headline(rows.drop(columns="model_id").iloc[[0]])


def _compared(h: dict) -> bool:
    return not (pd.isna(h["share_difference"]) or pd.isna(h["share_difference_ci_low"]))


def _carry(h: dict) -> str:
    """"67 of 657 completions carry a gendered word"."""
    k, n = int(h["n_gendered_completions"]), int(h["n_completions"])
    return f"{precision.count_text(k)} of {precision.count_text(n)} completions carry a gendered word"


def _writing_reading(page: _Page, model: str) -> str | None:
    h = _audit(page, model)
    if h is None:
        return "Writing: none (an encoder)" if page.writes(model) is False else None
    if int(h["n_gendered_completions"]) == 0 or not _compared(h):
        return f"Writing: the two groups' male shares cannot be compared; {_carry(h)}"
    difference = occupation_headline.percentage_points(h["share_difference"])
    interval = occupation_headline.mc_interval(h, "share_difference", 100)
    return (f"Writing: male share of gendered words, male- minus female-dominated occupations: {difference} points, "
            f"95% CI {interval}; {_carry(h)}")


def _decoders(page: _Page, clause: Callable[[str, str], str | None], lacking: str) -> str | None:
    """The clauses of the decoders (``clause(model, its name)``), then the encoders and those lacking the chapter's
    table; None when no model has the chapter's results."""
    parts, encoders, missing = [], [], []
    for model in page.models:
        text = clause(model, page.label[model])
        if text is not None:
            parts.append(text)
        else:
            (encoders if page.writes(model) is False else missing).append(page.label[model])
    if not parts:
        return None
    if encoders:
        parts.append(f"{_listed(encoders)} {'writes' if len(encoders) == 1 else 'write'} no text (an encoder)")
    if missing:
        parts.append(f"{_listed(missing)} {'has' if len(missing) == 1 else 'have'} no {lacking}")
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}."


def _writing_bullet(page: _Page) -> str | None:
    def clause(model: str, label: str) -> str | None:
        h = _audit(page, model)
        if h is None:
            return None
        link = _link(model, "audit", label)
        if int(h["n_gendered_completions"]) == 0:
            return f"{link} writes no gendered word about its occupations"
        if not _compared(h):
            return f"in {link} the two groups of occupations cannot be compared"
        return f"{link} shows {occupation_headline.difference_reading(h)}, though only {_carry(h)}"
    return _decoders(page, clause, "audit results")


_register(_Finding("writing", "audit", "Writing about occupations.", _writing_bullet, _writing_reading))


# The link between them (chapter 11): the next-word Spearman ρ across the BLS occupations


def _link_row(page: _Page, model: str):
    rows = page.rows(page.link_stats, model)
    if not len(rows) or "primary" not in rows or not rows["primary"].astype(bool).any():
        return None
    return link.pick_analysis(rows, **link.NEXT_WORD_PRIMARY)


def _link_shown(row) -> bool:
    return bool(np.isfinite(row["ci_low"]) and (row["ci_low"] > 0 or row["ci_high"] < 0))


def _link_reading(page: _Page, model: str) -> str | None:
    row = _link_row(page, model)
    if row is None:
        return None
    if not bool(row["readable"]):
        return "Inside and writing: not read (its female − male direction is not validated)"
    if not np.isfinite(row["effect_size"]):
        return "Inside and writing: not computable"
    return (f"Inside and writing: ρ = {_number(row['effect_size'])}, "
            f"{_interval(row['ci_low'], row['ci_high'], row['effect_size'])}, over {int(row['n'])} occupations"
            + ("" if _link_shown(row) else ", not shown"))


def _link_bullet(page: _Page) -> str | None:
    def clause(model: str, label: str) -> str | None:
        row = _link_row(page, model)
        if row is None:
            return None
        link_ = _link(model, "link", label)
        if not bool(row["readable"]) or not np.isfinite(row["effect_size"]):
            return f"in {link_} it is not read: its female − male direction is not validated"
        if not _link_shown(row):
            return (f"in {link_}, where the model places an occupation inside does not show in how it continues a "
                    "sentence about it (not shown)")
        way = "nearer its female terms" if row["effect_size"] > 0 else "nearer its male terms"
        return f"in {link_}, the occupations it places {way} are continued more often with a female word"
    return _decoders(page, clause, "results of this chapter")


_register(_Finding("link", "link", "Does the bias inside predict the bias it writes?", _link_bullet, _link_reading))


# Beyond the binary (chapter 11): how much of what a decoder writes about one person goes to "they"


def _neutral_row(page: _Page, question: str, model: str):
    rows = page.rows(page.neutral, model)
    return neutral_share.neutral_row(rows, question, "neutral_share") if len(rows) else None


def _neutral_reading(page: _Page, model: str) -> str | None:
    row = _neutral_row(page, "share", model)
    if row is None:
        return None
    percent = next_word_prompts.percent
    return (f"\"They\" for one person: {percent(row['effect_size'])} (95% CI {percent(row['ci_low'])} to "
            f"{percent(row['ci_high'])})")


def _neutral_bullet(page: _Page) -> str | None:
    """Per decoder with the table, in plain words: it writes "they" about one person, and where (more where the
    workforce is balanced, when that is shown)."""
    def clause(model: str, label: str) -> str | None:
        if _neutral_row(page, "share", model) is None:
            return None
        way = neutral_share.direction(_neutral_row(page, "balance", model))
        where = {1: ", more where an occupation's workers are about half women", 0: "",
                 -1: ", less where an occupation's workers are about half women"}[way]
        return f"{_link(model, 'link', label)} writes \"they\" for part of what it says about one person{where}"
    return _decoders(page, clause, "results of this chapter")


_register(_Finding("neutral", "link", "Beyond she and he: \"they\" about one person.", _neutral_bullet,
                   _neutral_reading))


_register(_Finding("long_form", "link", "Does the next word predict what it writes at length?", lambda page: _decoders(
    page, lambda model, label: long_form.at_length_clause(page.rows(page.long_form, model),
                                                           _link(model, "link", label)), "results of this chapter"),
    lambda page, model: None))  # its estimates stay in its chapter: the reading's word budget is the primaries'


# The erasure (chapter 12): does the inside drive what the model writes?


def _erasure_bullet(page: _Page) -> str | None:
    """Per decoder with chapter 12's table, in plain words (``intrinsic_extrinsic.erasure_reading.front_page_clause``):
    where the curve's largest effect is, how much of the stereotype in its writing goes, what it costs, how much of
    the fact goes and what the controls did, the rule's state where it names another; and whether erasing the concept
    everywhere also loses the gender of "the king ... he"."""
    def clause(model: str, label: str) -> str | None:
        rows = page.rows(page.erasure, model)
        if not len(rows):
            return None
        everywhere = rows[(rows["erasure"] == "leace") & (rows["layer"] == "all")
                          & (rows["measure"] == "facts_right_share")]
        lost = bool(len(everywhere)) and float(everywhere["value"].iloc[0]) < erasure_statistics.MIN_FACTS
        tail = ", and erasing it at every layer also loses whether \"the king\" is a he" if lost else ""
        return erasure_reading.front_page_clause(rows, _link(model, "erasure", label)) + tail
    return _decoders(page, clause, "results of this chapter")


_register(_Finding("erasure", "erasure", "Does the inside drive what the model writes?", _erasure_bullet,
                   lambda page, model: None))


def _caveat_bullet() -> str:
    return ("**Not shown is not absent.** Where a finding says *not shown* or *not read*, this build could not tell; "
            "it does not say that a model has no such bias.")


# --------------------------------------------------------------------------- the terms the findings use

#: The words of the findings a reader may not know, each linked to its entry in the front page's glossary
#: ("How to read the numbers" in ``book/index.md``): (the pattern as it is printed, the glossary's term).
_TERMS = [
    (r"\bg(?= = )", "Hedges' g"), (r"95% CI", "95% CI"), (r"\bwarm end\b", "warm end"),
    (r"\bcompetent end\b", "competent end"), (r"\bnot validated\b", "validated"), (r"\bnot shown\b", "not shown"),
    (r"\bnot read\b", "not read"), (r"\bfemale share\b", "female share"), (r"\bmale share\b", "male share"),
    (r"\bpoints\b", "points"),
    (r"\bgendered word\b", "gendered word"), (r"ρ", "Spearman's ρ"), (r"\bfemale − male direction\b", "direction"),
]


def _with_terms(text: str) -> str:
    """``text`` (MyST) with the first use of each glossary term (:data:`_TERMS`) linked to its definition, outside
    roles already there."""
    done = set()
    pieces = re.split(r"(\{\w+\}`[^`]*`)", text)
    for i, piece in enumerate(pieces):
        if piece.startswith("{"):
            continue
        for pattern, term in _TERMS:
            if term in done:
                continue
            m = re.search(pattern, piece)
            if m:
                done.add(term)
                piece = f"{piece[:m.start()]}{{term}}`{m.group(0)} <{term}>`{piece[m.end():]}"
        pieces[i] = piece
    # a term wrapped inside another's link text (none today) would nest roles: each role stays whole
    return "".join(pieces)


def _page(folders: Sequence[str], results_dir, can_generate: dict | None, gaps: pd.DataFrame,
          headline: pd.DataFrame, link_stats: pd.DataFrame | None) -> _Page:
    models, can_generate = _by_model_id(folders, results_dir, can_generate)
    link_stats = link_stats if link_stats is not None else pd.DataFrame(columns=["model_id"])
    erased, _ = read_results(list(folders), tables.NAMES.ERASURE_TRADEOFF, results_dir)
    neutral, _ = read_results(list(folders), tables.NAMES.NEXT_WORD_NEUTRAL, results_dir)
    at_length, _ = read_results(list(folders), tables.NAMES.LONG_FORM_LINK, results_dir)
    return _Page(models, _names(models), can_generate or {}, gaps, headline, link_stats, erased, neutral, at_length)


def _model_reading(page: _Page, model: str) -> str:
    """A model's reading: the clause of each registered finding (its chapter's primary estimate with its interval),
    at most :data:`_READING_WORDS` words."""
    clauses = [c for f in _FINDINGS if (c := f.reading(page, model)) is not None]
    return ". ".join(clauses) + "." if clauses else "No results of this build's chapters."


def chapter_findings(stem: str, results: str | Path | None) -> list[str]:
    """The sentences that open a chapter (``stem``, a notebook's) for the model whose results folder is
    ``results``: the reading of each finding registered for that chapter, as the front page prints it; [] for a
    chapter without one, or without results."""
    chapter = {stem_: key for key, stem_ in _CHAPTERS.items()}.get(stem)
    found = [f for f in _FINDINGS if f.chapter == chapter]
    if not found or results is None or not Path(results).is_dir():
        return []
    folder, root = Path(results).name, Path(results).parent
    gaps, head = read_summary([folder], root)
    link_stats, _ = read_results([folder], tables.NAMES.LINK_NEXT_WORD, root)
    page = _page([folder], root, None, gaps, head, link_stats)
    return [f"{clause}." for f in found if (clause := f.reading(page, page.models[0])) is not None]


#: The most words of a model's reading on the front page (every sensitivity estimand lives in its chapter).
_READING_WORDS = 80


def _findings_bullets(gaps: pd.DataFrame, headline: pd.DataFrame, models: Sequence[str],
                      can_generate: dict[str, bool] | None = None,
                      link_stats: pd.DataFrame | None = None, results_dir: str | Path | None = None) -> list[str]:
    """The findings that open the front page, in plain words, one per registered finding (:data:`_FINDINGS`: the
    warmth and the competence of first names, writing about occupations, whether the bias inside predicts the bias
    written), each linking each model to its chapter, then what "not shown" means. ``gaps`` and ``headline`` are
    :func:`read_summary`'s, ``link_stats`` the stacked ``link_next_word`` rows."""
    if not list(models):
        return []
    page = _page(models, results_dir, can_generate, gaps, headline, link_stats)
    bullets = [f"**{f.title}** {text}" for f in _FINDINGS if (text := f.bullet(page)) is not None]
    return bullets + [_caveat_bullet()]


def summary_table(models: Sequence[str], results_dir: str | Path | None = None,
                  can_generate: dict[str, bool] | None = None) -> pd.DataFrame:
    """One row per model (:data:`SUMMARY_COLUMNS`), the model id shortened for reading; ``sentence`` is the model's
    reading (:func:`_model_reading`: each registered finding's primary estimate with its interval).

    ``can_generate`` (by model folder name) words the reading of a model
    without audit results; unknown models are inferred from the tables. A row is named by the model its
    folder records (``crossmodel.model_folders``).
    """
    gaps, head = read_summary(models, results_dir)
    link_stats, _ = read_results(models, tables.NAMES.LINK_NEXT_WORD, results_dir)
    page = _page(models, results_dir, can_generate, gaps, head, link_stats)
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
        row["sentence"] = _model_reading(page, model)
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=_SUMMARY_COLUMNS)
    return short_model_ids(table) if len(table) else table


def _primary_sentence() -> str:
    """The one sentence naming the primary specification (the methods chapters state it before any result)."""
    spec = _PRIMARY_SPECIFICATION
    return (f"Each profile above is read at one primary specification: the {spec['context_source']} "
            f"example sentences of {_PAPER} for the ends of each axis, the {spec['layer']} over all layers, the "
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
        title=f"{population}: female − male", width=150, height=height)


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
    name = _names(table["model_id"])
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
    lines += [_primary_sentence(), ""]
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
