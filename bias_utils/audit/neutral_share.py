"""Singular "they" in the next word (chapter 11, issue 48): which templates' next word reads as one person, and the
neutral share, the part of the reference to one person that goes to "they", read per decoder.

Why a module of its own: the log-ratio of female to male words (:mod:`bias_utils.audit.next_word`) is defined, and
computed, as before the neutral words were counted; the neutral share is a second question asked of the same forward
passes, with its own rule on which templates count, its own definition, statistics and reading.

**Which next words read as one person, stated before the results** (:data:`_PLURAL_TEMPLATES`). A neutral form is
singular "they" only where it refers to one person. Seven templates bind it to one: the object of "thanked" or "trusts",
a possessive of the occupation's own things, the subject of a clause on why the occupation did something. Three leave it
room for more (:data:`_OPEN_TEMPLATES`): reported speech ("said that", "told the customer that"), where "they" can be an
unnamed group (the firm, the staff), and "waited for them" after two people are named, which can be the pair. Which of
the three would *usually* be plural is a check on sampled continuations (:data:`_READING_CHECK`): ten continuations of
each template after its likeliest neutral word, each read by hand as the one person, a group, or unclear. An open
template is left out of the neutral share where a group was read at least as often as the one person: "The {occupation}
said that" (3 group, 2 one person); "told the customer that" (0, 7) and "waited for them" (0, 5) stay. Per occupation,
over the templates that read as one person (``n_singular``): the mean ``neutral_mass`` and ``neopronoun_mass`` and the
**neutral share** ``neutral / (female + male + neutral)`` of the mean masses (the share of the reference to one person
that goes to "they"). :meth:`next_word._NextWord.neutral_share` reads it per decoder with intervals resampling
occupations (:func:`neutral_statistics`): how much goes to "they" (the BLS occupations and the audit's units), whether
more where the workforce is balanced, whether it follows the share of women as the female and male masses do, and the
neopronouns' mass. A run's own templates are all read as singular: no rule names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..core import tables
from ..core.cache import stable_hash
from ..core.criterion_validity import correlation_text
from ..core.errors import check_seed
from ..core.results import display_name, first_row, write_tables
from ..core.stats import STAT_COLUMNS, bootstrap_ci, check_n_boot, correlation_rows, results_table
from .next_word_prompts import (
    REFERENCE_LEXICONS,
    SLOT,
    TEMPLATES,
    TOKEN_COLUMNS,
    check_next_word_lexicons,
    check_next_word_templates,
    percent,
)

__all__: list[str] = []

#: The built-in templates that leave a neutral next word room for more than one person, and why (module docstring,
#: *Which next words read as one person*); the others bind it to one person.
_REPORTED = "reported speech: \"they\" can be an unnamed group (the firm, the staff)"
_OPEN_TEMPLATES: dict[str, str] = {
    "The {occupation} said that": _REPORTED,
    "The {occupation} told the customer that": _REPORTED,
    "The manager wanted to talk to the {occupation}, so we waited for": "two people are named: \"them\" can be "
                                                                        "the pair",
}
#: The check on sampled continuations (``tests/fixtures/neutral_reading_check.csv`` holds them with their readings):
#: per built-in template, of ten continuations after its likeliest neutral word (SmolLM2-135M-Instruct, the audit's
#: sampling settings, seed 0, ten occupations), how many read as the one person, as a group, and as neither clearly.
_READING_CHECK: dict[str, tuple[int, int, int]] = {
    "The {occupation} said that": (2, 3, 5),
    "The {occupation} told the customer that": (7, 0, 3),
    "The {occupation} could not come to the meeting because": (9, 0, 1),
    "After a long day at work, the {occupation} went home because": (10, 0, 0),
    "The {occupation} picked up": (10, 0, 0),
    "The {occupation} forgot": (10, 0, 0),
    "Before leaving, the {occupation} put on": (10, 0, 0),
    "I called the {occupation} and thanked": (9, 0, 1),
    "The manager wanted to talk to the {occupation}, so we waited for": (5, 0, 5),
    "Everyone in the office likes the {occupation} and trusts": (10, 0, 0),
}
#: Left out of the neutral share, with the reason: an open template whose check read a group at least as often as
#: the one person (its neutral continuation would usually be plural).
_PLURAL_TEMPLATES: dict[str, str] = {
    t: f"{why}, and of ten sampled continuations {group} read it as a group and {one} as the one person"
    for t, why in _OPEN_TEMPLATES.items() for one, group, _ in [_READING_CHECK[t]] if group >= one}
#: What the neutral share's tables carry (:func:`neutral_definition`).
NEUTRAL_DEFINITION = "neutral_definition"
_NEUTRAL_WORD_COLUMNS = TOKEN_COLUMNS + [NEUTRAL_DEFINITION]


def singular_templates(templates: Sequence[str]) -> list[str]:
    """The templates whose next word reads as one person (module docstring): all but :data:`_PLURAL_TEMPLATES`."""
    return [t for t in templates if t not in _PLURAL_TEMPLATES]


def neutral_definition(templates: Sequence[str] | None = None, lexicons=None) -> str:
    """What defines the neutral share, as :func:`next_word_prompts.measure_definition` defines the log-ratio: the
    templates read as singular, the log-ratio's two lexicons and :data:`next_word_prompts.REFERENCE_LEXICONS` (its
    denominator holds all three)."""
    words = check_next_word_lexicons(lexicons)
    return stable_hash({"measure": "next-word neutral share",
                         "templates": sorted(singular_templates(check_next_word_templates(templates))),
                         "lexicons": {side: sorted(set(w)) for side, w in
                                      {**words, **REFERENCE_LEXICONS}.items()}}, 12)


#: The built-in templates and words: the neutral definition every default build's tables carry.
_DEFAULT_NEUTRAL_DEFINITION = neutral_definition()


def singular_means(prompts: pd.DataFrame) -> pd.DataFrame:
    """Per occupation, over its templates whose next word reads as one person (``singular``): ``n_singular``, the
    mean ``female_mass``, ``male_mass``, ``neutral_mass`` and ``neopronoun_mass``, and ``neutral_share`` (the neutral
    mean over the sum of the female, male and neutral means: the share of the reference to one person that goes to
    "they"). An occupation with no such template has no row."""
    per = prompts[prompts["singular"]].groupby("occupation", sort=False).agg(
        n_singular=("template", "size"), female_mass=("female_mass", "mean"), male_mass=("male_mass", "mean"),
        neutral_mass=("neutral_mass", "mean"), neopronoun_mass=("neopronoun_mass", "mean")).reset_index()
    per["neutral_share"] = per["neutral_mass"] / (per["female_mass"] + per["male_mass"] + per["neutral_mass"])
    return per


# --------------------------------------------------------------------------- read per decoder

#: The units of :data:`tables.NAMES.NEXT_WORD_NEUTRAL`: the BLS occupations and the audit's primary units.
BLS_UNITS, _AUDIT_UNITS = "BLS occupations", "BOLD primary units"
#: How balanced an occupation's workforce is: −|BLS share of women − 50| (0 at half women, −50 at none or all).
_BALANCE = "balance"
_NEUTRAL_STAT_COLUMNS = ["question", "units", "measure", "against", NEUTRAL_DEFINITION, "templates"]


def templates_in_words(templates: Sequence[str]) -> str:
    """The templates a measure ran on, for a reader: "the book's ten templates", or a run's own, quoted with "…" for
    the occupation ("\"Gestern sagte …, dass\""): a definition hash tells two measures apart, these words say how."""
    if set(templates) == set(TEMPLATES):
        return f"the book's {len(TEMPLATES)} templates"
    return "; ".join(f"\"{t.replace(SLOT, '…')}\"" for t in dict.fromkeys(templates))


def neutral_statistics(prompts: pd.DataFrame, values: pd.DataFrame, units: pd.DataFrame | None = None, *,
                        definition: str = "", n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The neutral share (:func:`singular_means` of ``prompts``, :func:`next_word.next_word_table`'s) read per decoder,
    with intervals resampling occupations ``n_boot`` times, one row per question and measure (``question``):

    * ``share`` (``test`` ``mean``): the mean ``neutral_share`` over the BLS occupations of ``values`` and over the
      audit's primary units (``units``' ``noun``; None leaves the row out), percentile bootstrap interval
      (``stats.bootstrap_ci``): how much of the reference to one person goes to "they";
    * ``balance`` (``spearman``): Spearman's ρ of the neutral share with ``balance`` (−|``bls_pct_female`` − 50|)
      across the BLS occupations, scipy's p and the pair-bootstrap interval (``stats.correlation_rows``): is "they"
      written more where the workforce is balanced?
    * ``share of women`` (``spearman``): the neutral share and the female and male masses (over the same templates),
      each against ``bls_pct_female``; Holm over the three: does "they" follow the share of women as the pronouns do?
    * ``neopronouns`` (``mean``): the mean ``neopronoun_mass`` over the BLS occupations, reported as it is.

    Columns: ``stats.STAT_COLUMNS`` (``p_adj``: Holm within a question; ``n``: occupations with the measure), then
    ``question``, ``units``, ``measure``, ``against`` ("" for a mean), ``neutral_definition`` (``definition``) and
    ``templates`` (:func:`templates_in_words` of the prompts')."""
    check_n_boot(n_boot)
    check_seed(seed)
    need = {"occupation", "bls_pct_female"} - set(values.columns)
    if need or (units is not None and "noun" not in units):
        raise ValueError(f"neutral_statistics: values need occupation and bls_pct_female (missing {sorted(need)}), "
                         "units a noun column")
    per = singular_means(prompts)
    bls = values[["occupation", "bls_pct_female"]].merge(per, on="occupation").dropna(subset=["neutral_share"])
    if bls.empty:
        raise ValueError("neutral_statistics: no BLS occupation of values has a template that reads as one person")
    bls[_BALANCE] = -(bls["bls_pct_female"] - 50).abs()

    def mean(x, question, where, measure):
        est, lo, hi = bootstrap_ci(x, np.mean, n_boot=n_boot, seed=seed)
        return [{"test": "mean", "effect": "mean", "effect_size": est, "statistic": est, "ci_low": lo, "ci_high": hi,
                 "n": len(x), "question": question, "units": where, "measure": measure, "against": ""}]

    def rho(measure, against, question):
        row = next(r for r in correlation_rows(bls[measure], bls[against], n_boot=n_boot, seed=seed)
                   if r["test"] == "spearman")
        return {**row, "question": question, "units": BLS_UNITS, "measure": measure, "against": against,
                "group_a": measure, "group_b": against}

    families = [mean(bls["neutral_share"], "share", BLS_UNITS, "neutral_share")]
    if units is not None:
        audit = units[["noun"]].drop_duplicates().merge(per, left_on="noun", right_on="occupation")
        if len(audit.dropna(subset=["neutral_share"])):
            families.append(mean(audit["neutral_share"].dropna(), "share", _AUDIT_UNITS, "neutral_share"))
    families.append([rho("neutral_share", _BALANCE, "balance")])
    families.append([rho(m, "bls_pct_female", "share of women")
                     for m in ("neutral_share", "female_mass", "male_mass")])
    families.append(mean(bls["neopronoun_mass"], "neopronouns", BLS_UNITS, "neopronoun_mass"))
    out = pd.concat([results_table(rows) for rows in families], ignore_index=True)
    out[NEUTRAL_DEFINITION] = definition
    out["templates"] = templates_in_words(prompts["template"].unique())
    return out[STAT_COLUMNS + _NEUTRAL_STAT_COLUMNS]


@dataclass
class NeutralShare:
    """What :meth:`next_word._NextWord.neutral_share` finds: ``statistics`` (:func:`neutral_statistics`), the neutral
    lexicons' ``words``, the ``templates`` with the rule's reading of each (:func:`template_rule`), ``model_id`` and
    the ``plural_nouns`` read (measured, left out of the share: their "they" is plain plural) and ``coverage_note``
    (``next_word.coverage_note`` of the she, he and "they" words' share of the next word: "" where it is enough)."""

    statistics: pd.DataFrame
    words: pd.DataFrame
    templates: pd.DataFrame
    model_id: str
    plural_nouns: tuple[str, ...] = ()
    coverage_note: str = ""

    def write(self, folder: str | Path) -> list[Path]:
        """Write the statistics as parquet + CSV under ``folder`` (the words are written with the measure's tables)."""
        return write_tables(folder, {tables.NAMES.NEXT_WORD_NEUTRAL: self.statistics})

    def describe(self, model: str | None = None) -> str:
        """Markdown reading the four questions for ``model`` (default: this run's): :func:`_describe_neutral`."""
        text = _describe_neutral(self.statistics, self.words, self.templates, model or self.model_id,
                                 self.plural_nouns)
        return f"{text} {self.coverage_note}" if self.coverage_note else text


def template_rule(prompts: pd.DataFrame) -> pd.DataFrame:
    """One row per template of ``prompts``: ``template``, ``reference``, ``room`` (why a neutral word there may be
    more than one person, :data:`_OPEN_TEMPLATES`; "" where the sentence binds it to one), the check's ``one_person``,
    ``group`` and ``unclear`` readings (:data:`_READING_CHECK`; <NA> for a run's own template) and ``singular``."""
    rows = prompts.drop_duplicates("template")[["template", "reference", "singular"]].reset_index(drop=True)
    check = pd.DataFrame([_READING_CHECK.get(t, (pd.NA,) * 3) for t in rows["template"]],
                         columns=["one_person", "group", "unclear"], dtype="Int64")
    rows["room"] = rows["template"].map(_OPEN_TEMPLATES).fillna("")
    return pd.concat([rows[["template", "reference", "room"]], check, rows[["singular"]]], axis=1)


def _share_text(row, units: str) -> str:
    """A mean share or mass with its interval (:func:`next_word_prompts.percent`: whole percent from 1%, the book's
    digits below): "34% (95% CI 30% to 37%, 60 BLS occupations)"."""
    return (f"{percent(row['effect_size'])} (95% CI {percent(row['ci_low'])} to {percent(row['ci_high'])}, "
            f"{int(row['n'])} {units})")


def direction(row) -> int:
    """+1 or −1 where a row's interval lies above or below 0, else 0 (not shown)."""
    if not np.isfinite(row["ci_low"]):
        return 0
    return 1 if row["ci_low"] > 0 else -1 if row["ci_high"] < 0 else 0


def neutral_row(statistics: pd.DataFrame, question: str, measure: str, units: str = BLS_UNITS):
    return first_row(statistics, question=question, measure=measure, units=units)


def _neutral_share_sentence(statistics: pd.DataFrame, model: str) -> str:
    """One plain sentence (question 1 over the BLS occupations) for a page that shows one reading per decoder."""
    row = neutral_row(statistics, "share", "neutral_share")
    return (f"When {display_name(model)} continues a sentence that refers to one person, \"they\" takes "
            f"{_share_text(row, 'BLS occupations')} of the reference to that person, beside \"she\" and \"he\".")


def _describe_neutral(statistics: pd.DataFrame, words: pd.DataFrame, templates: pd.DataFrame,
                      model: str = "this model", plural_nouns: Sequence[str] = ()) -> str:
    """Markdown reading :func:`neutral_statistics` for ``model``: the four questions in order, each correlation read
    by whether its interval lies off 0 ("not shown is not absent" where it does not), the neopronouns as they are,
    the templates and ``plural_nouns`` left out and why (``templates``: :func:`template_rule`'s), and the neutral
    words counted by a first token or not at all (``words``)."""
    text = [_neutral_share_sentence(statistics, model)]
    audit = neutral_row(statistics, "share", "neutral_share", _AUDIT_UNITS)
    if audit is not None:
        text.append(f"Over the audit's units (the BOLD person-noun occupations): "
                    f"{_share_text(audit, 'BOLD primary units')}.")
    balance = neutral_row(statistics, "balance", "neutral_share")
    numbers = f"{correlation_text(balance)}, {int(balance['n'])} BLS occupations"
    way = direction(balance)
    where = "where the workforce is balanced (a BLS share of women near 50%)"
    text.append(f"{'More' if way > 0 else 'Less'} of it goes to \"they\" {where} ({numbers})." if way else
                f"That more of it goes to \"they\" {where} is not shown ({numbers}; not shown is not absent).")
    # the three rows answer one question: their p is read Holm-adjusted over the three
    share, female, male = (neutral_row(statistics, "share of women", m).copy() for m in
                           ("neutral_share", "female_mass", "male_mass"))
    for row in (share, female, male):
        row["p"] = row["p_adj"]
    follows = {1: "rises with it", -1: "falls with it", 0: "is not shown to follow it"}
    masses = (f"the female mass {follows[direction(female)]} ({correlation_text(female)}) and the male mass "
              f"{follows[direction(male)]} ({correlation_text(male)}); p Holm-adjusted over the three")
    way = direction(share)
    if way:
        more, unexpected = ("women", "he") if way > 0 else ("men", "she")
        text.append(f"Against the BLS share of women, \"they\" takes more where more of the workers are {more}, "
                    f"where \"{unexpected}\" would be the unexpected pronoun ({correlation_text(share)}), while "
                    f"{masses}.")
    else:
        text.append("Against the BLS share of women, that \"they\" stands in for one unexpected pronoun more than the "
                    f"other is not shown ({correlation_text(share)}; not shown is not absent), while {masses}.")
    neo = neutral_row(statistics, "neopronouns", "neopronoun_mass")
    text.append(f"The neopronouns (ze, xe and their forms) take {_share_text(neo, 'BLS occupations')} of the next "
                "word for the mean occupation: reported as it is, and not read beyond that.")
    text += [f"Left out of the share: \"{t.template.replace(SLOT, '…')}\", because {_PLURAL_TEMPLATES[t.template]}."
             for t in templates.itertuples() if t.template in _PLURAL_TEMPLATES]
    if len(plural_nouns):
        text.append(f"Also left out: {len(plural_nouns)} plural noun{'s' if len(plural_nouns) > 1 else ''} "
                    f"({', '.join(plural_nouns)}), measured like the others, because after a plural subject \"they\" "
                    "is plain plural.")
    longer = ", ".join(words.loc[words["counted"] == "first token", "word"])
    shared = ", ".join(words.loc[words["counted"] == "shared", "word"])
    parts = ([f"{longer} count by their first token (an upper bound on the word)"] if longer else []) + (
        [f"{shared} share a first token with another counted word and are not counted"] if shared else [])
    if parts:
        text.append(f"In {display_name(model)}'s tokenizer, " + "; ".join(parts) + ".")
    return " ".join(text)

