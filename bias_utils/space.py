"""Study 1 pipeline around the projection maths: build a model's stereotype
space from a dictionary and check it with the direction-prediction task.

Notebooks 03, 04 and 08 call these functions (05 through
:mod:`bias_utils.layers`); every table they return is tidy and documented below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from . import projection
from .contexts import ContextSet, build_contexts
from .dictionaries import limit_terms, load_full_dictionary_terms
from .embeddings import embed_words
from .extra_contexts import extra_term_contexts
from .results import display_name

__all__ = ["DROPPED_COLUMNS", "EMBED_SKIP_COLUMNS", "TERM_CONTEXTS", "DirectionResult", "StereotypeSpace",
           "TermEmbeddings", "accuracy_by_term_contexts", "build_space", "describe_dropped", "describe_space",
           "direction_prediction",
           "dropped_by_reason", "dropped_senses", "embed_contexts", "leave_one_out_values", "pole_table",
           "term_embeddings"]

EMBED_SKIP_COLUMNS = ["sense_id", "term", "context", "reason"]
#: Columns of :func:`dropped_senses`.
DROPPED_COLUMNS = ["sense_id", "term", "context", "stage", "reason"]
#: What the extra terms can be embedded in (:func:`term_embeddings`).
TERM_CONTEXTS = ("generated", "dictionary")


@dataclass
class StereotypeSpace:
    """Polar bases of one model, dictionary and context source.

    ``bases``: ``{"dimensions": PolarBasis, "warmth_competence": PolarBasis}``
    (the second only when the dictionary has the composites' dimensions).
    ``senses``: ``projection.sense_embeddings``'s table (``n_embedded == 0``
    marks a sense whose contexts could not be embedded). ``contexts``: the
    :class:`ContextSet` used. ``skipped``: contexts the model could not embed
    (``sense_id, term, context, reason``).
    """

    bases: dict
    senses: pd.DataFrame
    contexts: ContextSet
    skipped: pd.DataFrame
    model_id: str
    source: str
    sense_emb: np.ndarray


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


def embed_contexts(model, table: pd.DataFrame, layers="all") -> tuple[np.ndarray, pd.DataFrame, tuple[int, ...]]:
    """Word embeddings of ``table.term`` in ``table.context`` (one row per row of ``table``).

    Returns ``(values [n, L, H] with NaN rows for skipped pairs, skipped
    (sense_id, term, context, reason), layers)``.
    """
    emb = embed_words(model, table["context"].tolist(), table["term"].tolist(), layers=layers)
    skipped = pd.DataFrame(columns=EMBED_SKIP_COLUMNS)
    if len(emb.skipped):
        idx = emb.skipped["pair_index"].to_numpy(dtype=int)
        skipped = table.iloc[idx][["sense_id", "term", "context"]].reset_index(drop=True)
        skipped["reason"] = emb.skipped["reason"].astype(str).to_numpy()
    return np.asarray(emb.values), skipped, tuple(int(x) for x in emb.layers)


def build_space(model, dictionary: pd.DataFrame, source: str = "generated", n_contexts: int = 5, seed: int = 0,
                *, corpus=None, generator=None, layers="all") -> StereotypeSpace:
    """Contexts -> embeddings -> sense embeddings -> polar bases (Eqs. 1-3, 5) at every layer.

    ``source`` defaults to ``"generated"``, the paper's main setting (Sec. 3.2)
    and the authors' ``projection.py``. ``generator``: a model (or name) to
    generate new contexts with when ``source == "generated"``; ``None`` uses the
    published Llama-3 contexts.
    """
    contexts = build_contexts(dictionary, source, n_contexts, seed, model=generator, corpus=corpus)
    if contexts.table.empty:
        raise projection.ProjectionError(f"no contexts from source {source!r}; see the skipped senses")
    values, skipped, layer_ids = embed_contexts(model, contexts.table, layers)
    S, senses = projection.sense_embeddings(values, contexts.table)
    bases = {"dimensions": projection.polar_basis(S, senses, "dimensions", layers=layer_ids)}
    if all(d in set(senses["dimension"]) for subs in projection.COMPOSITES.values() for d in subs):
        bases["warmth_competence"] = projection.polar_basis(S, senses, "warmth_competence", layers=layer_ids)
    return StereotypeSpace(bases, senses, contexts, skipped, getattr(model, "model_id", str(model)), source, S)


def pole_table(space: StereotypeSpace) -> pd.DataFrame:
    """The poles of every basis of ``space`` stacked: :attr:`projection.PolarBasis.poles` plus ``space``."""
    return pd.concat([b.poles.assign(space=k) for k, b in space.bases.items()], ignore_index=True)


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
    if term_contexts not in TERM_CONTEXTS:
        raise ValueError(f"term_contexts must be 'generated' or 'dictionary', got {term_contexts!r}")
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
        values, emb_skipped, _ = embed_contexts(model, ctx.table)
        skipped.append(emb_skipped)
        X, table = projection.sense_embeddings(values, ctx.table)  # Eq. 4: average over contexts
        unembedded = table[table["n_embedded"] == 0]
        if len(unembedded):
            skipped.append(unembedded[["sense_id", "term"]].assign(context="", reason="no context could be embedded"))
    skipped = [s for s in skipped if len(s)]
    skipped = (pd.concat(skipped, ignore_index=True)[EMBED_SKIP_COLUMNS] if skipped
               else pd.DataFrame(columns=EMBED_SKIP_COLUMNS))
    return TermEmbeddings(X, table, terms, skipped)


@dataclass
class DirectionResult:
    """``accuracy``: ``model_id, context_source, term_contexts, evaluation, layer, dimension, cutoff, accuracy,
    ci_low, ci_high, n, n_high, n_low`` (``evaluation`` = ``extra terms`` for held-out
    full-dictionary terms, ``leave-one-out`` for dimensions that have none).
    ``values``: per term ``term, dimension, term_dimension, direction, layer, value, evaluation``.
    ``skipped``: terms or contexts left out, with ``reason``."""

    accuracy: pd.DataFrame
    values: pd.DataFrame
    skipped: pd.DataFrame


def leave_one_out_values(space: StereotypeSpace, dimensions: Sequence[str], layer="mean") -> pd.DataFrame:
    """Own-dimension value of every dictionary sense of ``dimensions``, each projected
    on a basis built without it (for dimensions without extra terms, e.g. a user's)."""
    S, senses = space.sense_emb, space.senses
    usable = senses["n_embedded"].to_numpy() > 0
    frames = []
    for i in np.flatnonzero(usable & senses["dimension"].isin(dimensions).to_numpy()):
        keep = np.ones(len(senses), bool)
        keep[i] = False
        try:
            basis = projection.polar_basis(S[keep], senses[keep], "dimensions", layers=space.bases["dimensions"].layers)
        except projection.ProjectionError:
            continue  # the held-out sense was its pole's only one: nothing left to predict it from
        frames.append(projection.own_dimension_values({"dimensions": basis}, S[i:i + 1], senses.iloc[[i]], layer))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def direction_prediction(model, space: StereotypeSpace, terms: pd.DataFrame | None = None, *, n_contexts: int = 5,
                         layer="mean", limit: int | None = None, seed: int = 0, n_boot: int = 2000,
                         term_contexts: str = "generated", contexts_file=None) -> DirectionResult:
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
    if terms is None:
        terms = load_full_dictionary_terms()
    # A space may hold only the warmth/competence basis (the layer analysis):
    # then the terms of the composites' member dimensions are the ones it can predict.
    own = list(space.bases["dimensions"].dimensions) if "dimensions" in space.bases else []
    composite_members = ([d for comp in space.bases["warmth_competence"].dimensions
                          for d in projection.COMPOSITES[comp]]
                         if "warmth_competence" in space.bases else [])
    emb = term_embeddings(model, terms[terms["dimension"].isin(own + composite_members)], n_contexts=n_contexts,
                          seed=seed, term_contexts=term_contexts, limit=limit, contexts_file=contexts_file)
    terms, frames = emb.terms, []
    if len(emb.table):
        frames.append(projection.own_dimension_values(space.bases, emb.X, emb.table, layer)
                      .assign(evaluation="extra terms"))
    loo_dims = [d for d in own if d not in set(terms["dimension"])]
    if loo_dims:
        loo = leave_one_out_values(space, loo_dims, layer)
        if len(loo):
            frames.append(loo.assign(evaluation="leave-one-out"))
    if not frames:
        raise projection.ProjectionError("no term to evaluate the direction prediction on")
    values = pd.concat(frames, ignore_index=True)
    accs = [projection.direction_accuracy(v, n_boot=n_boot, seed=seed).assign(evaluation=ev)
            for ev, v in values.groupby("evaluation", sort=False)]
    acc = pd.concat(accs, ignore_index=True)
    acc.insert(0, "term_contexts", term_contexts)
    acc.insert(0, "context_source", space.source)
    acc.insert(0, "model_id", space.model_id)
    cols = ["model_id", "context_source", "term_contexts", "evaluation", "layer", "dimension", "cutoff", "accuracy",
            "ci_low", "ci_high", "n", "n_high", "n_low"]
    return DirectionResult(acc[cols], values, emb.skipped)


def accuracy_by_term_contexts(model, space: StereotypeSpace, result: DirectionResult, *, term_contexts: str,
                              **kwargs) -> pd.DataFrame:
    """``result``'s accuracy (computed with ``term_contexts``) followed by the same prediction with the
    extra terms in each other :data:`TERM_CONTEXTS` source (Table 2 side by side). ``kwargs``: the other
    arguments of :func:`direction_prediction`, as ``result`` was computed. Columns: ``DirectionResult.accuracy``'s."""
    others = [direction_prediction(model, space, term_contexts=tc, **kwargs).accuracy
              for tc in TERM_CONTEXTS if tc != term_contexts]
    return pd.concat([result.accuracy, *others], ignore_index=True)


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
    if not frames:
        return pd.DataFrame(columns=DROPPED_COLUMNS)
    return pd.concat(frames, ignore_index=True)[DROPPED_COLUMNS]


def dropped_by_reason(dropped: pd.DataFrame) -> pd.DataFrame:
    """:func:`dropped_senses` counted per ``stage, reason`` (column ``n``)."""
    return dropped.groupby(["stage", "reason"]).size().rename("n").reset_index()


def describe_dropped(dropped: pd.DataFrame) -> str:
    """How many senses of :func:`dropped_senses` lost a context or were left off the axis."""
    return (f"{dropped['sense_id'].nunique()} senses lost a context or were left off the axis; "
            "by stage and reason:")
