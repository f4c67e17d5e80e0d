"""Context sentences for every dictionary sense, from one of four sources.

``build_contexts(dictionary, source=...)`` returns a :class:`ContextSet` whose
``table`` has one row per sense x context:

=================  ==========================================================
``sense_id``       the dictionary row (term + sense)
``dimension``      lower-case stereotype dimension
``term``           the word to embed (it occurs in ``context`` as a word)
``direction``      ``high`` / ``low``
``context``        the sentence or phrase
``context_source`` where this context came from (WordNet, Oxford Learner's
                   Dictionary, Meta-Llama-3-8B-Instruct, a model id, a corpus
                   key or file, ``term only``)
``context_index``  0-based position among the sense's contexts
``source``         the requested source (dictionary/generated/corpus/none)
=================  ==========================================================

Senses left without any context are rows of ``ContextSet.skipped`` (with a
``reason``); generated contexts dropped by the gender filter are rows of
``ContextSet.dropped``; ``ContextSet.notes`` records which corpus files were
used or refused.

Sources (Schuster et al. 2024, Sec. 3.2):

* ``dictionary``: the contexts stored with the dictionary (the seed
  dictionary's WordNet/Oxford/Cambridge/book examples, the full dictionary's
  WordNet examples), first ``n_contexts`` as in the original code; rows
  without any (e.g. user terms) get WordNet examples for their synset, or for
  all noun/adjective senses of the term.
* ``generated`` (the paper's main setting, and the default of the Study 1
  pipeline): with ``model=None`` the published Llama-3-8B-Instruct contexts
  (keyed by term + synset), used as the authors' ``projection.py`` uses them:
  the first ``n_contexts`` per sense, unfiltered. With a model, new contexts
  are sampled from it with :data:`GENERATION_INSTRUCTION` and filtered by
  :func:`usable_contexts`: the term must occur as a word (not only inside a
  longer word), no gendered word, pronoun or first name
  (:func:`gender_markers`), no meta-text, no identity marker beyond gender, no
  unknown word, and the term not the first word (:func:`quality_issue`); every
  drop is a row of ``dropped`` with its reason. ``gender_filter=True`` applies
  the gender check to the published contexts (an option, not the paper's
  procedure).
* ``corpus``: natural sentences containing the term as a word, sampled with
  ``seed``. Default: the BOLD Wikipedia sentences (:data:`DEFAULT_CORPORA`);
  any text file with one sentence per line works.
* ``none``: the term alone.

The full dictionary's extra terms (Table 2) are embedded in generated contexts
too, as in the paper. They are generated once, by
``python -m bias_utils.contexts generate-extra --model qwen2.5-coder-0.5b-instruct --seed 0``,
into the tracked file ``data/generated/extra_terms_contexts.jsonl`` (settings in
the ``.json`` beside it; :func:`generate_extra_contexts`, read by
:func:`extra_term_contexts`, coverage by :func:`extra_coverage`). The model was
chosen by ``compare-models`` (:func:`compare_generators`, tables in
``data/generated/model_choice_*.csv``).

Why the first-word filter: none of the 2,205 published Llama-3 contexts starts
with the term, but 1,236 of the extra terms' 6,492 WordNet examples do. On 120
of those terms (528 examples), SmolLM2's embedding of the term as first word had
a mean cosine of 0.60 (layers 1-30) with the mean of the same term's other
examples, against 0.95 for an example where it is not first; MiniLM, whose first
token is ``[CLS]``, 0.92 both ways (``scripts/first_word_check.py``). A
decoder's first token is not a contextual embedding of the term.
"""

from __future__ import annotations

import argparse
import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from . import data
from .cache import atomic_write_json, atomic_write_text
from .dictionaries import limit_terms, load_full_dictionary_terms, read_dictionary, wordnet_contexts
from .lexicon import FEMALE_WORDS, MALE_WORDS
from .paths import data_dir
from .wordnet import wordnet

__all__ = [
    "ContextError", "ContextSet", "DEFAULT_CORPORA", "DROP_COLUMNS", "GENDERED_PRONOUNS", "GENERATION_INSTRUCTION",
    "PUBLISHED_GENERATED_KEY", "SENSE_CLAUSE", "SKIP_COLUMNS", "SOURCES", "TABLE_COLUMNS", "build_contexts",
    "contains_term", "context_report", "crop", "gender_markers", "generation_prompt", "load_corpus", "parse_generated",
    "prepare_dictionary", "published_generated_contexts", "term_pattern", "term_position",
    "compare_generators", "extra_contexts_path", "extra_coverage", "extra_term_contexts", "extra_term_prompt",
    "generate_extra_contexts", "identity_descriptors", "identity_markers", "inside_longer_word", "meta_markers",
    "model_choice_senses", "quality_issue", "read_extra_contexts", "unknown_words", "usable_contexts",
]

SOURCES = ("dictionary", "generated", "corpus", "none")
TABLE_COLUMNS = ["sense_id", "dimension", "term", "direction", "context", "context_source", "context_index", "source"]
SKIP_COLUMNS = ["sense_id", "dimension", "term", "direction", "source", "reason"]
DROP_COLUMNS = ["sense_id", "term", "context", "context_source", "reason"]

#: BOLD Wikipedia sentences, tried in this order; a file that fails verification is refused and noted.
DEFAULT_CORPORA = ("bold_profession_wiki", "bold_gender_wiki")
PUBLISHED_GENERATED_KEY = "schuster_generated_contexts"

#: The paper describes (Sec. 3.2) but does not publish its prompt: gender-neutral contexts, no names, no
#: gender-specific pronouns, with the WordNet definition when the sense is known. This wording follows that
#: description; ``{sense}`` is filled with :data:`SENSE_CLAUSE` or left empty.
GENERATION_INSTRUCTION = (
    'Write one sentence that uses the word "{term}"{sense}. Do not use any names and do not use gender-specific '
    "pronouns such as he, she, him, her, his or hers; refer to people in a gender-neutral way. "
    "Reply with the sentence only."
)
SENSE_CLAUSE = ' in the sense of "{definition}"'
#: Sampling settings for newly generated contexts (``build_contexts`` with a model, and the extra terms' file).
# No top-k: the paper says nothing of one, and the extra terms' data file was generated without it.
GENERATION_SETTINGS = {"n_samples": 5, "max_new_tokens": 48, "temperature": 0.8, "top_p": 0.95, "top_k": None}
GENDERED_PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})

_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")


class ContextError(ValueError):
    """A dictionary or corpus cannot be used to build contexts."""


@dataclass
class ContextSet:
    table: pd.DataFrame
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SKIP_COLUMNS))
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DROP_COLUMNS))
    notes: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["item", "status", "detail"]))


def term_pattern(term: str) -> re.Pattern:
    """The term as a whole word (not inside a longer word), case-insensitive."""
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(term) + r"(?![A-Za-z0-9])", re.IGNORECASE)


def contains_term(context: str, term: str) -> bool:
    return bool(term_pattern(term).search(context))


def _as_list(value) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                return [str(x) for x in json.loads(text)]
            except json.JSONDecodeError:
                raise ContextError(f"cannot parse the contexts list {text[:80]!r}") from None
        return [text]
    return [str(x) for x in value]


def prepare_dictionary(dictionary: pd.DataFrame) -> pd.DataFrame:
    """Check the columns and give every row a unique ``sense_id`` (term + synset when known)."""
    missing = {"dimension", "term", "direction"} - set(dictionary.columns)
    if missing:
        raise ContextError(f"dictionary lacks column(s) {sorted(missing)}; it has {list(dictionary.columns)}")
    d = dictionary.reset_index(drop=True).copy()
    bad = sorted(set(d["direction"]) - {"high", "low"})
    if bad:
        raise ContextError(f"direction must be 'high' or 'low'; found {bad}")
    if "sense_id" not in d.columns:
        # Same key as dictionaries.py; the full dictionary repeats some terms (as the original counts them
        # twice), so repeated keys get a #k suffix instead of being merged.
        synset = d["synset"] if "synset" in d.columns else pd.Series([""] * len(d))
        base = pd.Series([f"{t}|{s if isinstance(s, str) else ''}|{dim}"
                          for t, s, dim in zip(d["term"], synset, d["dimension"])])
        k = base.groupby(base).cumcount()
        d["sense_id"] = base.where(k == 0, base + "#" + (k + 1).astype(str))
    dup = d["sense_id"][d["sense_id"].duplicated()]
    if len(dup):
        raise ContextError(f"duplicate sense_id(s) in the dictionary: {sorted(set(dup))[:5]}")
    return d


def _rows(sense: pd.Series, contexts: list[str], origin, source: str) -> list[dict]:
    origins = origin if isinstance(origin, list) else [origin] * len(contexts)
    return [{"sense_id": sense["sense_id"], "dimension": sense["dimension"], "term": sense["term"],
             "direction": sense["direction"], "context": c, "context_source": o, "context_index": i, "source": source}
            for i, (c, o) in enumerate(zip(contexts, origins))]


def _skip(sense: pd.Series, source: str, reason: str) -> dict:
    return {"sense_id": sense["sense_id"], "dimension": sense["dimension"], "term": sense["term"],
            "direction": sense["direction"], "source": source, "reason": reason}


def _finish(rows, skipped, dropped=(), notes=()) -> ContextSet:
    return ContextSet(pd.DataFrame(rows, columns=TABLE_COLUMNS), pd.DataFrame(skipped, columns=SKIP_COLUMNS),
                      pd.DataFrame(list(dropped), columns=DROP_COLUMNS),
                      pd.DataFrame(list(notes), columns=["item", "status", "detail"]))


# ---------------------------------------------------------------- dictionary / none

def _synset_of(sense: pd.Series):
    synset = sense.get("synset")
    return synset if isinstance(synset, str) and synset else None


def _dictionary_contexts(d: pd.DataFrame, n: int) -> ContextSet:
    rows, skipped = [], []
    for _, sense in d.iterrows():
        own = _as_list(sense["contexts"]) if "contexts" in d.columns else []
        own = [c for c in own if contains_term(c, sense["term"])]
        origin = (sense["context_source"] if "context_source" in d.columns
                  and isinstance(sense["context_source"], str) else "dictionary")
        if not own:
            own = [c for c in wordnet_contexts(sense["term"], _synset_of(sense)) if contains_term(c, sense["term"])]
            origin = "WordNet"
        if own:
            rows += _rows(sense, own[:n], origin, "dictionary")
        else:
            skipped.append(_skip(sense, "dictionary", "no dictionary or WordNet example contains the term"))
    return _finish(rows, skipped)


def _no_contexts(d: pd.DataFrame) -> ContextSet:
    rows = [r for _, s in d.iterrows() for r in _rows(s, [s["term"]], "term only", "none")]
    return _finish(rows, [])


# ---------------------------------------------------------------- generated

def _names() -> frozenset[str]:
    with open(data.resolve("schuster_names"), encoding="utf-8") as f:
        groups = json.load(f)
    return frozenset(n for names in groups.values() for n in names)


def gender_markers(context: str, term: str | None = None, names: frozenset[str] | None = None) -> list[str]:
    """Gendered words (``lexicon``), gendered pronouns and first names in ``context``.

    Lexicon words and pronouns match case-insensitively; names only when
    capitalised (so "will" or "may" are not names). The term itself is exempt,
    so a dictionary term that is also a lexicon word can still be embedded.
    """
    names = _names() if names is None else names
    gendered = {w.lower() for w in MALE_WORDS} | {w.lower() for w in FEMALE_WORDS} | GENDERED_PRONOUNS
    exempt = {term.lower()} if term else set()
    found = []
    # "She's" is "she" + "s": contractions are split at the apostrophe.
    for tok in (p for w in _WORD.findall(context) for p in re.split(r"['’]", w) if p):
        low = tok.lower()
        if low in exempt:
            continue
        if low in gendered:
            found.append(low)
        elif tok in names:
            found.append(tok)
    return found


# ---------------------------------------------------------------- quality filters for generated contexts

#: Bump when a filter changes: the extra terms' data file records it.
FILTER_VERSION = 2

#: Words that make a context talk about language or the task instead of using the term ("Cleaner is a single
#: sentence that uses the word "clean" without any gendered pronouns."). The term itself is exempt.
META_WORDS = frozenset({
    "sentence", "sentences", "phrase", "phrases", "noun", "nouns", "adjective", "adjectives", "verb", "verbs",
    "adverb", "pronoun", "pronouns", "synonym", "synonyms", "grammar", "grammatical", "grammatically", "definition",
    "vocabulary", "gender", "genders", "gendered", "gender-neutral", "gender-specific", "ai", "chatbot",
})
#: Chat-assistant lead-ins and self-reference. Talk about the term itself ("the word "clean"", the term in
#: quotation marks) is found by :func:`meta_markers`.
_META_PATTERNS = (
    re.compile(r"\b(?:language model|computer program|happy to help|here is|here's|i can help|i'd be happy|"
               r"what you mean|(?:any|no|without) names?)\b", re.IGNORECASE),
    re.compile(r"^(?:sure|certainly|of course)\b", re.IGNORECASE),
)

#: Closed-class words WordNet lacks (it lists nouns, verbs, adjectives and adverbs only), and word parts
#: around apostrophes and hyphens; with WordNet they are the vocabulary a "known" word comes from.
FUNCTION_WORDS = frozenset("""
a an the this that these those some any no every each either neither both all few many much more most other another
such what which who whom whose whoever whatever whichever i me my mine myself you your yours yourself yourselves we us
our ours ourselves they them their theirs themselves themself it its itself one ones oneself someone somebody something
anyone anybody anything everyone everybody everything nobody nothing none is am are was were be been being do does did
done doing have has had having will would shall should can could may might must ought and or but nor so yet for because
although though while whereas if unless until since as than whether of in on at by with without within into onto upon
from to toward towards about above below across after against along among amongst around before behind beneath beside
besides between beyond despite down during except inside near off out outside over past through throughout till under
underneath unlike up via not n't s t m re ve ll d o co non pre re self anti multi inter sub mid ex how why when where
he she him her his hers himself herself there here then thus hence also too very just only even still already else
ever never often always sometimes whose
whenever wherever however therefore moreover furthermore nevertheless meanwhile otherwise indeed perhaps let lets
others wo ca sha
""".split())

#: HolisticBias v1.1 axes (``descriptors.json``) whose descriptors mark an identity beyond the binary gender the
#: gender filter already covers, with the buckets left out. Not used: body type, characteristics, cultural,
#: socioeconomic class and political ideologies (they overlap the stereotype dimensions themselves: status,
#: politics) and ``gender_and_sex/binary`` (female/male: the gender filter).
IDENTITY_AXES = {
    "race_ethnicity": (), "nationality": (), "religion": (), "ability": (), "sexual_orientation": (),
    "age": ("young", "adult"), "gender_and_sex": ("binary",),
}
#: Descriptors whose everyday sense is not an identity (a match would drop ordinary sentences), with the reason.
IDENTITY_EXCLUDED = {
    "white": "a colour", "Latin": "the language", "slow": "everyday adjective", "dumb": "everyday adjective",
    "barren": "describes land", "straight": "everyday adjective", "pan": "a cooking pan", "poly": "a prefix",
    "bi": "a prefix", "ace": "an expert", "older": "everyday comparative", "old": "describes things",
    "mature": "everyday adjective", "senior": "a rank", "retired": "everyday adjective", "spry": "everyday adjective",
    "young-at-heart": "everyday phrase", "stud": "everyday senses", "boi": "slang with unrelated uses",
    "tomboy": "describes a girl (binary gender)", "genderless": "describes things", "fruity": "describes food",
    "fruitcake": "a cake", "cis": "a prefix", "trans": "a prefix", "spiritual": "everyday adjective",
    "religious": "everyday adjective", "secular": "everyday adjective", "humanist": "a philosophy",
}
#: Identity phrases HolisticBias lists as nouns rather than descriptors (the issue's "a person of color").
IDENTITY_PHRASES = ("person of color", "people of color", "person of colour", "people of colour")
#: Terms of a stereotype dimension may mention that dimension's own identity vocabulary.
DIMENSION_AXES = {"religion": "religion"}


def identity_descriptors() -> dict[str, str]:
    """``{descriptor: axis}`` from HolisticBias (:data:`IDENTITY_AXES`, minus :data:`IDENTITY_EXCLUDED`)."""
    raw = json.loads(data.resolve("holisticbias_descriptors").read_text(encoding="utf-8"))
    out = {}
    for axis, skip in IDENTITY_AXES.items():
        for bucket, items in raw[axis].items():
            if bucket in skip:
                continue
            for item in items:
                text = item["descriptor"] if isinstance(item, dict) else item
                if text not in IDENTITY_EXCLUDED:
                    out[text] = axis
    out.update({p: "race_ethnicity" for p in IDENTITY_PHRASES})
    return out


def _descriptor_pattern(descriptor: str) -> re.Pattern:
    # Capitalised descriptors (Black, Christian) match only capitalised, lower-case ones in any case;
    # a plural s is allowed (Christians).
    body = r"\s+".join(re.escape(w) for w in descriptor.split())
    flags = 0 if any(c.isupper() for c in descriptor) else re.IGNORECASE
    return re.compile(r"(?<![A-Za-z0-9-])" + body + r"s?(?![A-Za-z0-9-])", flags)


_IDENTITY_CACHE: dict = {}


def identity_markers(context: str, term: str, dimension: str | None = None) -> list[str]:
    """HolisticBias identity descriptors in ``context`` (the term and its dimension's own axis exempt)."""
    if "patterns" not in _IDENTITY_CACHE:
        _IDENTITY_CACHE["patterns"] = [(d, a, _descriptor_pattern(d)) for d, a in identity_descriptors().items()]
    own_axis = DIMENSION_AXES.get(dimension)
    found = []
    for descriptor, axis, pattern in _IDENTITY_CACHE["patterns"]:
        if axis == own_axis or descriptor.lower() == term.lower():
            continue
        for m in pattern.finditer(context):
            if not term_pattern(term).fullmatch(m.group(0)):
                found.append(f"{descriptor} ({axis})")
                break
    return found


def meta_markers(context: str, term: str) -> list[str]:
    """Signs that ``context`` talks about the word, the task or the assistant instead of using the term."""
    exempt = {w.lower() for w in _WORD.findall(term)}
    found = sorted({t.lower() for t in _WORD.findall(context) if t.lower() in META_WORDS and t.lower() not in exempt})
    found += [m.group(0).lower() for p in _META_PATTERNS if (m := p.search(context))]
    if re.search(r"[\"“'‘]" + re.escape(term) + r"[\"”'’]", context, re.IGNORECASE):
        found.append(f'"{term}" in quotes')
    elif re.search(r"\b(?:word|term|adjective|noun)s?\W{1,3}" + re.escape(term) + r"\b", context, re.IGNORECASE):
        found.append(f"the word {term}")
    return found


#: Derivational endings WordNet does not list forms of ("inclusivity", "nuanced"); a word that is a known
#: word plus one of them, or two known words run together ("coworker", "backstory"), is a known word.
_SUFFIXES = ("ity", "ness", "ly", "ing", "ed", "er", "ers", "d", "s", "ism", "ist", "ful", "less", "able")


@lru_cache(maxsize=None)
def _known(word: str, depth: int = 0) -> bool:

    low = word.lower()
    if low in FUNCTION_WORDS or wordnet().morphy(low) is not None:
        return True
    if "-" in low:
        return all(_known(p, depth) for p in low.split("-") if p)
    if depth:
        return False
    for suffix in _SUFFIXES:
        stem = low[: -len(suffix)]
        if low.endswith(suffix) and len(stem) >= 3 and (_known(stem, 1) or _known(stem + "e", 1)):
            return True
    return any(_known(low[:i], 1) and _known(low[i:], 1) for i in range(2, len(low) - 2))


_LETTERS = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def unknown_words(context: str, term: str) -> list[str]:
    """Words of ``context`` that are neither WordNet lemmas (any inflection, :data:`_SUFFIXES`, two run
    together) nor :data:`FUNCTION_WORDS`: invented or misspelled words ("hypervigilacism") and names the
    gender filter's list does not hold ("Cherubbi")."""
    exempt = {w.lower() for w in _WORD.findall(term)}
    found = []
    for tok in _LETTERS.findall(context):
        # café -> cafe; letters of other scripts stay and make the word unknown.
        plain = "".join(ch for ch in unicodedata.normalize("NFKD", tok) if not unicodedata.combining(ch))
        parts = [p for p in re.split(r"['’]", re.sub(r"n['’]t$", "", plain)) if p]  # didn't -> did
        if tok.lower() in exempt or (plain.isascii() and all(_known(p) for p in parts)):
            continue
        found.append(tok)
    return found


def inside_longer_word(text: str, term: str) -> str | None:
    """The longer word containing the term when the term never appears on its own ("Frigidness")."""
    if contains_term(text, term):
        return None
    m = re.search(r"[A-Za-z]*" + re.escape(term) + r"[A-Za-z]*", text, re.IGNORECASE)
    return m.group(0) if m else None


def quality_issue(context: str, term: str, dimension: str | None = None, *, first_word: bool = True) -> str | None:
    """The first quality problem of a generated context (``"reason: detail"``), or ``None``.

    Checked in this order: meta-text (:func:`meta_markers`), identity markers
    beyond gender (:func:`identity_markers`), unknown words
    (:func:`unknown_words`), and, with ``first_word``, the term as the first word.
    The gender check is :func:`gender_markers` (applied before this one).
    """
    for reason, found in (("meta-text", meta_markers(context, term)),
                          ("identity", identity_markers(context, term, dimension)),
                          ("unknown word", unknown_words(context, term))):
        if found:
            return f"{reason}: " + ", ".join(dict.fromkeys(found))
    if first_word and term_position(context, term) == 1:
        return "first word: the term opens the context"
    return None


def parse_generated(completion: str, term: str) -> str | None:
    """The first sentence of a completion that contains the term, without quotes or labels."""
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", completion.strip()):
        label = re.match(r"^[^:]{0,40}:\s*", sentence)  # "Here is a sentence: ..." style lead-ins
        if label and not contains_term(label.group(0), term):
            sentence = sentence[label.end():]
        sentence = sentence.strip().strip('"“”*').strip()
        if sentence and contains_term(sentence, term):
            return sentence
    return None


def _drop(sense, context, origin, reason) -> dict:
    return {"sense_id": sense["sense_id"], "term": sense["term"], "context": context, "context_source": origin,
            "reason": reason}


def _filter_generated(sense, candidates, origin, names, dropped: list, check=None) -> list[str]:
    """Keep the candidates without gender markers (``names=None``: no gender check) and, with ``check``,
    without a quality issue."""
    kept = []
    for c in candidates:
        markers = gender_markers(c, sense["term"], names) if names is not None else []
        reason = "gendered: " + ", ".join(sorted(set(markers))) if markers else (check(c, sense) if check else None)
        if reason:
            dropped.append(_drop(sense, c, origin, reason))
        else:
            kept.append(c)
    return kept


def usable_contexts(sense, completions, origin, names, dropped: list, *, gender_filter: bool = True,
                    first_word: bool = True) -> list[str]:
    """The usable sentences of a sense's completions, in order; every other one is a row of ``dropped``.

    Reasons: ``inside a longer word`` / ``no sentence containing the term``
    (:func:`parse_generated`), ``duplicate``, ``gendered``, then
    :func:`quality_issue`'s ``meta-text``, ``identity``, ``unknown word`` and
    ``first word`` (``first_word=False`` keeps those).
    """
    candidates = []
    for completion in completions:
        sentence = parse_generated(completion or "", sense["term"])
        if sentence is None:
            longer = inside_longer_word(completion or "", sense["term"])
            dropped.append(_drop(sense, completion, origin, f"inside a longer word: {longer}" if longer
                                 else "no sentence containing the term"))
        elif sentence in candidates:
            dropped.append(_drop(sense, sentence, origin, "duplicate"))
        else:
            candidates.append(sentence)

    def check(context, s):
        return quality_issue(context, s["term"], s["dimension"], first_word=first_word)

    return _filter_generated(sense, candidates, origin, names if gender_filter else None, dropped, check)


def published_generated_contexts() -> dict[str, list[str]]:
    """The published Llama-3-8B-Instruct contexts, keyed ``"term - synset"``."""
    out = {}
    with open(data.resolve(PUBLISHED_GENERATED_KEY), encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                out[f"{entry['term']} - {entry['synset']}"] = list(entry["examples"])
            except (json.JSONDecodeError, KeyError) as exc:
                raise ContextError(f"{PUBLISHED_GENERATED_KEY} line {i} is malformed: {exc}") from None
    return out


def generation_prompt(term: str, definition=None) -> str:
    sense = SENSE_CLAUSE.format(definition=definition) if isinstance(definition, str) and definition else ""
    return GENERATION_INSTRUCTION.format(term=term, sense=sense)


def _definition(sense: pd.Series):
    d = sense.get("definition")
    if isinstance(d, str) and d.startswith("["):
        d = (_as_list(d) or [None])[0]
    elif not isinstance(d, str) and d is not None and not (isinstance(d, float) and np.isnan(d)):
        d = (list(d) or [None])[0]
    if isinstance(d, str) and d:
        return d
    synset = _synset_of(sense)
    if synset:
        return wordnet().synset(synset).definition()
    return None


def _generated_contexts(d, n, seed, model, generation, gender_filter) -> ContextSet:
    names = _names()
    rows, skipped, dropped = [], [], []
    if model is None:
        published = published_generated_contexts()
        origin = "Meta-Llama-3-8B-Instruct (published)"
        for _, sense in d.iterrows():
            found = published.get(f"{sense['term']} - {_synset_of(sense)}")
            if found is None:
                skipped.append(_skip(sense, "generated", "no published generated context for this term + synset; "
                                     "pass model= to generate new ones"))
                continue
            # As the authors' code: the first n, whatever they contain (a context without the term
            # becomes a recorded skip when it is embedded).
            kept = _filter_generated(sense, found, origin, names, dropped) if gender_filter else list(found)
            if kept:
                rows += _rows(sense, kept[:n], origin, "generated")
            else:
                skipped.append(_skip(sense, "generated", "every published context was dropped by the gender filter"))
        return _finish(rows, skipped, dropped)

    from .generation import generate  # deferred: torch, only needed to generate new contexts

    settings = {**GENERATION_SETTINGS, "n_samples": n, **(generation or {})}
    prompts = [generation_prompt(s["term"], _definition(s)) for _, s in d.iterrows()]
    unique = list(dict.fromkeys(prompts))
    out = generate(model, unique, seed=seed, chat=True, **settings)
    by_prompt = out.groupby("prompt", sort=False)["completion"].apply(list).to_dict()
    origin = getattr(model, "model_id", str(model))
    for (_, sense), prompt in zip(d.iterrows(), prompts):
        completions = by_prompt.get(prompt, [])
        kept = usable_contexts(sense, completions, origin, names, dropped, gender_filter=gender_filter is not False)
        if kept:
            rows += _rows(sense, kept[:n], origin, "generated")
        else:
            skipped.append(_skip(sense, "generated", f"none of {len(completions)} generated contexts was usable "
                                 "(see dropped)"))
    return _finish(rows, skipped, dropped)


# ---------------------------------------------------------------- corpus

def _bold_sentences(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        nested = json.load(f)
    return [s for pages in nested.values() for sents in pages.values() for s in sents if isinstance(s, str)]


def load_corpus(corpus=None) -> tuple[list[str], list[dict]]:
    """Sentences of a corpus and notes on the files used/refused.

    ``corpus``: ``None`` (the BOLD Wikipedia files of :data:`DEFAULT_CORPORA`;
    one that fails checksum verification is refused and noted), a manifest key,
    a path to a text file with one sentence per line, or a list of those.
    """
    items = list(DEFAULT_CORPORA) if corpus is None else ([corpus] if isinstance(corpus, (str, Path)) else list(corpus))
    sentences, notes = [], []
    for item in items:
        path = Path(item)
        if isinstance(item, str) and item in data.manifest():
            try:
                resolved = data.resolve(item)
            except data.DataError as exc:
                notes.append({"item": item, "status": "refused", "detail": " ".join(str(exc).split())})
                continue
            found = _bold_sentences(resolved) if resolved.suffix == ".json" else _read_lines(resolved)
        elif path.is_file():
            found = _read_lines(path)
        else:
            raise ContextError(f"corpus {item!r} is neither a data key nor an existing file")
        notes.append({"item": str(item), "status": "used", "detail": f"{len(found)} sentences"})
        sentences += found
    if not sentences:
        raise ContextError("no usable corpus sentence: " + "; ".join(f"{n['item']}: {n['detail']}" for n in notes))
    return sentences, notes


def _read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def crop(sentence: str, term: str, max_words: int | None) -> str:
    """Keep at most ``max_words`` words centred on the first occurrence of the term."""
    words = sentence.split()
    if max_words is None or len(words) <= max_words:
        return sentence
    m = term_pattern(term).search(sentence)
    at = len(sentence[: m.start()].split()) if m else 0
    start = max(0, min(at - max_words // 2, len(words) - max_words))
    return " ".join(words[start: start + max_words])


def _corpus_contexts(d, n, seed, corpus, max_words) -> ContextSet:
    sentences, notes = load_corpus(corpus)
    index: dict[str, list[int]] = {}
    for i, s in enumerate(sentences):
        for w in set(t.lower() for t in _WORD.findall(s)):
            index.setdefault(w, []).append(i)
    origin = " + ".join(n_["item"] for n_ in notes if n_["status"] == "used")
    rng = np.random.default_rng(seed)
    rows, skipped = [], []
    for _, sense in d.iterrows():
        term = sense["term"]
        first = _WORD.findall(term.lower())
        candidates = index.get(first[0], []) if first else []
        hits = [i for i in candidates if contains_term(sentences[i], term)]
        if not hits:
            skipped.append(_skip(sense, "corpus", f"the term does not occur in the corpus ({origin})"))
            continue
        pick = rng.choice(hits, size=min(n, len(hits)), replace=False)
        rows += _rows(sense, [crop(sentences[i], term, max_words) for i in pick], origin, "corpus")
    return _finish(rows, skipped, notes=notes)


# ---------------------------------------------------------------- entry points

def build_contexts(dictionary: pd.DataFrame, source: str = "generated", n_contexts: int = 5, seed: int = 0,
                   model=None, corpus=None, *, generation: dict | None = None,
                   max_words: int | None = 40, gender_filter: bool | None = None) -> ContextSet:
    """Up to ``n_contexts`` contexts per dictionary sense from ``source`` (see the module docstring).

    ``dictionary`` needs ``dimension, term, direction`` and may have
    ``sense_id, synset, definition, contexts, context_source``.
    ``model`` (a ``LoadedModel`` or name) switches ``generated`` from the
    published contexts to new generation; ``generation`` overrides the sampling
    settings passed to ``generation.generate``. ``corpus`` and ``max_words``
    apply to ``corpus`` (sentences longer than ``max_words`` are cropped around
    the term, as the paper's Reddit examples were). ``gender_filter``
    (``generated`` only): ``None`` filters newly generated contexts and keeps the
    published ones as published; ``True``/``False`` force it either way.
    """
    if source not in SOURCES:
        raise ContextError(f"unknown context source {source!r}; choose one of {SOURCES}")
    if not isinstance(n_contexts, (int, np.integer)) or n_contexts < 1:
        raise ContextError(f"n_contexts must be a positive integer, got {n_contexts!r}")
    d = prepare_dictionary(dictionary)
    if source == "dictionary":
        return _dictionary_contexts(d, n_contexts)
    if source == "none":
        return _no_contexts(d)
    if source == "generated":
        if isinstance(model, str):
            from .models import load_model  # deferred: torch, only needed to generate new contexts

            model = load_model(model)
        return _generated_contexts(d, n_contexts, seed, model, generation, gender_filter)
    return _corpus_contexts(d, n_contexts, seed, corpus, max_words)


def term_position(context: str, term: str) -> int | None:
    """1-based word position of the term's first occurrence (None if absent)."""
    m = term_pattern(term).search(context)
    return None if m is None else len(context[: m.start()].split()) + 1


def context_report(contexts: pd.DataFrame | ContextSet, senses: pd.DataFrame | None = None) -> pd.DataFrame:
    """Properties of the contexts per source (the paper's Figure 2).

    Columns: ``source, n_senses, n_contexts, contexts_per_sense`` (mean over
    senses with contexts), ``senses_without`` (from ``ContextSet.skipped``),
    ``mean_words``, ``median_words``, ``mean_term_position`` (1-based word
    index), ``mean_relative_position`` (0 = first word, 1 = last word),
    ``share_gendered`` (contexts with a gendered word, pronoun or name).
    """
    skipped = contexts.skipped if isinstance(contexts, ContextSet) else None
    table = contexts.table if isinstance(contexts, ContextSet) else contexts
    if table.empty:
        return pd.DataFrame()
    t = table.copy()
    t["words"] = t["context"].str.split().str.len()
    t["position"] = [term_position(c, w) for c, w in zip(t["context"], t["term"])]
    t["relative"] = (t["position"] - 1) / (t["words"] - 1).where(t["words"] > 1)
    names = _names()
    t["gendered"] = [bool(gender_markers(c, w, names)) for c, w in zip(t["context"], t["term"])]
    g = t.groupby("source", sort=False)
    out = pd.DataFrame({
        "n_senses": g["sense_id"].nunique(),
        "n_contexts": g.size(),
        "contexts_per_sense": g.size() / g["sense_id"].nunique(),
        "mean_words": g["words"].mean(),
        "median_words": g["words"].median(),
        "mean_term_position": g["position"].mean(),
        "mean_relative_position": g["relative"].mean(),
        "share_gendered": g["gendered"].mean(),
    }).reset_index()
    n_skipped = skipped.groupby("source").size() if skipped is not None and len(skipped) else pd.Series(dtype=int)
    out.insert(3, "senses_without", out["source"].map(n_skipped).fillna(0).astype(int))
    return out


# ---------------------------------------------------------------- the full dictionary's extra terms

EXTRA_CONTEXTS_FILE = "generated/extra_terms_contexts.jsonl"
#: Terms per call of ``generation.generate``: the file is rewritten after each, so an interrupted run leaves a
#: usable file, and the generation cache makes the next run resume where it stopped.
EXTRA_CHUNK = 25


def extra_contexts_path(path=None) -> Path:

    return Path(path) if path else data_dir() / EXTRA_CONTEXTS_FILE


def _settings_path(path: Path) -> Path:
    return path.with_suffix(".json")


def extra_term_prompt(term: str) -> str:
    """The paper's instruction without a definition: the full dictionary does not say which sense a term has
    (Sec. 3.2 adds WordNet definitions for the seed dictionary only)."""
    return generation_prompt(term)


def generate_extra_contexts(model, terms: pd.DataFrame | None = None, *, seed: int = 0, path=None,
                            n_keep: int = 5, generation: dict | None = None, limit: int | None = None,
                            chunk: int = EXTRA_CHUNK, progress: bool = True) -> Path:
    """Generate, filter and write contexts for the full dictionary's extra terms (one JSON line per term).

    Terms (default ``dictionaries.load_full_dictionary_terms()``) are processed in
    an order shuffled with ``seed``, so a file cut short covers every dimension and
    pole evenly; ``limit`` stops after that many terms. Each line: ``dimension,
    term, direction, contexts`` (up to ``n_keep`` usable ones, :func:`usable_contexts`),
    ``n_generated`` and ``dropped`` (``{reason: count}``). The settings (model id,
    seed, sampling, prompt template, filter version, order) go to the sidecar
    ``<file>.json``. Completions come from ``generation.generate`` (seeded, cached):
    a rerun reuses them and continues where an interrupted one stopped.
    """
    # deferred: torch, only needed to generate new contexts
    from .generation import generate
    from .models import load_model

    if terms is None:

        terms = load_full_dictionary_terms()
    model = load_model(model) if isinstance(model, str) else model
    settings = {**GENERATION_SETTINGS, **(generation or {})}
    order = terms[["dimension", "term", "direction"]].sample(frac=1.0, random_state=seed).reset_index(drop=True)
    n_total = len(order)
    if limit is not None:
        order = order.head(limit)
    path = extra_contexts_path(path)
    meta = {"model_id": model.model_id, "seed": seed, "generation": settings, "chat": True,
            "prompt_template": GENERATION_INSTRUCTION, "sense_clause": "none (the extra terms have no known sense)",
            "filter_version": FILTER_VERSION, "n_keep": n_keep, "chunk": chunk,
            "order": "terms shuffled with pandas sample(frac=1, random_state=seed)",
            "command": f"python -m bias_utils.contexts generate-extra --model {model.name} --seed {seed}",
            "n_terms_total": n_total}
    names, lines = _names(), []
    done = _reusable_extra_lines(path, meta)
    for start in range(0, len(order), chunk):
        part = order.iloc[start:start + chunk]
        todo = part[~part["term"].isin(done)]
        by_term = {}
        if len(todo):
            out = generate(model, [extra_term_prompt(t) for t in todo["term"]], prompt_ids=list(todo["term"]),
                           seed=seed, chat=True, progress=progress, **settings)
            by_term = out.groupby("prompt_id", sort=False)["completion"].apply(list).to_dict()
        for _, row in part.iterrows():
            if row["term"] in done:
                lines.append(done[row["term"]])
                continue
            sense = {**row.to_dict(), "sense_id": row["term"]}
            dropped: list = []
            kept = usable_contexts(sense, by_term[row["term"]], model.model_id, names, dropped)
            reasons = pd.Series([d["reason"].split(":")[0] for d in dropped], dtype=object).value_counts()
            lines.append(json.dumps({**row.to_dict(), "contexts": kept[:n_keep],
                                     "n_generated": len(by_term[row["term"]]),
                                     "dropped": {k: int(v) for k, v in reasons.items()}}, ensure_ascii=False))
        atomic_write_text(path, "\n".join(lines) + "\n")
        atomic_write_json(_settings_path(path), {**meta, "n_terms_done": len(lines)})
    return path



#: Sidecar settings that decide a line's content: a line is reused only when all of them match.
_EXTRA_IDENTITY = ("model_id", "seed", "generation", "chat", "prompt_template", "filter_version", "n_keep")


def _identity(meta: dict) -> dict:
    # A sidecar written before top-k existed has no "top_k": that is top_k=None.
    generation = {k: v for k, v in (meta.get("generation") or {}).items() if v is not None}
    return {**{k: meta.get(k) for k in _EXTRA_IDENTITY}, "generation": generation}


def _reusable_extra_lines(path: Path, meta: dict) -> dict[str, str]:
    """``{term: line}`` of an existing file made with the same settings, so a rerun (even with an empty
    generation cache) generates only the terms the file lacks."""
    settings_path = _settings_path(path)
    if not (path.is_file() and settings_path.is_file()):
        return {}
    with open(settings_path, encoding="utf-8") as f:
        if _identity(json.load(f)) != _identity(meta):
            return {}
    with open(path, encoding="utf-8") as f:
        return {json.loads(line)["term"]: line.rstrip("\n") for line in f if line.strip()}

def read_extra_contexts(path=None) -> tuple[pd.DataFrame, dict]:
    """The extra terms' generated contexts file: ``(table, settings)``; one row per term with columns
    ``dimension, term, direction, contexts, n_generated, dropped``."""
    path = extra_contexts_path(path)
    if not path.is_file():
        raise ContextError(f"no generated contexts file at {path}; make it with "
                           "python -m bias_utils.contexts generate-extra --model qwen2.5-coder-0.5b-instruct --seed 0")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ContextError(f"{path} line {i} is not valid JSON: {exc}") from None
    with open(_settings_path(path), encoding="utf-8") as f:
        settings = json.load(f)
    columns = ["dimension", "term", "direction", "contexts", "n_generated", "dropped"]
    return pd.DataFrame(rows, columns=columns), settings


def extra_term_contexts(terms: pd.DataFrame, n_contexts: int = 5, path=None) -> ContextSet:
    """Contexts for ``terms`` from the generated file, as a :class:`ContextSet`.

    A term missing from the file, or with no usable context in it, is a row of
    ``skipped`` with its reason (never a WordNet fallback).
    """
    table, settings = read_extra_contexts(path)
    found = {(r.dimension, r.term): r for r in table.itertuples()}
    origin = settings["model_id"]
    rows, skipped = [], []
    for _, sense in prepare_dictionary(terms).iterrows():
        entry = found.get((sense["dimension"], sense["term"]))
        if entry is None:
            skipped.append(_skip(sense, "generated", "not in the generated contexts file (generation not run for it)"))
        elif not entry.contexts:
            skipped.append(_skip(sense, "generated", f"none of {entry.n_generated} generated contexts was usable "
                                 f"({', '.join(f'{k} {v}' for k, v in entry.dropped.items())})"))
        else:
            rows += _rows(sense, list(entry.contexts)[:n_contexts], origin, "generated")
    return _finish(rows, skipped)


def extra_coverage(terms: pd.DataFrame | None = None, path=None) -> pd.DataFrame:
    """Terms with at least one generated context, per dimension and pole.

    Columns: ``dimension, direction, n_terms`` (all extra terms), ``n_generated``
    (terms the generation has reached), ``n_covered`` (>= 1 usable context),
    ``coverage`` (``n_covered / n_terms``), ``mean_contexts`` (per covered term);
    plus a ``total`` row.
    """
    if terms is None:

        terms = load_full_dictionary_terms()
    table, _ = read_extra_contexts(path)
    table = table.assign(n=table["contexts"].str.len())
    keys = ["dimension", "direction"]
    out = terms.groupby(keys).size().rename("n_terms").to_frame()
    out["n_generated"] = table.groupby(keys).size()
    covered = table[table["n"] > 0]
    out["n_covered"] = covered.groupby(keys).size()
    out["mean_contexts"] = covered.groupby(keys)["n"].mean()
    out = out.fillna({"n_generated": 0, "n_covered": 0}).reset_index()
    total = {"dimension": "total", "direction": "", "n_terms": out["n_terms"].sum(),
             "n_generated": out["n_generated"].sum(), "n_covered": out["n_covered"].sum(),
             "mean_contexts": covered["n"].mean() if len(covered) else np.nan}
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out[["n_generated", "n_covered"]] = out[["n_generated", "n_covered"]].astype(int)
    out.insert(5, "coverage", out["n_covered"] / out["n_terms"])
    return out


MODEL_CHOICE_FILES = {"summary": "generated/model_choice_summary.csv", "reasons": "generated/model_choice_reasons.csv",
                      "kept": "generated/model_choice_kept.csv"}
USER_EXAMPLE_DICTIONARY = "examples/user_dictionary_example.csv"


def model_choice_senses(per_pole: int = 3, seed: int = 0) -> pd.DataFrame:
    """The senses the generators are compared on: ``per_pole`` extra terms per dimension and pole
    (``dictionaries.limit_terms``) and the example user dictionary's senses (``data/examples``)."""

    extra = limit_terms(load_full_dictionary_terms(), per_pole, seed)[["dimension", "term", "direction"]]
    user = read_dictionary(data_dir() / USER_EXAMPLE_DICTIONARY)[["dimension", "term", "direction"]]
    out = pd.concat([extra.assign(sample="extra terms"), user.assign(sample="user example")], ignore_index=True)
    return out.assign(sense_id=out["term"] + "|" + out["dimension"])


def compare_generators(models, senses: pd.DataFrame | None = None, *, n_samples: int = 3, seed: int = 0,
                       progress: bool = True) -> dict[str, pd.DataFrame]:
    """Generate ``n_samples`` contexts per sense with each model and filter them (:func:`usable_contexts`).

    Returns ``summary`` (``model_id, n_senses, n_generated, n_kept, share_kept,
    n_covered`` (senses with >= 1 kept), ``share_covered, n_first_word``),
    ``reasons`` (``model_id, reason, n, share`` of the generated) and ``kept``
    (``model_id, sample, dimension, term, direction, context``).
    """
    # deferred: torch, only needed to generate new contexts
    from .generation import generate
    from .models import load_model

    senses = model_choice_senses() if senses is None else senses
    names = _names()
    summary, reasons, kept_rows = [], [], []
    for name in models:
        model = load_model(name) if isinstance(name, str) else name
        settings = {**GENERATION_SETTINGS, "n_samples": n_samples}
        out = generate(model, [extra_term_prompt(t) for t in senses["term"]], seed=seed, chat=True,
                       progress=progress, **settings)
        by_id = out.groupby("prompt_id", sort=True)["completion"].apply(list)
        dropped, n_kept, n_covered = [], 0, 0
        for i, sense in senses.reset_index(drop=True).iterrows():
            kept = usable_contexts(sense, by_id[i], model.model_id, names, dropped)
            n_kept, n_covered = n_kept + len(kept), n_covered + bool(kept)
            kept_rows += [{"model_id": model.model_id, **sense[["sample", "dimension", "term", "direction"]].to_dict(),
                           "context": c} for c in kept]
        counts = pd.Series([d["reason"].split(":")[0] for d in dropped], dtype=object).value_counts()
        reasons += [{"model_id": model.model_id, "reason": r, "n": int(k), "share": k / len(out)}
                    for r, k in counts.items()]
        summary.append({"model_id": model.model_id, "n_senses": len(senses), "n_generated": len(out), "n_kept": n_kept,
                        "share_kept": n_kept / len(out), "n_covered": n_covered,
                        "share_covered": n_covered / len(senses),
                        "n_samples": n_samples, "seed": seed})
    return {"summary": pd.DataFrame(summary), "reasons": pd.DataFrame(reasons), "kept": pd.DataFrame(kept_rows)}


def _main(argv=None) -> None:


    parser = argparse.ArgumentParser(prog="python -m bias_utils.contexts",
                                     description="Generated contexts for the full dictionary's extra terms.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate-extra", help="generate (or resume) the extra terms' contexts file")
    gen.add_argument("--model", default="smollm2-135m-instruct")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--limit", type=int, default=None, help="stop after this many terms (in the shuffled order)")
    gen.add_argument("--out", default=None, help=f"output file (default data/{EXTRA_CONTEXTS_FILE})")
    sub.add_parser("coverage", help="print the coverage table of the extra terms' contexts file")
    cmp_ = sub.add_parser("compare-models", help="measure the share of usable contexts per generator model "
                          f"(writes data/{MODEL_CHOICE_FILES['summary']} and its siblings)")
    cmp_.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"])
    cmp_.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "compare-models":

        for key, table in compare_generators(args.models, seed=args.seed).items():
            atomic_write_text(data_dir() / MODEL_CHOICE_FILES[key], table.to_csv(index=False))
            print(table.to_string(index=False) if key != "kept" else f"{len(table)} kept contexts")
        return
    if args.command == "generate-extra":
        print(generate_extra_contexts(args.model, seed=args.seed, path=args.out, limit=args.limit))
    print(extra_coverage(path=getattr(args, "out", None)).to_string(index=False))


if __name__ == "__main__":
    _main()
