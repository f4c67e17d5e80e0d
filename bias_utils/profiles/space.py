"""Study 1 pipeline around the projection maths: build a model's stereotype
space from a dictionary and check it with the direction-prediction task.

Notebooks 03, 04 and 08 call these functions (05 through
:mod:`bias_utils.profiles.layers`); every table they return is tidy and documented below.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..core import tables
from ..core.errors import ParameterError, check_layer, check_positive_int, check_seed
from ..core.results import display_name, write_table
from ..core.stats import check_n_boot
from ..models.embeddings import embed_words
from ..models.loading import ModelFacts, check_model, load_tokenizer
from . import projection
from .context_filters import contains_term, known_term, not_a_word
from .contexts import (
    SKIP_COLUMNS,
    ContextSet,
    as_list,
    build_contexts,
    check_request,
    check_source_names,
    prepare_dictionary,
)
from .dictionaries import (
    COMPOSITES,
    DIRECTIONS,
    MIN_POLE_SIZE,
    check_poles,
    limit_terms,
    load_full_dictionary_terms,
)
from .extra_contexts import extra_term_contexts, known_generated_contexts

__all__ = [
    "accuracy_by_term_contexts", "build_space", "describe_direction_skipped", "describe_dropped", "describe_space",
    "describe_table2", "describe_untestable", "direction_prediction", "dropped_by_reason", "dropped_senses",
    "pole_table", "table2_by_term_contexts",
]

_EMBED_SKIP_COLUMNS = ["sense_id", "term", "context", "reason"]
#: Columns of :func:`dropped_senses`.
DROPPED_COLUMNS = ["sense_id", "term", "context", "stage", "reason"]
#: What the extra terms can be embedded in (:func:`term_embeddings`).
_TERM_CONTEXTS = ("generated", "dictionary")
#: Columns of :attr:`StereotypeSpace.untestable` (:func:`untestable_poles`).
_UNTESTABLE_COLUMNS = ["space", "dimension", "direction", "n_terms", "n_usable", "usable_terms", "reason"]


@dataclass
class StereotypeSpace:
    """Polar bases of one model, dictionary and context source.

    ``bases``: ``{"dimensions": PolarBasis, "warmth_competence": PolarBasis}``
    (the second only when the dictionary has the composites' dimensions).
    ``senses``: ``projection.sense_embeddings``'s table (``n_embedded == 0``
    marks a sense whose contexts could not be embedded). ``contexts``: the
    :class:`ContextSet` used. ``skipped``: contexts the model could not embed
    (``sense_id, term, context, reason``). ``untestable``: the poles that kept
    fewer than ``dictionaries.MIN_POLE_SIZE`` terms after the filters and the
    embedding (:func:`untestable_poles`); their axes are in no basis, and
    ``senses``/``sense_emb`` hold the senses of the axes that are.
    """

    bases: dict
    senses: pd.DataFrame
    contexts: ContextSet
    skipped: pd.DataFrame
    model_id: str
    source: str
    sense_emb: np.ndarray
    untestable: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_UNTESTABLE_COLUMNS))


def describe_space(sp: StereotypeSpace) -> str:
    """A sentence naming what a space holds: its model, context source, the axes of each basis and the layers,
    e.g. "smollm2-135m-instruct, generated contexts: 7 axes (sociability, …, religion) and 2 composites (warmth,
    competence), at each of 31 hidden states (0 to 30)"."""
    kinds = {"dimensions": "axes", "warmth_competence": "composites"}
    parts = [f"{len(b.dimensions)} {kinds.get(name, name.replace('_', ' '))} ({', '.join(b.dimensions)})"
             for name, b in sp.bases.items()]
    layers = next(iter(sp.bases.values())).layers if sp.bases else ()
    where = f", at each of {len(layers)} hidden states ({layers[0]} to {layers[-1]})" if layers else ""
    return f"{display_name(sp.model_id)}, {sp.source} contexts: {' and '.join(parts) or 'no axis'}{where}."


def _embed_contexts(model, table: pd.DataFrame, layers="all") -> tuple[np.ndarray, pd.DataFrame, tuple[int, ...]]:
    """Word embeddings of ``table.term`` in ``table.context`` (one row per row of ``table``).

    Returns ``(values [n, L, H] with NaN rows for skipped pairs, skipped
    (sense_id, term, context, reason), layers)``.
    """
    emb = embed_words(model, table["context"].tolist(), table["term"].tolist(), layers=layers)
    skipped = pd.DataFrame(columns=_EMBED_SKIP_COLUMNS)
    if len(emb.skipped):
        idx = emb.skipped["pair_index"].to_numpy(dtype=int)
        skipped = table.iloc[idx][["sense_id", "term", "context"]].reset_index(drop=True)
        skipped["reason"] = emb.skipped["reason"].astype(str).to_numpy()
    return np.asarray(emb.values), skipped, tuple(int(x) for x in emb.layers)


def check_space(model, dictionary: pd.DataFrame, source: str = "generated", n_contexts=5, seed=0, *,
                generator=None, layers="all", names: tuple[str, str] = ("source", "generator")) -> ModelFacts:
    """:func:`build_space`'s parameters, checked before any model loads (chapters 03, 04, 05, 08, 10 and 11 call it
    through their checks), and the model's :class:`~bias_utils.models.loading.ModelFacts`. A :class:`ParameterError`
    names
    the parameter: a model without hidden states, every rule of :func:`bias_utils.profiles.contexts.check_request` (the
    source, counts, seed, the generator), a pole with fewer than ``dictionaries.MIN_POLE_SIZE`` terms
    (``dictionaries.check_poles``) and ``layers`` (``"all"`` or hidden-state indices of the model)."""
    facts = check_model(model, need="embed", what="a stereotype space (hidden states)")
    check_request(dictionary, source, n_contexts, seed, model=generator, names=names)
    try:
        check_poles(dictionary)
    except ParameterError as exc:
        raise ParameterError(f"dictionary: {exc}") from None
    if not (isinstance(layers, str) and layers == "all"):
        if isinstance(layers, str) or not isinstance(layers, Sequence) or not layers:
            raise ParameterError(f"layers must be 'all' or a list of hidden-state indices, got {layers!r}")
        for layer in layers:
            check_layer(layer, layers=facts.n_states, allow_names=False, name="layers")
    return facts


def check_source_spaces(model, dictionary: pd.DataFrame, sources=None, n_contexts=5, seed=0, *,
                  generator=None) -> tuple[str, ...]:
    """The parameters of building one space per context source (``layers.layers_by_context``,
    ``robustness.collect_curve_inputs``), checked before any model loads: :func:`check_space`, and
    ``bias_utils.profiles.contexts.check_request`` for each of ``sources`` (``None``: every registered one; the
    generator
    is needed only when they include ``"generated"``). Returns the sources."""
    chosen = check_source_names(sources)
    check_space(model, dictionary, "dictionary", n_contexts, seed)
    for source in chosen:
        check_request(dictionary, source, n_contexts, seed, model=generator if source == "generated" else None,
                       names=("sources", "generator"))
    return chosen


def check_terms(model, *, n_contexts=5, seed=0, limit=None, term_contexts="generated") -> ModelFacts:
    """The parameters of embedding the extra terms (:func:`term_embeddings`, :func:`direction_prediction`,
    ``axis_validity.axis_validity``), checked before any model loads: a model with hidden states, ``n_contexts``,
    ``seed``, ``limit`` and ``term_contexts`` (:data:`TERM_CONTEXTS`). Returns the model's ``ModelFacts``."""
    facts = check_model(model, need="embed", what="embedding the extra terms")
    check_positive_int(n_contexts, "n_contexts")
    check_seed(seed)
    check_positive_int(limit, "limit", allow_none=True)
    if term_contexts not in _TERM_CONTEXTS:
        raise ParameterError(f"term_contexts must be 'generated' or 'dictionary', got {term_contexts!r}")
    return facts


def _untestable_poles(dictionary: pd.DataFrame, usable: pd.DataFrame, what: str = "kept a usable context"
                      ) -> pd.DataFrame:
    """The poles of ``dictionary``'s axes that keep fewer than ``dictionaries.MIN_POLE_SIZE`` distinct terms in
    ``usable`` (senses with a usable context: rows of a contexts table, or senses with ``n_embedded > 0``): the
    input's rule again, on what survived the context filters and the embedding. A composite (warmth, competence)
    is untestable when one of its member dimensions is; ``what`` says what the usable terms did. Columns
    :data:`UNTESTABLE_COLUMNS`."""
    if "n_embedded" in usable:
        usable = usable[usable["n_embedded"] > 0]
    rows = []
    for dim in dict.fromkeys(dictionary["dimension"]):
        for pole in DIRECTIONS:
            given = dictionary.loc[(dictionary["dimension"] == dim) & (dictionary["direction"] == pole), "term"]
            kept = list(dict.fromkeys(usable.loc[(usable["dimension"] == dim) & (usable["direction"] == pole), "term"]))
            if len(kept) < MIN_POLE_SIZE:
                rows.append({"space": "dimensions", "dimension": dim, "direction": pole,
                             "n_terms": given.nunique(), "n_usable": len(kept), "usable_terms": ", ".join(kept),
                             "reason": f"{len(kept)} of its {given.nunique()} terms {what} "
                                       f"({', '.join(kept) or 'none'}); {MIN_POLE_SIZE} per pole needed"})
    lost = {r["dimension"] for r in rows}
    present = set(dictionary["dimension"])
    for composite, members in COMPOSITES.items():
        if set(members) <= present and lost & set(members):
            rows.append({"space": "warmth_competence", "dimension": composite, "direction": "", "n_terms": 0,
                         "n_usable": 0, "usable_terms": "",
                         "reason": f"its member dimension(s) {', '.join(sorted(lost & set(members)))} are untestable"})
    return pd.DataFrame(rows, columns=_UNTESTABLE_COLUMNS)


def describe_untestable(space: StereotypeSpace) -> str:
    """One sentence per untestable axis of ``space`` (empty when every axis was built): which pole lost its
    terms, and that the axis is left out of the space, its profiles and tests."""
    lines = []
    for (name, dim), rows in space.untestable.groupby(["space", "dimension"], sort=False):
        poles = "; ".join(f"its {r.direction} pole: {r.reason}" if r.direction else r.reason
                          for r in rows.itertuples())
        lines.append(f"{dim} is untestable and left out of the space, its profiles and tests ({poles}).")
    return "\n".join(lines)


def _overlapping_axes(space: StereotypeSpace) -> pd.DataFrame:
    """Pairs of axes of ``space``'s ``dimensions`` basis that share terms, with the Pearson correlation of their
    values over the space's own senses (projected at the mean over layers): two axes built from mostly the same
    words measure mostly the same thing, and their gaps are not two findings. Columns ``dimension_a, dimension_b,
    n_shared, shared_terms, correlation``."""
    senses, basis = space.senses, space.bases.get("dimensions")
    terms = {d: set(senses.loc[senses["dimension"] == d, "term"]) for d in (basis.dimensions if basis else ())}
    rows = []
    usable = senses["n_embedded"].to_numpy() > 0
    values = projection.project(basis, space.sense_emb[usable], "mean") if basis is not None else None
    for i, a in enumerate(terms):
        for j, b in list(enumerate(terms))[i + 1:]:
            shared = sorted(terms[a] & terms[b])
            if shared:
                r = float(np.corrcoef(values[:, i], values[:, j])[0, 1])
                rows.append({"dimension_a": a, "dimension_b": b, "n_shared": len(shared),
                             "shared_terms": ", ".join(shared), "correlation": r})
    return pd.DataFrame(rows, columns=["dimension_a", "dimension_b", "n_shared", "shared_terms", "correlation"])


def _no_axis(space: StereotypeSpace, stage: str, out) -> ParameterError:
    """The error of a space without a single axis, after :func:`dropped_senses` of what was built so far is written
    to ``out`` (a results folder; the message gives the file) or attached to the error (``.dropped``)."""
    dropped = dropped_senses(space)
    if out is not None:
        _, csv = write_table(dropped, Path(out) / tables.NAMES.DROPPED_SENSES)
        where = (f"What did not reach an axis ({len(dropped)} senses and contexts, each with its stage and reason) "
                 f"is in {csv}")
    else:
        where = ("What did not reach an axis (each sense and context with its stage and reason) is the error's "
                 "dropped table (build_space(..., out=folder) writes it)")
    reasons = "; ".join(f"{r.dimension} {r.direction}: {r.reason}" for r in space.untestable.itertuples()
                        if r.direction)
    error = ParameterError(
        f"no axis can be built {stage}: every dimension has a pole with fewer than {MIN_POLE_SIZE} terms that kept "
        f"a usable context ({reasons}). {where}. Give these terms contexts of their own (a contexts column in the "
        "dictionary), or more terms on those poles")
    error.dropped = dropped
    return error


def _nonword_senses(dictionary: pd.DataFrame, model, source: str) -> pd.DataFrame:
    """The senses of ``dictionary`` (prepared: with ``sense_id``) whose term is not a word
    (``context_filters.not_a_word`` with ``model``'s tokenizer, read without loading weights), as rows of a
    ``ContextSet.skipped`` table with the reason; a sense with contexts of its own that contain the term is the
    user's word and is kept. Empty without a candidate (every term known to WordNet)."""
    own = ([any(contains_term(c, t) for c in as_list(x)) for t, x in zip(dictionary["term"], dictionary["contexts"])]
           if "contexts" in dictionary else [False] * len(dictionary))
    rows, tokenizer = [], None
    for (_, sense), given in zip(dictionary.iterrows(), own):
        if given or known_term(str(sense["term"])):
            continue
        if tokenizer is None:
            tokenizer = load_tokenizer(model)
        why = not_a_word(str(sense["term"]), tokenizer)
        if why:
            rows.append({**{c: sense[c] for c in ("sense_id", "dimension", "term", "direction")}, "source": source,
                         "reason": f"{why}: left out before its contexts are found (give it contexts of its own, "
                                   "sentences that use it, to keep it)"})
    return pd.DataFrame(rows, columns=SKIP_COLUMNS)


def build_space(model, dictionary: pd.DataFrame, source: str = "generated", n_contexts: int = 5, seed: int = 0,
                *, corpus=None, generator=None, layers="all", out: str | Path | None = None) -> StereotypeSpace:
    """Contexts -> embeddings -> sense embeddings -> polar bases (Eqs. 1-3, 5) at every layer.

    ``source`` defaults to ``"generated"``, the paper's main setting (Sec. 3.2)
    and the authors' ``projection.py``. ``generator``: a model (or name) to
    generate new contexts with when ``source == "generated"``; ``None`` uses the
    published Llama-3 contexts. Every parameter is checked first (:func:`check_space`).
    A pole left with fewer than ``dictionaries.MIN_POLE_SIZE`` terms after the
    filters or the embedding makes its axis untestable (:func:`untestable_poles`,
    in :attr:`StereotypeSpace.untestable` and :func:`dropped_senses`): the space is
    built from the other axes; with none left, a ``ParameterError`` says why,
    before anything is embedded when the contexts alone decide it, after writing
    :func:`dropped_senses` (the senses and contexts that reached no axis, each with
    its stage and reason) into ``out`` (a results folder) and naming the file; without
    ``out`` the error carries that table as ``.dropped``.
    """
    check_space(model, dictionary, source, n_contexts, seed, generator=generator, layers=layers)
    model_id = getattr(model, "model_id", str(model))
    dictionary = prepare_dictionary(dictionary)
    nonwords = _nonword_senses(dictionary, model, source)
    words = dictionary[~dictionary["sense_id"].isin(set(nonwords["sense_id"]))]
    if len(nonwords):
        warnings.warn(f"{len(nonwords)} term(s) are not words, left out before their contexts are found: "
                      + ", ".join(f"{r.term} ({r.dimension} {r.direction})" for r in nonwords.itertuples())
                      + f"; a pole left with fewer than {MIN_POLE_SIZE} terms makes its axis untestable",
                      stacklevel=2)
    before = _untestable_poles(dictionary, words, "are words")
    if set(dictionary["dimension"]) <= set(before["dimension"]):  # no axis whatever the contexts: nothing generated
        contexts = ContextSet(words[["sense_id", "dimension", "term", "direction"]], nonwords)  # no context sought
        raise _no_axis(StereotypeSpace({}, pd.DataFrame(), contexts, pd.DataFrame(columns=_EMBED_SKIP_COLUMNS),
                                        model_id, source, np.empty(0), before), "from the dictionary's words", out)
    known = known_generated_contexts(seed=seed, n_contexts=n_contexts) if source == "generated" else None
    contexts = build_contexts(words, source, n_contexts, seed, model=generator, corpus=corpus, known=known)
    contexts.skipped = pd.concat([contexts.skipped, nonwords], ignore_index=True) if len(nonwords) \
        else contexts.skipped
    early = _untestable_poles(dictionary, contexts.table)
    if set(dictionary["dimension"]) <= set(early["dimension"]):
        unembedded = pd.DataFrame(columns=_EMBED_SKIP_COLUMNS)
        raise _no_axis(StereotypeSpace({}, pd.DataFrame(), contexts, unembedded, model_id, source, np.empty(0), early),
                       "from the contexts", out)
    values, skipped, layer_ids = _embed_contexts(model, contexts.table, layers)
    S, senses = projection.sense_embeddings(values, contexts.table)
    untestable = _untestable_poles(dictionary, senses)
    if set(dictionary["dimension"]) <= set(untestable["dimension"]):
        raise _no_axis(StereotypeSpace({}, senses, contexts, skipped, model_id, source, S, untestable),
                       "from the embedded contexts", out)
    keep = ~senses["dimension"].isin(set(untestable["dimension"])).to_numpy()
    S, senses = S[keep], senses[keep].reset_index(drop=True)
    bases = {"dimensions": projection.polar_basis(S, senses, "dimensions", layers=layer_ids)}
    if all(d in set(senses["dimension"]) for subs in COMPOSITES.values() for d in subs):
        bases["warmth_competence"] = projection.polar_basis(S, senses, "warmth_competence", layers=layer_ids)
    space = StereotypeSpace(bases, senses, contexts, skipped, model_id, source, S, untestable)
    for r in _overlapping_axes(space).itertuples():
        warnings.warn(f"axes {r.dimension_a} and {r.dimension_b} share {r.n_shared} term(s) ({r.shared_terms}); their "
                      f"values correlate r = {r.correlation:.2f} over the dictionary's senses, so their gaps are not "
                      "independent findings", stacklevel=2)
    return space


def pole_table(space: StereotypeSpace) -> pd.DataFrame:
    """The poles of every basis of ``space`` stacked: :attr:`projection.PolarBasis.poles` plus ``space``,
    ``testable`` (True) and ``reason`` (empty); then the poles of the untestable axes
    (:attr:`StereotypeSpace.untestable`: ``n_senses`` the terms that kept a usable context, ``testable`` False,
    the ``reason``)."""
    built = [b.poles.assign(space=k, testable=True, reason="") for k, b in space.bases.items()]
    lost = space.untestable.rename(columns={"n_usable": "n_senses"}).assign(testable=False)
    return pd.concat(built + ([lost[["dimension", "direction", "n_senses", "space", "testable", "reason"]]]
                              if len(lost) else []), ignore_index=True)


@dataclass
class TermEmbeddings:
    """Extra terms embedded once (:func:`term_embeddings`): ``X`` [n, L, H] (Eq. 4, averaged over
    contexts) aligned with ``table`` (``projection.sense_embeddings``'s, ``n_embedded == 0`` = not
    embedded); ``terms``: the terms asked for after the coverage rule and ``limit``; ``skipped``:
    ``sense_id, term, context, reason`` of every term or context left out."""

    X: np.ndarray
    table: pd.DataFrame
    terms: pd.DataFrame
    skipped: pd.DataFrame


def term_embeddings(model, terms: pd.DataFrame, *, n_contexts: int = 5, seed: int = 0,
                    term_contexts: str = "generated", limit: int | None = None,
                    contexts_file=None) -> TermEmbeddings:
    """Embed extra terms in their contexts, the first ``n_contexts`` per term (the one place that does).

    ``term_contexts``: ``"generated"`` (Table 2's: the gender-neutral contexts of
    ``data/generated/extra_terms_contexts.jsonl``, or ``contexts_file``, see
    ``contexts.generate_extra_contexts``) or ``"dictionary"`` (their WordNet
    examples). With ``generated`` a term without a generated context is a skip with
    its reason and ``limit`` (per dimension and pole, ``dictionaries.limit_terms``)
    samples among the terms that have one, so a quick run evaluates as many terms
    as it would with WordNet contexts.
    """
    check_terms(model, n_contexts=n_contexts, seed=seed, limit=limit, term_contexts=term_contexts)
    skipped = []
    if term_contexts == "generated" and len(terms):
        ctx = extra_term_contexts(terms, n_contexts, contexts_file)
        skipped.append(ctx.skipped.assign(context=""))
        terms = terms[terms["term"].isin(set(ctx.table["term"]))]
    terms = limit_terms(terms, limit, seed)
    X, table = np.empty((0, 0, 0)), pd.DataFrame(columns=["sense_id", "dimension", "term", "direction",
                                                          "n_contexts", "n_embedded"])
    if len(terms):
        if term_contexts == "generated":
            ctx.table = ctx.table[ctx.table["term"].isin(set(terms["term"]))].reset_index(drop=True)
        else:
            ctx = build_contexts(terms, "dictionary", n_contexts, seed)
            skipped.append(ctx.skipped.assign(context=""))
        values, emb_skipped, _ = _embed_contexts(model, ctx.table)
        skipped.append(emb_skipped)
        X, table = projection.sense_embeddings(values, ctx.table)  # Eq. 4: average over contexts
        unembedded = table[table["n_embedded"] == 0]
        if len(unembedded):
            skipped.append(unembedded[["sense_id", "term"]].assign(context="", reason="no context could be embedded"))
    skipped = [s for s in skipped if len(s)]
    skipped = (pd.concat(skipped, ignore_index=True)[_EMBED_SKIP_COLUMNS] if skipped
               else pd.DataFrame(columns=_EMBED_SKIP_COLUMNS))
    return TermEmbeddings(X, table, terms, skipped)


@dataclass
class _DirectionResult:
    """``accuracy``: ``model_id, context_source, term_contexts, evaluation, layer, dimension, cutoff, accuracy,
    ci_low, ci_high, n, n_high, n_low`` (``evaluation`` = ``extra terms`` for held-out
    full-dictionary terms, ``leave-one-out`` for dimensions that have none).
    ``values``: per term ``term, dimension, term_dimension, direction, layer, value, evaluation``.
    ``skipped``: terms or contexts left out, with ``reason``."""

    accuracy: pd.DataFrame
    values: pd.DataFrame
    skipped: pd.DataFrame


def _leave_one_out_values(space: StereotypeSpace, dimensions: Sequence[str], layer="mean") -> pd.DataFrame:
    """Own-dimension value of every dictionary sense of ``dimensions``, each projected
    on a basis built without it (for dimensions without extra terms, e.g. a user's)."""
    S, senses = space.sense_emb, space.senses
    usable = senses["n_embedded"].to_numpy() > 0
    frames = []
    for i in np.flatnonzero(usable & senses["dimension"].isin(dimensions).to_numpy()):
        keep = np.ones(len(senses), bool)
        keep[i] = False
        try:
            basis = projection.polar_basis(S[keep], senses[keep], "dimensions",
                                            layers=space.bases["dimensions"].layers)
        except ParameterError:
            continue  # the held-out sense was its pole's only one: nothing left to predict it from
        frames.append(projection.own_dimension_values({"dimensions": basis}, S[i:i + 1], senses.iloc[[i]], layer))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def direction_prediction(model, space: StereotypeSpace, terms: pd.DataFrame | None = None, *, n_contexts: int = 5,
                         layer="mean", limit: int | None = None, seed: int = 0, n_boot: int = 2000,
                         term_contexts: str = "generated", contexts_file=None) -> _DirectionResult:
    """Predict each extra term's direction from the sign of its projection (Sec. 3.3, Table 2).

    ``terms`` default: ``dictionaries.load_full_dictionary_terms()``, restricted
    to the space's dimensions. ``term_contexts`` says what the extra terms are
    embedded in, first ``n_contexts`` per term: ``"generated"`` (default, the
    paper's Table 2: the gender-neutral contexts of the project's data file
    ``data/generated/extra_terms_contexts.jsonl``, or ``contexts_file``, see
    ``extra_contexts.generate_extra_contexts``) or ``"dictionary"`` (their WordNet
    examples). A term without a context is a row of ``skipped`` with the reason
    (with ``generated``, ``limit`` samples among the terms that have one).
    Dimensions of the space that have no extra term (a user dimension) are
    evaluated leave-one-out on the dictionary's own senses. ``layer``:
    ``"mean"`` (mean over layers, the original's headline), ``"last"``, an int,
    or ``"all"`` (one accuracy per layer). ``accuracy.term_contexts`` records the choice.
    """
    check_terms(model, n_contexts=n_contexts, seed=seed, limit=limit, term_contexts=term_contexts)
    check_layer(layer, layers=next(iter(space.bases.values())).layers)
    check_n_boot(n_boot)
    if terms is None:
        terms = load_full_dictionary_terms()
    # A space may hold only the warmth/competence basis (the layer analysis):
    # then the terms of the composites' member dimensions are the ones it can predict.
    own = list(space.bases["dimensions"].dimensions) if "dimensions" in space.bases else []
    composite_members = ([d for comp in space.bases["warmth_competence"].dimensions
                          for d in COMPOSITES[comp]]
                         if "warmth_competence" in space.bases else [])
    emb = term_embeddings(model, terms[terms["dimension"].isin(own + composite_members)], n_contexts=n_contexts,
                          seed=seed, term_contexts=term_contexts, limit=limit, contexts_file=contexts_file)
    terms, frames = emb.terms, []
    if len(emb.table):
        frames.append(projection.own_dimension_values(space.bases, emb.X, emb.table, layer)
                      .assign(evaluation="extra terms"))
    loo_dims = [d for d in own if d not in set(terms["dimension"])]
    if loo_dims:
        loo = _leave_one_out_values(space, loo_dims, layer)
        if len(loo):
            frames.append(loo.assign(evaluation="leave-one-out"))
    if not frames:
        raise ParameterError("no term to evaluate the direction prediction on")
    values = pd.concat(frames, ignore_index=True)
    accs = [projection.direction_accuracy(v, n_boot=n_boot, seed=seed).assign(evaluation=ev)
            for ev, v in values.groupby("evaluation", sort=False)]
    acc = pd.concat(accs, ignore_index=True)
    acc.insert(0, "term_contexts", term_contexts)
    acc.insert(0, "context_source", space.source)
    acc.insert(0, "model_id", space.model_id)
    cols = ["model_id", "context_source", "term_contexts", "evaluation", "layer", "dimension", "cutoff", "accuracy",
            "ci_low", "ci_high", "n", "n_high", "n_low"]
    return _DirectionResult(acc[cols], values, emb.skipped)


def accuracy_by_term_contexts(model, space: StereotypeSpace, result: _DirectionResult, *, term_contexts: str,
                              **kwargs) -> pd.DataFrame:
    """``result``'s accuracy (computed with ``term_contexts``) followed by the same prediction with the
    extra terms in each other :data:`TERM_CONTEXTS` source (Table 2 side by side). ``kwargs``: the other
    arguments of :func:`direction_prediction`, as ``result`` was computed. Columns: ``DirectionResult.accuracy``'s."""
    others = [direction_prediction(model, space, term_contexts=tc, **kwargs).accuracy
              for tc in _TERM_CONTEXTS if tc != term_contexts]
    return pd.concat([result.accuracy, *others], ignore_index=True)


#: How the chapter names each source of the extra terms' contexts (:data:`TERM_CONTEXTS`).
_TERM_CONTEXT_NAMES = {"generated": "generated sentences", "dictionary": "WordNet examples"}


def table2_by_term_contexts(accuracy: pd.DataFrame, values: str = "accuracy") -> pd.DataFrame:
    """Table 2 for each source of the extra terms' contexts, side by side (:func:`accuracy_by_term_contexts`' rows):
    ``values="accuracy"``, a row per source (``term_contexts``, named as the chapter names it) and ``cutoff``, a
    column per dimension in :func:`bias_utils.profiles.projection.table2`'s order; ``values="n"``, a row per source,
    the number of extra terms each accuracy is computed on (both cut-offs use the same terms). A ``layer`` column
    only when the rows hold several layers."""
    if values not in ("accuracy", "n"):
        raise ParameterError(f"values must be 'accuracy' or 'n', got {values!r}")
    if accuracy.empty:
        return pd.DataFrame(columns=["term_contexts", *(["cutoff"] if values == "accuracy" else [])])
    layered = accuracy["layer"].astype(str).nunique() > 1
    cutoffs = ("raw", "centred") if values == "accuracy" else ("raw",)
    frames = []
    for source, rows in accuracy.groupby("term_contexts", sort=False):
        for cutoff in cutoffs:
            wide = projection.table2(rows.assign(accuracy=rows[values]), cutoff)
            keys = {"term_contexts": _TERM_CONTEXT_NAMES.get(source, source)}
            keys.update({"cutoff": cutoff} if values == "accuracy" else {})
            frames.append(wide.drop(columns=["model_id", "context_source"] + ([] if layered else ["layer"]),
                                    errors="ignore").assign(**keys))
    table = pd.concat(frames, ignore_index=True)
    first = [c for c in ("term_contexts", "cutoff", "layer") if c in table]
    return table[first + [c for c in table.columns if c not in first]]


def describe_table2(accuracy: pd.DataFrame) -> str:
    """What :func:`table2_by_term_contexts` shows, for the sentence before it: the axes (the seed senses' context
    source and the layer) and the extra terms' sources compared."""
    if accuracy.empty:
        return "No direction accuracy to show: no dimension had terms to evaluate."
    sources = [_TERM_CONTEXT_NAMES.get(s, s) for s in dict.fromkeys(accuracy["term_contexts"])]
    layers = list(dict.fromkeys(accuracy["layer"].astype(str)))
    where = f"the {layers[0]} layer" if len(layers) == 1 else f"{len(layers)} layers"
    return (f"Direction accuracy (the share of extra terms whose pole the axis predicts) of the axes built from the "
            f"seed senses' {' and '.join(dict.fromkeys(accuracy['context_source'].astype(str)))} contexts, at "
            f"{where}: a row per context of the extra terms ({' and '.join(sources)}) and cut-off (raw: 0; "
            "centred: the mean over the evaluated terms), a column per dimension.")


def dropped_senses(space: StereotypeSpace) -> pd.DataFrame:
    """Every sense or context of ``space``'s dictionary that did not reach the axis, with the reason.

    Columns ``sense_id, term, context, stage, reason``: ``stage`` is ``contexts``
    (no usable context: ``space.contexts.skipped``), ``filter`` (a context dropped
    by the context filters: ``space.contexts.dropped``), ``embedding`` (a context
    the model could not embed: ``space.skipped``) or ``axis`` (a sense left with
    no embedded context: ``n_embedded == 0`` in ``space.senses``).
    """
    frames = []

    def add(frame: pd.DataFrame | None, stage: str) -> None:
        if frame is None or not len(frame):
            return
        columns = ("sense_id", "term", "context", "reason")
        out = pd.DataFrame({c: frame[c].astype(str) if c in frame else "" for c in columns})
        out["stage"] = stage
        frames.append(out)

    ctx = space.contexts
    add(getattr(ctx, "skipped", None), "contexts")
    add(getattr(ctx, "dropped", None), "filter")
    add(space.skipped, "embedding")
    senses = space.senses
    if "n_embedded" in senses:
        empty = senses[senses["n_embedded"] == 0]
        already = {f for frame in frames if frame["stage"].iloc[0] == "contexts" for f in frame["sense_id"]}
        empty = empty[~empty["sense_id"].astype(str).isin(already)]
        add(empty.assign(reason="no context of this sense could be embedded: the sense is left out of the axis"),
            "axis")
    table = getattr(ctx, "table", None)
    for r in space.untestable[space.untestable["space"] == "dimensions"].drop_duplicates("dimension").itertuples():
        if table is not None:  # the senses that had contexts but whose axis could not be built
            lost = table[(table["dimension"] == r.dimension)].drop_duplicates("sense_id")
            add(lost.assign(context="", reason=f"axis {r.dimension} is untestable (its {r.direction} pole: "
                                               f"{r.reason}): the sense is left out"), "axis")
    if not frames:
        return pd.DataFrame(columns=DROPPED_COLUMNS)
    return pd.concat(frames, ignore_index=True)[DROPPED_COLUMNS]


def dropped_by_reason(dropped: pd.DataFrame) -> pd.DataFrame:
    """:func:`dropped_senses` counted per ``stage, reason`` (column ``n``)."""
    return dropped.groupby(["stage", "reason"]).size().rename("n").reset_index()


def describe_dropped(dropped: pd.DataFrame) -> str:
    """How many senses of :func:`dropped_senses` lost a context or were left off the axis, in a sentence that
    announces :func:`dropped_by_reason`'s table only when there is one to show."""
    n = dropped["sense_id"].nunique()
    if n == 0:
        return "Every sense kept its contexts and reached its axis: none was dropped."
    return (f"{n:,} sense{'s' if n != 1 else ''} lost a context or {'were' if n != 1 else 'was'} left off the axis; "
            "the table below counts them by stage and reason.")


def describe_direction_skipped(skipped: pd.DataFrame) -> str:
    """The extra terms :func:`direction_prediction` could not evaluate (its ``skipped``), in a sentence: how many,
    and why, each reason without its per-term detail (the parenthesis), most frequent first."""
    if skipped.empty:
        return "Every extra term had a usable context: none was left out."
    reasons = skipped["reason"].astype(str).str.replace(r"\s*\([^)]*\)", "", regex=True).value_counts()
    why = "; ".join(f"{reason} ({n:,})" for reason, n in reasons.items())
    n = skipped["term"].nunique() if "term" in skipped else len(skipped)
    return (f"{n:,} extra term{'s were' if n != 1 else ' was'} left out, each a recorded skip with its full reason "
            f"in `{tables.NAMES.DIRECTION_SKIPPED}.csv`: {why}.")
