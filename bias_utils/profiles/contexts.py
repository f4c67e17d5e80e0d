"""Context sentences for every dictionary sense, from one of the registered sources (four built in).

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

Sources (Schuster et al. 2024, Sec. 3.2). Each is a builder registered with
:func:`context_source` (``@context_source("name")``); :func:`source_names`
lists them in registration order, which is the order of reports:

* ``dictionary``: the contexts stored with the dictionary (the seed
  dictionary's WordNet/Oxford/Cambridge/book examples, the full dictionary's
  WordNet examples), first ``n_contexts`` as in the original code; rows
  without any (e.g. user terms) get WordNet examples for their synset, or for
  all noun/adjective senses of the term.
* ``generated`` (the paper's main setting, and the default of the Study 1
  pipeline): with ``model=None`` the published Llama-3-8B-Instruct contexts
  (keyed by term + synset), used as the authors' ``projection.py`` uses them:
  the first ``n_contexts`` per sense, unfiltered. A sense without published
  contexts (every user term) gets new ones from :data:`DEFAULT_GENERATOR`, the
  extra terms' generator, with the same prompt, filters, cache and settings
  (``fill_generator``; :func:`generation_report` counts them per sense). With a model, new contexts
  are sampled from it with :data:`GENERATION_INSTRUCTION` and filtered by
  ``context_filters.usable_contexts`` (every drop is a row of ``dropped`` with
  its reason). ``gender_filter=True`` applies
  the gender check to the published contexts (an option, not the paper's
  procedure).
* ``corpus``: natural sentences containing the term as a word, sampled with
  ``seed``. Default: the BOLD Wikipedia sentences (:data:`DEFAULT_CORPORA`);
  any text file with one sentence per line works.
* ``none``: the term alone.

The full dictionary's extra terms (Table 2) get their generated contexts from
a tracked file (``extra_contexts``).

One concept over 600 lines: the registry of context sources and what each gives per sense (built-in sources,
the filling of unpublished senses by the default generator, the report of what each source produced).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..core import data, precision
from ..core.errors import DataError, ParameterError, check_positive_int, check_seed, check_word_list
from ..core.paths import resolve_input
from ..core.registry import Registry
from ..core.wordnet import wordnet
from ..models.builtin_models import BUILTIN_MODELS, is_installed
from .context_filters import (
    FILTER_VERSION,
    WORD,
    contains_term,
    filter_generated,
    gender_markers,
    known_names,
    term_pattern,
    term_position,
    usable_contexts,
)
from .dictionaries import ensure_sense_ids, wordnet_contexts

__all__ = [
    "build_contexts", "source_names", "context_report", "describe_generation", "describe_report",
    "generation_report",
]

_TABLE_COLUMNS = ["sense_id", "dimension", "term", "direction", "context", "context_source", "context_index", "source"]
SKIP_COLUMNS = ["sense_id", "dimension", "term", "direction", "source", "reason"]
_DROP_COLUMNS = ["sense_id", "term", "context", "context_source", "reason"]
#: :func:`generation_report`: the contexts generated now for a sense and those kept (after the filters, at most
#: ``n_contexts``); ``generator`` is the model id, or :data:`GIVEN` for a sense whose contexts the dictionary gives
#: (``n_generated``: the contexts given, ``n_kept``: those used).
_GENERATED_COLUMNS = ["sense_id", "dimension", "term", "direction", "generator", "n_generated", "n_kept"]
_GIVEN = "given in the dictionary"

#: BOLD Wikipedia sentences, tried in this order; a file that fails verification is refused and noted.
_DEFAULT_CORPORA = ("bold_profession_wiki", "bold_gender_wiki")
#: What each BOLD Wikipedia file holds, for a sentence that names the corpus (a reason says words, not data keys).
_BOLD_TOPICS = {"bold_profession_wiki": "professions", "bold_gender_wiki": "gender"}
_PUBLISHED_GENERATED_KEY = "schuster_generated_contexts"

#: The paper describes (Sec. 3.2) but does not publish its prompt: gender-neutral contexts, no names, no
#: gender-specific pronouns, with the WordNet definition when the sense is known. This wording follows that
#: description; ``{sense}`` is filled with :data:`SENSE_CLAUSE` or left empty.
GENERATION_INSTRUCTION = (
    'Write one sentence that uses the word "{term}"{sense}. Do not use any names and do not use gender-specific '
    "pronouns such as he, she, him, her, his or hers; refer to people in a gender-neutral way. "
    "Reply with the sentence only."
)
_SENSE_CLAUSE = ' in the sense of "{definition}"'
#: Sampling settings for newly generated contexts (``build_contexts`` with a model, and the extra terms' file).
# No top-k: the paper says nothing of one, and the extra terms' data file was generated without it.
GENERATION_SETTINGS = {"n_samples": 5, "max_new_tokens": 48, "temperature": 0.8, "top_p": 0.95, "top_k": None}
#: The generator of the senses without published contexts: the one the extra terms' file was made with
#: (chosen by ``python -m bias_utils.profiles.extra_contexts compare-models``).
DEFAULT_GENERATOR = "qwen2.5-coder-0.5b-instruct"


@dataclass
class ContextSet:
    table: pd.DataFrame
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SKIP_COLUMNS))
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_DROP_COLUMNS))
    notes: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["item", "status", "detail"]))
    generated: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_GENERATED_COLUMNS))


@dataclass(frozen=True)
class _SourceRequest:
    """What :func:`build_contexts` passes to a source's builder (each builder reads the fields it needs)."""

    n_contexts: int
    seed: int
    model: Any = None
    corpus: Any = None
    generation: dict | None = None
    max_words: int | None = 40
    gender_filter: bool | None = None
    fill_generator: Any = DEFAULT_GENERATOR
    #: ``{term: {"contexts", "n_generated", "generator"}}``: contexts the fill generator already made with these
    #: settings and seed for a sense without a definition (the project's files, ``extra_contexts``), used as made.
    known: Any = None


#: ``{source name: builder(dictionary, request) -> ContextSet}``, in registration order (the order of reports).
_SOURCES: Registry[Callable[[pd.DataFrame, _SourceRequest], ContextSet]] = Registry("context source", ParameterError)


def _context_source(name: str):
    """Register the decorated ``builder(dictionary, request) -> ContextSet`` as context source ``name``.

    ``dictionary`` has passed :func:`prepare_dictionary`; ``request`` is a
    :class:`SourceRequest`. A second builder under a taken name is an error
    (the same function defined again, as when a notebook cell reruns, replaces it).
    """
    return _SOURCES.register(name)


def source_names() -> tuple[str, ...]:
    """The registered context sources, in registration order (``dictionary, generated, corpus, none`` built in)."""
    return _SOURCES.names()


def as_list(value) -> list[str]:
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
                raise ParameterError(f"cannot parse the contexts list {text[:80]!r}") from None
        return [text]
    return [str(x) for x in value]


def prepare_dictionary(dictionary: pd.DataFrame) -> pd.DataFrame:
    """Check the columns and give every row a unique ``sense_id`` (term + synset when known)."""
    missing = {"dimension", "term", "direction"} - set(dictionary.columns)
    if missing:
        raise ParameterError(f"dictionary lacks column(s) {sorted(missing)}; it has {list(dictionary.columns)}")
    # Rows appended by hand in a notebook cell may lack a sense_id: they get one (the rule of dictionaries.py),
    # and a row without a term or a high/low direction is an error naming the row.
    d = ensure_sense_ids(dictionary.reset_index(drop=True).copy())
    dup = d["sense_id"][d["sense_id"].duplicated()]
    if len(dup):
        raise ParameterError(f"duplicate sense_id(s) in the dictionary: {sorted(set(dup))[:5]}")
    return d


def context_rows(sense: pd.Series, contexts: list[str], origin, source: str) -> list[dict]:
    origins = origin if isinstance(origin, list) else [origin] * len(contexts)
    return [{"sense_id": sense["sense_id"], "dimension": sense["dimension"], "term": sense["term"],
             "direction": sense["direction"], "context": c, "context_source": o, "context_index": i, "source": source}
            for i, (c, o) in enumerate(zip(contexts, origins))]


def skip(sense: pd.Series, source: str, reason: str) -> dict:
    return {"sense_id": sense["sense_id"], "dimension": sense["dimension"], "term": sense["term"],
            "direction": sense["direction"], "source": source, "reason": reason}


def finish(rows, skipped, dropped=(), notes=()) -> ContextSet:
    return ContextSet(pd.DataFrame(rows, columns=_TABLE_COLUMNS), pd.DataFrame(skipped, columns=SKIP_COLUMNS),
                      pd.DataFrame(list(dropped), columns=_DROP_COLUMNS),
                      pd.DataFrame(list(notes), columns=["item", "status", "detail"]))


# ---------------------------------------------------------------- dictionary / none

def _synset_of(sense: pd.Series):
    synset = sense.get("synset")
    return synset if isinstance(synset, str) and synset else None


@_context_source("dictionary")
def _dictionary_contexts(d: pd.DataFrame, request: _SourceRequest) -> ContextSet:
    n = request.n_contexts
    rows, skipped = [], []
    for _, sense in d.iterrows():
        own = as_list(sense["contexts"]) if "contexts" in d.columns else []
        own = [c for c in own if contains_term(c, sense["term"])]
        origin = (sense["context_source"] if "context_source" in d.columns
                  and isinstance(sense["context_source"], str) else "dictionary")
        if not own:
            own = [c for c in wordnet_contexts(sense["term"], _synset_of(sense)) if contains_term(c, sense["term"])]
            origin = "WordNet"
        if own:
            rows += context_rows(sense, own[:n], origin, "dictionary")
        else:
            skipped.append(skip(sense, "dictionary", "no dictionary or WordNet example contains the term"))
    return finish(rows, skipped)


# ---------------------------------------------------------------- generated

def _published_generated_contexts() -> dict[str, list[str]]:
    """The published Llama-3-8B-Instruct contexts, keyed ``"term - synset"``."""
    out = {}
    with open(data.resolve(_PUBLISHED_GENERATED_KEY), encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                out[f"{entry['term']} - {entry['synset']}"] = list(entry["examples"])
            except (json.JSONDecodeError, KeyError) as exc:
                raise ParameterError(f"{_PUBLISHED_GENERATED_KEY} line {i} is malformed: {exc}") from None
    return out


def generation_prompt(term: str, definition=None) -> str:
    sense = _SENSE_CLAUSE.format(definition=definition) if isinstance(definition, str) and definition else ""
    return GENERATION_INSTRUCTION.format(term=term, sense=sense)


def _definition(sense: pd.Series):
    d = sense.get("definition")
    if isinstance(d, str) and d.startswith("["):
        d = (as_list(d) or [None])[0]
    elif not isinstance(d, str) and d is not None and not (isinstance(d, float) and np.isnan(d)):
        d = (list(d) or [None])[0]
    if isinstance(d, str) and d:
        return d
    synset = _synset_of(sense)
    if synset:
        return wordnet().synset(synset).definition()
    return None


def _unpublished_senses(dictionary: pd.DataFrame) -> pd.DataFrame:
    """The senses of ``dictionary`` without published generated contexts (term + synset) and without contexts of
    their own that contain the term: those the ``generated`` source has to generate (none in the seed dictionary;
    every row of a user dictionary that gives no sentences)."""
    d = prepare_dictionary(dictionary)
    published = _published_generated_contexts()
    own = [any(contains_term(c, s["term"]) for c in as_list(s["contexts"])) if "contexts" in d.columns else False
           for _, s in d.iterrows()]
    return d[[f"{t} - {_synset_of(s)}" not in published and not o
              for t, (_, s), o in zip(d["term"], d.iterrows(), own)]]


def _require_generator(dictionary: pd.DataFrame, generator=DEFAULT_GENERATOR) -> pd.DataFrame:
    """:func:`unpublished_senses`, checked before any model loads: when there are some and ``generator`` is a
    built-in model that is not installed, a :class:`ParameterError` names the two ways out."""
    todo = _unpublished_senses(dictionary)
    if len(todo) and isinstance(generator, str) and generator in BUILTIN_MODELS and not is_installed(generator):
        terms = ", ".join(todo["term"].head(5)) + (", ..." if len(todo) > 5 else "")
        raise ParameterError(
            f"context_source='generated': {len(todo)} sense(s) have no published generated contexts ({terms}), and "
            f"their generator {generator!r} is not installed. Either install it: python -m bias_utils.models install "
            f"{generator}, or use the dictionary's contexts (WordNet examples for terms without any): "
            'context_source="dictionary"')
    return todo


def generate_usable(model, senses: pd.DataFrame, prompts: list[str], prompt_ids: list, *, seed: int, settings: dict,
                    gender_filter: bool = True, progress: bool = True) -> list[tuple[list[str], int, list[dict]]]:
    """New contexts for ``senses`` (rows with ``sense_id, dimension, term``), one prompt per row.

    ``settings["n_samples"]`` completions per distinct prompt id from ``generation.generate``: seeded, with a
    progress bar, and cached batch by batch, so a rerun after a crash generates only what is missing.
    Each sense's completions go through ``context_filters.usable_contexts``. Returns per sense
    ``(usable sentences, number of completions, dropped rows)``.
    """
    from ..models.generation import generate  # deferred: torch, only needed to generate new contexts

    unique = dict(zip(prompt_ids, prompts))
    out = generate(model, list(unique.values()), prompt_ids=list(unique), seed=seed, chat=True, progress=progress,
                   **settings)
    by_id = out.groupby("prompt_id", sort=False)["completion"].apply(list).to_dict()
    names, results = known_names(), []
    for sense, pid in zip(senses.to_dict("records"), prompt_ids):
        dropped: list[dict] = []
        kept = usable_contexts(sense, by_id.get(pid, []), model.model_id, names, dropped,
                               gender_filter=gender_filter)
        results.append((kept, len(by_id.get(pid, [])), dropped))
    return results


def _generate_senses(d: pd.DataFrame, model, request: _SourceRequest, prompt_ids: list) -> ContextSet:
    """The ``generated`` source's new contexts for the senses of ``d``, with the per-sense counts and the
    settings record (a row of ``notes``)."""
    settings = {**GENERATION_SETTINGS, "n_samples": request.n_contexts, **(request.generation or {})}
    prompts = [generation_prompt(s["term"], _definition(s)) for _, s in d.iterrows()]
    print(f"contexts: {len(d)} sense(s) without published contexts ({', '.join(d['term'].head(6))}"
          f"{', ...' if len(d) > 6 else ''}) get {settings['n_samples']} generated each from {model.model_id}, "
          f"{len(set(prompt_ids))} prompt(s) of at most {settings['max_new_tokens']} new tokens")
    results = generate_usable(model, d, prompts, prompt_ids, seed=request.seed, settings=settings,
                              gender_filter=request.gender_filter is not False)
    rows, skipped, dropped, counts = [], [], [], []
    for (_, sense), (kept, n_generated, drops) in zip(d.iterrows(), results):
        dropped += drops
        counts.append({**{c: sense[c] for c in _GENERATED_COLUMNS[:4]}, "generator": model.model_id,
                       "n_generated": n_generated, "n_kept": len(kept[:request.n_contexts])})
        if kept:
            rows += context_rows(sense, kept[:request.n_contexts], model.model_id, "generated")
        else:
            skipped.append(skip(sense, "generated", f"none of {n_generated} generated contexts was usable "
                                 "(see dropped)"))
    record = {"model_id": model.model_id, "seed": request.seed, "generation": settings, "chat": True,
              "prompt_template": GENERATION_INSTRUCTION, "sense_clause": _SENSE_CLAUSE,
              "filter_version": FILTER_VERSION}
    out = finish(rows, skipped, dropped, [{"item": "generator", "status": "used",
                                            "detail": json.dumps(record, sort_keys=True)}])
    out.generated = pd.DataFrame(counts, columns=_GENERATED_COLUMNS)
    return out


def _fill_id(term: str, definition) -> str:
    # A sense without a definition has the extra terms' prompt and, keyed by its term as they are, reuses
    # their cached completions.
    return term if not definition else f"{term} | {definition}"


@_context_source("generated")
def _generated_contexts(d: pd.DataFrame, request: _SourceRequest) -> ContextSet:
    if request.model is not None:
        from ..models.loading import resolve_model  # deferred: torch, only needed to generate new contexts

        model = resolve_model(request.model, need="generate")
        prompts = [generation_prompt(s["term"], _definition(s)) for _, s in d.iterrows()]
        index = {p: i for i, p in enumerate(dict.fromkeys(prompts))}
        return _generate_senses(d, model, request, [index[p] for p in prompts])
    published = _published_generated_contexts()
    origin = "Meta-Llama-3-8B-Instruct (published)"
    names = known_names()
    rows, skipped, dropped, missing = [], [], [], []
    for i, sense in d.iterrows():
        found = published.get(f"{sense['term']} - {_synset_of(sense)}")
        if found is None:
            missing.append(i)
            continue
        # As the authors' code: the first n, whatever they contain (a context without the term
        # becomes a recorded skip when it is embedded).
        kept = filter_generated(sense, found, origin, names, dropped) if request.gender_filter else list(found)
        if kept:
            rows += context_rows(sense, kept[:request.n_contexts], origin, "generated")
        else:
            skipped.append(skip(sense, "generated", "every published context was dropped by the gender filter"))
    # A user's own sentences for a sense without published contexts are its contexts, as given (none generated).
    own, notes, counts = [], [], []
    for i in missing:
        sense = d.loc[i]
        given = as_list(sense["contexts"]) if "contexts" in d.columns else []
        usable = [c for c in given if contains_term(c, sense["term"])]
        dropped += [{"sense_id": sense["sense_id"], "term": sense["term"], "context": c, "context_source": "user",
                     "reason": "the dictionary's own context does not contain the term"}
                    for c in given if c not in usable]
        if usable:
            own.append(i)
            rows += context_rows(sense, usable[:request.n_contexts], _own_origin(sense), "generated")
            counts.append({**{c: sense[c] for c in _GENERATED_COLUMNS[:4]}, "generator": _GIVEN,
                           "n_generated": len(given), "n_kept": len(usable[:request.n_contexts])})
    if own:
        notes.append({"item": "user contexts", "status": "used",
                      "detail": f"{len(own)} sense(s) without published contexts have their own in the dictionary, "
                                f"used as given and not generated: {', '.join(d.loc[own, 'term'].head(8))}"})
        missing = [i for i in missing if i not in own]
    made = [i for i in missing if d.loc[i, "term"] in (request.known or {}) and _definition(d.loc[i]) is None]
    for i in made:
        sense, entry = d.loc[i], request.known[d.loc[i, "term"]]
        kept = list(entry["contexts"])[:request.n_contexts]
        counts.append({**{c: sense[c] for c in _GENERATED_COLUMNS[:4]}, "generator": entry["generator"],
                       "n_generated": entry["n_generated"], "n_kept": len(kept)})
        if kept:
            rows += context_rows(sense, kept, entry["generator"], "generated")
        else:
            skipped.append(skip(sense, "generated", f"none of {entry['n_generated']} generated contexts was usable "
                                 "(the project's generated-contexts file)"))
    if made:
        notes.append({"item": "project generated contexts", "status": "used",
                      "detail": f"{len(made)} sense(s) without a definition have contexts in the project's generated-"
                                "contexts files, made by the same generator with the same prompt, settings and seed: "
                                f"used as made, not generated again ({', '.join(d.loc[made, 'term'].head(8))})"})
        missing = [i for i in missing if i not in made]
    if missing and request.fill_generator is None:
        skipped += [skip(sense, "generated", "no published generated context for this term + synset; pass model= "
                          "or fill_generator= to generate new ones") for _, sense in d.loc[missing].iterrows()]
    order = {sid: k for k, sid in enumerate(d["sense_id"])}
    rows.sort(key=lambda r: order[r["sense_id"]])  # the dictionary's order, wherever a sense's contexts came from
    out = finish(rows, skipped, dropped, notes)
    out.generated = pd.DataFrame(counts, columns=_GENERATED_COLUMNS)
    if not missing or request.fill_generator is None:
        return out
    _require_generator(d.loc[missing], request.fill_generator)
    from ..models.loading import resolve_model  # deferred: torch, only needed to generate new contexts

    todo = d.loc[missing]
    new = _generate_senses(todo, resolve_model(request.fill_generator, need="generate"), request,
                           [_fill_id(s["term"], _definition(s)) for _, s in todo.iterrows()])
    table = pd.concat([out.table, new.table], ignore_index=True)
    table = table.iloc[np.argsort(table["sense_id"].map(order).to_numpy(), kind="stable")].reset_index(drop=True)
    new.table, new.skipped = table, pd.concat([out.skipped, new.skipped], ignore_index=True)
    new.dropped = pd.concat([out.dropped, new.dropped], ignore_index=True)
    new.notes = pd.concat([out.notes, new.notes], ignore_index=True)
    new.generated = pd.concat([out.generated, new.generated], ignore_index=True) if len(out.generated) \
        else new.generated
    return new


def _own_origin(sense: pd.Series) -> str:
    origin = sense.get("context_source")
    return origin if isinstance(origin, str) and origin else "user (the dictionary's own)"


def generation_report(contexts: ContextSet) -> pd.DataFrame:
    """Per sense whose contexts were generated now: how many were generated and how many kept
    (:data:`GENERATED_COLUMNS`; empty when every sense had published contexts or another source)."""
    return contexts.generated.reset_index(drop=True)


def describe_generation(report: pd.DataFrame) -> str:
    """The chapter's sentence on :func:`generation_report`: how many senses got new contexts, from which
    generator, and how many of the generated contexts the filters kept."""
    if report.empty:
        return "Every sense had published contexts (or came from another source): none were generated."
    given = report[report["generator"] == _GIVEN]
    made = report[report["generator"] != _GIVEN]
    parts = []
    if len(given):
        parts.append(f"{len(given)} of them use the {int(given['n_kept'].sum())} contexts the dictionary gives them "
                     f"that contain the term (of {int(given['n_generated'].sum())} given)")
    if len(made):
        generators = ", ".join(sorted(made["generator"].astype(str).unique()))
        parts.append(f"for {len(made)}, {generators} generated {int(made['n_generated'].sum())} contexts, of which "
                     f"the filters kept {int(made['n_kept'].sum())}")
    return (f"{len(report)} senses had no published contexts; " + "; ".join(parts)
            + " (per sense below; senses with none kept are dropped).")


# ---------------------------------------------------------------- corpus

def bold_sentences(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        nested = json.load(f)
    return [s for pages in nested.values() for sents in pages.values() for s in sents if isinstance(s, str)]


def _load_corpus(corpus=None) -> tuple[list[str], list[dict], list[str]]:
    """Sentences of a corpus, notes on the files used/refused (each named in words: "BOLD's Wikipedia sentences on
    professions", a file's name) and the items used.

    ``corpus``: ``None`` (the BOLD Wikipedia files of :data:`DEFAULT_CORPORA`;
    one that fails checksum verification is refused and noted), a manifest key,
    a path to a text file with one sentence per line, or a list of those.
    """
    items = (list(_DEFAULT_CORPORA) if corpus is None
             else [corpus] if isinstance(corpus, (str, Path)) else list(corpus))
    sentences, notes, used = [], [], []
    for item in items:
        path = Path(item)
        if isinstance(item, str) and item in data.manifest():
            try:
                resolved = data.resolve(item)
            except DataError as exc:
                notes.append({"item": _corpus_name([item]), "status": "refused",
                              "detail": " ".join(str(exc).split())})
                continue
            found = bold_sentences(resolved) if resolved.suffix == ".json" else _read_lines(resolved)
        else:
            try:  # relative to the working folder, then the repository root (Jupyter runs from notebooks/)
                path = resolve_input(path, "corpus")
            except ParameterError as exc:
                raise ParameterError(f"{exc} (and it is not a data key)") from None
            found = _read_lines(path)
        notes.append({"item": _corpus_name([str(item)]), "status": "used", "detail": f"{len(found):,} sentences"})
        used.append(str(item))
        sentences += found
    if not sentences:
        raise ParameterError("no usable corpus sentence: " + "; ".join(f"{n['item']}: {n['detail']}" for n in notes))
    return sentences, notes, used


def _corpus_name(items: list[str]) -> str:
    """The corpus in words: "BOLD's Wikipedia sentences on professions and gender" for the BOLD files, a file's
    name for a file of the user's."""
    topics = [_BOLD_TOPICS[i] for i in items if i in _BOLD_TOPICS]
    parts = ([f"BOLD's Wikipedia sentences on {' and '.join(topics)}"] if topics else []) + [
        Path(i).name for i in items if i not in _BOLD_TOPICS]
    return " and ".join(parts)


def _read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _crop(sentence: str, term: str, max_words: int | None) -> str:
    """Keep at most ``max_words`` words centred on the first occurrence of the term."""
    words = sentence.split()
    if max_words is None or len(words) <= max_words:
        return sentence
    m = term_pattern(term).search(sentence)
    at = len(sentence[: m.start()].split()) if m else 0
    start = max(0, min(at - max_words // 2, len(words) - max_words))
    return " ".join(words[start: start + max_words])


@_context_source("corpus")
def _corpus_contexts(d: pd.DataFrame, request: _SourceRequest) -> ContextSet:
    n, max_words = request.n_contexts, request.max_words
    sentences, notes, used = _load_corpus(request.corpus)
    index: dict[str, list[int]] = {}
    for i, s in enumerate(sentences):
        for w in set(t.lower() for t in WORD.findall(s)):
            index.setdefault(w, []).append(i)
    origin, corpus_name = " + ".join(used), _corpus_name(used)
    rng = np.random.default_rng(request.seed)
    rows, skipped = [], []
    for _, sense in d.iterrows():
        term = sense["term"]
        first = WORD.findall(term.lower())
        candidates = index.get(first[0], []) if first else []
        hits = [i for i in candidates if contains_term(sentences[i], term)]
        if not hits:
            skipped.append(skip(sense, "corpus", f"the term does not occur in the corpus ({corpus_name})"))
            continue
        pick = rng.choice(hits, size=min(n, len(hits)), replace=False)
        rows += context_rows(sense, [_crop(sentences[i], term, max_words) for i in pick], origin, "corpus")
    return finish(rows, skipped, notes=notes)


@_context_source("none")
def _no_contexts(d: pd.DataFrame, request: _SourceRequest) -> ContextSet:
    rows = [r for _, s in d.iterrows() for r in context_rows(s, [s["term"]], "term only", "none")]
    return finish(rows, [])


# ---------------------------------------------------------------- entry points

def check_source_names(sources, name: str = "sources") -> tuple[str, ...]:
    """``None`` (every registered context source, :func:`source_names`) or a non-empty list of them; a
    :class:`ParameterError` names ``name``."""
    if sources is None:
        return source_names()
    sources = check_word_list(sources, name, empty="name one context source or more (None: every one)")
    unknown = [s for s in sources if s not in _SOURCES]
    if unknown:
        raise ParameterError(f"{name} must be context sources among {', '.join(source_names())}, got {unknown[0]!r}")
    return tuple(sources)


def check_request(dictionary: pd.DataFrame, source: str = "generated", n_contexts=5, seed=0, *, model=None,
                   fill_generator="default", names: tuple[str, str] = ("source", "model")) -> pd.DataFrame:
    """:func:`build_contexts`' parameters, checked before any model loads, and the prepared dictionary
    (:func:`prepare_dictionary`). A :class:`ParameterError` names the parameter (``names``: what the caller calls
    the source and the generating model, e.g. ``("context_source", "generator")``): an unknown source, a count or
    seed out of range, a dictionary without its columns, and with ``"generated"`` a generator that cannot write
    text (read from its config) or a built-in one that is not installed (:func:`require_generator`;
    ``fill_generator="default"``: :data:`DEFAULT_GENERATOR`)."""
    if source not in _SOURCES:
        raise ParameterError(f"{names[0]} must be one of {', '.join(source_names())}, got {source!r}")
    check_positive_int(n_contexts, "n_contexts")
    check_seed(seed)
    try:
        d = prepare_dictionary(dictionary)
    except ParameterError as exc:
        raise ParameterError(f"dictionary: {exc}") from None
    if source == "generated":
        fill_generator = DEFAULT_GENERATOR if fill_generator == "default" else fill_generator
        generator = model if model is not None else fill_generator
        todo = _require_generator(d, generator) if generator is not None else ()
        if model is not None or len(todo):
            from ..models.loading import check_model  # deferred: torch, needed only where contexts are generated

            check_model(generator, names[1] if model is not None else "generator", need="generate",
                        what="generating contexts")
    return d


def build_contexts(dictionary: pd.DataFrame, source: str = "generated", n_contexts: int = 5, seed: int = 0,
                   model=None, corpus=None, *, generation: dict | None = None,
                   max_words: int | None = 40, gender_filter: bool | None = None,
                   fill_generator=DEFAULT_GENERATOR, known=None) -> ContextSet:
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
    ``fill_generator`` (``generated`` without ``model``): the model that generates
    contexts for senses without published ones (:func:`unpublished_senses`), the
    same way as ``model``; ``None`` leaves them skipped. ``known``: contexts
    that generator already made for terms without a definition, with these
    settings and seed (``extra_contexts.known_generated_contexts``: the
    project's generated-contexts files), used as made instead of generating
    them again. Every parameter is checked first (:func:`check_request`),
    before any model loads.
    """
    d = check_request(dictionary, source, n_contexts, seed, model=model, fill_generator=fill_generator)
    request = _SourceRequest(n_contexts, seed, model, corpus, generation, max_words, gender_filter, fill_generator,
                            known)
    return _SOURCES[source](d, request)


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
    names = known_names()
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


def describe_report(report: pd.DataFrame, source: str) -> str:
    """Chapter 02's first sentence, from :func:`context_report`'s table: how many senses the selected ``source``
    covers, with how many contexts each, how many it leaves without one, and the share of its contexts that carry a
    gendered word, pronoun or name; then the other sources' coverage in a clause. "" without the source's row."""
    rows = report.set_index("source") if len(report) else report
    if source not in rows.index:
        return ""
    r = rows.loc[source]
    total = int(r["n_senses"]) + int(r["senses_without"])
    others = "; ".join(f"{name} {int(o['n_senses'])} of {int(o['n_senses']) + int(o['senses_without'])}"
                       for name, o in rows.drop(index=source).iterrows())
    return (f"The {source} contexts (this run's) cover {int(r['n_senses'])} of {total} senses, "
            f"{precision.number_text(r['contexts_per_sense'])} contexts per covered sense, and leave "
            f"{int(r['senses_without'])} without one{' (listed below)' if int(r['senses_without']) else ''}; "
            f"{precision.count_text(r['share_gendered'] * r['n_contexts'])} of its "
            f"{precision.count_text(r['n_contexts'])} contexts carry a gendered word, pronoun or name."
            + (f" Senses covered by the other sources: {others}." if others else ""))
