"""Study 1 pipeline around the projection maths: build a model's stereotype
space from a dictionary, check it with the direction-prediction task, and
trace accuracy and the female-male difference over layers and context sources.

Notebooks 03 and 05 (and 04 for the bases) call these functions; every table
they return is tidy and documented below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from . import projection
from .contexts import ContextSet, build_contexts, extra_term_contexts

EMBED_SKIP_COLUMNS = ["sense_id", "term", "context", "reason"]


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


def embed_contexts(model, table: pd.DataFrame, layers="all") -> tuple[np.ndarray, pd.DataFrame, tuple[int, ...]]:
    """Word embeddings of ``table.term`` in ``table.context`` (one row per row of ``table``).

    Returns ``(values [n, L, H] with NaN rows for skipped pairs, skipped
    (sense_id, term, context, reason), layers)``.
    """
    from .embeddings import embed_words

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


def limit_terms(terms: pd.DataFrame, limit: int | None, seed: int = 0) -> pd.DataFrame:
    """At most ``limit`` terms per (dimension, direction), sampled with ``seed`` (quick runs)."""
    if limit is None:
        return terms.reset_index(drop=True)
    shuffled = terms.sample(frac=1.0, random_state=seed)
    keep = shuffled.groupby(["dimension", "direction"], sort=False).cumcount() < limit
    return shuffled[keep].sort_index().reset_index(drop=True)


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
    ``contexts.generate_extra_contexts``) or ``"dictionary"`` (their WordNet
    examples). A term without a context is a row of ``skipped`` with the reason
    (with ``generated``, ``limit`` samples among the terms that have one).
    Dimensions of the space that have no extra term (a user dimension) are
    evaluated leave-one-out on the dictionary's own senses. ``layer``:
    ``"mean"`` (mean over layers, the original's headline), ``"last"``, an int,
    or ``"all"`` (one accuracy per layer). ``accuracy.term_contexts`` records the choice.
    """
    if term_contexts not in ("generated", "dictionary"):
        raise ValueError(f"term_contexts must be 'generated' or 'dictionary', got {term_contexts!r}")
    if terms is None:
        from .dictionaries import load_full_dictionary_terms

        terms = load_full_dictionary_terms()
    # A space may hold only the warmth/competence basis (the layer analysis):
    # then the terms of the composites' member dimensions are the ones it can predict.
    own = list(space.bases["dimensions"].dimensions) if "dimensions" in space.bases else []
    composite_members = ([d for comp in space.bases["warmth_competence"].dimensions for d in projection.COMPOSITES[comp]]
                         if "warmth_competence" in space.bases else [])
    terms = terms[terms["dimension"].isin(own + composite_members)]
    frames, skipped = [], []
    if term_contexts == "generated" and len(terms):
        # Terms without a generated context are recorded; ``limit`` then samples among the others, so a
        # quick run evaluates as many terms as it would with WordNet contexts.
        ctx = extra_term_contexts(terms, n_contexts, contexts_file)
        skipped.append(ctx.skipped.assign(context=""))
        terms = terms[terms["term"].isin(set(ctx.table["term"]))]
    terms = limit_terms(terms, limit, seed)
    if len(terms):
        if term_contexts == "generated":
            ctx.table = ctx.table[ctx.table["term"].isin(set(terms["term"]))].reset_index(drop=True)
        else:
            ctx = build_contexts(terms, "dictionary", n_contexts, seed)
            skipped.append(ctx.skipped.assign(context=""))
        values, emb_skipped, _ = embed_contexts(model, ctx.table)
        skipped.append(emb_skipped)
        X, term_table = projection.sense_embeddings(values, ctx.table)  # Eq. 4: average over contexts
        frames.append(projection.own_dimension_values(space.bases, X, term_table, layer).assign(evaluation="extra terms"))
        unembedded = term_table[term_table["n_embedded"] == 0]
        if len(unembedded):
            skipped.append(unembedded[["sense_id", "term"]].assign(context="", reason="no context could be embedded"))
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
    skipped = [s for s in skipped if len(s)]
    skipped = (pd.concat(skipped, ignore_index=True)[["sense_id", "term", "context", "reason"]]
               if skipped else pd.DataFrame(columns=EMBED_SKIP_COLUMNS))
    cols = ["model_id", "context_source", "term_contexts", "evaluation", "layer", "dimension", "cutoff", "accuracy",
            "ci_low", "ci_high", "n", "n_high", "n_low"]
    return DirectionResult(acc[cols], values, skipped)


def gender_difference_by_layer(space: StereotypeSpace, pop_emb, population: str = "names") -> pd.DataFrame:
    """Female-minus-male difference of standardised projections at every layer
    (``profiles.profile_table`` + ``profiles.profile_stats``, Welch t with Holm per layer).

    Columns: ``population, space, layer, dimension, group_a, group_b, diff, t, p, p_holm, g, g_ci_low, g_ci_high``.
    """
    from .profiles import profile_stats, profile_table

    table = profile_table(pop_emb, space.bases, layer="all")
    stats = profile_stats(table, populations=[population])
    return stats[["population", "space", "layer", "dimension", "group_a", "group_b", "diff", "t", "p", "p_holm",
                  "g", "g_ci_low", "g_ci_high"]]


def layers_by_context(model, dictionary: pd.DataFrame, sources: Sequence[str] = ("dictionary", "generated", "corpus", "none"),
                      *, populations="names", templates=None, n_contexts: int = 5, seed: int = 0,
                      limit: int | None = None, n_boot: int = 200, corpus=None, generator=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy (warmth/competence) and the female-male difference on every layer,
    for each context source (the paper's Figure 6).

    Returns ``(curves, skipped)``. ``curves`` columns: ``model_id,
    context_source, layer, measure, dimension, value, ci_low, ci_high,
    p_holm``. Measures: ``accuracy_raw`` / ``accuracy_centred`` (CI: bootstrap
    with ``n_boot`` draws), ``female_minus_male`` (difference of the groups'
    standardised means, first group minus second, positive = female-associated;
    ``p_holm`` from Welch's t, Holm over the two dimensions of a layer) and
    ``hedges_g`` (same comparison as an effect size, with its 95% CI).
    ``skipped``: per source, senses without contexts, unembeddable contexts and
    sources that failed entirely, with ``reason``.
    """
    from .profiles import DEFAULT_TEMPLATES, population_embeddings

    pop_emb = population_embeddings(model, populations, templates or DEFAULT_TEMPLATES)
    from .dictionaries import load_full_dictionary_terms

    terms = load_full_dictionary_terms()
    curves, skipped = [], []
    for source in tqdm(sources, desc="context sources"):
        try:
            space = build_space(model, dictionary, source, n_contexts, seed, corpus=corpus, generator=generator)
        except Exception as exc:  # one unusable source must not hide the others; it is reported
            skipped.append({"context_source": source, "sense_id": "", "term": "", "reason": f"{type(exc).__name__}: {exc}"})
            continue
        skipped += [{"context_source": source, "sense_id": r.sense_id, "term": r.term, "reason": r.reason}
                    for r in pd.concat([space.contexts.skipped, space.skipped], ignore_index=True).itertuples()]
        if "warmth_competence" not in space.bases:
            continue
        wc = StereotypeSpace({"warmth_competence": space.bases["warmth_competence"]}, space.senses, space.contexts,
                             space.skipped, space.model_id, source, space.sense_emb)
        acc = direction_prediction(model, wc, terms, n_contexts=n_contexts, layer="all", limit=limit, seed=seed,
                                   n_boot=n_boot).accuracy
        acc = acc[acc["dimension"].isin(list(projection.COMPOSITES))]
        curves.append(pd.DataFrame({"model_id": space.model_id, "context_source": source, "layer": acc["layer"],
                                    "measure": "accuracy_" + acc["cutoff"], "dimension": acc["dimension"],
                                    "value": acc["accuracy"], "ci_low": acc["ci_low"], "ci_high": acc["ci_high"],
                                    "p_holm": np.nan}))
        diff = gender_difference_by_layer(wc, pop_emb, next(iter(pop_emb.words["population"])))
        for measure, col, lo, hi in (("female_minus_male", "diff", None, None),
                                     ("hedges_g", "g", "g_ci_low", "g_ci_high")):
            curves.append(pd.DataFrame({
                "model_id": space.model_id, "context_source": source, "layer": diff["layer"], "measure": measure,
                "dimension": diff["dimension"], "value": diff[col],
                "ci_low": diff[lo] if lo else np.nan, "ci_high": diff[hi] if hi else np.nan,
                "p_holm": diff["p_holm"]}))
    curves = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    return curves, pd.DataFrame(skipped, columns=["context_source", "sense_id", "term", "reason"])


def load_dictionary(dictionary_path=None) -> pd.DataFrame:
    """The seed dictionary (``None``) or a user dictionary CSV (``dictionaries.read_dictionary``)."""
    from .dictionaries import load_seed_dictionary, read_dictionary

    return load_seed_dictionary() if dictionary_path in (None, "") else read_dictionary(dictionary_path)
