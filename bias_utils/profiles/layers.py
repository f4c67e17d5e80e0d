"""Layers × context sources (notebook 05, the paper's Figure 6): on every layer and for
each context source, the accuracy of the warmth/competence direction prediction and
the female-male difference of name projections.

It reuses the Study 1 steps unchanged: :func:`bias_utils.profiles.space.build_space` and
:func:`bias_utils.profiles.space.direction_prediction` per source, and
:mod:`bias_utils.profiles.population_profiles` for the group comparison at every layer.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core import precision
from ..core.errors import check_positive_int
from ..core.stats import check_n_boot
from .dictionaries import COMPOSITES, load_full_dictionary_terms
from .population_profiles import (
    DEFAULT_TEMPLATES,
    check_profile_run,
    population_embeddings,
    profile_stats,
    profile_table,
)
from .space import (
    DROPPED_COLUMNS,
    StereotypeSpace,
    build_space,
    check_source_spaces,
    direction_prediction,
    dropped_senses,
)

__all__ = [
    "describe_layers", "layers_by_context",
]


def _gender_difference_by_layer(space: StereotypeSpace, pop_emb, population: str = "names") -> pd.DataFrame:
    """Female-minus-male difference of standardised projections at every layer
    (``profiles.profile_table`` + ``profiles.profile_stats``, Welch t with Holm per layer).

    Columns: ``population, space, layer, dimension, group_a, group_b, diff, t, p, p_holm, g, g_ci_low, g_ci_high``.
    """
    table = profile_table(pop_emb, space.bases, layer="all")
    stats = profile_stats(table, populations=[population])
    return stats[["population", "space", "layer", "dimension", "group_a", "group_b", "diff", "t", "p", "p_holm",
                  "g", "g_ci_low", "g_ci_high"]]


def layers_by_context(model, dictionary: pd.DataFrame, sources: Sequence[str] | None = None,
                      *, populations="names", templates=None, n_contexts: int = 5, seed: int = 0,
                      limit: int | None = None, n_boot: int = 200, corpus=None,
                      generator=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy (warmth/competence) and the female-male difference on every layer,
    for each context source (the paper's Figure 6; ``sources=None``: every
    registered one, ``contexts.source_names()``).

    Returns ``(curves, skipped)``. ``curves`` columns: ``model_id,
    context_source, layer, measure, dimension, value, ci_low, ci_high,
    p_holm``. Measures: ``accuracy_raw`` / ``accuracy_centred`` (CI: bootstrap
    with ``n_boot`` draws), ``female_minus_male`` (difference of the groups'
    standardised means, first group minus second, positive = female-associated;
    ``p_holm`` from Welch's t, Holm over the two dimensions of a layer) and
    ``hedges_g`` (same comparison as an effect size, with its 95% CI).
    ``skipped``: ``context_source`` plus :func:`space.dropped_senses`'s columns
    (every sense or context that missed the axis, with ``stage`` and ``reason``), and a
    ``stage == "source"`` row for a source that failed entirely. Every parameter is checked first, before any
    model loads (``space.check_source_spaces``, ``profiles.check_profile_run``).
    """
    sources = check_source_spaces(model, dictionary, sources, n_contexts, seed, generator=generator)
    check_profile_run(model, populations, templates)
    check_positive_int(limit, "limit", allow_none=True)
    check_n_boot(n_boot)
    pop_emb = population_embeddings(model, populations, templates or DEFAULT_TEMPLATES)
    terms = load_full_dictionary_terms()
    curves, skipped = [], []
    for source in tqdm(sources, desc="context sources"):
        try:
            space = build_space(model, dictionary, source, n_contexts, seed, corpus=corpus, generator=generator)
        except Exception as exc:  # one unusable source must not hide the others; it is reported
            skipped.append(pd.DataFrame([{"context_source": source, "sense_id": "", "term": "", "context": "",
                                          "stage": "source", "reason": f"{type(exc).__name__}: {exc}"}]))
            continue
        skipped.append(dropped_senses(space).assign(context_source=source))
        if "warmth_competence" not in space.bases:
            continue
        wc = StereotypeSpace({"warmth_competence": space.bases["warmth_competence"]}, space.senses, space.contexts,
                             space.skipped, space.model_id, source, space.sense_emb)
        acc = direction_prediction(model, wc, terms, n_contexts=n_contexts, layer="all", limit=limit, seed=seed,
                                   n_boot=n_boot).accuracy
        acc = acc[acc["dimension"].isin(list(COMPOSITES))]
        curves.append(pd.DataFrame({"model_id": space.model_id, "context_source": source, "layer": acc["layer"],
                                    "measure": "accuracy_" + acc["cutoff"], "dimension": acc["dimension"],
                                    "value": acc["accuracy"], "ci_low": acc["ci_low"], "ci_high": acc["ci_high"],
                                    "p_holm": np.nan}))
        diff = _gender_difference_by_layer(wc, pop_emb, next(iter(pop_emb.words["population"])))
        for measure, col, lo, hi in (("female_minus_male", "diff", None, None),
                                     ("hedges_g", "g", "g_ci_low", "g_ci_high")):
            curves.append(pd.DataFrame({
                "model_id": space.model_id, "context_source": source, "layer": diff["layer"], "measure": measure,
                "dimension": diff["dimension"], "value": diff[col],
                "ci_low": diff[lo] if lo else np.nan, "ci_high": diff[hi] if hi else np.nan,
                "p_holm": diff["p_holm"]}))
    curves = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    columns = ["context_source", *DROPPED_COLUMNS]
    skipped = pd.concat(skipped, ignore_index=True)[columns] if skipped else pd.DataFrame(columns=columns)
    return curves, skipped


def describe_layers(curves: pd.DataFrame, context_source: str = "generated") -> str:
    """Where in the model the names' gap is largest (chapter 05's first screen), from :func:`layers_by_context`'s
    ``curves``: per dimension, the hidden state of the largest |Hedges' g| with ``context_source``'s contexts (the
    first source in the table where it has none), its g and 95% interval, and on how many states the interval lies
    off 0. Each state's interval is its own, not adjusted over the states, and the sentence says so; "" without
    curves."""
    g = curves[curves["measure"] == "hedges_g"] if len(curves) else curves
    if g.empty:
        return ""
    source = context_source if context_source in set(g["context_source"]) else str(g["context_source"].iloc[0])
    g = g[g["context_source"] == source]
    n_states = g["layer"].nunique()
    parts = []
    for dimension, rows in g.groupby("dimension", sort=False):
        top = rows.loc[rows["value"].abs().idxmax()]
        off = int(((rows["ci_low"] > 0) | (rows["ci_high"] < 0)).sum())
        side = "female" if top["value"] > 0 else "male"
        parts.append(f"on {dimension} at hidden state {int(top['layer'])} of {n_states - 1} (g "
                     f"{precision.number_text(top['value'])}, 95% CI "
                     f"{precision.interval_text(top['ci_low'], top['ci_high'], top['value'])}, toward the {side} "
                     f"names' side; the interval lies off 0 at {off} of {n_states} states)")
    return (f"With the {source} contexts, the female − male gap of first names is largest "
            + "; ".join(parts) + ". Each state's interval is its own, not adjusted over the states: the profile's "
            "reading is the mean over the states (chapter *Stereotype profiles*).")
