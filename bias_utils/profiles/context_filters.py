"""Quality filters for generated contexts: does a sentence use the term, and is it usable?

A generated completion becomes a context when :func:`parse_generated` finds a
sentence with the term as a word (not only inside a longer word,
:func:`inside_longer_word`), and :func:`usable_contexts` keeps it: no gendered
word, pronoun or first name (:func:`gender_markers`), no meta-text, no identity
marker beyond gender, no unknown word, and the term not the first word
(:func:`quality_issue`); every drop is a row of ``dropped`` with its reason.
:data:`FILTER_VERSION` is recorded with the extra terms' generated contexts.

Why the first-word filter: none of the 2,205 published Llama-3 contexts starts
with the term, but 1,236 of the extra terms' 6,492 WordNet examples do. On 120
of those terms (528 examples), SmolLM2's embedding of the term as first word had
a mean cosine of 0.60 (layers 1-30) with the mean of the same term's other
examples, against 0.95 for an example where it is not first; MiniLM, whose first
token is ``[CLS]``, 0.92 both ways (``scripts/first_word_check.py``). A
decoder's first token is not a contextual embedding of the term.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache

from ..core import data
from ..core.lexicon import FEMALE_WORDS, MALE_WORDS
from ..core.wordnet import wordnet

__all__: list[str] = []

_GENDERED_PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})

WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")


def term_pattern(term: str) -> re.Pattern:
    """The term as a whole word (not inside a longer word), case-insensitive."""
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(term) + r"(?![A-Za-z0-9])", re.IGNORECASE)


def contains_term(context: str, term: str) -> bool:
    return bool(term_pattern(term).search(context))


def known_names() -> frozenset[str]:
    with open(data.resolve("schuster_names"), encoding="utf-8") as f:
        groups = json.load(f)
    return frozenset(n for names in groups.values() for n in names)


def gender_markers(context: str, term: str | None = None, names: frozenset[str] | None = None) -> list[str]:
    """Gendered words (``lexicon``), gendered pronouns and first names in ``context``.

    Lexicon words and pronouns match case-insensitively; names only when
    capitalised (so "will" or "may" are not names). The term itself is exempt,
    so a dictionary term that is also a lexicon word can still be embedded.
    """
    names = known_names() if names is None else names
    gendered = {w.lower() for w in MALE_WORDS} | {w.lower() for w in FEMALE_WORDS} | _GENDERED_PRONOUNS
    exempt = {term.lower()} if term else set()
    found = []
    # "She's" is "she" + "s": contractions are split at the apostrophe.
    for tok in (p for w in WORD.findall(context) for p in re.split(r"['’]", w) if p):
        low = tok.lower()
        if low in exempt:
            continue
        if low in gendered:
            found.append(low)
        elif tok in names:
            found.append(tok)
    return found



#: Bump when a filter changes: the extra terms' data file records it.
FILTER_VERSION = 2

#: Words that make a context talk about language or the task instead of using the term ("Cleaner is a single
#: sentence that uses the word "clean" without any gendered pronouns."). The term itself is exempt.
_META_WORDS = frozenset({
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
_FUNCTION_WORDS = frozenset("""
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
_IDENTITY_AXES = {
    "race_ethnicity": (), "nationality": (), "religion": (), "ability": (), "sexual_orientation": (),
    "age": ("young", "adult"), "gender_and_sex": ("binary",),
}
#: Descriptors whose everyday sense is not an identity (a match would drop ordinary sentences), with the reason.
_IDENTITY_EXCLUDED = {
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
_IDENTITY_PHRASES = ("person of color", "people of color", "person of colour", "people of colour")
#: Terms of a stereotype dimension may mention that dimension's own identity vocabulary.
_DIMENSION_AXES = {"religion": "religion"}


def _identity_descriptors() -> dict[str, str]:
    """``{descriptor: axis}`` from HolisticBias (:data:`IDENTITY_AXES`, minus :data:`IDENTITY_EXCLUDED`)."""
    raw = json.loads(data.resolve("holisticbias_descriptors").read_text(encoding="utf-8"))
    out = {}
    for axis, skip in _IDENTITY_AXES.items():
        for bucket, items in raw[axis].items():
            if bucket in skip:
                continue
            for item in items:
                text = item["descriptor"] if isinstance(item, dict) else item
                if text not in _IDENTITY_EXCLUDED:
                    out[text] = axis
    out.update({p: "race_ethnicity" for p in _IDENTITY_PHRASES})
    return out


def _descriptor_pattern(descriptor: str) -> re.Pattern:
    # Capitalised descriptors (Black, Christian) match only capitalised, lower-case ones in any case;
    # a plural s is allowed (Christians).
    body = r"\s+".join(re.escape(w) for w in descriptor.split())
    flags = 0 if any(c.isupper() for c in descriptor) else re.IGNORECASE
    return re.compile(r"(?<![A-Za-z0-9-])" + body + r"s?(?![A-Za-z0-9-])", flags)


_IDENTITY_CACHE: dict = {}


def _identity_markers(context: str, term: str, dimension: str | None = None) -> list[str]:
    """HolisticBias identity descriptors in ``context`` (the term and its dimension's own axis exempt)."""
    if "patterns" not in _IDENTITY_CACHE:
        _IDENTITY_CACHE["patterns"] = [(d, a, _descriptor_pattern(d)) for d, a in _identity_descriptors().items()]
    own_axis = _DIMENSION_AXES.get(dimension)
    found = []
    for descriptor, axis, pattern in _IDENTITY_CACHE["patterns"]:
        if axis == own_axis or descriptor.lower() == term.lower():
            continue
        for m in pattern.finditer(context):
            if not term_pattern(term).fullmatch(m.group(0)):
                found.append(f"{descriptor} ({axis})")
                break
    return found


def _meta_markers(context: str, term: str) -> list[str]:
    """Signs that ``context`` talks about the word, the task or the assistant instead of using the term."""
    exempt = {w.lower() for w in WORD.findall(term)}
    found = sorted({t.lower() for t in WORD.findall(context) if t.lower() in _META_WORDS and t.lower() not in exempt})
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
    if low in _FUNCTION_WORDS or wordnet().morphy(low) is not None:
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


#: A term WordNet does not know (:func:`known`) that the model's tokenizer splits into this many pieces or more is
#: not a word (:func:`not_a_word`): "brrzzkt" is 4 pieces for MiniLM, SmolLM2 and Qwen2.5.
_MIN_NONWORD_PIECES = 3


def known_term(term: str) -> bool:
    """Every word of ``term`` is :func:`known` (WordNet, its inflections and compounds, or a function word)."""
    words = WORD.findall(term)
    return bool(words) and all(_known(w) for w in words)


def not_a_word(term: str, tokenizer) -> str | None:
    """Why ``term`` is not a word to WordNet or to the model (its pieces as ``tokenizer`` splits it, written as in a
    sentence), or ``None``: a term whose every word is :func:`known` is a word; one that is not is marked when the
    tokenizer has no word for it either, splitting it into :data:`MIN_NONWORD_PIECES` pieces or more."""
    if known_term(term):
        return None
    pieces = [p.replace("Ġ", "").replace("▁", "") for p in tokenizer.tokenize(" " + term)]
    pieces = [p for p in pieces if p.strip()]
    if len(pieces) < _MIN_NONWORD_PIECES:
        return None
    return (f"not a word: WordNet does not know it, and the model's tokenizer splits it into {len(pieces)} pieces "
            f"({', '.join(pieces)})")


_LETTERS = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _unknown_words(context: str, term: str) -> list[str]:
    """Words of ``context`` that are neither WordNet lemmas (any inflection, :data:`_SUFFIXES`, two run
    together) nor :data:`FUNCTION_WORDS`: invented or misspelled words ("hypervigilacism") and names the
    gender filter's list does not hold ("Cherubbi")."""
    exempt = {w.lower() for w in WORD.findall(term)}
    found = []
    for tok in _LETTERS.findall(context):
        # café -> cafe; letters of other scripts stay and make the word unknown.
        plain = "".join(ch for ch in unicodedata.normalize("NFKD", tok) if not unicodedata.combining(ch))
        parts = [p for p in re.split(r"['’]", re.sub(r"n['’]t$", "", plain)) if p]  # didn't -> did
        if tok.lower() in exempt or (plain.isascii() and all(_known(p) for p in parts)):
            continue
        found.append(tok)
    return found


def _inside_longer_word(text: str, term: str) -> str | None:
    """The longer word containing the term when the term never appears on its own ("Frigidness")."""
    if contains_term(text, term):
        return None
    m = re.search(r"[A-Za-z]*" + re.escape(term) + r"[A-Za-z]*", text, re.IGNORECASE)
    return m.group(0) if m else None


def _quality_issue(context: str, term: str, dimension: str | None = None, *, first_word: bool = True) -> str | None:
    """The first quality problem of a generated context (``"reason: detail"``), or ``None``.

    Checked in this order: meta-text (:func:`meta_markers`), identity markers
    beyond gender (:func:`identity_markers`), unknown words
    (:func:`unknown_words`), and, with ``first_word``, the term as the first word.
    The gender check is :func:`gender_markers` (applied before this one).
    """
    for reason, found in (("meta-text", _meta_markers(context, term)),
                          ("identity", _identity_markers(context, term, dimension)),
                          ("unknown word", _unknown_words(context, term))):
        if found:
            return f"{reason}: " + ", ".join(dict.fromkeys(found))
    if first_word and term_position(context, term) == 1:
        return "first word: the term opens the context"
    return None


def _parse_generated(completion: str, term: str) -> str | None:
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


def filter_generated(sense, candidates, origin, names, dropped: list, check=None) -> list[str]:
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
        sentence = _parse_generated(completion or "", sense["term"])
        if sentence is None:
            longer = _inside_longer_word(completion or "", sense["term"])
            dropped.append(_drop(sense, completion, origin, f"inside a longer word: {longer}" if longer
                                 else "no sentence containing the term"))
        elif sentence in candidates:
            dropped.append(_drop(sense, sentence, origin, "duplicate"))
        else:
            candidates.append(sentence)

    def check(context, s):
        return _quality_issue(context, s["term"], s["dimension"], first_word=first_word)

    return filter_generated(sense, candidates, origin, names if gender_filter else None, dropped, check)



def term_position(context: str, term: str) -> int | None:
    """1-based word position of the term's first occurrence (None if absent)."""
    m = term_pattern(term).search(context)
    return None if m is None else len(context[: m.start()].split()) + 1
