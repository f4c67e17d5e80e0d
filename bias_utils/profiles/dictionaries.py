"""Stereotype-content dictionaries: the Schuster et al. seed, the Nicolas et al. full
dictionary's extra terms, and user dictionaries.

Every loader returns one row per *sense* (a term in one WordNet sense on one
dimension) with these columns:

``dimension``
    lower-case dimension name; the built-in ones are :data:`DIMENSIONS`.
``term``
    the word as it appears in its contexts (lower case for the built-ins).
``direction``
    ``high`` or ``low``. Politics high = traditional, low = progressive;
    religion high = religious, low = non-religious.
``synset``
    nltk WordNet 3.0 synset name (``friendly.s.02``); ``""`` when a user
    dictionary gives none. The full-dictionary terms have ``synsets`` (a list)
    instead, because their sense is not known.
``definition``
    the WordNet gloss (a list aligned with ``synsets`` for full-dictionary terms).
``contexts``
    ``list[str]`` of sentences (surrounding whitespace stripped); WordNet-derived
    ones contain ``term`` as a space-separated token; may be empty for user
    dictionaries (Study 1 then builds contexts).
``context_source``
    where the contexts come from (``WordNet``, ``Oxford Learner's Dictionary``,
    ``user``...; ``""`` when there are none).
``sense_id``
    ``"term|synset|dimension"``: stable key of a row (seed and user
    dictionaries), used to join embeddings and results back to senses.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import nltk
import pandas as pd
from tqdm.auto import tqdm

from ..core import paths
from ..core.cache import atomic_write_bytes, sha256_file, stable_hash
from ..core.data import entry, resolve
from ..core.errors import ParameterError, check_word_list
from ..core.wordnet import wordnet

__all__ = [
    "PUBLISHED_FULL_COUNTS", "PUBLISHED_SEED_COUNTS", "add_terms", "context_sources", "describe_counts", "limit_terms",
    "load_dictionary", "load_full_dictionary_terms", "load_seed_dictionary", "pole_counts",
]

DIMENSIONS = ("sociability", "morality", "ability", "agency", "status", "politics", "religion")
#: Composite dimensions pool the senses of their components (Schuster et al.).
COMPOSITES = {"warmth": ("sociability", "morality"), "competence": ("ability", "agency")}
DIRECTIONS = ("high", "low")

_REQUIRED_COLUMNS = ("dimension", "term", "direction")
#: Fewest terms on a pole of a dimension a user adds (the seed dictionary has at least 10).
MIN_POLE_SIZE = 3
_OPTIONAL_COLUMNS = ("synset", "definition", "contexts", "context_source")
_SEED_COLUMNS = ("dimension", "term", "direction", "synset", "definition", "contexts", "context_source", "sense_id")
_FULL_COLUMNS = ("dimension", "term", "direction", "synsets", "definition", "contexts", "context_source")

#: Table 1 of Schuster et al. (2024): seed senses per (dimension, direction).
PUBLISHED_SEED_COUNTS = {
    ("sociability", "high"): 43, ("sociability", "low"): 42,
    ("morality", "high"): 51, ("morality", "low"): 69,
    ("ability", "high"): 40, ("ability", "low"): 39,
    ("agency", "high"): 42, ("agency", "low"): 39,
    ("status", "high"): 21, ("status", "low"): 13,
    ("politics", "high"): 12, ("politics", "low"): 16,
    ("religion", "high"): 18, ("religion", "low"): 10,
}
#: Table 1 of Schuster et al. (2024): additional full-dictionary terms (total 2,567).
PUBLISHED_FULL_COUNTS = {
    ("sociability", "high"): 199, ("sociability", "low"): 162,
    ("morality", "high"): 205, ("morality", "low"): 635,
    ("ability", "high"): 302, ("ability", "low"): 160,
    ("agency", "high"): 256, ("agency", "low"): 113,
    ("status", "high"): 187, ("status", "low"): 117,
    ("politics", "high"): 34, ("politics", "low"): 45,
    ("religion", "high"): 146, ("religion", "low"): 6,
}

# Bump when the full-dictionary derivation changes: it is part of the cache key.
_FULL_CODE_VERSION = 1
# The seed CSV of Schuster et al. names some columns differently.
_SEED_RENAME = {"dir": "direction", "examples": "contexts", "example_source": "context_source"}


def _sense_key(term: str, synset, dimension: str) -> str:
    """The ``sense_id`` of a row: ``"term|synset|dimension"`` (``synset`` ``""`` when unknown)."""
    return f"{term}|{synset if isinstance(synset, str) else ''}|{dimension}"


# ----------------------------------------------------------------------------- WordNet contexts

def _synset_word(synset_name: str) -> str:
    return synset_name.rsplit(".", 2)[0]


def _replace_synonym(term: str, example: str, synset_name: str) -> str:
    """Schuster et al.'s ``utils.replace_wn_terms`` rule for one example.

    WordNet examples sometimes show a synonym instead of the term (``aloof.s.01``:
    "stood apart with aloof dignity" for the term *distant*). When the term is
    absent but the synset's head word is present, the head word is replaced by
    the term (a plain substring replace, as in their code).
    """
    word = _synset_word(synset_name)
    if term not in example and word in example:
        return example.replace(word, term)
    return example


def _has_token(term: str, sentence: str) -> bool:
    # Same test as their get_examples_with_term: the term must be a space-separated token.
    return term in sentence.split(" ")


def _noun_adj_synsets(term: str) -> list:
    """All noun, adjective and satellite-adjective synsets of ``term`` (WordNet order)."""
    return [s for s in wordnet().synsets(term) if s.pos() in ("n", "a", "s")]


def wordnet_contexts(term: str, synset: str | None = None, n: int | None = None) -> list[str]:
    """WordNet example sentences usable as contexts for ``term``.

    With ``synset`` (an nltk synset name such as ``"tidy.a.01"``) only that
    sense's examples are used; without it, the examples of every noun,
    adjective and satellite synset of ``term`` in WordNet order (the procedure
    Schuster et al. used for the full-dictionary terms). Examples are
    lower-cased, a synonym standing in for the term is replaced by the term
    (:func:`_replace_synonym`), and only sentences containing ``term`` as a
    space-separated token are kept. ``n`` keeps the first ``n``.

    Returns ``[]`` when WordNet has no usable example; callers record that as a
    skip. Raises :class:`ParameterError` for an unknown synset name.
    """
    wn = wordnet()
    if synset:
        try:
            synsets = [wn.synset(synset)]
        except (nltk.corpus.reader.wordnet.WordNetError, ValueError) as exc:
            raise ParameterError(f"unknown WordNet 3.0 synset {synset!r} for term {term!r}: {exc}") from None
    else:
        synsets = _noun_adj_synsets(term)
    out = []
    for s in synsets:
        for example in s.examples():
            sentence = _replace_synonym(term, example.lower(), s.name())
            if _has_token(term, sentence):
                out.append(sentence)
    return out[:n] if n is not None else out


# ----------------------------------------------------------------------------- reading CSV dictionaries

def _parse_contexts(value: str) -> list[str]:
    """A contexts cell: a JSON list, a Python-list literal, or ``|``-separated sentences."""
    value = value.strip()
    if not value:
        return []
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            try:
                parsed = ast.literal_eval(value)  # literals only: never executes code
            except (ValueError, SyntaxError) as exc:
                raise ValueError(f"not a JSON or Python list of strings ({exc.__class__.__name__})") from None
        if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
            raise ValueError("must be a list of strings")
        return [x.strip() for x in parsed if x.strip()]
    return [part.strip() for part in value.split("|") if part.strip()]


def _read_rows(path: Path, rename: dict[str, str]) -> tuple[list[str], list[tuple[int, dict]]]:
    """Header and ``(first CSV line of the record, row)`` pairs; handles quoted newlines."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise ParameterError(f"{path}: the file is empty (expected a header line)") from None
        header = [rename.get(h.strip().lower(), h.strip().lower()) for h in header]
        rows = []
        start = reader.line_num + 1
        for values in reader:
            if any(v.strip() for v in values):
                rows.append((start, dict(zip(header, values))))
            start = reader.line_num + 1
    return header, rows


def _validate(path: Path, header: list[str], rows: list[tuple[int, dict]]) -> pd.DataFrame:
    """Normalise and validate dictionary rows; raise one error listing every problem."""
    missing = [c for c in _REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ParameterError(
            f"{path}, line 1 (header): required column(s) {', '.join(missing)} missing; "
            f"found {', '.join(header)}. Required: {', '.join(_REQUIRED_COLUMNS)}; "
            f"optional: {', '.join(_OPTIONAL_COLUMNS)}."
        )
    errors: list[str] = []
    records, lines = [], []
    seen: dict[str, int] = {}
    wn = wordnet() if "synset" in header else None
    for line, row in rows:
        where = f"line {line}"
        dimension = (row.get("dimension") or "").strip().lower()
        term = (row.get("term") or "").strip()
        direction = (row.get("direction") or "").strip().lower()
        synset = (row.get("synset") or "").strip()
        definition = (row.get("definition") or "").strip()
        if not dimension:
            errors.append(f"{where}, column dimension: empty dimension")
        if not term:
            errors.append(f"{where}, column term: empty term")
        if direction not in DIRECTIONS:
            errors.append(f"{where}, column direction: {row.get('direction')!r} is not 'high' or 'low'")
        try:
            contexts = _parse_contexts(row.get("contexts") or "")
        except ValueError as exc:
            errors.append(f"{where}, column contexts: {exc}")
            contexts = []
        if synset:
            try:
                sense = wn.synset(synset)
                definition = definition or sense.definition()
            except (nltk.corpus.reader.wordnet.WordNetError, ValueError):
                errors.append(f"{where}, column synset: {synset!r} is not a WordNet 3.0 synset name")
        sense_id = _sense_key(term, synset, dimension)
        if term and dimension:
            if sense_id in seen:
                errors.append(
                    f"{where}, columns term/synset/dimension: duplicate of line {seen[sense_id]} "
                    f"(term {term!r}, synset {synset!r}, dimension {dimension!r})"
                )
            else:
                seen[sense_id] = line
        source = (row.get("context_source") or "").strip() or ("user" if contexts else "")
        records.append({
            "dimension": dimension, "term": term, "direction": direction, "synset": synset,
            "definition": definition, "contexts": contexts, "context_source": source, "sense_id": sense_id,
        })
        lines.append(line)
    frame = pd.DataFrame(records, columns=_SEED_COLUMNS)
    frame["line"] = lines
    for dimension, group in frame[frame.direction.isin(DIRECTIONS) & (frame.dimension != "")].groupby("dimension"):
        poles = set(group.direction)
        for pole in DIRECTIONS:
            if pole not in poles:
                errors.append(
                    f"lines {', '.join(map(str, group.line))}, column direction: dimension {dimension!r} "
                    f"has no {pole!r} terms (both poles are needed to define a direction)"
                )
    if errors:
        raise ParameterError(f"{path}: {len(errors)} problem(s):\n  " + "\n  ".join(errors))
    if frame.empty:
        raise ParameterError(f"{path}: no dictionary rows after the header")
    return frame.drop(columns="line").reset_index(drop=True)


def read_dictionary(path: str | Path) -> pd.DataFrame:
    """A user dictionary from CSV, validated, with the columns of the module docstring.

    Format (UTF-8 CSV with a header line, column names case-insensitive):

    * required: ``dimension`` (any name; new dimensions are welcome), ``term``,
      ``direction`` (``high``/``low``, case-insensitive);
    * optional: ``synset`` (nltk WordNet 3.0 name; checked, and its gloss fills
      an empty ``definition``), ``definition``, ``contexts`` and
      ``context_source``. A ``contexts`` cell is a JSON list (``["a b", "c"]``),
      a Python list literal (``['a b']``) or sentences separated by ``|``.
      Rows without contexts get ``[]``; Study 1 then uses
      :func:`wordnet_contexts` or generated contexts.

    Each dimension needs both poles. Every problem is reported at once, each
    naming its 1-based CSV line and the column, in a :class:`ParameterError`.
    """
    path = paths.resolve_input(path, "dictionary_path")
    try:
        header, rows = _read_rows(path, rename={})
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    return _validate(path, header, rows)


def load_seed_dictionary() -> pd.DataFrame:
    """The 455 senses of Schuster et al.'s seed dictionary (columns: module docstring).

    From ``stereotype_dimensions_dictionary.csv`` (key ``schuster_seed_dictionary``):
    its ``dir``/``examples``/``example_source`` columns become
    ``direction``/``contexts``/``context_source``; contexts are parsed from their
    Python-list strings with ``ast.literal_eval`` (never ``eval``).
    """
    path = resolve("schuster_seed_dictionary")
    header, rows = _read_rows(path, rename=_SEED_RENAME)
    header = [h for h in header if h]  # the unnamed pandas index column
    frame = _validate(path, header, rows)
    unknown = sorted(set(frame.dimension) - set(DIMENSIONS))
    if unknown:
        raise ParameterError(f"{path}: unexpected dimensions {unknown}; expected {DIMENSIONS}")
    return frame


# ----------------------------------------------------------------------------- full dictionary

def _derive_full_terms(full_csv: Path, seed_terms: set[str]) -> pd.DataFrame:
    """Schuster et al.'s ``setting_up_dictionaries.ipynb`` step for the additional terms."""
    full = pd.read_csv(full_csv)
    terms = full["original word"].astype(str).str.lower()
    dimension = pd.Series(None, index=full.index, dtype=object)
    direction = pd.Series(None, index=full.index, dtype=object)
    # Later dimensions overwrite earlier ones, exactly as the notebook's loop does.
    for dim in DIMENSIONS:
        column = full[f"{dim.capitalize()} direction"]
        for value, pole in ((-1, "low"), (1, "high")):
            dimension[column == value] = dim
            direction[column == value] = pole
    keep = dimension.notna() & ~terms.isin(seed_terms)
    records = []
    for idx in tqdm(full.index[keep], desc="full-dictionary terms: WordNet examples", leave=False):
        term = terms[idx]
        synsets = _noun_adj_synsets(term)
        contexts = wordnet_contexts(term)
        if contexts:
            records.append({
                "dimension": dimension[idx], "term": term, "direction": direction[idx],
                "synsets": [s.name() for s in synsets], "definition": [s.definition() for s in synsets],
                "contexts": contexts, "context_source": "WordNet",
            })
    return pd.DataFrame(records, columns=_FULL_COLUMNS)


def _full_cache_path() -> Path:
    key = stable_hash({
        "full": entry("nicolas_full_dictionary").sha256,
        "seed": entry("schuster_seed_dictionary").sha256,
        "code": _FULL_CODE_VERSION,
        "nltk": nltk.__version__,
        "wordnet": sha256_file(Path(wordnet().root.path) / "data.noun")[:16],
    })
    return paths.cache_dir() / "dictionaries" / f"full_dictionary_terms_{key}.parquet"


def _list_columns(frame: pd.DataFrame) -> pd.DataFrame:
    # parquet round-trips list<string> as numpy arrays; callers expect plain lists.
    for column in ("synsets", "definition", "contexts"):
        frame[column] = [list(v) for v in frame[column]]
    return frame


def load_full_dictionary_terms() -> pd.DataFrame:
    """Extra terms for the direction-prediction task, derived from Nicolas et al.'s full dictionary.

    Procedure (Schuster et al., ``setting_up_dictionaries.ipynb``), run here on
    the OSF "Full Dictionaries.csv" copy (key ``nicolas_full_dictionary``):
    term = lower-cased ``original word``; dimension/direction from
    ``<Dim> direction`` = +1 (high) / -1 (low), looping over :data:`DIMENSIONS`
    in order so that a later dimension overwrites an earlier one; terms already
    in the seed dictionary dropped; contexts = :func:`wordnet_contexts` over all
    noun/adjective/satellite synsets; terms without contexts dropped. The OSF
    file is not de-duplicated, as in the original.

    Columns: ``dimension, term, direction, synsets`` (list of synset names),
    ``definition`` (list of glosses aligned with ``synsets``), ``contexts``
    (list[str]), ``context_source`` (``WordNet``). Cached as parquet under
    ``paths.cache_dir()/dictionaries``, keyed by the input hashes, the code
    version and the WordNet/nltk versions; an unreadable entry is recomputed.
    Compare with :data:`PUBLISHED_FULL_COUNTS` via :func:`pole_counts`.
    """
    cache = _full_cache_path()
    if cache.exists():
        try:
            return _list_columns(pd.read_parquet(cache))
        except Exception:  # any unreadable entry (torn file, wrong schema) is a cache miss
            cache.unlink(missing_ok=True)
    seed_terms = set(load_seed_dictionary().term)
    frame = _derive_full_terms(resolve("nicolas_full_dictionary"), seed_terms)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic_write_bytes(cache, buffer.getvalue())
    return frame


def load_dictionary(dictionary_path=None) -> pd.DataFrame:
    """The seed dictionary (``None`` or ``""``) or a user dictionary CSV (:func:`read_dictionary`)."""
    return load_seed_dictionary() if dictionary_path in (None, "") else read_dictionary(dictionary_path)


def limit_terms(terms: pd.DataFrame, limit: int | None, seed: int = 0) -> pd.DataFrame:
    """At most ``limit`` terms per (dimension, direction), sampled with ``seed`` (quick runs)."""
    if limit is None:
        return terms.reset_index(drop=True)
    shuffled = terms.sample(frac=1.0, random_state=seed)
    keep = shuffled.groupby(["dimension", "direction"], sort=False).cumcount() < limit
    return shuffled[keep].sort_index().reset_index(drop=True)


def pole_counts(frame: pd.DataFrame, published: dict[tuple[str, str], int] | None = None) -> pd.DataFrame:
    """Rows per (dimension, direction).

    With ``published`` (e.g. :data:`PUBLISHED_SEED_COUNTS`): found vs published for
    each published cell plus a ``total`` row, columns ``dimension, direction, found,
    published, difference`` (found - published). Without (a user dictionary, which
    has no published counts): ``dimension, direction, found`` for the cells present.
    """
    found = frame.groupby(["dimension", "direction"]).size()
    if published is None:
        return found.rename("found").reset_index()
    rows = [
        {"dimension": dim, "direction": pole, "found": int(found.get((dim, pole), 0)), "published": n}
        for (dim, pole), n in published.items()
    ]
    table = pd.DataFrame(rows)
    total = {"dimension": "total", "direction": "", "found": int(table.found.sum()),
             "published": int(table.published.sum())}
    table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    table["difference"] = table.found - table.published
    return table


def describe_counts(counts: pd.DataFrame, what: str = "The seed dictionary", unit: str = "senses") -> str:
    """One sentence on :func:`pole_counts`' table (chapter 01's first screen): the ``unit`` found against the paper's
    count, how many poles match it and where the others differ; without published counts (a user's dictionary), the
    count as found."""
    poles = counts[counts["dimension"] != "total"]
    if "published" not in counts:
        dims = poles.groupby("dimension", sort=False)["found"].sum()
        return (f"{what} has {int(poles['found'].sum()):,} {unit} on {len(poles)} poles of {len(dims)} dimensions "
                "(no published counts to compare).")
    off = poles[poles["difference"] != 0]
    where = "; ".join(f"{r.dimension} {r.direction} {int(r.found)} against {int(r.published)}"
                      for r in off.itertuples())
    return (f"{what} has {int(poles['found'].sum()):,} {unit} against the paper's {int(poles['published'].sum()):,}: "
            f"{len(poles) - len(off)} of its {len(poles)} poles match the published count"
            + (f", and {len(off)} differ{'s' if len(off) == 1 else ''} ({where})." if len(off) else ", every one."))


def context_sources(dictionary: pd.DataFrame) -> pd.DataFrame:
    """Where a dictionary's stored contexts come from, per dimension.

    Columns: ``dimension, context_source`` (``""`` for senses without contexts),
    ``senses`` (rows), ``mean_contexts`` (mean number of stored contexts per sense).
    """
    return (dictionary.assign(n_contexts=dictionary.contexts.str.len())
            .groupby(["dimension", "context_source"], dropna=False)
            .agg(senses=("term", "size"), mean_contexts=("n_contexts", "mean")).reset_index())


def _blank(value) -> bool:
    return (value is None or (isinstance(value, float) and value != value)
            or (isinstance(value, str) and not value.strip()))


def ensure_sense_ids(dictionary: pd.DataFrame) -> pd.DataFrame:
    """The dictionary with a ``sense_id`` on every row: rows appended by hand (in a notebook cell)
    without one get :func:`sense_key` (with a ``#k`` suffix when the key is taken: the full dictionary
    repeats some terms, and the original counts them twice); a row without dimension, term or a high/low
    direction is a :class:`ParameterError` naming the row. A dictionary whose rows all have one is
    returned as it is."""
    bad = [f"row {i} ({row.get('term')!r}): needs dimension, term and direction high/low"
           for i, row in enumerate(dictionary.to_dict("records"))
           if any(_blank(row.get(c)) for c in _REQUIRED_COLUMNS) or row.get("direction") not in DIRECTIONS]
    if bad:
        raise ParameterError("dictionary: " + "; ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))
    ids = dictionary["sense_id"] if "sense_id" in dictionary.columns else pd.Series([None] * len(dictionary))
    blank = [_blank(sid) for sid in ids]
    if not any(blank):
        return dictionary
    d = dictionary.reset_index(drop=True).copy()
    synsets = d["synset"].tolist() if "synset" in d.columns else [""] * len(d)
    taken = {sid for sid, b in zip(ids, blank) if not b}
    filled = []
    for sid, b, t, s, dim in zip(ids, blank, d["term"], synsets, d["dimension"]):
        if b:
            key, k = _sense_key(t, s, dim), 1
            sid = key
            while sid in taken:
                k += 1
                sid = f"{key}#{k}"
            taken.add(sid)
        filled.append(sid)
    d["sense_id"] = pd.Series(filled, dtype=ids.dtype if "sense_id" in d.columns else object)
    return d


def check_poles(dictionary: pd.DataFrame, dimensions=None) -> pd.DataFrame:
    """``dictionary`` when every pole of ``dimensions`` (default: all) has at least :data:`MIN_POLE_SIZE` terms and
    no two of them share half of either one's terms (:func:`look_alike`); otherwise a :class:`ParameterError` naming
    the dimension, the pole and its terms, or the two dimensions, their shared terms and the fix."""
    dims = list(dict.fromkeys(dictionary["dimension"])) if dimensions is None else list(dimensions)
    problems = []
    for dim in dims:
        rows = dictionary[dictionary["dimension"] == dim]
        for pole in DIRECTIONS:
            terms = rows.loc[rows["direction"] == pole, "term"].tolist()
            if len(terms) < MIN_POLE_SIZE:
                problems.append(f"{dim!r} has {len(terms)} {pole} term{'s' * (len(terms) != 1)}"
                                + (f" ({', '.join(terms)})" if terms else ""))
    if problems:
        raise ParameterError(f"every pole needs at least {MIN_POLE_SIZE} terms (an axis from fewer is mostly the "
                             f"words' own noise, and nothing could say so): " + "; ".join(problems))
    twins = _look_alike(dictionary, dims)
    if twins:
        raise ParameterError(
            "dimensions that share at least half of either one's terms are one axis measured twice: their directions "
            "nearly coincide, the basis's pseudo-inverse splits what they share between them, and the sign of each "
            "one's values is decided by the basis, not by its words (their gaps would read as two findings): "
            + "; ".join(twins) + ". Merge them into one dimension, give each terms of its own (fewer than half "
            "shared), or profile each in a run of its own (a dictionary with only one of them)")
    return dictionary


#: Two dimensions that share at least this share of the terms of either one are refused (:func:`check_poles`);
#: a smaller overlap is a warning with the correlation of their values (``space.build_space``).
_MAX_SHARED = 0.5


def _look_alike(dictionary: pd.DataFrame, dims: list[str]) -> list[str]:
    """The pairs of ``dims`` sharing at least :data:`MAX_SHARED` of either one's distinct terms (case-insensitive),
    each as "'a' and 'b' share 5 of their 6 and 6 terms (neat, tidy, ...; on the same poles)"."""
    rows = {d: dictionary[dictionary["dimension"] == d] for d in dims}
    poles = {d: dict(zip(r["term"].str.lower(), r["direction"])) for d, r in rows.items()}
    found = []
    for i, a in enumerate(dims):
        for b in dims[i + 1:]:
            shared = [t for t in poles[a] if t in poles[b]]
            if shared and len(shared) >= _MAX_SHARED * min(len(poles[a]), len(poles[b])):
                opposite = [t for t in shared if poles[a][t] != poles[b][t]]
                side = ("on the same poles" if not opposite else "on opposite poles" if len(opposite) == len(shared)
                        else f"{len(opposite)} on opposite poles")
                found.append(f"{a!r} and {b!r} share {len(shared)} of their {len(poles[a])} and {len(poles[b])} terms "
                             f"({', '.join(shared)}; {side})")
    return found


def add_terms(dictionary: pd.DataFrame, dimension: str, high=(), low=(), *, synsets: dict | None = None
              ) -> pd.DataFrame:
    """``dictionary`` with ``high`` and ``low`` terms added on ``dimension`` (existing or new).

    The cell a researcher edits to try words: each new row gets every column a CSV row of
    :func:`read_dictionary` gets (``synset`` from ``synsets`` ``{term: name}`` when given and
    checked against WordNet, its gloss as ``definition``, ``contexts`` empty so the chapter's
    context source fills them, ``sense_id``). A term already on that dimension, an empty term,
    or a dimension left with one pole is a :class:`ParameterError`.
    """
    dimension = str(dimension).strip().lower()
    synsets = synsets or {}
    if not dimension:
        raise ParameterError("dimension is empty")
    rows = []
    for direction, terms in (("high", high), ("low", low)):
        for term in check_word_list(terms, direction, strings=False):
            term = str(term).strip()
            if not term:
                raise ParameterError(f"{direction}: an empty term on {dimension!r}")
            synset = synsets.get(term, "")
            definition = ""
            if synset:
                try:
                    definition = wordnet().synset(synset).definition()
                except (nltk.corpus.reader.wordnet.WordNetError, ValueError):
                    raise ParameterError(f"synsets: {synset!r} (for {term!r}) is not a WordNet 3.0 synset name"
                                         ) from None
            rows.append({"dimension": dimension, "term": term, "direction": direction, "synset": synset,
                         "definition": definition, "contexts": [], "context_source": "",
                         "sense_id": _sense_key(term, synset, dimension)})
    base = ensure_sense_ids(dictionary)
    if not rows:  # the trying-words cell as shipped: the dictionary as loaded
        return base
    new = pd.DataFrame(rows, columns=_SEED_COLUMNS)
    clash = sorted(set(new["sense_id"]) & set(base["sense_id"])) + sorted(new["sense_id"][new["sense_id"].duplicated()])
    if clash:
        raise ParameterError(f"high, low: already in the dictionary: {', '.join(c.split('|')[0] for c in clash)}")
    out = pd.concat([base, new], ignore_index=True)
    poles = set(out.loc[out["dimension"] == dimension, "direction"])
    if poles != set(DIRECTIONS):
        raise ParameterError(f"dimension {dimension!r} has no {sorted(set(DIRECTIONS) - poles)[0]!r} "
                             "terms (both poles are needed to define a direction)")
    try:
        return check_poles(out, [dimension])
    except ParameterError as exc:
        raise ParameterError(f"high, low: {exc}") from None
