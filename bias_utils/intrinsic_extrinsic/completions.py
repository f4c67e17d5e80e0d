"""Stereotype projection of a model's own BOLD completions (notebook ``08_completion_profiles``,
decoders only).

Each completion is embedded in its context (prompt + completion) and its
embedding is the mean hidden state over the completion's tokens (for a causal
model every such state has read the prompt). The states come from the decoding
pass that wrote the completion (``generation.generate`` stores them beside its
cache; :func:`bias_utils.models.generation.completion_states`); a completion from an
older cache is embedded again (:mod:`bias_utils.models.embeddings` with the completion
as the "word" in ``prompt + " " + completion``). It is projected onto the model's
warmth/competence basis at every layer and averaged over layers, exactly as the
name profiles are (:func:`bias_utils.profiles.projection.project` with ``layer="mean"``),
then standardised over all completions of the model (population SD). Because the
projection is linear, this equals the mean of the projected token states.

What the chapter tests, and why
-------------------------------
* **The occupation is the unit** (primary). The audit's prompts come in
  occupations (224 in the full audit), and completions about one occupation
  share their topic and their prompt's words, so they are not independent
  draws. Completions are averaged per occupation; female- and male-dominated
  occupations are compared with Welch's t and Hedges' g on these means (Holm
  over the two axes), and the difference of occupation means gets an
  occupation bootstrap interval (:func:`bias_utils.core.stats.cluster_bootstrap_ci`,
  occupations resampled within each group). The completion-level test is kept in
  the table as ``completions_as_independent``, for comparison only.
* **Topic held fixed.** Female- and male-dominated occupations sit in different
  BOLD categories (nursing against engineering), so their contrast mixes gender
  with topic. Within each category that has occupations of both groups the
  difference of occupation means is reported (:func:`category_contrasts`), and
  pooled as the category fixed-effects estimate (the coefficient of group in a
  regression of the occupation mean on group and category dummies, which equals
  the category differences weighted by ``n_a n_b / (n_a + n_b)``). Its test
  permutes the group labels within each category. It has no interval: a
  bootstrap that resamples occupations within category and group has no
  variance where a group holds one occupation of a category (most of them), so
  its interval excluded zero while the permutation p was 0.48; the permutation
  test is the one whose structure matches the question.
* **The prompt's own words, and the primary contrast.** The completion's states
  have read the prompt, and the prompt (BOLD's words, not the model's) names the
  occupation. The prompt alone is embedded the same way (mean hidden state over
  its tokens, nothing after it) and projected; the completion's effect beyond it
  is ``completion − prompt`` per completion. Both are put on the completion's
  scale (centred on their own mean, divided by the completions' SD), so the
  completion's gap is exactly the prompt's gap plus the gap beyond it. The
  question of the chapter is what the model *writes*, so the **pre-stated primary
  contrast** is the completion beyond its prompt (:data:`PRIMARY_MEASURE`), at
  the occupation level; the whole completion and the prompt alone are reported
  beside it as its decomposition.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..audit.bold_prompts import FEMALE_GROUP, MALE_GROUP
from ..core import precision, stats
from ..core.errors import ParameterError, check_count, check_seed, check_word_list
from ..core.results import first_row
from ..profiles import projection
from ..report import plots, rendering

__all__ = [
    "category_contrasts", "completion_chart", "completion_embeddings", "completion_projection",
    "completion_projection_stats", "describe_completion_stats", "occupation_means",
]

#: Tables notebook 08 writes in the model's result folder.

#: measure -> its standardised column in :func:`completion_projection`'s table.
_MEASURES = {"completion": "z", "prompt": "prompt_z", "beyond_prompt": "beyond_prompt_z"}
#: The pre-stated primary contrast: what the model adds beyond the prompt's words (module docstring).
_PRIMARY_MEASURE = "beyond_prompt"
#: The analyses of :func:`completion_projection_stats`, primary first.
_ANALYSES = ("occupation", "within_category", "completions_as_independent")

_SIDES = {"warmth": ("warmer", "colder"), "competence": ("more competent", "less competent")}


def completion_embeddings(model, completions: pd.DataFrame, layers="all", part: str = "completion",
                          stored: bool = True, with_source: bool = False):
    """Mean hidden state over each completion's tokens, read in context (prompt + completion).

    ``completions``: columns ``prompt, completion`` (and any ids). With
    ``part="prompt"`` the prompt alone is embedded the same way (its own text as
    context, the mean over all its tokens): the baseline of what the prompt's
    words put on the axes. Returns ``(values [n, L, H] with NaN rows for skipped
    rows, layers, skipped)`` where ``skipped`` has the input columns plus
    ``part`` and ``reason`` (an empty text, or one the tokenizer cannot locate in
    its context); with ``with_source`` also a boolean array, True where the row
    came from the stored states.

    ``stored`` (with ``layers="all"``): take the states that
    :func:`bias_utils.models.generation.generate` kept while it wrote the completion
    (:func:`bias_utils.models.generation.completion_states`), and embed only the rest
    again. The two agree wherever the re-embedding reads the tokens the model
    wrote; where the completion began with whitespace the re-embedding joins it
    to the prompt with one space (module docstring of ``generation``, *Hidden
    states*), and the stored states are those the model had.
    """
    # deferred: torch; crossmodel imports this module for its table names
    from ..models.embeddings import embed_words
    from ..models.loading import check_model, resolve_model

    check_model(model, need="embed", what="projecting completions (hidden states)")
    missing = {"prompt", "completion"} - set(completions.columns)
    if missing:
        raise ParameterError(f"completions lacks columns {sorted(missing)}")
    if part not in ("completion", "prompt"):
        raise ParameterError(f"part must be 'completion' or 'prompt', got {part!r}")
    model = resolve_model(model, need="embed")
    table = completions.reset_index(drop=True)
    if part == "completion":
        # Leading punctuation glued to the prompt's last word cannot start a whole-word
        # match; the completion's words are what the projection is about.
        targets = table["completion"].fillna("").str.strip().str.lstrip(",.;:!?)]}'\"-").str.strip()
        contexts = table["prompt"].str.rstrip() + " " + table["completion"].fillna("").str.strip()
    else:
        targets = contexts = table["prompt"].fillna("").str.strip()
    values, found = None, np.zeros(len(table), dtype=bool)
    if stored and isinstance(layers, str) and layers == "all" and len(table):
        from ..models.generation import completion_states  # deferred: torch

        states = completion_states(model.model_id, table["prompt"].tolist(), table["completion"].tolist())
        if states is not None:
            values = states[part]
            found = ~np.isnan(values).any(axis=(1, 2))
    rest = np.flatnonzero(~found)
    skipped = table.iloc[[]].assign(part=part, reason=pd.Series(dtype=str))
    layer_list = list(range(model.n_layers + 1))
    if len(rest) or values is None:
        emb = embed_words(model, contexts.iloc[rest].tolist(), targets.iloc[rest].tolist(), layers=layers)
        layer_list = list(emb.layers)
        if values is None:
            values = np.asarray(emb.values)
        else:
            values[rest] = emb.values
        skipped = table.iloc[rest[emb.skipped["pair_index"].to_numpy(dtype=int)]].copy()
        skipped["part"] = part
        skipped["reason"] = emb.skipped["reason"].astype(str).to_numpy()
    out = (values, layer_list, skipped.reset_index(drop=True))
    return (*out, found) if with_source else out


def completion_projection(basis: projection.PolarBasis, values: np.ndarray, completions: pd.DataFrame,
                          layer="mean", prompt_values: np.ndarray | None = None) -> pd.DataFrame:
    """Tidy projections of completion embeddings, standardised per dimension.

    Columns: the columns of ``completions``, ``completion_index`` (its row in
    ``completions``), ``space, layer, dimension, value`` and ``z`` (value
    standardised over all embedded completions of this model and dimension,
    population SD, as the profiles are). With ``prompt_values`` (the prompts'
    embeddings, :func:`completion_embeddings` with ``part="prompt"``) also
    ``prompt_value``, ``beyond_prompt_value`` (``value − prompt_value``) and
    ``prompt_z``, ``beyond_prompt_z``: each centred on its own mean and divided
    by the completions' SD, so ``z`` gaps = ``prompt_z`` gaps + ``beyond_prompt_z``
    gaps. Rows with a NaN embedding (of the completion or of its prompt) are
    left out here; they are listed by :func:`completion_embeddings`.
    """
    bad = np.isnan(values).any(axis=(1, 2))
    if prompt_values is not None:
        if prompt_values.shape != values.shape:
            raise ValueError(f"completion_projection: prompt embeddings {prompt_values.shape} do not match the "
                             f"completions' {values.shape}")
        bad |= np.isnan(prompt_values).any(axis=(1, 2))
    kept = ~bad
    items = completions.reset_index(drop=True).assign(completion_index=np.arange(len(completions)))
    table = projection.projection_table(basis, values[kept], items[kept], layer=layer)
    keys = [table["layer"], table["dimension"]]
    sd = table["value"].groupby(keys).transform(lambda v: v.std(ddof=0))
    if (sd == 0).any():
        raise ValueError("completion_projection: a dimension has zero spread over the completions")
    if prompt_values is not None:
        table["prompt_value"] = projection.projection_table(basis, prompt_values[kept], items[kept],
                                                            layer=layer)["value"].to_numpy()
        table["beyond_prompt_value"] = table["value"] - table["prompt_value"]
    for measure, column in _MEASURES.items():
        raw = table.get("value" if measure == "completion" else f"{measure}_value")
        if raw is not None:
            table[column] = (raw - raw.groupby(keys).transform("mean")) / sd
    return table


def occupation_means(table: pd.DataFrame, within_category: bool = False) -> pd.DataFrame:
    """Per dimension and occupation, the mean of every measure over the occupation's completions.

    Columns: ``space, layer, dimension, group`` (and ``category`` when
    ``within_category``: one row per category an occupation is listed in),
    ``occupation``, ``n_completions`` and the measure columns of :data:`MEASURES`
    that ``table`` has.
    """
    if within_category and "category" not in table:
        raise ValueError("occupation_means: within_category needs a 'category' column")
    keys = ["space", "layer", "dimension", "group", *(["category"] if within_category else []), "occupation"]
    columns = [c for c in _MEASURES.values() if c in table]
    grouped = table.groupby(keys, sort=False, dropna=False)
    return grouped[columns].mean().assign(n_completions=grouped.size()).reset_index()[
        keys + ["n_completions"] + columns]


def category_contrasts(table: pd.DataFrame, group_a: str = FEMALE_GROUP, group_b: str = MALE_GROUP) -> pd.DataFrame:
    """Per measure, dimension and BOLD category: ``group_a`` minus ``group_b`` occupation means.

    Columns: ``measure, dimension, category, n_a, n_b`` (occupations), ``mean_a,
    mean_b, difference`` (NaN unless both groups are present), ``both_groups`` and
    ``weight`` = ``n_a n_b / (n_a + n_b)``, the category's weight in the pooled
    within-category estimate of :func:`completion_projection_stats`.
    """
    cells = occupation_means(table, within_category=True)
    rows = []
    for measure, column in _MEASURES.items():
        if column not in cells:
            continue
        for (dim, category), d in cells.groupby(["dimension", "category"], sort=False):
            a = d.loc[d["group"] == group_a, column]
            b = d.loc[d["group"] == group_b, column]
            both = len(a) > 0 and len(b) > 0
            rows.append({"measure": measure, "dimension": dim, "category": category, "n_a": len(a), "n_b": len(b),
                         "mean_a": a.mean(), "mean_b": b.mean(), "difference": a.mean() - b.mean(),
                         "both_groups": both, "weight": len(a) * len(b) / (len(a) + len(b)) if both else 0.0})
    return pd.DataFrame(rows, columns=["measure", "dimension", "category", "n_a", "n_b", "mean_a", "mean_b",
                                       "difference", "both_groups", "weight"])


def _fixed_effects_gap(v: np.ndarray, is_a: np.ndarray, category: np.ndarray) -> np.ndarray:
    """Category fixed-effects estimate of the a − b gap for each row of labels ``is_a`` [K, n]."""
    num = np.zeros(is_a.shape[0])
    den = np.zeros(is_a.shape[0])
    for c in np.unique(category):
        m = category == c
        a = is_a[:, m]
        na = a.sum(axis=1)
        nb = m.sum() - na
        diff = a @ v[m] / na - (~a) @ v[m] / nb
        weight = na * nb / (na + nb)
        num += weight * diff
        den += weight
    return num / den


def _pooled_gap(cells: pd.DataFrame, column: str, group_a: str) -> float:
    """:func:`_fixed_effects_gap` of (category, occupation) cells with their own labels."""
    is_a = (cells["group"] == group_a).to_numpy()[None]
    return float(_fixed_effects_gap(cells[column].to_numpy(float), is_a, pd.factorize(cells["category"])[0])[0])


def _group_values(d: pd.DataFrame, column: str, group_a: str, group_b: str, unit: str):
    a = d.loc[d["group"] == group_a, column].to_numpy(float)
    b = d.loc[d["group"] == group_b, column].to_numpy(float)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"completion_projection_stats: {d['dimension'].iloc[0]}: {len(a)} {group_a} and {len(b)} "
                         f"{group_b} {unit}; need at least 2 each")
    return a, b


def _occupation_rows(occ: pd.DataFrame, column: str, group_a: str, group_b: str, n_boot: int, seed: int) -> list:
    def gap(d: pd.DataFrame) -> float:
        means = d.groupby("group")[column].mean()
        return means.get(group_a, np.nan) - means.get(group_b, np.nan)

    rows = []
    for dim, d in occ.groupby("dimension", sort=False):
        a, b = _group_values(d, column, group_a, group_b, "occupations")
        est, low, high = stats.cluster_bootstrap_ci(d, gap, cluster="occupation", strata="group", n_boot=n_boot,
                                                    seed=seed)
        common = {"dimension": dim, "n_a": len(a), "n_b": len(b), "mean_a": a.mean(), "mean_b": b.mean()}
        rows += [{**stats.welch_t(a, b, group_a=group_a, group_b=group_b), **common},
                 {**stats.hedges_g(a, b, group_a=group_a, group_b=group_b), **common},
                 {"test": "cluster_bootstrap_occupation", "group_a": group_a, "group_b": group_b,
                  "effect": "mean_difference", "effect_size": est, "ci_low": low, "ci_high": high,
                  "n": len(a) + len(b), **common}]
    return rows


def _within_category_rows(cells: pd.DataFrame, column: str, group_a: str, group_b: str,
                          n_permutations: int, seed: int) -> list:
    n_total = cells["category"].nunique()
    sides = cells[cells["group"].isin([group_a, group_b])]
    both = sides.groupby("category")["group"].transform("nunique") == 2
    cells = sides[both].reset_index(drop=True)
    names = list(dict.fromkeys(cells["category"]))
    rows = []
    for dim, d in cells.groupby("dimension", sort=False):
        v = d[column].to_numpy(float)
        is_a = (d["group"] == group_a).to_numpy()
        category = pd.factorize(d["category"])[0]
        est = _pooled_gap(d, column, group_a)
        rng = np.random.default_rng(seed)
        perms = np.tile(is_a, (n_permutations, 1))
        for c in np.unique(category):
            perms[:, category == c] = rng.permuted(perms[:, category == c], axis=1)
        null = _fixed_effects_gap(v, perms, category)
        p = float(stats.permutation_p(est, null, "two-sided"))
        counts = d.groupby(["category", "group"]).size()
        listed = "; ".join(f"{c} ({counts.get((c, group_a), 0)} vs {counts.get((c, group_b), 0)})" for c in names)
        rows.append({"test": "permutation_within_category", "group_a": group_a, "group_b": group_b,
                     "statistic": est, "p": p, "effect": "mean_difference", "effect_size": est, "ci_low": np.nan,
                     "ci_high": np.nan, "n": len(d), "dimension": dim, "n_a": int(is_a.sum()),
                     "n_b": int((~is_a).sum()), "p_floor": 1 / (n_permutations + 1),
                     "n_permutations": n_permutations, "n_categories": len(names), "n_categories_total": n_total,
                     "categories": listed})
    return rows


def _completion_rows(table: pd.DataFrame, group_a: str, group_b: str) -> list:
    rows = []
    for dim, d in table.groupby("dimension", sort=False):
        a, b = _group_values(d, "z", group_a, group_b, "completions")
        common = {"dimension": dim, "n_a": len(a), "n_b": len(b), "mean_a": a.mean(), "mean_b": b.mean()}
        rows += [{**stats.welch_t(a, b, group_a=group_a, group_b=group_b), **common},
                 {**stats.hedges_g(a, b, group_a=group_a, group_b=group_b), **common}]
    return rows


def completion_projection_stats(table: pd.DataFrame, group_a: str = FEMALE_GROUP, group_b: str = MALE_GROUP, *,
                                n_boot: int = 1000, n_permutations: int = 2000, seed: int = 0,
                                method: str = "holm", unreadable: Sequence[str] = ()) -> pd.DataFrame:
    """``group_a`` versus ``group_b`` per dimension, with the occupation as the unit.

    ``table``: :func:`completion_projection`'s rows (columns ``group,
    occupation``; ``category`` for the within-category analysis; the
    ``prompt_z`` columns for the prompt baseline). Rows follow
    :data:`bias_utils.core.stats.STAT_COLUMNS` plus ``analysis`` (:data:`ANALYSES`),
    ``measure`` (:data:`MEASURES`), ``unit``, ``dimension, n_a, n_b`` (units per
    group), ``mean_a, mean_b`` (unit means on the completion's scale),
    ``primary`` (the occupation-level completion rows, which come first),
    ``axis_readable`` (False for the dimensions in ``unreadable``), and for the
    within-category rows ``p_floor`` (= 1/(K+1)), ``n_permutations``,
    ``n_categories`` (with both groups), ``n_categories_total`` and
    ``categories`` (each with its occupations per group).

    * ``occupation``: per measure, ``welch_t`` and ``hedges_g`` on occupation
      means and ``cluster_bootstrap_occupation`` (the difference of occupation
      means with an occupation bootstrap CI, ``n_boot`` replicates).
    * ``within_category``: ``permutation_within_category``, the category
      fixed-effects gap over the categories with both groups (``n`` = category ×
      occupation cells), its p from ``n_permutations`` relabellings within
      category (two-sided); no interval (``ci_low, ci_high`` NaN: module
      docstring). ``mean_a, mean_b`` are NaN here (per category in
      :func:`category_contrasts`). Missing without a ``category`` column or a
      category with both groups.
    * ``completions_as_independent``: ``welch_t`` and ``hedges_g`` on the
      completions themselves, as if they were independent (for comparison only).

    ``primary`` marks the occupation-level rows of :data:`PRIMARY_MEASURE` (the
    completion beyond its prompt; the whole completion where the table has no
    prompt values), which come first. ``p_adj`` is corrected across dimensions
    within one analysis and measure (``method``). A positive effect means
    ``group_a`` sits towards the high pole.
    """
    stats.check_n_boot(n_boot)
    check_count(n_permutations, "n_permutations", minimum=1)
    check_seed(seed)
    if method not in ("holm", "bonferroni"):
        raise ParameterError(f"method must be 'holm' or 'bonferroni', got {method!r}")
    unreadable = check_word_list(unreadable, "unreadable")
    occ = occupation_means(table)
    measures = [(m, c) for m, c in _MEASURES.items() if c in table]
    primary = _PRIMARY_MEASURE if _MEASURES[_PRIMARY_MEASURE] in table else "completion"
    measures.sort(key=lambda mc: mc[0] != primary)
    families = [(("occupation", m, "occupation"), _occupation_rows(occ, c, group_a, group_b, n_boot, seed))
                for m, c in measures]
    if "category" in table:
        cells = occupation_means(table, within_category=True)
        families += [(("within_category", m, "occupation within category"),
                      _within_category_rows(cells, c, group_a, group_b, n_permutations, seed))
                     for m, c in measures]
    families.append((("completions_as_independent", "completion", "completion"),
                     _completion_rows(table, group_a, group_b)))
    parts = [stats.results_table(rows, method=method).assign(analysis=analysis, measure=measure, unit=unit)
             for (analysis, measure, unit), rows in families if rows]
    out = pd.concat(parts, ignore_index=True)
    out["primary"] = (out["analysis"] == "occupation") & (out["measure"] == primary)
    out["axis_readable"] = ~out["dimension"].isin(unreadable)
    return out


def _p_text(row: pd.Series) -> str:
    """"Welch p = 0.025, Holm p = 0.040"; a permutation p at its floor reads "≤ 1/(K+1)" (and Holm "≤")."""
    holm = precision.p_text(float(row["p_adj"]), relation=True)
    if pd.isna(row.get("n_permutations", np.nan)):
        return f"Welch p {precision.p_text(float(row['p']), relation=True)}, Holm p {holm}"
    p = stats.permutation_p_text(float(row["p"]), int(row["n_permutations"]))
    return f"permutation p {p}, Holm p {holm.replace('=', '≤') if p.startswith('≤') else holm}"


def _excludes_zero(interval: pd.Series) -> bool:
    """Whether a row's interval lies off 0 (a row without one: True, its test alone decides)."""
    low, high = float(interval["ci_low"]), float(interval["ci_high"])
    return low > 0 or high < 0 if np.isfinite(low) and np.isfinite(high) else True


def _shown(interval: pd.Series, test: pd.Series) -> bool:
    """A gap is read as shown only when its test's Holm p is below 0.05 and its interval, where it has one,
    excludes 0."""
    return _excludes_zero(interval) and bool(test["p_adj"] < 0.05)


def _reading(interval: pd.Series, test: pd.Series, dim: str, who: str) -> str:
    """"<who> sit 0.83 SD warmer (occupation bootstrap 95% CI 0.21 to 1.50, unadjusted), Welch p = ..., Holm p = ..."
    (without the parenthesis for a row that has no interval). The verdict is Holm's and the interval is not: where
    they disagree (the interval lies off 0, the Holm p does not reach 0.05) the sentence says that the correction
    decides it, so the reader does not read "not shown" against an interval that excludes 0."""
    num = precision.number_text
    more, less = _SIDES.get(dim, (f"higher on {dim}", f"lower on {dim}"))
    size = abs(float(interval["effect_size"]))
    ci = (f" (occupation bootstrap 95% CI "
          f"{precision.interval_text(interval['ci_low'], interval['ci_high'], interval['effect_size'])}, unadjusted)"
          if np.isfinite(float(interval["ci_low"])) else "")
    if _shown(interval, test):
        verdict = ""
    elif _excludes_zero(interval) and np.isfinite(float(interval["ci_low"])):
        verdict = ("a difference is not shown after Holm's correction over the dimensions (the unadjusted interval "
                   "excludes 0; the Holm p, which decides, does not reach 0.05): ")
    else:
        verdict = "a difference is not shown: "
    return f"{verdict}{who} sit {num(size)} SD {more if interval['effect_size'] > 0 else less}{ci}, {_p_text(test)}"


def describe_completion_stats(result: pd.DataFrame, unreadable: Mapping[str, str] | None = None) -> list[str]:
    """Sentences reading :func:`completion_projection_stats`' table, the pre-stated primary contrast first.

    Per readable axis: the primary occupation-level gap of the completion beyond its prompt (occupation
    bootstrap CI, Hedges' g with CI, Welch Holm p); its decomposition: the whole completion and the
    prompt alone; the within-category gap of the primary measure (permutation p, "≤ 1/(K+1)" at its
    floor, no interval) and how many categories have both groups; last, the completion-level test,
    labelled as treating completions as independent. A table without prompt values reads the whole
    completion as primary. An axis in ``unreadable`` (``{dimension: why}``, why = its
    :func:`bias_utils.profiles.axis_validity.verdict_phrase`) gets one sentence saying why and no number.
    "Not shown" is never read as "no difference".
    """
    unreadable = dict(unreadable or {})

    def pick(analysis: str, measure: str, test: str, dim: str):
        return first_row(result, analysis=analysis, measure=measure, test=test, dimension=dim)

    primary_rows = result[result["primary"].astype(bool)]
    primary = primary_rows["measure"].iloc[0] if len(primary_rows) else "completion"
    what = {"beyond_prompt": "what the completion adds beyond its prompt's words",
            "completion": "the whole completion (this table has no prompt baseline)"}[primary]
    lines = []
    for dim in dict.fromkeys(result["dimension"]):
        if dim in unreadable or not result.loc[result["dimension"] == dim, "axis_readable"].all():
            why = unreadable.get(dim, "is not supported by the validity check")
            lines.append(f"**{dim}**: not read: the axis {why}, so no gap on it is interpreted (the numbers stay "
                         "in the table below).")
            continue
        occ, g, t = (pick("occupation", primary, test, dim)
                     for test in ("cluster_bootstrap_occupation", "hedges_g", "welch_t"))
        a, b = (rendering.group_label(occ[k]) for k in ("group_a", "group_b"))
        lines.append(
            f"**{dim}** (primary, stated before the results: {what}, occupation means, {int(occ['n_a'])} {a} vs "
            f"{int(occ['n_b'])} {b} occupations): {_reading(occ, t, dim, f'completions about {a} occupations')}; "
            f"Hedges' g {precision.number_text(g['effect_size'])} (95% CI "
            f"{precision.interval_text(g['ci_low'], g['ci_high'], g['effect_size'])}, unadjusted).")
        whole, prompt = (pick("occupation", m, "cluster_bootstrap_occupation", dim) for m in ("completion", "prompt"))
        if primary == "beyond_prompt" and whole is not None and prompt is not None:
            wt, pt = (pick("occupation", m, "welch_t", dim) for m in ("completion", "prompt"))
            if not _shown(occ, t):
                verdict = "a gap beyond the prompt's own words is not shown"
            elif np.sign(occ["effect_size"]) == np.sign(whole["effect_size"]):
                verdict = "the completion adds to the gap beyond its prompt's words"
            elif np.sign(prompt["effect_size"]) == np.sign(whole["effect_size"]):
                verdict = "the completion narrows the gap its prompt alone already shows"
            else:
                verdict = "the completion reverses the gap its prompt alone shows"
            lines.append(
                f"{dim}, its decomposition: the whole completion (its prompt's words included): "
                f"{_reading(whole, wt, dim, f'completions about {a} occupations')}; the prompt alone (each prompt "
                f"embedded by itself): {_reading(prompt, pt, dim, f'the prompts of {a} occupations')}: {verdict}.")
        within = pick("within_category", primary, "permutation_within_category", dim)
        if within is None:
            lines.append(f"{dim}, within BOLD category: not available (no category has occupations of both groups "
                         "in this run, or the table has no category).")
        else:
            lines.append(
                f"{dim}, within BOLD category (topic held fixed; categories with occupations of both groups: "
                f"{int(within['n_categories'])} of {int(within['n_categories_total'])}, "
                f"{rendering.value_label(within['categories'])}): "
                f"{_reading(within, within, dim, f'{a} occupations')}.")
        ct, cg = (pick("completions_as_independent", "completion", test, dim) for test in ("welch_t", "hedges_g"))
        lines.append(
            f"{dim}, for comparison only, treating the {int(ct['n'])} completions as independent (which they are "
            f"not: completions of one occupation share topic and prompt): g {precision.number_text(cg['effect_size'])}"
            f", {_p_text(ct)}; this is not the test read here.")
    return lines


def completion_chart(table: pd.DataFrame, unreadable: Sequence[str] = (), *, title: str | None = None) -> alt.Chart:
    """Each occupation (the mean of its completions) on the warmth × competence plane, coloured by group.

    An axis in ``unreadable`` is marked and greyed as in the profile charts
    (:data:`bias_utils.report.plots.INVALID_MARK`): its position is not read.
    """
    unreadable = check_word_list(unreadable, "unreadable")
    occ = occupation_means(table)
    wide = occ.pivot_table(index=["group", "occupation", "n_completions"], columns="dimension",
                           values="z").reset_index()
    wide["group"] = wide["group"].map(rendering.group_label)
    if not {"warmth", "competence"} <= set(wide.columns):
        raise ValueError("completion_chart needs warmth and competence projections")

    def axis(dim: str) -> tuple[str, alt.Axis]:
        text = f"← low {dim} · high {dim} → (occupation mean, standardised)"
        if dim in unreadable:
            return text + plots.INVALID_MARK, alt.Axis(titleColor=plots.INVALID_GREY)
        return text, alt.Axis()

    (x_title, x_axis), (y_title, y_axis) = axis("warmth"), axis("competence")
    chart = alt.Chart(wide).mark_point(opacity=0.6, filled=True).encode(
        x=alt.X("warmth:Q", title=x_title, axis=x_axis),
        y=alt.Y("competence:Q", title=y_title, axis=y_axis),
        color=alt.Color("group:N", title="occupations", scale=plots.group_scale(wide["group"])),
        size=alt.Size("n_completions:Q", title="completions"),
        tooltip=["occupation", "group", "n_completions", alt.Tooltip("warmth:Q", format=".2f"),
                 alt.Tooltip("competence:Q", format=".2f")],
    ).properties(width=380, height=320)
    groups = ", ".join(dict.fromkeys(wide["group"]))
    caption = ("Each point is an occupation: the mean position of the model's completions about it on warmth (left "
               f"to right) and competence (bottom to top), standardised; colour is its audit group ({groups}), size "
               "the number of completions. Look for whether the groups' clouds sit apart along either axis.")
    if unreadable:
        caption += " " + plots.INVALID_NOTE + "."
    return plots.captioned(chart, title or "Occupations on the warmth and competence axes",
                           [plots.INVALID_NOTE] if unreadable else [],
                           f"Scatter plot of {len(wide)} occupations' completion means on warmth (x) and competence "
                           f"(y), coloured by group ({groups}).", caption)
