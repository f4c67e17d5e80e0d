"""Populations: groups of words (names or person terms) whose stereotype profiles are compared.

:func:`load_populations` returns ``{group: [words]}`` (groups and words in
source order). Built-in sets:

``"names"``
    Schuster et al.'s ``names.json``: the SSA "Top Names Over the Last 100
    Years" table, groups ``female`` and ``male``, 100 each, in rank order.
``"terms"``
    Schuster et al.'s ``terms.json``: WEAT 7/8 gendered words without the
    pronoun objects/possessives, groups ``female`` and ``male``, 9 each.
``"nonbinary"``
    Terms chosen from HolisticBias v1.1 (``descriptors.json`` ->
    ``gender_and_sex``), groups ``nonbinary`` (bucket ``non_binary_or_gnc``)
    and ``transgender`` (bucket ``transgender``); see :func:`nonbinary_terms`
    for the selection rule.
``"occupations"``
    The 60 occupation nouns of Rudinger et al.'s (2018) ``occupations-stats.tsv``
    ("technician", ..., "secretary") split by the U.S. Bureau of Labor Statistics
    share of women among their workers (2015/2016): ``female-majority`` (at least
    :data:`MAJORITY_PCT` = 50% women, 31 nouns) and ``male-majority`` (the other 29),
    each in the file's order. :func:`occupation_shares` gives the shares themselves, the
    external scale against which ``gender_direction`` validates a model's female − male
    direction.

User files (any number of groups, at least one word each):

* JSON ``{"group": ["word", ...], ...}``, or
  ``{"kind": "name", "groups": {"group": [...], ...}}`` to set the kind;
* CSV with a header ``group,word`` and optionally a ``kind`` column (one
  value for the whole file).

The *kind* tells template builders how to put a word into a sentence
(:func:`population_kind`): ``"name"`` words never take an article ("this is
Mary"); ``"noun"`` words take "the" ("this is the woman"), the treatment
Schuster et al.'s ``fill_template`` gives to every word nltk tags NN or JJ,
so adjectives such as "nonbinary" are ``"noun"`` too. Pronouns are the
exception (nltk tags them PRP: "this is she"); :func:`takes_article` applies
the rule per word, and a phrase that already opens with a determiner ("the old
lady", "my aunt") takes none. A user file that does not give its kind gets one
inferred (:func:`infer_kind`), with a warning that says how: ``"name"`` when every
word is one capitalised word ("Mary", "Mary-Jane", "McKenzie", "LaToya"),
``"noun"`` when none is; a list that mixes the two, or whose lower-case words are
mostly first names of the built-in ``names`` ("mary", "john": "this is the mary"),
is refused until the file states its kind.
"""

from __future__ import annotations

import csv
import json
import re
import warnings
from pathlib import Path

import pandas as pd

from ..core.data import resolve
from ..core.errors import ParameterError
from ..core.paths import resolve_input

__all__: list[str] = []

KINDS = ("name", "noun")
#: Template kind of the built-in populations (see the module docstring).
POPULATION_KINDS = {"names": "name", "terms": "noun", "nonbinary": "noun", "occupations": "noun"}
_BUILTIN = tuple(POPULATION_KINDS)
#: The ``occupations`` population's split: a noun whose BLS share of women is at least this (percent) is
#: ``female-majority``, any other ``male-majority`` (the groups of :data:`OCCUPATION_GROUPS`, in this order).
_MAJORITY_PCT = 50.0
OCCUPATION_GROUPS = ("female-majority", "male-majority")

# A template word must be one lower-case token: letters with at most one inner hyphen. This
# excludes multi-word descriptors ("trans female", "gender neutral"), abbreviations ("FTM",
# "F2M", "FoC") and phrases glued by hyphens ("feminine-of-center").
_TEMPLATE_WORD = re.compile(r"^[a-z]+(-[a-z]+)?$")
# Single words whose everyday sense is not a gender identity, so their embedding would
# measure something else; with the reason, for the docs.
_NONBINARY_EXCLUDED = {
    "stud": "everyday senses (a male horse, a metal knob) dominate",
    "tomboy": "describes a girl, i.e. a binary-gendered person",
    "boi": "slang with several unrelated uses",
    "genderless": "mostly describes things (languages, products), not people",
}


# Personal pronouns (nltk's PRP tag) never take an article in Schuster et al.'s templates.
_PRONOUNS = frozenset({"he", "she", "they", "him", "her", "them", "it", "i", "we", "you", "xe", "ze"})
#: A phrase opening with one of these already has its determiner ("this is the old lady", not "the the").
_DETERMINERS = frozenset({"the", "a", "an", "my", "your", "our", "their", "his", "her", "this", "that", "some"})
#: One capitalised word with at least one lower-case letter: "Mary", "Mary-Jane", "O'Brien", "McKenzie", "LaToya"
#: (an acronym such as "FTM" is not a name).
_NAME = re.compile(r"^(?=.*[a-z])[A-Z][A-Za-z]*(?:[-'’][A-Z][A-Za-z]*)*$")


def _descriptor_text(item) -> str:
    return item["descriptor"] if isinstance(item, dict) else item


def _nonbinary_terms() -> dict[str, list[str]]:
    """The ``nonbinary`` population, selected from HolisticBias by a fixed rule.

    From buckets ``non_binary_or_gnc`` (group ``nonbinary``) and ``transgender``
    (group ``transgender``) keep, in source order, the descriptors that

    1. are one lower-case token (letters, at most one inner hyphen), so they fit
       templates such as "this is the X" and are found as one word in context;
    2. are not the hyphenated spelling of another kept word (``non-binary`` is
       dropped because ``nonbinary`` is kept: one concept counts once);
    3. are not in :data:`NONBINARY_EXCLUDED` (words whose common sense is not a
       gender identity).
    """
    buckets = json.loads(resolve("holisticbias_descriptors").read_text(encoding="utf-8"))["gender_and_sex"]
    groups = {}
    for group, bucket in (("nonbinary", "non_binary_or_gnc"), ("transgender", "transgender")):
        words = [_descriptor_text(x) for x in buckets[bucket]]
        words = [w for w in words if _TEMPLATE_WORD.match(w) and w not in _NONBINARY_EXCLUDED]
        groups[group] = [w for w in words if "-" not in w or w.replace("-", "") not in words]
    return groups


def occupation_shares() -> pd.DataFrame:
    """Rudinger et al.'s (2018) occupation statistics, one row per noun in the file's order: ``occupation``,
    ``bls_pct_female`` (U.S. Bureau of Labor Statistics, percent of workers who are women), ``bls_year``
    (2015 or 2016), ``bergsma_pct_female`` (Bergsma & Lin's 2006 text-based estimate, kept as published)."""
    table = pd.read_csv(resolve("winogender_occupation_stats"), sep="\t")
    return table[["occupation", "bls_pct_female", "bls_year", "bergsma_pct_female"]]


def _occupation_groups() -> dict[str, list[str]]:
    table = occupation_shares()
    female = table["bls_pct_female"] >= _MAJORITY_PCT
    return {OCCUPATION_GROUPS[0]: table.loc[female, "occupation"].tolist(),
            OCCUPATION_GROUPS[1]: table.loc[~female, "occupation"].tolist()}


def _schuster_groups(key: str, suffix: str) -> dict[str, list[str]]:
    raw = json.loads(resolve(key).read_text(encoding="utf-8"))
    return {g.lower(): raw[f"{g} {suffix}"] for g in ("Female", "Male")}


def _read_user_file(path: Path) -> tuple[dict[str, list[str]], str]:
    try:
        return _parse_user_file(path)
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None


def _parse_user_file(path: Path) -> tuple[dict[str, list[str]], str | None]:
    if path.suffix.lower() == ".json":
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ParameterError(
                f"{path}, line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
        kind = None
        if isinstance(raw, dict) and "groups" in raw:
            kind, raw = raw.get("kind"), raw["groups"]
        if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
            raise ParameterError(f'{path}: expected {{"group": ["word", ...]}} (or {{"kind": ..., "groups": '
                                 f'{{...}}}})')
        return raw, kind
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [h.strip().lower() for h in reader.fieldnames or []]
            if "group" not in header or "word" not in header:
                raise ParameterError(f"{path}, line 1: the header needs columns 'group' and 'word' (found {header})")
            reader.fieldnames = header
            groups: dict[str, list[str]] = {}
            kinds = set()
            for row in reader:
                group = (row["group"] or "").strip()
                if not group:
                    raise ParameterError(f"{path}, line {reader.line_num}, column group: empty group name")
                groups.setdefault(group, []).append(row["word"] or "")
                kinds.add((row.get("kind") or "").strip() or None)
        if len(kinds) > 1:
            raise ParameterError(f"{path}, column kind: one kind per file, found {sorted(map(str, kinds))}")
        return groups, kinds.pop() if kinds else None
    raise ParameterError(f"{path}: population files must be .json or .csv")


def _validate(groups: dict[str, list[str]], where: str) -> dict[str, list[str]]:
    if not groups:
        raise ParameterError(f"{where}: no groups")
    owner: dict[str, str] = {}
    clean = {}
    for group, words in groups.items():
        if not words:
            raise ParameterError(f"{where}: group {group!r} is empty")
        seen = set()
        for i, word in enumerate(words, 1):
            if not isinstance(word, str) or not word.strip():
                raise ParameterError(f"{where}: group {group!r}, word {i} is empty or not a string ({word!r})")
            word = word.strip()
            if word in seen:
                raise ParameterError(f"{where}: group {group!r} lists {word!r} twice")
            if word in owner:
                raise ParameterError(f"{where}: {word!r} is in both group {owner[word]!r} and group {group!r}")
            seen.add(word)
            owner[word] = group
        clean[group] = [w.strip() for w in words]
    return clean


def _load(name_or_path: str | Path) -> tuple[dict[str, list[str]], str]:
    if isinstance(name_or_path, str) and name_or_path in POPULATION_KINDS:
        loaders = {
            "names": lambda: _schuster_groups("schuster_names", "Names"),
            "terms": lambda: _schuster_groups("schuster_terms", "Terms"),
            "nonbinary": _nonbinary_terms,
            "occupations": _occupation_groups,
        }
        return _validate(loaders[name_or_path](), name_or_path), POPULATION_KINDS[name_or_path]
    try:
        path = resolve_input(name_or_path, "file")
    except ParameterError as exc:
        raise ParameterError(f"unknown population {str(name_or_path)!r}: not a built-in one ({', '.join(_BUILTIN)}), "
                             f"and as a {exc}") from None
    groups, kind = _read_user_file(path)
    if kind is not None and kind not in KINDS:
        raise ParameterError(f"{path}: kind {kind!r} is not one of {KINDS}")
    groups = _validate(groups, str(path))
    if kind is None:
        kind = _infer_kind(groups, str(path))
        # the check, the run's own check and the embedding each read the file: the reader is told once per version
        said = (str(path.resolve()), path.stat().st_mtime_ns, kind)
        if said not in _KIND_SAID:
            _KIND_SAID.add(said)
            warnings.warn(f"{path}: the file does not state its kind; {_KIND_READING[kind]} (state it with a kind "
                          f'column, or {{"kind": "name" or "noun", "groups": {{...}}}} in JSON)', stacklevel=3)
    return groups, kind


#: The population files whose inferred kind has been said in this process: ``(path, mtime, kind)``.
_KIND_SAID: set[tuple[str, int, str]] = set()


_KIND_READING = {
    "name": "every word is one capitalised word, so they are read as names, without an article (\"this is Mary\")",
    "noun": "no word is a capitalised single word, so they are read as nouns, after \"the\" (\"this is the woman\")",
}


def _examples(words: list[str]) -> str:
    return ", ".join(words[:4]) + (", ..." if len(words) > 4 else "")


def _infer_kind(groups: dict[str, list[str]], where: str = "population") -> str:
    """``"name"`` when every word is one capitalised word (first names), ``"noun"`` when none is. A
    :class:`ParameterError` refuses the ambiguous lists: capitalised single words beside other words, and lower-case
    words at least half of which are first names of the built-in ``names`` ("mary": "this is the mary")."""
    words = [w for ws in groups.values() for w in ws]
    named = [w for w in words if _NAME.match(w)]
    if words and len(named) == len(words):
        return "name"
    if named:
        others = [w for w in words if not _NAME.match(w)]
        raise ParameterError(f"{where}: the kind is not stated and cannot be inferred: {len(named)} word(s) "
                             "look like "
                             f"names ({_examples(named)}) and {len(others)} do not ({_examples(others)}); state "
                             "kind name (no article) or noun (after \"the\")")
    first_names = {w.lower() for ws in _schuster_groups("schuster_names", "Names").values() for w in ws}
    lowered = [w for w in words if w.lower() in first_names]
    if 2 * len(lowered) >= len(words):
        raise ParameterError(f"{where}: the kind is not stated and {len(lowered)} of {len(words)} words are first "
                             f"names written in lower case ({_examples(lowered)}); as nouns they would read \"this is "
                             f"the {lowered[0]}\". Capitalise them, or state kind name or noun")
    return "noun"


def load_populations(name_or_path: str | Path) -> dict[str, list[str]]:
    """``{group: [words]}`` for a built-in population or a user file (module docstring).

    Raises :class:`ParameterError` for an unknown name, an empty group, a word
    listed twice in a group, or a word in two groups.
    """
    return _load(name_or_path)[0]


def population_kind(name_or_path: str | Path) -> str:
    """``"name"`` (no article in templates) or ``"noun"`` (takes "the"); see the module docstring."""
    return _load(name_or_path)[1]


def takes_article(word: str, kind: str) -> bool:
    """Whether templates put "the" before ``word`` ("this is the woman", not "this is the she")."""
    if kind not in KINDS:
        raise ParameterError(f"kind {kind!r} is not one of {KINDS}")
    first = word.split()[0].lower() if word.split() else ""
    return kind == "noun" and word.lower() not in _PRONOUNS and first not in _DETERMINERS
