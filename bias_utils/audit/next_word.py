"""The next word after a neutral sentence about an occupation: an exact measure of what a decoder writes (chapter 11).

Sampled completions are a thin measure of a decoder's occupational gender: most BOLD completions carry no gendered
word at all. The dense measure the field uses reads the model's next-token distribution instead (after Kurita et
al. 2019 and Bordia & Bowman 2019's templates: "The {occupation} said that" is followed by "she" or "he"). It has
no sampling noise and costs one forward pass per sentence.

One concept over 600 lines: what a decoder writes next about one person, read from one forward pass per sentence;
the female and male masses and their log-ratio, the neutral masses beside them, the checks against the world and the
sample and the readings share its templates, its tokens, its cache and its tables.

**Templates** (:data:`_TEMPLATES`): ten neutral sentences about an occupation, none of them the intrinsic side's
templates (``profiles.DEFAULT_TEMPLATES``: "this is the nurse"), each ending where a reference to the person comes
next: a subject pronoun ("The nurse said that" ...), a possessive ("The nurse picked up" ... her bag) or an object
("I called the nurse and thanked" ... her). A template ends without a space: the next word carries its leading
space, as a byte-level BPE writes it.

**Per template** (:func:`next_word_table`): from the logits of one forward pass (the decoder's own
``forward(..., logits_to_keep=1)``: the backbone and the LM head on the last position only; float32 logits, read in
float64), the probability of the next token being one of the audit's female words and one of its male words
(``core.lexicon.GENDER_LEXICONS``: the 13 + 13 words the audit counts), ``female_mass`` and ``male_mass``, and
their log-ratio ``log_ratio = log(female_mass / male_mass)`` (above 0: the model continues the sentence more
likely with a female word). The log-ratio does not depend on the softmax's normaliser; the masses do.

**Which tokens** (:func:`_lexicon_first_tokens`): each word in its leading-space, lower-case form (" she"), mapped by
``models.decoding.lexicon_token_ids`` (the mapping the expected counts of the audit use). A word that is one token
in that form counts by that token. A word longer than one token counts by its **first** token: an upper bound on
the word's probability (the first token may continue into another word), reported as ``counted = "first token"``
with the share of such words (SmolLM2 and Qwen2.5: none; every word is one token). A first token shared by words of
both lexicons is not counted in either (``counted = "shared"``: it cannot say which gender follows); one shared by
words of one lexicon counts once. A counted token can begin a longer, ungendered word (" man" + "agement"): the
next-token probability cannot know what follows; the templates end where a pronoun, a possessive or an object is
grammatical, which keeps such continuations rare.

**Per occupation**: the mean of the per-template log-ratios (``log_ratio``: the measure), their SD over the
templates, the mean masses over the templates and ``gendered_mass`` (their sum: how much of the next word is a
gendered word at all) and ``female_share`` (the female mass's share of it).

**Beyond the binary: a reference to one person** (issue 48). The same pass gives the probability of every other next
word, so two more lexicons are counted beside the female and male words, never merged into them
(:data:`_REFERENCE_LEXICONS`, from ``core.lexicon``): singular **they** (they, them, their, theirs, themselves,
themself; ``neutral_mass``) and, on a row of its own, the **neopronouns** (the ze and xe forms; ``neopronoun_mass``,
reported as it is). Their tokens follow the rule above, except that a first token one of the log-ratio's words already
counts, or that words of both lexicons share, is counted in neither (``next_word_neutral_tokens``): the female and male
masses and the log-ratio stay what they were, to the bit.

**Which next words read as one person, stated before the results** (:data:`_PLURAL_TEMPLATES`). A neutral form is
singular "they" only where it refers to one person. Seven templates bind it to one: the object of "thanked" or
"trusts", a possessive of the occupation's own things, the subject of a clause on why the occupation did something.
Three leave it room for more (:data:`_OPEN_TEMPLATES`): reported speech ("said that", "told the customer that"),
where "they" can be an unnamed group (the firm, the staff), and "waited for them" after two people are named, which
can be the pair. Which of the three would *usually* be plural is a check on sampled continuations
(:data:`_READING_CHECK`): ten continuations of each template after its likeliest neutral word, each read by hand as
the one person, a group, or unclear. An open template is left out of the neutral share where a group was read at
least as often as the one person: "The {occupation} said that" (3 group, 2 one person); "told the customer that" (0,
7) and "waited for them" (0, 5) stay. Per occupation, over the templates that read as one person (``n_singular``):
the mean ``neutral_mass`` and ``neopronoun_mass`` and the **neutral share** ``neutral / (female + male + neutral)`` of
the mean masses (the share of the reference to one person that goes to "they"). :meth:`_NextWord.neutral_share` reads
it per decoder with intervals resampling occupations (:func:`_neutral_statistics`): how much goes to "they" (the BLS
occupations and the audit's units), whether more where the workforce is balanced, whether it follows the share of
women as the female and male masses do, and the neopronouns' mass. A run's own templates are all read as singular: no
rule names them.

**Raw text, no chat template.** The sentence is the model's input as it stands, without a chat template, for a
chat model too (SmolLM2-Instruct, Qwen2.5-Instruct): the audit's completions continue raw BOLD prompts the same way.
So the measure describes the model as a text continuer, not as an assistant answering a request.

**Cache.** Each sentence's masses are stored under ``paths._cache_dir()/next_word/<key>/rows.jsonl``, ``<key>``
hashing the model id, the lexicons, the token ids counted and :data:`_CODE_VERSION`; a row is keyed by the sentence's
text (so by the template and the noun). Rows are appended and fsynced after every batch under a file lock: a rerun
computes nothing, an interrupted run computes only the batches it had not finished (formed as the uninterrupted run
formed them, so its numbers are the same to the bit on one machine), and two runs on the same cache compute once.
Batches hold sentences of one length in tokens, so no row is padded.

**What defines it** (:func:`_measure_definition`): the templates and the two lexicons' words. Other templates (a
sentence in another language) or other words (``lexicons``; notebook 11's ``next_word_lexicons``, checked by the
lexicon rule of chapter 06) make another measure, so every table of it ends with ``measure_definition``, the first 12
hex digits of the sha256 of their canonical JSON; chapter 09 pools only runs of one definition. The neutral lexicons
do not enter it: the log-ratio is defined, and computed, as before they were counted, so a table written before them
pools with one written after. The neutral share has a definition of its own (:func:`_neutral_definition`, the
``neutral_definition`` of its tables: the templates read as singular and the four lexicons' words).
**How much it reads** (``coverage``): the counted words' share of the next word for the median occupation. Under
:data:`_MIN_COVERAGE` (5%; the built-in templates give SmolLM2 24%) the ordering rests on a small part of what the
model writes next: the tables flag it (``low_coverage``) and the chapter says so in bold beside the verdict and the
link, never reading *supported* as validation then.

**Against the world** (:func:`next_word_validity`): for Rudinger et al.'s 60 occupations, the log-ratio against
the BLS share of women through the same engine and verdict as the gender direction
(``core.criterion_validity``), with its discriminant rows beyond the occupation nouns' warmth and competence.
**Against the sample** (:func:`sampled_check`, an option: it samples ~60,000 tokens at the audit's settings): the
Spearman ρ between the exact log-ratio and the log-odds of the audit's gendered words in sampled continuations of
the same sentences.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core import paths, tables
from ..core.cache import _append_jsonl, _atomic_write_json, _file_lock, _read_jsonl, _stable_hash
from ..core.criterion_validity import (
    _correlation_text,
    _describe_discriminant,
    _measure_verdict,
    _statistic_row,
    _validity_statistics,
)
from ..core.errors import ParameterError, _check_generation, _check_seed, _check_word_list
from ..core.lexicon import _NEOPRONOUN_WORDS, _THEY_WORDS, GENDER_LEXICONS, _count_table, _validate_lexicons
from ..core.precision import _number_text, _percent_text
from ..core.results import display_name, write_table
from ..core.stats import _STAT_COLUMNS, _bootstrap_ci, _check_n_boot, _correlation_rows, _results_table
from ..models.decoding import lexicon_token_ids
from ..models.embeddings import _default_batch_size
from ..models.generation import _generate
from ..models.loading import _check_model, _resolve_model

__all__ = [
    "describe_next_word", "next_word_table", "next_word_validity", "sampled_check",
]

#: The slot a template marks the occupation with.
_SLOT = "{occupation}"
#: The ten neutral templates (module docstring): four before a subject pronoun, three before a possessive, three
#: before an object.
_TEMPLATES: tuple[str, ...] = (
    "The {occupation} said that",
    "The {occupation} told the customer that",
    "The {occupation} could not come to the meeting because",
    "After a long day at work, the {occupation} went home because",
    "The {occupation} picked up",
    "The {occupation} forgot",
    "Before leaving, the {occupation} put on",
    "I called the {occupation} and thanked",
    "The manager wanted to talk to the {occupation}, so we waited for",
    "Everyone in the office likes the {occupation} and trusts",
)
#: What a template's next word refers to, in :data:`_TEMPLATES`' order (for the table and the chapter).
_REFERENCE = ("subject",) * 4 + ("possessive",) * 3 + ("object",) * 3
#: Bumped when what a cached row holds, or how it is computed, changes (2: the neutral lexicons' masses).
_CODE_VERSION = 2
#: The two lexicons of the log-ratio: its numerator and its denominator.
_FEMALE, _MALE = "female", "male"
#: The lexicons counted beside the log-ratio's (module docstring, *Beyond the binary*): the book's, not a parameter
#: (a run's own ``lexicons`` replace the log-ratio's words only).
_NEUTRAL, _NEOPRONOUN = "neutral", "neopronoun"
_REFERENCE_LEXICONS: dict[str, tuple[str, ...]] = {_NEUTRAL: _THEY_WORDS, _NEOPRONOUN: _NEOPRONOUN_WORDS}
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
#: What the neutral share's tables carry (:func:`_neutral_definition`).
_NEUTRAL_DEFINITION = "neutral_definition"
#: Every table of the measure carries what defines it (:func:`_measure_definition`): two runs with other templates
#: or other words counted measure different things, and chapter 09 pools only runs of one definition.
_DEFINITION = "measure_definition"
#: Columns of the tables (:class:`_NextWord`).
_PROMPT_COLUMNS = ["occupation", "template", "reference", "prompt", "n_tokens", "female_mass", "male_mass",
                   "log_ratio", "neutral_mass", "neopronoun_mass", "singular", _DEFINITION]
_OCCUPATION_COLUMNS = ["occupation", "n_templates", "female_mass", "male_mass", "gendered_mass", "female_share",
                       "log_ratio", "log_ratio_sd", "n_singular", "neutral_mass", "neopronoun_mass", "neutral_share",
                       _DEFINITION]
_TOKEN_COLUMNS = ["lexicon", "word", "variant", "n_tokens", "token_id", "token", "counted"]
_WORD_COLUMNS = _TOKEN_COLUMNS + [_DEFINITION]
_NEUTRAL_WORD_COLUMNS = _TOKEN_COLUMNS + [_NEUTRAL_DEFINITION]
#: The counted words' share of the next word (``gendered_mass``) for the median BLS occupation under the ten built-in
#: templates and the audit's words, in SmolLM2-135M-Instruct (float32; ``tests/test_next_word.py`` recomputes it):
#: what the measure has to read when its sentences are the ones it was designed with.
_REFERENCE_COVERAGE = 0.239
#: Below this share for the median occupation (``coverage``) the verdict against the world rests on a small part of
#: what the model writes next, and the chapter says so beside it (``low_coverage``). Why 5%: about a fifth of
#: :data:`_REFERENCE_COVERAGE` (Qwen2.5-Coder-0.5B-Instruct's median is 25.0%), and under half of the lowest single
#: occupation's share under the built-in templates (11.4% in SmolLM2, 11.1% in Qwen), so a default build is not
#: flagged, while a sentence after which the counted words are seldom grammatical is: after the German clause
#: "Gestern sagte {occupation}, dass" the English words take 3.3% (SmolLM2; 2.3% in Qwen), and SmolLM2's link with
#: the direction falls from 0.53 to 0.12. (Gemma 3's share was not measured.)
_MIN_COVERAGE = 0.05
#: The audit's sampling settings (``models.generation._generate``'s defaults, notebook 06's parameters).
_AUDIT_SAMPLING = {"n_samples": 1, "max_new_tokens": 100, "temperature": 0.7, "top_p": 0.9, "top_k": 50}
#: Haldane–Anscombe continuity correction of the sampled log-odds (as chapter 11's BOLD link).
_CONTINUITY = 0.5


# --------------------------------------------------------------------------- templates and tokens


def _check_next_word_templates(templates, name: str = "templates") -> tuple[str, ...]:
    """The templates as a tuple (None: :data:`_TEMPLATES`), each a string with ``{occupation}`` exactly once that
    ends in a word (no trailing space: the next token carries its own), none twice; a :class:`ParameterError`
    names the parameter (``name``: a notebook's ``next_word_templates``)."""
    if templates is None:
        return _TEMPLATES
    templates = _check_word_list(templates, name, empty="give None (the ten built-in templates) or a non-empty "
                                                        "list of strings")
    for t in templates:
        if t.count(_SLOT) != 1:
            raise ParameterError(f"{name}: {t!r} must be a string with {_SLOT} exactly once")
        if t != t.rstrip() or not re.search(r"\w$", t):
            raise ParameterError(f"{name}: {t!r} must end in a word, without a trailing space or punctuation (the "
                                 "next word is read with its leading space)")
    if len(set(templates)) != len(templates):
        raise ParameterError(f"{name}: a template is listed twice (it would weigh twice)")
    return tuple(templates)


def _check_next_word_lexicons(lexicons, name: str = "lexicons") -> dict[str, list[str]]:
    """The words the log-ratio counts, ``{"female": [...], "male": [...]}`` lower-cased in their given order (None:
    the audit's, ``core.lexicon.GENDER_LEXICONS``), by the one rule for a lexicon set
    (``core.lexicon._validate_lexicons``, as chapter 06's ``lexicons``) with ``female`` and ``male`` required; a
    :class:`ParameterError` names the parameter (``name``: a notebook's ``next_word_lexicons``). Other lexicons of
    the mapping are checked and not counted."""
    lexicons = GENDER_LEXICONS if lexicons is None else lexicons
    _validate_lexicons(lexicons, what=name, required=(_FEMALE, _MALE), why="the log-ratio's two sides")
    return {side: list(dict.fromkeys(w.strip().lower() for w in lexicons[side])) for side in (_FEMALE, _MALE)}


def _measure_definition(templates: Sequence[str] | None = None, lexicons=None) -> str:
    """What defines the measure, as a short stable hash: the first 12 hex digits of the sha256 of the canonical JSON
    (sorted keys, ``core.cache._stable_hash``) of the templates and the two lexicons' words, each sorted (the
    measure is a mean over the templates, and a lexicon a set). None: the built-in templates, the audit's words."""
    words = _check_next_word_lexicons(lexicons)
    return _stable_hash({"measure": "next-word log-ratio", "templates": sorted(_check_next_word_templates(templates)),
                         "lexicons": {side: sorted(set(w)) for side, w in words.items()}}, 12)


#: The built-in templates with the audit's words: the definition every default build's tables carry.
_DEFAULT_DEFINITION = _measure_definition()


def _singular_templates(templates: Sequence[str]) -> list[str]:
    """The templates whose next word reads as one person (module docstring): all but :data:`_PLURAL_TEMPLATES`."""
    return [t for t in templates if t not in _PLURAL_TEMPLATES]


def _neutral_definition(templates: Sequence[str] | None = None, lexicons=None) -> str:
    """What defines the neutral share, as :func:`_measure_definition` defines the log-ratio: the templates read as
    singular, the log-ratio's two lexicons and :data:`_REFERENCE_LEXICONS` (its denominator holds all three)."""
    words = _check_next_word_lexicons(lexicons)
    return _stable_hash({"measure": "next-word neutral share",
                         "templates": sorted(_singular_templates(_check_next_word_templates(templates))),
                         "lexicons": {side: sorted(set(w)) for side, w in
                                      {**words, **_REFERENCE_LEXICONS}.items()}}, 12)


#: The built-in templates and words: the neutral definition every default build's tables carry.
_DEFAULT_NEUTRAL_DEFINITION = _neutral_definition()


def _lexicon_first_tokens(tokenizer, lexicons: Mapping[str, Sequence[str]] | None = GENDER_LEXICONS
                         ) -> tuple[dict[str, list[int]], pd.DataFrame]:
    """``({lexicon: token ids counted}, words)``: the token each word of ``lexicons`` (which need ``female`` and
    ``male``) counts by after a template, from ``models.decoding.lexicon_token_ids``: its leading-space, lower-case
    form, one token or else its first token; a first token that words of two lexicons share counts in neither.
    ``words``: one row per word (:data:`_WORD_COLUMNS`): ``variant`` (" she"), ``n_tokens``, ``token_id`` (the
    token, or the first one), ``token`` (its text), ``counted`` (``single token``, ``first token`` or ``shared``)."""
    ordered = _check_next_word_lexicons(lexicons)
    ids, words = _first_tokens(tokenizer, ordered)
    empty = [name for name in (_FEMALE, _MALE) if not ids[name]]
    if empty:
        raise ParameterError(f"lexicons: no word of {empty} has a token of its own in this tokenizer")
    return ids, words


def _first_tokens(tokenizer, lexicons: Mapping[str, Sequence[str]], taken: Sequence[int] = ()
                  ) -> tuple[dict[str, list[int]], pd.DataFrame]:
    """:func:`_lexicon_first_tokens`' rule for any ``lexicons``: ``({lexicon: token ids counted}, words)``, a first
    token that words of two of them share, or that is in ``taken`` (another measure's counted tokens), counted in
    none (``counted = "shared"``)."""
    _, coverage = lexicon_token_ids(tokenizer, {name: list(w) for name, w in lexicons.items()})
    words = coverage[coverage["variant"] == " " + coverage["word"]].copy()
    words["token_id"] = words["first_token_id"].astype(int)
    owners = words.groupby("token_id")["lexicon"].nunique()
    shared = (words["token_id"].map(owners) > 1) | words["token_id"].isin(list(taken))
    words["counted"] = np.where(shared, "shared", np.where(words["n_tokens"] == 1, "single token", "first token"))
    words["token"] = [tokenizer.decode([t]) for t in words["token_id"]]
    words = words[_TOKEN_COLUMNS].reset_index(drop=True)
    kept = words[words["counted"] != "shared"]
    return {name: sorted(set(kept.loc[kept["lexicon"] == name, "token_id"].tolist())) for name in lexicons}, words


# --------------------------------------------------------------------------- the forward passes


def _prompts(nouns: Sequence[str], templates: Sequence[str]) -> pd.DataFrame:
    reference = dict(zip(_TEMPLATES, _REFERENCE))
    return pd.DataFrame([{"occupation": noun, "template": t, "reference": reference.get(t, ""),
                          "prompt": t.replace(_SLOT, noun)} for noun in nouns for t in templates])


def _log_masses(model, prompt_ids: list[list[int]], groups: torch.Tensor,
                extra: Sequence[Sequence[int]] = ()) -> np.ndarray:
    """``[rows, G + 1 + E]`` float64: per prompt (all of one length in tokens: no padding, so a row's logits are
    those of its prompt alone) the log of each token set's next-token probability (``groups`` ``[G, vocabulary]``
    bool), the log normaliser, then the log of each ``extra`` token list's unnormalised probability; one forward
    pass, the LM head on the last position only (``logits_to_keep=1``)."""
    input_ids = torch.tensor(prompt_ids, device=model.device)
    logits = model.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                         logits_to_keep=1).logits[:, -1, :].float().to(torch.float64)
    masked = logits.unsqueeze(1).masked_fill(~groups.to(logits.device).unsqueeze(0), -torch.inf)
    # The neutral lexicons' few tokens are gathered rather than added as groups: the log-ratio's sums then run over
    # the tensor they always did, so its values stay the same to the bit (a reduction's order follows its shape).
    gathered = [torch.logsumexp(logits[:, list(ids)], dim=1, keepdim=True) for ids in extra]
    return torch.cat([torch.logsumexp(masked, dim=2), torch.logsumexp(logits, dim=1, keepdim=True), *gathered],
                     dim=1).cpu().numpy()


class _Store:
    """The append-only rows of one model and lexicon (module docstring, *Cache*)."""

    def __init__(self, params: dict):
        self.dir = paths._cache_dir() / "next_word" / _stable_hash(params)
        self.rows = self.dir / "rows.jsonl"
        if not (self.dir / "meta.json").exists():  # for people browsing the cache; the key is the folder name
            _atomic_write_json(self.dir / "meta.json", params)

    def load(self) -> dict[str, dict]:
        return {r["key"]: r for r in _read_jsonl(self.rows) if isinstance(r, dict) and "key" in r}


@dataclass
class _NextWord:
    """What :func:`next_word_table` finds: ``prompts`` (one row per occupation and template:
    :data:`_PROMPT_COLUMNS`), ``occupations`` (one row per occupation: :data:`_OCCUPATION_COLUMNS`), ``words``
    (the lexicon's tokens: :func:`_lexicon_first_tokens`), ``neutral_words`` (the neutral lexicons' tokens:
    :data:`_NEUTRAL_WORD_COLUMNS`) and ``model_id``."""

    prompts: pd.DataFrame
    occupations: pd.DataFrame
    words: pd.DataFrame
    neutral_words: pd.DataFrame
    model_id: str

    def write(self, folder: str | Path) -> list[Path]:
        """Write the four tables as parquet + CSV under ``folder``."""
        folder = Path(folder)
        frames = {tables.NAMES.NEXT_WORD_PROMPTS: self.prompts, tables.NAMES.NEXT_WORD_OCCUPATIONS: self.occupations,
                  tables.NAMES.NEXT_WORD_TOKENS: self.words, tables.NAMES.NEXT_WORD_NEUTRAL_TOKENS: self.neutral_words}
        return [p for name, df in frames.items() for p in write_table(df, folder / name)]

    def neutral_share(self, values: pd.DataFrame, units: pd.DataFrame | None = None, *, n_boot: int = 1000,
                      seed: int = 0) -> _NeutralShare:
        """The neutral share read per decoder (:func:`_neutral_statistics`): ``values`` one row per BLS occupation
        with ``occupation, bls_pct_female`` (``gender_direction.occupation_validity``'s), ``units`` the audit's
        primary units with their ``noun`` (``link.run_link``'s occupations; None leaves their row out)."""
        definition = str(self.neutral_words[_NEUTRAL_DEFINITION].iloc[0])
        return _NeutralShare(_neutral_statistics(self.prompts, values, units, definition=definition, n_boot=n_boot,
                                                 seed=seed), self.neutral_words, _template_rule(self.prompts),
                             self.model_id)


def next_word_table(model, occupations: Sequence[str], *, templates: Sequence[str] | None = None,
                    lexicons: Mapping[str, Sequence[str]] | None = None, batch_size: int | None = None,
                    cache: bool = True, progress: bool = True) -> _NextWord:
    """The exact measure (module docstring) of every occupation noun of ``occupations`` (duplicates once) in
    ``templates`` (None: :data:`_TEMPLATES`), counting the words of ``lexicons`` (``female`` and ``male``; None: the
    audit's), for ``model`` (a decoder: a ``LoadedModel`` or a name for ``models.loading._resolve_model``).
    ``batch_size``: sentences per forward pass (default: 32 on a CPU). Every parameter is checked before the model
    loads, its kind too (``models.loading._check_model``: a built-in's from the built-in table, a folder's or a hub
    id's from its config): an encoder is refused in a second, naming the built-in decoders.

    ``prompts`` columns: ``occupation`` (the noun), ``template``, ``reference`` (``subject``, ``possessive`` or
    ``object`` for the built-in templates, else ""), ``prompt``, ``n_tokens`` (its length in tokens),
    ``female_mass``, ``male_mass`` (the next token's probability of being a counted token of each lexicon),
    ``log_ratio``, ``neutral_mass``, ``neopronoun_mass`` (the same probability for singular "they" and the
    neopronouns, :data:`_REFERENCE_LEXICONS`) and ``singular`` (whether the template's next word reads as one person:
    not one of :data:`_PLURAL_TEMPLATES`). ``occupations``: ``n_templates``, the masses' means over the templates,
    ``gendered_mass`` (their sum), ``female_share`` (female / gendered), ``log_ratio`` (the mean of the templates'
    log-ratios: the measure), ``log_ratio_sd`` (their SD over the templates), and over the ``n_singular`` templates
    that read as one person the mean ``neutral_mass`` and ``neopronoun_mass`` and ``neutral_share`` (neutral /
    (female + male + neutral) of those templates' mean masses; NaN with none). Each table ends with
    ``measure_definition`` (:func:`_measure_definition` of the templates and words: the log-ratio's); ``words`` and
    ``neutral_words`` list the tokens counted, the latter with the ``neutral_definition``
    (:func:`_neutral_definition`)."""
    templates = _check_next_word_templates(templates)
    occupations = _check_word_list(occupations, "occupations", empty="no occupation noun to measure")
    nouns = list(dict.fromkeys(o.strip() for o in occupations))
    if any(not n for n in nouns):
        raise ParameterError(f"occupations: an empty noun among {occupations[:5]!r}")
    lexicons = _check_next_word_lexicons(lexicons)
    definition = _measure_definition(templates, lexicons)
    _check_model(model, need="generate", what="next_word_table (the probability of each next word)")
    model = _resolve_model(model, need="generate")
    ids, words = _lexicon_first_tokens(model.tokenizer, lexicons)
    neutral_ids, neutral_words = _first_tokens(model.tokenizer, _REFERENCE_LEXICONS, ids[_FEMALE] + ids[_MALE])
    n_vocab = model.model.get_output_embeddings().weight.shape[0]
    groups = torch.zeros(2, n_vocab, dtype=torch.bool)
    for g, name in enumerate((_FEMALE, _MALE)):
        groups[g, ids[name]] = True
    table = _prompts(nouns, templates)
    encoded = [model.tokenizer(p)["input_ids"] for p in table["prompt"]]  # as the audit's generation reads a raw prompt
    keys = [_stable_hash(p, 24) for p in table["prompt"]]
    store = _Store({"model_id": model.model_id, "lexicons": {k: sorted(v) for k, v in lexicons.items()},
                    "token_ids": ids, "neutral_token_ids": neutral_ids, "version": _CODE_VERSION}) if cache else None
    with _file_lock(store.dir / "lock") if store else nullcontext():
        done = store.load() if store else {}
        # Batches of one length each (no padding), formed from every sentence in a fixed order, so a resumed run
        # computes a missing batch exactly as the uninterrupted run did; a batch partly on disk is computed whole
        # and only its missing rows are appended.
        unique = sorted({k: i for i, k in enumerate(keys)}.values(), key=lambda i: (len(encoded[i]), i))
        by_length: dict[int, list[int]] = {}
        for i in unique:
            by_length.setdefault(len(encoded[i]), []).append(i)
        size = batch_size or _default_batch_size(model)
        batches = [rows[b:b + size] for rows in by_length.values() for b in range(0, len(rows), size)]
        todo = [batch for batch in batches if any(keys[i] not in done for i in batch)]
        bar = tqdm(total=len(unique), initial=len(unique) - sum(map(len, todo)), desc=f"next word ({model.name})",
                   unit="sentence", disable=not progress)
        with torch.inference_mode():
            for batch in todo:
                found = _log_masses(model, [encoded[i] for i in batch], groups,
                                    [neutral_ids[name] for name in _REFERENCE_LEXICONS])
                rows = [{"key": keys[i], "prompt": table.at[i, "prompt"], "log_female": float(f),
                         "log_male": float(m), "log_normaliser": float(z), "log_neutral": float(n),
                         "log_neopronoun": float(x)}
                        for i, (f, m, z, n, x) in zip(batch, found) if keys[i] not in done]
                if store:
                    _append_jsonl(store.rows, rows)
                done.update({r["key"]: r for r in rows})
                bar.update(len(batch))
        bar.close()
    got = [done[k] for k in keys]
    table["n_tokens"] = [len(e) for e in encoded]
    table["female_mass"] = [np.exp(r["log_female"] - r["log_normaliser"]) for r in got]
    table["male_mass"] = [np.exp(r["log_male"] - r["log_normaliser"]) for r in got]
    table["log_ratio"] = [r["log_female"] - r["log_male"] for r in got]
    for name in _REFERENCE_LEXICONS:
        table[f"{name}_mass"] = [np.exp(r[f"log_{name}"] - r["log_normaliser"]) for r in got]
    table["singular"] = table["template"].isin(_singular_templates(templates))
    table[_DEFINITION] = definition
    table = table[_PROMPT_COLUMNS]
    per = table.groupby("occupation", sort=False).agg(
        n_templates=("template", "size"), female_mass=("female_mass", "mean"), male_mass=("male_mass", "mean"),
        log_ratio=("log_ratio", "mean"), log_ratio_sd=("log_ratio", "std")).reset_index()
    per["gendered_mass"] = per["female_mass"] + per["male_mass"]
    per["female_share"] = per["female_mass"] / per["gendered_mass"]
    singular = _singular_means(table)[["occupation", "n_singular", "neutral_mass", "neopronoun_mass", "neutral_share"]]
    per = per.merge(singular, on="occupation", how="left")
    per["n_singular"] = per["n_singular"].fillna(0).astype(int)
    per[_DEFINITION] = definition
    neutral_words = neutral_words.assign(**{_NEUTRAL_DEFINITION: _neutral_definition(templates, lexicons)})
    return _NextWord(table, per[_OCCUPATION_COLUMNS], words.assign(**{_DEFINITION: definition}), neutral_words,
                     model.model_id)


def _singular_means(prompts: pd.DataFrame) -> pd.DataFrame:
    """Per occupation, over its templates whose next word reads as one person (``singular``): ``n_singular``, the
    mean ``female_mass``, ``male_mass``, ``neutral_mass`` and ``neopronoun_mass``, and ``neutral_share`` (the neutral
    mean over the sum of the female, male and neutral means: the share of the reference to one person that goes to
    "they"). An occupation with no such template has no row."""
    per = prompts[prompts["singular"]].groupby("occupation", sort=False).agg(
        n_singular=("template", "size"), female_mass=("female_mass", "mean"), male_mass=("male_mass", "mean"),
        neutral_mass=("neutral_mass", "mean"), neopronoun_mass=("neopronoun_mass", "mean")).reset_index()
    per["neutral_share"] = per["neutral_mass"] / (per["female_mass"] + per["male_mass"] + per["neutral_mass"])
    return per


# --------------------------------------------------------------------------- against the world and the sample


def next_word_validity(occupations: pd.DataFrame, values: pd.DataFrame, *, n_boot: int = 1000,
                       seed: int = 0) -> pd.DataFrame:
    """The exact log-ratio of the BLS occupations against their share of women, by the engine and verdict of the
    gender direction (``core.criterion_validity._validity_statistics``, measure ``log_ratio``), with the discriminant
    rows beyond the nouns' ``warmth`` and ``competence``. ``occupations``: :func:`next_word_table`'s (rows of other
    nouns are ignored); ``values``: one row per BLS occupation with ``occupation, bls_pct_female`` and, for the
    discriminant rows, ``warmth, competence`` (``gender_direction.occupation_validity``'s ``values``).
    Columns: as ``tables.NAMES.OCCUPATION_VALIDITY``, then ``measure_definition`` (``occupations``'), ``coverage``
    (the counted words' share of the next word, ``gendered_mass``, for the median occupation checked) and
    ``low_coverage`` (``coverage`` under :data:`_MIN_COVERAGE`: the verdict rests on little of what the model writes
    next, and :func:`describe_next_word` says so beside it)."""
    _check_n_boot(n_boot)
    _check_seed(seed)
    need = {"occupation", "bls_pct_female"}
    if need - set(values.columns):
        raise ValueError(f"next_word_validity: values lack {sorted(need - set(values.columns))}")
    measure = occupations.reindex(columns=["occupation", "log_ratio", "gendered_mass", _DEFINITION])
    merged = values.drop(columns=["log_ratio", "gendered_mass", _DEFINITION], errors="ignore").merge(
        measure, on="occupation", how="left")
    for control in ("warmth", "competence"):
        if control not in merged:
            merged[control] = np.nan
    statistics = _validity_statistics(merged.drop(columns=["gendered_mass", _DEFINITION]), ["log_ratio"],
                                      n_boot=n_boot, seed=seed)
    coverage = _coverage(merged.dropna(subset=["log_ratio"]))
    return statistics.assign(**{_DEFINITION: _definition_of(occupations), "coverage": coverage,
                                "low_coverage": bool(coverage < _MIN_COVERAGE)})


def _coverage(occupations: pd.DataFrame) -> float:
    """The counted words' share of the next word (``gendered_mass``) for the median occupation; NaN without it."""
    mass = occupations["gendered_mass"].dropna() if "gendered_mass" in occupations else pd.Series(dtype=float)
    return float(mass.median()) if len(mass) else float("nan")


def _definition_of(table: pd.DataFrame) -> str:
    """The ``measure_definition`` a table of the measure carries ("" when it has none: written before it was
    recorded); a table of several definitions is refused (its rows would be different measures side by side)."""
    found = sorted(set(table[_DEFINITION].dropna().astype(str))) if _DEFINITION in table else []
    if len(found) > 1:
        raise ValueError(f"the next-word table mixes measure definitions {found}: rows of different templates or "
                         "words cannot be read as one measure")
    return found[0] if found else ""


def _coverage_note(coverage: float, what: str = "the verdict") -> str:
    """A sentence on a low ``coverage`` (:data:`_MIN_COVERAGE`), saying what it means for ``what``; "" when the
    coverage is at or above it, or unknown."""
    if not np.isfinite(coverage) or coverage >= _MIN_COVERAGE:
        return ""
    return (f"**Low coverage: the counted words take only {_percent(coverage)} of the next word's probability for "
            f"the median occupation**, under the {_percent(_MIN_COVERAGE)} this book asks of the measure (the ten "
            f"built-in templates give SmolLM2-135M-Instruct {_percent(_REFERENCE_COVERAGE)}): after these sentences "
            f"the model mostly writes other words, so {what} rests on a small part of what it writes next. Use "
            "templates that end where a pronoun, a possessive or an object follows in the counted words' language, "
            "or count the words of that language (`next_word_lexicons`).")


def sampled_check(model, occupations: pd.DataFrame, *, templates: Sequence[str] | None = None,
                  lexicons: Mapping[str, Sequence[str]] | None = None, correction: float = _CONTINUITY,
                  n_boot: int = 1000, seed: int = 0, cache: bool = True, progress: bool = True,
                  **sampling) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Does the exact measure say what the model writes? ``(per_occupation, statistics)``: the sentences of
    ``occupations`` (:func:`next_word_table`'s, in ``templates``) continued by sampling at the audit's settings
    (:data:`_AUDIT_SAMPLING`: one completion of up to 100 tokens, temperature 0.7, top-p 0.9, top-k 50; override
    with ``sampling``, e.g. ``max_new_tokens=20`` for a quick run; ``models.generation._generate``, cached),
    the audit's words counted in them (``core.lexicon._count_table``), per occupation ``female_words, male_words``
    and ``log_odds = log((female + correction) / (male + correction))`` beside the exact ``log_ratio``; and the
    Pearson and Spearman rows between the two (occupation-bootstrap intervals; ``stats._correlation_rows``), each
    with the ``measure_definition`` of ``templates`` and ``lexicons`` (None: the audit's words).
    The cost is the sampling: 60 occupations × 10 templates × 100 tokens is 60,000 tokens."""
    unknown = sorted(set(sampling) - set(_AUDIT_SAMPLING))
    if unknown:
        raise ParameterError(f"sampling: {unknown} are not sampling settings; use {sorted(_AUDIT_SAMPLING)}")
    settings = {**_AUDIT_SAMPLING, **sampling}
    _check_generation(None, **settings, seed=seed)
    _check_n_boot(n_boot)
    templates = _check_next_word_templates(templates)
    lexicons = _check_next_word_lexicons(lexicons)
    prompts = _prompts(occupations["occupation"].tolist(), templates)
    done = _generate(model, prompts["prompt"].tolist(), seed=seed, cache=cache, progress=progress, **settings)
    counts = _count_table(done["completion"], lexicons)
    done = done.assign(occupation=np.repeat(prompts["occupation"].to_numpy(), settings["n_samples"]),
                       female_words=counts[f"{_FEMALE}_words"].to_numpy(),
                       male_words=counts[f"{_MALE}_words"].to_numpy())
    per = done.groupby("occupation", sort=False).agg(n_completions=("completion", "size"),
                                                      female_words=("female_words", "sum"),
                                                      male_words=("male_words", "sum")).reset_index()
    per["log_odds"] = np.log((per["female_words"] + correction) / (per["male_words"] + correction))
    per = per.merge(occupations[["occupation", "log_ratio"]], on="occupation", how="left")
    rows = [{**r, "group_a": "log_ratio", "group_b": "log_odds", "n_gendered": int(
        (per["female_words"] + per["male_words"] > 0).sum())}
        for r in _correlation_rows(per["log_ratio"], per["log_odds"], n_boot=n_boot, seed=seed)]
    return per, _results_table(rows).assign(**{_DEFINITION: _measure_definition(templates, lexicons)})


# --------------------------------------------------------------------------- beyond the binary: singular "they"

#: The units of :data:`tables.NAMES.NEXT_WORD_NEUTRAL`: the BLS occupations and the audit's primary units.
_BLS_UNITS, _AUDIT_UNITS = "BLS occupations", "BOLD primary units"
#: How balanced an occupation's workforce is: −|BLS share of women − 50| (0 at half women, −50 at none or all).
_BALANCE = "balance"
_NEUTRAL_STAT_COLUMNS = ["question", "units", "measure", "against", _NEUTRAL_DEFINITION]


def _neutral_statistics(prompts: pd.DataFrame, values: pd.DataFrame, units: pd.DataFrame | None = None, *,
                        definition: str = "", n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The neutral share (:func:`_singular_means` of ``prompts``, :func:`next_word_table`'s) read per decoder, with
    intervals resampling occupations ``n_boot`` times, one row per question and measure (``question``):

    * ``share`` (``test`` ``mean``): the mean ``neutral_share`` over the BLS occupations of ``values`` and over the
      audit's primary units (``units``' ``noun``; None leaves the row out), percentile bootstrap interval
      (``stats._bootstrap_ci``): how much of the reference to one person goes to "they";
    * ``balance`` (``spearman``): Spearman's ρ of the neutral share with ``balance`` (−|``bls_pct_female`` − 50|)
      across the BLS occupations, scipy's p and the pair-bootstrap interval (``stats._correlation_rows``): is "they"
      written more where the workforce is balanced?
    * ``share of women`` (``spearman``): the neutral share and the female and male masses (over the same templates),
      each against ``bls_pct_female``; Holm over the three: does "they" follow the share of women as the pronouns do?
    * ``neopronouns`` (``mean``): the mean ``neopronoun_mass`` over the BLS occupations, reported as it is.

    Columns: ``stats._STAT_COLUMNS`` (``p_adj``: Holm within a question; ``n``: occupations with the measure), then
    ``question``, ``units``, ``measure``, ``against`` ("" for a mean) and ``neutral_definition`` (``definition``)."""
    _check_n_boot(n_boot)
    _check_seed(seed)
    need = {"occupation", "bls_pct_female"} - set(values.columns)
    if need or (units is not None and "noun" not in units):
        raise ValueError(f"neutral_statistics: values need occupation and bls_pct_female (missing {sorted(need)}), "
                         "units a noun column")
    per = _singular_means(prompts)
    bls = values[["occupation", "bls_pct_female"]].merge(per, on="occupation").dropna(subset=["neutral_share"])
    if bls.empty:
        raise ValueError("neutral_statistics: no BLS occupation of values has a template that reads as one person")
    bls[_BALANCE] = -(bls["bls_pct_female"] - 50).abs()

    def mean(x, question, where, measure):
        est, lo, hi = _bootstrap_ci(x, np.mean, n_boot=n_boot, seed=seed)
        return [{"test": "mean", "effect": "mean", "effect_size": est, "statistic": est, "ci_low": lo, "ci_high": hi,
                 "n": len(x), "question": question, "units": where, "measure": measure, "against": ""}]

    def rho(measure, against, question):
        row = next(r for r in _correlation_rows(bls[measure], bls[against], n_boot=n_boot, seed=seed)
                   if r["test"] == "spearman")
        return {**row, "question": question, "units": _BLS_UNITS, "measure": measure, "against": against,
                "group_a": measure, "group_b": against}

    families = [mean(bls["neutral_share"], "share", _BLS_UNITS, "neutral_share")]
    if units is not None:
        audit = units[["noun"]].drop_duplicates().merge(per, left_on="noun", right_on="occupation")
        if len(audit.dropna(subset=["neutral_share"])):
            families.append(mean(audit["neutral_share"].dropna(), "share", _AUDIT_UNITS, "neutral_share"))
    families.append([rho("neutral_share", _BALANCE, "balance")])
    families.append([rho(m, "bls_pct_female", "share of women")
                     for m in ("neutral_share", "female_mass", "male_mass")])
    families.append(mean(bls["neopronoun_mass"], "neopronouns", _BLS_UNITS, "neopronoun_mass"))
    out = pd.concat([_results_table(rows) for rows in families], ignore_index=True)
    out[_NEUTRAL_DEFINITION] = definition
    return out[_STAT_COLUMNS + _NEUTRAL_STAT_COLUMNS]


@dataclass
class _NeutralShare:
    """What :meth:`_NextWord.neutral_share` finds: ``statistics`` (:func:`_neutral_statistics`), the neutral lexicons'
    ``words``, the ``templates`` with the rule's reading of each (:func:`_template_rule`) and ``model_id``."""

    statistics: pd.DataFrame
    words: pd.DataFrame
    templates: pd.DataFrame
    model_id: str

    def write(self, folder: str | Path) -> list[Path]:
        """Write the statistics as parquet + CSV under ``folder`` (the words are written with the measure's tables)."""
        return write_table(self.statistics, Path(folder) / tables.NAMES.NEXT_WORD_NEUTRAL)

    def describe(self, model: str | None = None) -> str:
        """Markdown reading the four questions for ``model`` (default: this run's): :func:`_describe_neutral`."""
        return _describe_neutral(self.statistics, self.words, self.templates, model or self.model_id)


def _template_rule(prompts: pd.DataFrame) -> pd.DataFrame:
    """One row per template of ``prompts``: ``template``, ``reference``, ``room`` (why a neutral word there may be
    more than one person, :data:`_OPEN_TEMPLATES`; "" where the sentence binds it to one), the check's ``one_person``,
    ``group`` and ``unclear`` readings (:data:`_READING_CHECK`; <NA> for a run's own template) and ``singular``."""
    rows = prompts.drop_duplicates("template")[["template", "reference", "singular"]].reset_index(drop=True)
    check = pd.DataFrame([_READING_CHECK.get(t, (pd.NA,) * 3) for t in rows["template"]],
                         columns=["one_person", "group", "unclear"], dtype="Int64")
    rows["room"] = rows["template"].map(_OPEN_TEMPLATES).fillna("")
    return pd.concat([rows[["template", "reference", "room"]], check, rows[["singular"]]], axis=1)


def _share_text(row, units: str) -> str:
    """A mean share or mass with its interval (:func:`_percent`: whole percent from 1%, the book's digits below):
    "34% (95% CI 30% to 37%, 60 BLS occupations)"."""
    return (f"{_percent(row['effect_size'])} (95% CI {_percent(row['ci_low'])} to {_percent(row['ci_high'])}, "
            f"{int(row['n'])} {units})")


def _direction(row) -> int:
    """+1 or −1 where a row's interval lies above or below 0, else 0 (not shown)."""
    if not np.isfinite(row["ci_low"]):
        return 0
    return 1 if row["ci_low"] > 0 else -1 if row["ci_high"] < 0 else 0


def _neutral_row(statistics: pd.DataFrame, question: str, measure: str, units: str = _BLS_UNITS):
    hit = statistics[(statistics["question"] == question) & (statistics["measure"] == measure)
                     & (statistics["units"] == units)]
    return hit.iloc[0] if len(hit) else None


def _neutral_share_sentence(statistics: pd.DataFrame, model: str) -> str:
    """One plain sentence (question 1 over the BLS occupations) for a page that shows one reading per decoder."""
    row = _neutral_row(statistics, "share", "neutral_share")
    return (f"When {display_name(model)} continues a sentence that refers to one person, \"they\" takes "
            f"{_share_text(row, 'BLS occupations')} of the reference to that person, beside \"she\" and \"he\".")


def _describe_neutral(statistics: pd.DataFrame, words: pd.DataFrame, templates: pd.DataFrame,
                      model: str = "this model") -> str:
    """Markdown reading :func:`_neutral_statistics` for ``model``: the four questions in order, each correlation read
    by whether its interval lies off 0 ("not shown is not absent" where it does not), the neopronouns as they are,
    the templates left out and why (``templates``: :func:`_template_rule`'s), and the neutral words counted by a
    first token or not at all (``words``)."""
    text = [_neutral_share_sentence(statistics, model)]
    audit = _neutral_row(statistics, "share", "neutral_share", _AUDIT_UNITS)
    if audit is not None:
        text.append(f"Over the audit's units (the BOLD person-noun occupations): "
                    f"{_share_text(audit, 'BOLD primary units')}.")
    balance = _neutral_row(statistics, "balance", "neutral_share")
    numbers = f"{_correlation_text(balance)}, {int(balance['n'])} BLS occupations"
    way = _direction(balance)
    where = "where the workforce is balanced (a BLS share of women near 50%)"
    text.append(f"{'More' if way > 0 else 'Less'} of it goes to \"they\" {where} ({numbers})." if way else
                f"That more of it goes to \"they\" {where} is not shown ({numbers}; not shown is not absent).")
    # the three rows answer one question: their p is read Holm-adjusted over the three
    share, female, male = (_neutral_row(statistics, "share of women", m).copy() for m in
                           ("neutral_share", "female_mass", "male_mass"))
    for row in (share, female, male):
        row["p"] = row["p_adj"]
    follows = {1: "rises with it", -1: "falls with it", 0: "is not shown to follow it"}
    masses = (f"the female mass {follows[_direction(female)]} ({_correlation_text(female)}) and the male mass "
              f"{follows[_direction(male)]} ({_correlation_text(male)}); p Holm-adjusted over the three")
    way = _direction(share)
    if way:
        more, unexpected = ("women", "he") if way > 0 else ("men", "she")
        text.append(f"Against the BLS share of women, \"they\" takes more where more of the workers are {more}, "
                    f"where \"{unexpected}\" would be the unexpected pronoun ({_correlation_text(share)}), while "
                    f"{masses}.")
    else:
        text.append("Against the BLS share of women, that \"they\" stands in for one unexpected pronoun more than the "
                    f"other is not shown ({_correlation_text(share)}; not shown is not absent), while {masses}.")
    neo = _neutral_row(statistics, "neopronouns", "neopronoun_mass")
    text.append(f"The neopronouns (ze, xe and their forms) take {_share_text(neo, 'BLS occupations')} of the next "
                "word for the mean occupation: reported as it is, and not read beyond that.")
    text += [f"Left out of the share: \"{t.template.replace(_SLOT, '…')}\", because {_PLURAL_TEMPLATES[t.template]}."
             for t in templates.itertuples() if t.template in _PLURAL_TEMPLATES]
    longer = ", ".join(words.loc[words["counted"] == "first token", "word"])
    shared = ", ".join(words.loc[words["counted"] == "shared", "word"])
    parts = ([f"{longer} count by their first token (an upper bound on the word)"] if longer else []) + (
        [f"{shared} share a first token with another counted word and are not counted"] if shared else [])
    if parts:
        text.append(f"In {display_name(model)}'s tokenizer, " + "; ".join(parts) + ".")
    return " ".join(text)


# --------------------------------------------------------------------------- reading it


def describe_next_word(statistics: pd.DataFrame, words: pd.DataFrame, model: str = "this model",
                       occupations: pd.DataFrame | None = None, *, chat_model: bool = False) -> str:
    """Markdown reading :func:`next_word_validity` for ``model``: how the exact log-ratio follows the BLS share of
    women, the verdict in words with the power of the check, the discriminant rows; then how the lexicon's words
    were counted (``words``: :func:`_lexicon_first_tokens`'s), with ``occupations`` how much of the next word is
    gendered at all, and that the input was the raw text (saying what that means where ``chat_model``: a model
    with a chat template). Where the counted words take little of the next word (``low_coverage``), a verdict of
    *supported* is not read as validating the measure, and a note in bold says why; where the templates or the words
    are not the built-in ones, it says so with the measure's definition."""
    name = display_name(model)
    rho, r = _statistic_row(statistics, "log_ratio", "spearman"), _statistic_row(statistics, "log_ratio", "pearson")
    verdict, n = _measure_verdict(statistics, "log_ratio"), int(rho["n"])
    numbers = f"{_correlation_text(rho)}; {_correlation_text(r)}; n = {n} occupations, intervals resampling them"
    coverage = float(rho["coverage"]) if "coverage" in rho else float("nan")
    if not np.isfinite(coverage) and occupations is not None:
        coverage = _coverage(occupations)
    low = _coverage_note(coverage)
    if verdict == "supported" and low:
        text = (f"In {name}, the sentences about occupations with more women among their workers (U.S. BLS) are "
                f"continued more often with a female word ({numbers}; verdict: supported), but that is not read as "
                f"validating the next-word measure. {low}")
    elif verdict == "supported":
        text = (f"In {name}, the sentences about occupations with more women among their workers (U.S. BLS) are "
                f"continued more often with a female word ({numbers}): **the next-word measure is validated against "
                "the world** (verdict: supported).")
    elif verdict == "untestable":
        text = f"Only {n} occupations carry the next-word measure: the check is untestable ({numbers})."
    else:
        text = (f"In {name}, an ordering of the next-word log-ratio by the share of women is not shown ({numbers}; "
                f"verdict: not shown). With {n} occupations the check finds a ρ of {_number_text(rho['detectable'])} "
                "80% of the time (not shown is not absent).")
    if low and verdict != "supported":
        text += f" {low}"
    beyond = _describe_discriminant(statistics, "log_ratio", "the next-word log-ratio")
    text += (" " + beyond) if beyond else ""
    longer = words[words["counted"] == "first token"]
    shared = words[words["counted"] == "shared"]
    text += (f" The {len(words)} lexicon words are read in their leading-space form (\" she\"): "
             + (f"{len(longer)} ({_percent_text(len(longer) / len(words))}) are longer than one token and count by "
                f"their first ({', '.join(longer['word'])})" if len(longer) else "each is one token of this model")
             + (f"; {len(shared)} share a first token with a word of the other lexicon and are not counted "
                f"({', '.join(shared['word'])})" if len(shared) else "") + ".")
    if occupations is not None and len(occupations):
        mass = occupations["gendered_mass"]
        text += (f" The gendered words take {_percent(mass.median())} of the next word's probability for the median "
                 f"occupation (from {_percent(mass.min())} to {_percent(mass.max())}).")
    definition = str(rho[_DEFINITION]) if _DEFINITION in rho and pd.notna(rho[_DEFINITION]) else ""
    if definition and definition != _DEFAULT_DEFINITION:
        text += (f" The templates or the words counted are this run's own, not the book's ten templates and the "
                 f"audit's words: the measure's definition is `{definition}` (`{_DEFAULT_DEFINITION}` for the "
                 "built-in ones), and chapter 09 pools it only with runs of the same definition.")
    text += (" The sentences are the model's raw input, without a chat template"
             + (f": {name} is a chat model, and the measure describes it continuing a text, as the audit's "
                "completions do, not answering a request." if chat_model else "."))
    return text


def _percent(share) -> str:
    """A probability as a percentage: whole percent from 1% (0.2388 -> "24%"), the book's digits below it
    (0.0042 -> "0.42%")."""
    return _percent_text(share) if float(share) >= 0.01 else _number_text(100 * float(share)) + "%"
