"""The front page's findings, one registration per chapter: each finding's sentence, with its numbers, and its clause
of a model's reading.

A finding (:class:`Finding`, :func:`register`) gives a bullet of the front page's findings list, which says in plain
words which model shows what, each model linked to its chapter, with the number behind it: its estimate, in the
finding's own unit, and its 95% interval, read from the same row of the same table as the model's reading and printed
with the same digits (:mod:`bias_utils.core.precision`); and a clause of each model's reading, the chapter's primary
estimate with its interval (the front page's table of readings, at most :data:`READING_WORDS` words a model; the same
clauses open the chapter, :func:`bias_utils.book.summary.chapter_findings`). A share names what it is a share of in its
sentence. The findings registered here:

* **Warmth and competence of first names** (Study 1, chapter 04's ``profile_stats`` at the primary specification):
  the female − male gap in standard deviations (Hedges' g) with its 95% CI, read only on an axis whose verdict
  (:mod:`bias_utils.profiles.axis_validity`, chapter 03) is ``supported``; otherwise "not read".
* **Writing about occupations** (Study 2, ``bold_headline``, decoders only; :mod:`bias_utils.audit.occupations`): the
  pre-stated primary estimand, the male share of the gendered words about a typical male- and a typical
  female-dominated occupation and their difference (percentage points, whole occupations resampled), with how many
  completions carry a gendered word.
* **The link between them** (``link_next_word``, decoders only; :mod:`bias_utils.intrinsic_extrinsic.link`, chapter
  11): the pre-stated Spearman ρ across the BLS occupations with its interval, and whether it holds beyond their share
  of women (the partial ρ); a direction not validated against the BLS share is not read.
* **"They" about one person** (``next_word_neutral``, decoders only; :mod:`bias_utils.audit.neutral_share`, chapter
  11): the mean share of the next-word probability among the she, he and they words that goes to "they", over the BLS
  occupations, and whether more where an occupation's workers are about half women, when that is shown.
* **The next word and the long form** (``long_form_link``, decoders only; :mod:`bias_utils.audit.long_form`, chapter
  11): whether the next word predicts the female share of what the decoder writes at length, with its ρ.
* **Erasing the concept** (``erasure_tradeoff``, decoders only; :mod:`bias_utils.intrinsic_extrinsic.erasure`,
  chapter 12): the curve's largest effect in plain words with its numbers
  (:func:`bias_utils.intrinsic_extrinsic.erasure_reading.front_page_clause`), and whether erasing the concept at
  every layer loses the facts. Its intervals stay in its chapter: the trade-off is a curve, not one number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..audit import long_form, neutral_share, next_word_prompts, occupation_headline
from ..core import precision, tables
from ..core.results import first_row, model_slug
from ..intrinsic_extrinsic import erasure_reading, erasure_statistics, link
from ..models.builtin_models import BUILTIN_MODELS, model_name
from ..profiles.axis_validity import VERDICTS
from ..report import rendering
from .crossmodel import folder_id, read_results, results_root, short_model_ids

#: The composite dimensions on the front page, and the paper's expectation for each.
HEADLINE = {"warmth": "female", "competence": "male"}
#: The high pole of each headline dimension in plain words.
_HIGH_POLE = {"warmth": "warm", "competence": "competent"}
_ALPHA = 0.05
PAPER = "Schuster et al. 2024"
#: The per-model chapters a finding links to (notebook stems; ``bias_utils.book.build`` writes each
#: executed notebook to ``models/<model folder>/<stem>.ipynb``).
CHAPTERS = {"axes": "03_projection_accuracy", "profile": "04_profiles", "robustness": "10_robustness",
            "audit": "06_bold_audit", "link": "11_intrinsic_extrinsic", "erasure": "12_erasure"}
#: The most words of a model's reading on the front page (every sensitivity estimand lives in its chapter).
READING_WORDS = 80

__all__: list[str] = []


def _reading(dimension: str, row) -> str:
    """How a gap is read: ``unread`` (its axis is not ``supported``, or has no verdict), ``none``
    (Holm p >= ALPHA: no gap shown), ``agree`` or ``opposite`` (to the paper's direction)."""
    if getattr(row, "axis_verdict", None) != VERDICTS[0]:
        return "unread"
    if row.p_holm >= _ALPHA:
        return "none"
    return "agree" if ("female" if row.g > 0 else "male") == HEADLINE[dimension] else "opposite"


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
    return f"{{doc}}`{label} </models/{model_slug(model)}/{CHAPTERS[chapter]}>`"


def model_names(models: Sequence[str]) -> dict[str, str]:
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
class Page:
    """What the findings read, for the models of one build: ``models`` (model ids, in the build's order), their
    ``label`` (running text's names), ``can_generate`` (by model id; a missing model: its built-in kind), the name
    ``gaps`` and audit ``headline`` (:func:`bias_utils.book.summary.read_summary`) and the stacked ``link_next_word``
    rows."""
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
class Finding:
    """One finding of the front page, from one chapter (``chapter``, a key of :data:`CHAPTERS`; its reading opens
    that chapter too): ``title`` heads its line in the findings list, ``bullet`` says in plain words what each model
    shows, with its numbers, linking each model to its chapter (None: nothing to say in this build), and ``reading``
    gives a model's clause of the per-model reading: the chapter's primary estimate with its interval (None: the model
    has none). ``opening``: the model's sentence that opens its chapter where it is not that clause (a finding the
    per-model reading leaves to its bullet); None: the clause. A new chapter's finding is one :func:`register` call."""
    key: str
    chapter: str
    title: str
    bullet: Callable[[Page], str | None]
    reading: Callable[[Page, str], str | None]
    opening: Callable[[Page, str], str | None] | None = None

    def opens(self, page: Page, model: str) -> str | None:
        """The sentence (without its full stop) that opens ``model``'s chapter."""
        return (self.opening or self.reading)(page, model)


#: The front page's findings in reading order (:func:`register`).
FINDINGS: list[Finding] = []


def register(finding: Finding) -> Finding:
    """Add a finding to the front page (its bullet and its clause of every model's reading); one per chapter."""
    if any(f.key == finding.key for f in FINDINGS):
        raise ValueError(f"a front-page finding {finding.key!r} is registered already")
    FINDINGS.append(finding)
    return finding


def _number(value: float) -> str:
    return precision.number_text(value)


def _interval(low: float, high: float, estimate: float) -> str:
    return f"95% CI {precision.interval_text(low, high, estimate)}"


def _rho(row, name: str = "ρ") -> str:
    """"ρ = 0.53, 95% CI 0.32 to 0.72": a correlation row as the readings print it."""
    return f"{name} = {_number(row['effect_size'])}, {_interval(row['ci_low'], row['ci_high'], row['effect_size'])}"


# Study 1: the name gap on each headline dimension (chapter 04), read only on a validated axis (chapter 03)


def _gap_numbers(r, kind: str) -> str:
    """A gap in words' units, printed as the reading prints g: "0.86 standard deviations, 95% CI 0.57 to 1.14". Where
    the sentence names the group nearer the pole (``agree``, ``opposite``) the gap runs from that group; where no gap
    is shown it is female − male, and one not shown after Holm's correction whose printed interval excludes 0 says
    what decides. A gap that is not read has no number here (its chapter prints it)."""
    g, low, high = float(r.g), float(r.g_ci_low), float(r.g_ci_high)
    if kind in ("agree", "opposite") and g < 0:
        g, low, high = -g, -high, -low
    text = f"{_number(g)} standard deviations, {_interval(low, high, g)}"
    if kind in ("agree", "opposite"):
        return text
    text = f"female − male {text}"
    if low > 0 or high < 0:
        text += f" unadjusted; Holm-adjusted p {precision.p_text(r.p_holm, relation=True)}"
    return text


def _gap_reading(dimension: str) -> Callable[[Page, str], str | None]:
    def reading(page: Page, model: str) -> str | None:
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


def _gap_bullet(dimension: str) -> Callable[[Page], str | None]:
    def bullet(page: Page) -> str | None:
        names = page.gaps[page.gaps["population"] == "names"] if len(page.gaps) else page.gaps
        names = names[names["dimension"] == dimension] if len(names) else names
        if not len(names):
            return None
        kinds: dict[str, list[str]] = {"agree": [], "opposite": [], "none": [], "unread": []}
        for r in names.itertuples(index=False):
            kind = _reading(dimension, r)
            chapter = "axes" if kind == "unread" else "profile"
            numbers = "" if kind == "unread" else f" ({_gap_numbers(r, kind)})"
            kinds[kind].append(f"{_link(r.model_id, chapter, page.label[r.model_id])}{numbers}")
        pole, expected = _HIGH_POLE[dimension], HEADLINE[dimension]
        other = "male" if expected == "female" else "female"
        parts = []
        if kinds["agree"]:
            parts.append(f"{expected.capitalize()} first names sit nearer the {pole} end than {other} names in "
                         f"{_listed(kinds['agree'])}, as {PAPER} found")
        if kinds["opposite"]:
            parts.append(f"{other.capitalize()} first names sit nearer the {pole} end than {expected} names in "
                         f"{_listed(kinds['opposite'])}, the opposite of {PAPER}")
        if kinds["none"]:
            parts.append(f"no gap is shown in {_listed(kinds['none'])}")
        if kinds["unread"]:
            parts.append(f"not read in {_listed(kinds['unread'])}: its {dimension} axis is not validated")
        return " ".join(f"{p[0].upper()}{p[1:]}." for p in parts)
    return bullet


for _dimension in HEADLINE:
    register(Finding(_dimension, "profile", f"{_dimension.capitalize()} of first names.", _gap_bullet(_dimension),
                     _gap_reading(_dimension)))


# Study 2: what a decoder wrote about occupations (chapter 06)


def _audit(page: Page, model: str) -> dict | None:
    rows = page.rows(page.headline, model)
    return None if rows.empty else occupation_headline.headline(rows.drop(columns="model_id").iloc[[0]])


def _compared(h: dict) -> bool:
    return not (pd.isna(h["share_difference"]) or pd.isna(h["share_difference_ci_low"]))


def _carry(h: dict) -> str:
    """"67 of 657 completions carry a gendered word"."""
    k, n = int(h["n_gendered_completions"]), int(h["n_completions"])
    return f"{precision.count_text(k)} of {precision.count_text(n)} completions carry a gendered word"


def _difference(h: dict) -> tuple[str, str]:
    """("57", "31 to 83"): the primary difference in points and its interval, as the chapter prints them."""
    return (occupation_headline.percentage_points(h["share_difference"]),
            occupation_headline.mc_interval(h, "share_difference", 100))


def _writing_reading(page: Page, model: str) -> str | None:
    h = _audit(page, model)
    if h is None:
        return "Writing: none (an encoder)" if page.writes(model) is False else None
    if int(h["n_gendered_completions"]) == 0 or not _compared(h):
        return f"Writing: the two groups' male shares cannot be compared; {_carry(h)}"
    points, interval = _difference(h)
    return (f"Writing: male share of gendered words, male- minus female-dominated occupations: {points} points, "
            f"95% CI {interval}; {_carry(h)}")


def _decoders(page: Page, clause: Callable[[str, str], str | None], lacking: str) -> str | None:
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


def _writing_bullet(page: Page) -> str | None:
    def clause(model: str, label: str) -> str | None:
        h = _audit(page, model)
        if h is None:
            return None
        link_ = _link(model, "audit", label)
        if int(h["n_gendered_completions"]) == 0:
            return f"{link_} writes no gendered word about its occupations"
        if not _compared(h):
            return f"in {link_} the two groups of occupations cannot be compared"
        a, b = (rendering.group_label(h[f"group_{side}"]) for side in ("a", "b"))
        shares = (f"{precision.percent_text(h['male_share_a'])} of its gendered words about a typical {a} "
                  f"occupation are male and {precision.percent_text(h['male_share_b'])} about a typical {b} one")
        points, interval = _difference(h)
        reading = occupation_headline.difference_reading(h)
        # "SmolLM2 shows a larger share ...", or "in SmolLM2, a difference ... is not shown"
        shown = h["share_difference_ci_low"] > 0 or h["share_difference_ci_high"] < 0
        lead = f"{link_} shows {reading}" if shown else f"in {link_}, {reading}"
        return f"{lead}: {shares}, {points} points apart (95% CI {interval}), though only {_carry(h)}"
    return _decoders(page, clause, "audit results")


register(Finding("writing", "audit", "Writing about occupations.", _writing_bullet, _writing_reading))


# The link between them (chapter 11): the next-word Spearman ρ across the BLS occupations


def _link_row(page: Page, model: str, analysis: dict | None = None):
    """A model's row of ``link_next_word`` (``analysis``: its analysis and test; default the primary,
    ``link.NEXT_WORD_PRIMARY``); None where the model has no primary."""
    rows = page.rows(page.link_stats, model)
    if not len(rows) or "primary" not in rows or not rows["primary"].astype(bool).any():
        return None
    return link.pick_analysis(rows, **(analysis or link.NEXT_WORD_PRIMARY))


def _shown(row) -> bool:
    return bool(np.isfinite(row["ci_low"]) and (row["ci_low"] > 0 or row["ci_high"] < 0))


def _link_reading(page: Page, model: str) -> str | None:
    row = _link_row(page, model)
    if row is None:
        return None
    if not bool(row["readable"]):
        return "Inside and writing: not read (its female − male direction is not validated)"
    if not np.isfinite(row["effect_size"]):
        return "Inside and writing: not computable"
    return f"Inside and writing: {_rho(row)}, {int(row['n'])} occupations" + ("" if _shown(row) else ", not shown")


def _beyond_share(page: Page, model: str, row) -> str:
    """Whether a shown link holds beyond the occupations' share of women (the partial ρ, chapter 11's row "beyond
    the BLS share"): "" without the row."""
    beyond = _link_row(page, model, {"analysis": "beyond the BLS share", "test": "partial_spearman"})
    if beyond is None or not np.isfinite(beyond["effect_size"]):
        return ""
    holds = _shown(beyond) and np.sign(beyond["effect_size"]) == np.sign(row["effect_size"])
    said = ("and it holds beyond their share of women in the workforce" if holds else
            "but that it holds beyond their share of women in the workforce is not shown")
    return f", {said} ({_rho(beyond, 'partial ρ')})"


def _link_bullet(page: Page) -> str | None:
    def clause(model: str, label: str) -> str | None:
        row = _link_row(page, model)
        if row is None:
            return None
        link_ = _link(model, "link", label)
        if not bool(row["readable"]) or not np.isfinite(row["effect_size"]):
            return f"in {link_} it is not read: its female − male direction is not validated"
        numbers = f"{_rho(row)}, over {int(row['n'])} occupations"
        if not _shown(row):
            return (f"in {link_}, where the model places an occupation inside does not show in how it continues a "
                    f"sentence about it ({numbers}: not shown)")
        way = "nearer its female terms" if row["effect_size"] > 0 else "nearer its male terms"
        return (f"in {link_}, the occupations it places {way} are continued more often with a female word "
                f"({numbers}){_beyond_share(page, model, row)}")
    return _decoders(page, clause, "results of this chapter")


register(Finding("link", "link", "Does the bias inside predict the bias it writes?", _link_bullet, _link_reading))


# Beyond the binary (chapter 11): how much of what a decoder writes about one person goes to "they"


def _neutral_row(page: Page, question: str, model: str):
    rows = page.rows(page.neutral, model)
    return neutral_share.neutral_row(rows, question, "neutral_share") if len(rows) else None


def _they_share(row, of: str = "") -> str:
    """"34% (95% CI 30% to 38%)": the neutral share as chapter 11 prints it, ``of`` (what it is a share of) after the
    estimate."""
    percent = next_word_prompts.percent
    return f"{percent(row['effect_size'])}{of} (95% CI {percent(row['ci_low'])} to {percent(row['ci_high'])})"


def _neutral_reading(page: Page, model: str) -> str | None:
    row = _neutral_row(page, "share", model)
    if row is None:
        return None
    return f"\"They\" for one person: {_they_share(row, ' of she/he/they')}"


def _neutral_bullet(page: Page) -> str | None:
    """Per decoder with the table, in plain words: how much of the next word about one person goes to "they", of
    what, and where (more where the workforce is balanced, when that is shown, with its ρ)."""
    def clause(model: str, label: str) -> str | None:
        row = _neutral_row(page, "share", model)
        if row is None:
            return None
        balance = _neutral_row(page, "balance", model)
        way = 0 if balance is None else neutral_share.direction(balance)
        where = {1: ", more where an occupation's workers are about half women", 0: "",
                 -1: ", less where an occupation's workers are about half women"}[way]
        return (f"when {_link(model, 'link', label)} continues a sentence about one person, \"they\" takes "
                f"{_they_share(row)} of the next-word probability that goes to she, he or they words"
                + (f"{where} ({_rho(balance)})" if way else ""))
    return _decoders(page, clause, "results of this chapter")


register(Finding("neutral", "link", "Beyond she and he: \"they\" about one person.", _neutral_bullet,
                 _neutral_reading))


def _long_form_bullet(page: Page) -> str | None:
    """Per decoder with the table: whether the next word predicts the female share of what it writes at length
    (:func:`bias_utils.audit.long_form.at_length_clause`), with the primary ρ."""
    def clause(model: str, label: str) -> str | None:
        rows = page.rows(page.long_form, model)
        text = long_form.at_length_clause(rows, _link(model, "link", label))
        if text is None:
            return None
        row = first_row(rows, **long_form.LONG_FORM_PRIMARY)
        return f"{text} ({_rho(row)}, over {int(row['n'])} occupations)"
    return _decoders(page, clause, "results of this chapter")


# no clause in the readings: their word budget is the primaries'
register(Finding("long_form", "link", "Does the next word predict what it writes at length?", _long_form_bullet,
                 lambda page, model: None))


# The erasure (chapter 12): does the inside drive what the model writes?


def _erasure_clause(page: Page, model: str, who: str) -> str | None:
    """A decoder's erasure in plain words (``intrinsic_extrinsic.erasure_reading.front_page_clause``, ``who`` naming
    it): where the curve's largest effect is, how much of the stereotype in its writing goes, what it costs, how much
    of the fact goes and what the controls did, the rule's state where it names another; and whether erasing the
    concept everywhere also loses the gender of "the king ... he". None without chapter 12's table."""
    rows = page.rows(page.erasure, model)
    if not len(rows):
        return None
    everywhere = rows[(rows["erasure"] == "leace") & (rows["layer"] == "all")
                      & (rows["measure"] == "facts_right_share")]
    lost = bool(len(everywhere)) and float(everywhere["value"].iloc[0]) < erasure_statistics.MIN_FACTS
    tail = ", and erasing it at every layer also loses whether \"the king\" is a he" if lost else ""
    return erasure_reading.front_page_clause(rows, who) + tail


def _erasure_bullet(page: Page) -> str | None:
    """Per decoder with chapter 12's table, :func:`_erasure_clause` linking it to its chapter."""
    return _decoders(page, lambda model, label: _erasure_clause(page, model, _link(model, "erasure", label)),
                     "results of this chapter")


def _erasure_opening(page: Page, model: str) -> str | None:
    """Chapter 12 opens with the front page's clause for its model: the curve's largest effect first."""
    text = _erasure_clause(page, model, page.label[model])
    return text[:1].upper() + text[1:] if text else None


register(Finding("erasure", "erasure", "Does the inside drive what the model writes?", _erasure_bullet,
                 lambda page, model: None, _erasure_opening))


def caveat_bullet() -> str:
    return ("**Not shown is not absent.** Where a finding says *not shown* or *not read*, this build could not tell; "
            "it does not say that a model has no such bias.")


def read_page(folders: Sequence[str], results_dir, can_generate: dict | None, gaps: pd.DataFrame,
              headline: pd.DataFrame, link_stats: pd.DataFrame | None) -> Page:
    """The :class:`Page` of ``folders`` (results folder names): ``gaps`` and ``headline`` as
    :func:`bias_utils.book.summary.read_summary` gives them, ``link_stats`` the stacked ``link_next_word`` rows, the
    other chapters' tables read here."""
    models, can_generate = _by_model_id(folders, results_dir, can_generate)
    link_stats = link_stats if link_stats is not None else pd.DataFrame(columns=["model_id"])
    erased, _ = read_results(list(folders), tables.NAMES.ERASURE_TRADEOFF, results_dir)
    neutral, _ = read_results(list(folders), tables.NAMES.NEXT_WORD_NEUTRAL, results_dir)
    at_length, _ = read_results(list(folders), tables.NAMES.LONG_FORM_LINK, results_dir)
    return Page(models, model_names(models), can_generate or {}, gaps, headline, link_stats, erased, neutral,
                at_length)


def model_reading(page: Page, model: str) -> str:
    """A model's reading: the clause of each registered finding (its chapter's primary estimate with its interval),
    at most :data:`READING_WORDS` words."""
    clauses = [c for f in FINDINGS if (c := f.reading(page, model)) is not None]
    return ". ".join(clauses) + "." if clauses else "No results of this build's chapters."
