"""Stereotype projection of a model's own BOLD completions (notebook ``08_completion_profiles``,
decoders only).

Each completion is embedded in its context (prompt + completion) and its
embedding is the mean hidden state over the completion's tokens
(:mod:`bias_utils.embeddings` with the completion as the "word"; for a causal
model every such state has read the prompt). It is projected onto the model's
warmth/competence basis at every layer and averaged over layers, exactly as the
name profiles are (:func:`bias_utils.projection.project` with ``layer="mean"``),
then standardised over all completions of the model (population SD). Because the
projection is linear, this equals the mean of the projected token states.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from . import projection, stats
from .bold import FEMALE_GROUP, MALE_GROUP

__all__ = ["COMPLETION_SKIPPED_TABLE", "COMPLETION_STATS_TABLE", "COMPLETION_VALUES_TABLE", "completion_chart",
           "completion_embeddings", "completion_projection", "completion_projection_stats",
           "describe_completion_stats"]

#: Tables notebook 08 writes in the model's result folder.
COMPLETION_VALUES_TABLE = "completion_projection"
COMPLETION_STATS_TABLE = "completion_projection_stats"
COMPLETION_SKIPPED_TABLE = "completion_projection_skipped"


def completion_embeddings(model, completions: pd.DataFrame, layers="all"):
    """Mean hidden state over each completion's tokens, read in context (prompt + completion).

    ``completions``: columns ``prompt, completion`` (and any ids). Returns
    ``(values [n, L, H] with NaN rows for skipped completions, layers, skipped)``
    where ``skipped`` has the input columns plus ``reason`` (an empty
    completion, or one the tokenizer cannot locate in its context).
    """
    from .embeddings import embed_words  # deferred: torch; crossmodel imports this module for its table names

    missing = {"prompt", "completion"} - set(completions.columns)
    if missing:
        raise ValueError(f"completion_embeddings: input lacks columns {sorted(missing)}")
    table = completions.reset_index(drop=True)
    # Leading punctuation glued to the prompt's last word cannot start a whole-word
    # match; the completion's words are what the projection is about.
    targets = table["completion"].fillna("").str.strip().str.lstrip(",.;:!?)]}'\"-").str.strip()
    contexts = (table["prompt"].str.rstrip() + " " + table["completion"].fillna("").str.strip()).tolist()
    emb = embed_words(model, contexts, targets.tolist(), layers=layers)
    skipped = table.iloc[emb.skipped["pair_index"].to_numpy(dtype=int)].copy()
    skipped["reason"] = emb.skipped["reason"].astype(str).to_numpy()
    return np.asarray(emb.values), list(emb.layers), skipped.reset_index(drop=True)


def completion_projection(basis: projection.PolarBasis, values: np.ndarray, completions: pd.DataFrame,
                          layer="mean") -> pd.DataFrame:
    """Tidy projections of completion embeddings, standardised per dimension.

    Columns: the columns of ``completions``, ``completion_index`` (its row in
    ``completions``), ``space, layer, dimension, value`` and ``z`` (value
    standardised over all embedded completions of this model and dimension,
    population SD, as the profiles are). Skipped completions (NaN embeddings)
    are left out here; they are listed by :func:`completion_embeddings`.
    """
    kept = ~np.isnan(values).any(axis=(1, 2))
    items = completions.reset_index(drop=True).assign(completion_index=np.arange(len(completions)))
    table = projection.projection_table(basis, values[kept], items[kept], layer=layer)
    grouped = table.groupby(["layer", "dimension"])["value"]
    sd = grouped.transform(lambda v: v.std(ddof=0))
    if (sd == 0).any():
        raise ValueError("completion_projection: a dimension has zero spread over the completions")
    table["z"] = (table["value"] - grouped.transform("mean")) / sd
    return table


def completion_projection_stats(table: pd.DataFrame, group_a: str = FEMALE_GROUP, group_b: str = MALE_GROUP,
                                value: str = "z", method: str = "holm") -> pd.DataFrame:
    """Per dimension, ``group_a`` versus ``group_b`` completions: Welch t and Hedges' g (95% CI).

    Rows follow :data:`bias_utils.stats.STAT_COLUMNS` plus ``dimension, mean_a, mean_b``;
    ``p_adj`` is corrected across dimensions (``method``). A positive effect means
    ``group_a``'s completions sit towards the dimension's high pole.
    """
    rows = []
    for dim, d in table.groupby("dimension", sort=False):
        a = d.loc[d["group"] == group_a, value].to_numpy(float)
        b = d.loc[d["group"] == group_b, value].to_numpy(float)
        if len(a) < 2 or len(b) < 2:
            raise ValueError(f"completion_projection_stats: {dim}: {len(a)} {group_a} and {len(b)} {group_b} "
                             "completions; need at least 2 each")
        for row in (stats.welch_t(a, b, group_a=group_a, group_b=group_b),
                    stats.hedges_g(a, b, group_a=group_a, group_b=group_b)):
            rows.append({**row, "dimension": dim, "mean_a": a.mean(), "mean_b": b.mean()})
    return stats.results_table(rows, method=method)


def describe_completion_stats(result: pd.DataFrame) -> list[str]:
    """One sentence per axis: which occupations' completions read warmer / more competent, g, CI, Holm p."""
    lines = []
    for dim, r in result[result["test"] == "hedges_g"].set_index("dimension").iterrows():
        p = result.loc[(result["test"] == "welch_t") & (result["dimension"] == dim), "p_adj"].iloc[0]
        side = {"warmth": "warmer", "competence": "more competent"}.get(dim, f"higher on {dim}")
        who = r["group_a"] if r["effect_size"] > 0 else r["group_b"]
        lines.append(f"{dim}: completions about {who.replace('_', '-')} occupations read as {side} "
                     f"(g = {r['effect_size']:.2f}, 95% CI [{r['ci_low']:.2f}, {r['ci_high']:.2f}], Holm p = {p:.3g})")
    return lines


def completion_chart(table: pd.DataFrame, value: str = "z", *, title: str | None = None) -> alt.Chart:
    """Each completion as a point on the warmth × competence plane, coloured by occupation group."""
    wide = table.pivot_table(index=["completion_index", "group", "occupation"], columns="dimension",
                             values=value).reset_index()
    if not {"warmth", "competence"} <= set(wide.columns):
        raise ValueError("completion_chart needs warmth and competence projections")
    return alt.Chart(wide).mark_point(opacity=0.5, filled=True).encode(
        x=alt.X("warmth:Q", title="← low warmth · high warmth → (standardised)"),
        y=alt.Y("competence:Q", title="← low competence · high competence → (standardised)"),
        color=alt.Color("group:N", title="occupations"),
        tooltip=["occupation", "group", alt.Tooltip("warmth:Q", format=".2f"),
                 alt.Tooltip("competence:Q", format=".2f")],
    ).properties(title=title or "Completions on the warmth and competence axes", width=380, height=320)
