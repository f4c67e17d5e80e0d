"""How robust is a stereotype profile? (issue 12)

A profile is the output of many analysis choices. This module measures how much one model's profile depends on them
with a **specification curve** (Simonsohn, Simmons & Nelson 2020). Every combination of four choices is one
*specification*:

* pole context source: every registered one (``contexts.source_names()``: ``dictionary``, ``generated``, ``corpus``,
  ``none`` built in), the paper's main setting :data:`PRIMARY_SOURCE` first (:func:`curve_sources`);
* layer: the mean over all hidden states (the original's headline), the last, the middle one, or per dimension the
  layer whose direction accuracy is best on a fixed half of the extra terms (``space.direction_prediction`` with
  ``layer="all"`` on the half chosen by :func:`split_terms`; the other half reports the chosen layer's held-out
  accuracy) (``mean``, ``last``, ``middle``, ``best``);
* template set (:func:`template_sets`): the original seven templates; the five where the word is not the first word;
  the seven behind the neutral lead-in :data:`LEAD_IN`, so the word is never the first token;
* test: Student t, Welch t, a permutation test of the mean difference (:data:`TESTS`).

For each, the first-minus-second group gap (female - male) as Hedges' g with its 95% CI and p, Holm-corrected over
the dimensions of one space (the 7 dimensions, or warmth and competence) as in ``profiles.profile_stats``. A
specification *agrees* with the paper when the gap has the sign :data:`EXPECTED_SIGN` gives (Schuster et al. 2024,
Sec. 4.2 and Figures 3/5) and is significant after correction. The **joint test** permutes the group labels of the
whole population (the same permutation in every specification), recomputes the curve and compares two statistics
with their permutation null: ``n_agree_significant`` (number of specifications that are significant in the expected
direction) and ``median_effect`` (median g over the specifications, signed so that positive = the expected
direction). For a dimension where the paper reports no trend (religion) the direction is the dominant one (more
significant specifications), and the median is taken in absolute value.

Projected values are z-standardised per population, layer and dimension before testing; every statistic here is
invariant to that affine map, so permuting the labels never requires re-standardising.

Nothing is embedded twice: each context source's space is built once, each population is embedded once per template
set (the ``not_first`` set is a subset of the original's contexts, so the embedding cache serves it), and the extra
terms once; every specification is then a projection of those arrays.

The per-model summary (:func:`robustness_summary`) adds each axis's verdict (``axis_validity``): a gap on an axis
whose verdict is not ``supported`` is not read. The primary specification, the one the chapters read, is generated
contexts, the mean over layers, the seven templates and Welch with Holm; the curve is the robustness check around
it. The tokenisation confound is :mod:`bias_utils.profiles.tokenisation`, the vectorised tests are in
:mod:`bias_utils.core.stats`.

One concept over 600 lines: the specification curve. Its joint test recomputes the whole curve under each
relabelling from the same embedded arrays, and the summary reads that curve; split, each would rebuild them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core.cache import stable_hash
from ..core.errors import ParameterError, check_count, check_positive_int, check_seed, check_word_list, is_number
from ..core.precision import number_text, p_text, percent_text
from ..core.stats import (
    TWO_GROUP_TESTS,
    group_tests,
    holm,
    permutation_p,
    permutation_p_text,
    permutation_reference,
)
from ..report.rendering import value_label
from . import projection
from .axis_validity import verdict_phrase
from .contexts import prepare_dictionary, source_names
from .dictionaries import limit_terms, load_full_dictionary_terms
from .population_profiles import (
    DEFAULT_TEMPLATES,
    PLACEHOLDER,
    check_profile_run,
    check_templates,
    population_embeddings,
)
from .space import TermEmbeddings, build_space, check_source_spaces, direction_prediction, term_embeddings

__all__ = [
    "TESTS", "collect_curve_inputs", "default_cell_values", "headline_source", "name_gap_verdict",
    "robustness_summary", "specification_curve", "template_gap", "timing_table",
]

#: The context source of the primary specification (the paper's main setting): first in the curve, the headline.
_PRIMARY_SOURCE = "generated"
TESTS = ("student", "welch", "permutation")
#: The ``test`` column of each test choice, as in the project's statistics tables.
_TEST_NAMES = {"student": "student_t", "welch": "welch_t", "permutation": "permutation_mean_diff"}
#: Neutral lead-in put before every original template so the word is never the first token.
_LEAD_IN = "the text reads: "
#: Sign of the female-minus-male gap the paper reports for names (Sec. 4.2, Figures 3 and 5):
#: female names warmer (sociability, morality), male names more competent (ability, agency),
#: of higher status and more traditional (politics: high = traditional). Religion: "no perceivable
#: trend" (0: sign shares are reported without a verdict).
_EXPECTED_SIGN = {"warmth": 1, "competence": -1, "sociability": 1, "morality": 1, "ability": -1, "agency": -1,
                 "status": -1, "politics": -1, "religion": 0}
#: The statistics of the joint test (see the module docstring).
_JOINT_STATISTICS = ("n_agree_significant", "median_effect")

_SKIPPED_COLUMNS = ["step", "context_source", "item", "reason"]


# --------------------------------------------------------------------------- choices


def _curve_sources(sources: Sequence[str] | None = None) -> tuple[str, ...]:
    """``sources``, or every registered context source (``contexts.source_names()``) with
    :data:`PRIMARY_SOURCE` first and the others in registration order."""
    if sources is not None:
        return tuple(sources)
    return tuple(sorted(source_names(), key=lambda s: s != _PRIMARY_SOURCE))


def headline_source(spaces: Mapping[str, object]) -> str:
    """The context source the chapter reads: :data:`PRIMARY_SOURCE` when it gave a space, else the first that did."""
    return _PRIMARY_SOURCE if _PRIMARY_SOURCE in spaces else next(iter(spaces))


def _template_sets(templates: Sequence[str] = DEFAULT_TEMPLATES, lead_in: str = _LEAD_IN) -> dict[str, tuple[str, ...]]:
    """The three template sets: ``original``, ``not_first`` (templates whose word
    slot is not at the start) and ``lead_in`` (every original behind ``lead_in``)."""
    original = check_templates(templates)
    not_first = tuple(t for t in original if not t.lstrip().startswith(PLACEHOLDER))
    if not not_first:
        raise ParameterError("every template starts with the word; the not_first set would be empty")
    if PLACEHOLDER in lead_in or not lead_in.strip():
        raise ParameterError(f"lead_in must be non-empty text without {PLACEHOLDER}, got {lead_in!r}")
    return {"original": original, "not_first": not_first, "lead_in": tuple(lead_in + t for t in original)}


def _split_terms(terms: pd.DataFrame, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Deterministic halves ``(selection, held_out)`` of the extra terms.

    ``terms`` gets ``contexts.prepare_dictionary``'s ``sense_id``; within each
    (dimension, direction) the terms are ordered by ``stable_hash([seed,
    sense_id])`` and alternate between the halves, so both halves keep the
    poles' proportions and the split does not depend on row order.
    """

    d = prepare_dictionary(terms)
    key = d["sense_id"].map(lambda s: stable_hash([seed, s], 16))
    rank = d.assign(_k=key).sort_values("_k").groupby(["dimension", "direction"]).cumcount()
    first = (rank.reindex(d.index) % 2 == 0).to_numpy()
    return d[first].reset_index(drop=True), d[~first].reset_index(drop=True)


# --------------------------------------------------------------------------- curve inputs


@dataclass
class _CurveInputs:
    """Projected values of every specification cell, ready for the tests.

    ``cells``: one row per (``context_source, template_set, layer_choice``) with
    ``layer`` (``"mean"``, the hidden-state index, or ``"best"`` when it differs
    per dimension). ``values``: ``{population: [C, n, D] array}`` aligned with
    ``cells`` rows, ``words[population]`` rows (``group, word``) and
    ``dimensions``; ``spaces`` names each dimension's space (the Holm family).
    ``groups``: ``{population: (group_a, group_b)}``; the gap is a - b.
    ``best_layers``: per source and dimension the chosen layer with its accuracy
    on the selection half and the held-out half. ``skipped``: ``step,
    context_source, item, reason``. ``seconds``: wall time per step.
    """

    cells: pd.DataFrame
    values: dict
    words: dict
    groups: dict
    dimensions: tuple
    spaces: tuple
    best_layers: pd.DataFrame = field(default_factory=pd.DataFrame)
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_SKIPPED_COLUMNS))
    seconds: dict = field(default_factory=dict)
    model_id: str = ""


def _extra_terms(space, terms: pd.DataFrame | None = None, limit: int | None = None,
                seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The extra terms of ``space``'s own dimensions (default: the full dictionary's), at most
    ``limit`` per dimension and pole, as :func:`split_terms`' two halves; stacked in this
    order, every chapter that embeds them asks the embedding cache for the same batches."""
    if terms is None:
        terms = load_full_dictionary_terms()
    own = list(space.bases["dimensions"].dimensions) if "dimensions" in space.bases else []
    terms = limit_terms(terms[terms["dimension"].isin(own)], limit, seed)
    return _split_terms(terms, seed)


def _space_columns(bases: Mapping[str, projection.PolarBasis]) -> tuple[list[str], list[str]]:
    dims, spaces = [], []
    for space in ("warmth_competence", "dimensions"):
        if space in bases:
            dims += list(bases[space].dimensions)
            spaces += [space] * len(bases[space].dimensions)
    return dims, spaces


def _project_all(bases: Mapping[str, projection.PolarBasis], X: np.ndarray) -> np.ndarray:
    """Projections of ``X`` [n, L, H] on every axis of ``bases`` at every layer: [n, L, D]
    (warmth/competence first, then the dimensions, as :func:`_space_columns` lists them)."""
    parts = [projection.project(bases[s], X, "all") for s in ("warmth_competence", "dimensions") if s in bases]
    return np.concatenate(parts, axis=2)


def _best_layers(model, space, selection: pd.DataFrame, terms: TermEmbeddings, held_out: pd.DataFrame,
                n_contexts: int = 5, seed: int = 0) -> pd.DataFrame:
    """Per dimension of ``space``, the layer with the best raw direction accuracy on ``selection``
    (``space.direction_prediction(layer="all")``; ties go to the earlier layer) and that layer's
    accuracy on ``held_out`` (from the once-embedded ``terms``).

    Columns: ``context_source, dimension, layer, accuracy_selection, n_selection, accuracy_held_out, n_held_out``.
    """

    acc = direction_prediction(model, space, selection, n_contexts=n_contexts, layer="all", seed=seed,
                               n_boot=20).accuracy
    acc = acc[(acc["cutoff"] == "raw") & (acc["evaluation"] == "extra terms")]
    keep = terms.table["sense_id"].isin(held_out["sense_id"]).to_numpy() & (terms.table["n_embedded"] > 0).to_numpy()
    held = projection.own_dimension_values(space.bases, terms.X[keep], terms.table[keep], "all")
    rows = []
    for dim, a in acc.groupby("dimension", sort=False):
        a = a.sort_values("layer", kind="stable")
        best = a.loc[a["accuracy"].idxmax()]
        h = held[(held["dimension"] == dim) & (held["layer"] == best["layer"])]
        rows.append({"context_source": space.source, "dimension": dim, "layer": int(best["layer"]),
                     "accuracy_selection": float(best["accuracy"]), "n_selection": int(best["n"]),
                     "accuracy_held_out": float(((h["value"] > 0) == (h["direction"] == "high")).mean())
                     if len(h) else np.nan, "n_held_out": len(h)})
    return pd.DataFrame(rows)


def _cell_values(P: np.ndarray, layers: Sequence[int], dimensions: Sequence[str],
                best: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """The four layer choices of projections ``P`` [n, L, D]: ``{choice: [n, D]}``.

    ``middle`` is hidden state ``layers[len(layers) // 2]``; ``best`` takes each
    dimension at ``best[dimension]`` (left out when ``best`` is None).
    """
    layers = list(layers)
    out = {"mean": P.mean(axis=1), "last": P[:, -1], "middle": P[:, len(layers) // 2]}
    if best is not None:
        idx = [layers.index(int(best[d])) for d in dimensions]
        out["best"] = P[:, idx, np.arange(len(dimensions))]
    return out


def collect_curve_inputs(model, dictionary: pd.DataFrame, populations=("names", "terms"), *,
                         sources: Sequence[str] | None = None, templates: Sequence[str] = DEFAULT_TEMPLATES,
                         terms: pd.DataFrame | None = None, n_contexts: int = 5, seed: int = 0,
                         limit: int | None = None, term_limit: int | None = None) -> tuple[_CurveInputs, dict]:
    """Build every space once, embed every population once per template set and the extra
    terms once; return the projected values of every specification cell.

    ``sources``: the pole context sources (default :func:`curve_sources`);
    ``limit``: at most this many names per group (``profiles.limit_populations``);
    ``term_limit``: at most this many extra terms per dimension and pole
    (``dictionaries.limit_terms``). Returns ``(inputs, extras)`` with
    ``extras = {"spaces": {source: StereotypeSpace}, "terms": TermEmbeddings,
    "term_table": the extra terms used (both halves), "population_embeddings":
    {template_set: PopulationEmbeddings}}`` for the axis null and the
    tokenisation analysis.
    """

    chosen = check_source_spaces(model, dictionary, sources, n_contexts, seed)
    sources = _curve_sources(None if sources is None else chosen)  # the primary source first when all are run
    pops, kinds = check_profile_run(model, populations, templates, "mean", limit)
    two = {p: list(g) for p, g in pops.items() if len(g) != 2}
    if two:
        name, groups = next(iter(two.items()))
        raise ParameterError(f"populations: {name!r} has the groups {groups}; the curve compares exactly two")
    check_positive_int(term_limit, "term_limit", allow_none=True)
    seconds, skipped = {}, []
    t0 = time.perf_counter()
    spaces = {}
    for source in sources:
        try:
            spaces[source] = build_space(model, dictionary, source, n_contexts, seed)
        except Exception as exc:  # one unusable source must not hide the others; it is reported
            skipped.append({"step": "space", "context_source": source, "item": "",
                            "reason": f"{type(exc).__name__}: {exc}"})
            continue
        sp = spaces[source]
        skipped += [{"step": "contexts", "context_source": source, "item": r.sense_id, "reason": r.reason}
                    for r in pd.concat([sp.contexts.skipped, sp.skipped], ignore_index=True).itertuples()]
    if not spaces:
        raise ParameterError("no context source gave a usable space: " + "; ".join(s["reason"] for s in skipped))
    seconds["spaces"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    first = next(iter(spaces.values()))
    selection, held_out = _extra_terms(first, terms, term_limit, seed)
    term_table = pd.concat([selection, held_out], ignore_index=True)
    term_emb = term_embeddings(model, term_table, n_contexts=n_contexts, seed=seed, term_contexts="dictionary")
    skipped += [{"step": "extra terms", "context_source": "", "item": r.sense_id, "reason": r.reason}
                for r in term_emb.skipped.itertuples()]
    best = pd.concat([_best_layers(model, sp, selection, term_emb, held_out, n_contexts, seed)
                      for sp in spaces.values()], ignore_index=True)
    seconds["extra_terms"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sets = _template_sets(templates)
    pop_embs = {name: population_embeddings(model, pops, tpl, kind=kinds) for name, tpl in sets.items()}
    seconds["populations"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    keys = ["population", "group", "word"]
    common = None
    for name, pe in pop_embs.items():
        skipped += [{"step": f"templates {name}", "context_source": "", "item": f"{r.population}/{r.word}: {r.context}",
                     "reason": r.reason} for r in pe.skipped.itertuples()]
        idx = pd.MultiIndex.from_frame(pe.words[keys])
        common = idx if common is None else common.intersection(idx, sort=False)
    dims, space_of = _space_columns(first.bases)
    cells, values = [], {p: [] for p in pops}
    kept = common.to_frame(index=False)
    words = {p: kept[kept["population"] == p][["group", "word"]].reset_index(drop=True) for p in pops}
    groups = {}
    for p, w in words.items():
        g = list(dict.fromkeys(pops[p]))
        if len(g) != 2:
            raise ParameterError(f"population {p!r} has groups {g}; the curve compares exactly two")
        groups[p] = tuple(g)
    for source, sp in spaces.items():
        sdims, _ = _space_columns(sp.bases)
        if sdims != dims:
            skipped.append({"step": "space", "context_source": source, "item": "",
                            "reason": f"axes {sdims} differ from {dims}; left out of the curve"})
            continue
        best_map = best[best["context_source"] == source].set_index("dimension")["layer"].to_dict()
        use_best = set(dims) <= set(best_map)
        for tname, pe in pop_embs.items():
            P = _project_all(sp.bases, pe.values)
            row_of = {k: i for i, k in enumerate(pe.words[keys].itertuples(index=False, name=None))}
            choices = _cell_values(P, pe.layers, dims, best_map if use_best else None)
            label = {"mean": "mean", "last": str(pe.layers[-1]), "middle": str(pe.layers[len(pe.layers) // 2]),
                     "best": "best"}
            for choice, M in choices.items():
                cells.append({"context_source": source, "template_set": tname, "layer_choice": choice,
                              "layer": label[choice]})
                for p, w in words.items():
                    values[p].append(M[[row_of[(p, g, x)] for g, x in zip(w["group"], w["word"])]])
    seconds["projection"] = time.perf_counter() - t0
    inputs = _CurveInputs(pd.DataFrame(cells), {p: np.stack(v) for p, v in values.items()}, words, groups,
                         tuple(dims), tuple(space_of), best, pd.DataFrame(skipped, columns=_SKIPPED_COLUMNS),
                         seconds, getattr(model, "model_id", str(model)))
    return inputs, {"spaces": spaces, "terms": term_emb, "term_table": term_table, "population_embeddings": pop_embs}


# --------------------------------------------------------------------------- the curve and its joint test

#: Columns of :func:`specification_curve`'s ``specs`` table.
_SPEC_COLUMNS = ["population", "context_source", "template_set", "layer_choice", "layer", "test_choice", "space",
                "dimension", "group_a", "group_b", "diff", "expected_sign", "agrees", "significant",
                "test", "statistic", "df", "p", "p_adj", "adj_method", "effect", "effect_size", "ci_low", "ci_high",
                "n"]


def _adjusted(res: dict, spaces: np.ndarray) -> dict[str, np.ndarray]:
    """Holm over the dimensions of each space, per specification cell and test: {test: [P, C, D]}."""
    out = {}
    for test in TESTS:
        p = res[f"p_{test}"]
        adj = np.empty_like(p)
        for s in dict.fromkeys(spaces):
            cols = np.flatnonzero(spaces == s)
            adj[..., cols] = holm(p[..., cols], axis=-1)
        out[test] = adj
    return out


def _joint_statistics(g: np.ndarray, padj: dict, expected: np.ndarray, alpha: float) -> dict[str, np.ndarray]:
    """The joint test's statistics per label row and dimension: [P, D] each (module docstring)."""
    sig = np.stack([padj[t] < alpha for t in TESTS], axis=1)  # [P, T, C, D]
    sign = np.sign(g)[:, None]
    pos, neg = (sig & (sign > 0)).sum(axis=(1, 2)), (sig & (sign < 0)).sum(axis=(1, 2))
    med = np.median(g, axis=1)  # every test shares the cell's g, so the median over cells is the curve's
    n_agree = np.where(expected > 0, pos, np.where(expected < 0, neg, np.maximum(pos, neg)))
    med_eff = np.where(expected != 0, med * expected, np.abs(med))
    return {"n_agree_significant": n_agree, "median_effect": med_eff}


@dataclass
class _SpecificationCurve:
    """``specs``: one row per population x cell x test x dimension (:data:`SPEC_COLUMNS`;
    ``agrees``: sign as :data:`EXPECTED_SIGN` and ``p_adj < alpha``, NA where the paper
    gives no sign). ``summary``: per population and dimension ``n_specs,
    share_agree_sign, share_agree_significant`` (NaN without an expected sign),
    ``share_positive_significant, share_negative_significant``, and per joint
    statistic its observed value, null median and p. ``joint_null``: the
    permutation distributions (``population, dimension, permutation, statistic, value``)."""

    specs: pd.DataFrame
    summary: pd.DataFrame
    joint_null: pd.DataFrame
    seconds: float


def specification_curve(inputs: _CurveInputs, *, n_permutations: int = 200, n_perm_test: int = 2000,
                        seed: int = 0, alpha: float = 0.05, expected: Mapping[str, int] | None = None,
                        chunk: int = 50) -> _SpecificationCurve:
    """Every specification's test and the joint test (module docstring).

    ``n_permutations``: relabellings of the joint null (>= 200 recommended);
    ``n_perm_test``: relabellings of the per-specification permutation test
    (exact enumeration when the population has no more distinct splits).
    """
    check_count(n_permutations, "n_permutations", minimum=1)
    check_count(n_perm_test, "n_perm_test", minimum=1)
    check_seed(seed)
    if not is_number(alpha) or not 0 < alpha < 1:
        raise ParameterError(f"alpha must be a number in (0, 1), got {alpha!r}")
    expected = dict(_EXPECTED_SIGN if expected is None else expected)
    t0 = time.perf_counter()
    spaces = np.array(inputs.spaces)
    exp = np.array([expected.get(d, 0) for d in inputs.dimensions])
    specs, summary, nulls = [], [], []
    for pi, (pop, V) in enumerate(inputs.values.items()):
        ga, gb = inputs.groups[pop]
        y = (inputs.words[pop]["group"] == ga).to_numpy()
        n, na = len(y), int(y.sum())
        ref = permutation_reference(n, na, n_perm_test, seed + 1 + pi)
        obs = group_tests(V, y[None], TWO_GROUP_TESTS, reference=ref)
        padj = _adjusted(obs, spaces)
        specs.append(_spec_rows(inputs, pop, obs, padj, exp, alpha))
        stat_obs = _joint_statistics(obs["g"], padj, exp, alpha)
        rng = np.random.default_rng(seed + 1000 + pi)
        perm_labels = np.stack([y[rng.permutation(n)] for _ in range(n_permutations)])
        null = {k: [] for k in _JOINT_STATISTICS}
        for b0 in range(0, n_permutations, chunk):
            res = group_tests(V, perm_labels[b0:b0 + chunk], TWO_GROUP_TESTS, reference=ref)
            st = _joint_statistics(res["g"], _adjusted(res, spaces), exp, alpha)
            for k in _JOINT_STATISTICS:
                null[k].append(st[k])
        null = {k: np.concatenate(v) for k, v in null.items()}  # [B, D]
        sp = specs[-1]
        for di, dim in enumerate(inputs.dimensions):
            s = sp[sp["dimension"] == dim]
            sig = s["p_adj"] < alpha
            row = {"population": pop, "dimension": dim, "space": inputs.spaces[di], "group_a": ga, "group_b": gb,
                   "expected_sign": int(exp[di]), "n_specs": len(s),
                   "share_agree_sign": float((np.sign(s["effect_size"]) == exp[di]).mean()) if exp[di] else np.nan,
                   "share_agree_significant": float(s["agrees"].astype(float).mean()) if exp[di] else np.nan,
                   "share_positive_significant": float((sig & (s["effect_size"] > 0)).mean()),
                   "share_negative_significant": float((sig & (s["effect_size"] < 0)).mean()),
                   "median_g": float(np.median(s["effect_size"])),
                   "n_permutations": n_permutations}
            for k in _JOINT_STATISTICS:
                o, nv = float(stat_obs[k][0, di]), null[k][:, di]
                row[k] = o
                row[f"{k}_null_median"] = float(np.median(nv))
                row[f"{k}_p"] = float(permutation_p(o, nv))
                nulls.append(pd.DataFrame({"population": pop, "dimension": dim, "permutation": np.arange(len(nv)),
                                           "statistic": k, "value": nv}))
            summary.append(row)
    return _SpecificationCurve(pd.concat(specs, ignore_index=True), pd.DataFrame(summary),
                              pd.concat(nulls, ignore_index=True), time.perf_counter() - t0)


def _spec_rows(inputs: _CurveInputs, pop: str, obs: dict, padj: dict, exp: np.ndarray, alpha: float) -> pd.DataFrame:
    ga, gb = inputs.groups[pop]
    C, D = len(inputs.cells), len(inputs.dimensions)
    n = len(inputs.words[pop])
    frames = []
    stat = {"student": ("t_student", "df_student"), "welch": ("t_welch", "df_welch"), "permutation": ("diff", None)}
    for test in TESTS:
        sc, dc = stat[test]
        cells = inputs.cells.loc[np.repeat(np.arange(C), D)].reset_index(drop=True)
        f = cells.assign(population=pop, test_choice=test, space=np.tile(inputs.spaces, C),
                         dimension=np.tile(inputs.dimensions, C), group_a=ga, group_b=gb,
                         diff=obs["diff"][0].ravel(), expected_sign=np.tile(exp, C),
                         test=_TEST_NAMES[test],
                         statistic=obs[sc][0].ravel(), df=obs[dc][0].ravel() if dc else np.nan,
                         p=obs[f"p_{test}"][0].ravel(), p_adj=padj[test][0].ravel(), adj_method="holm",
                         effect="hedges_g", effect_size=obs["g"][0].ravel(), ci_low=obs["g_low"][0].ravel(),
                         ci_high=obs["g_high"][0].ravel(), n=n)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    out["significant"] = out["p_adj"] < alpha
    agrees = (np.sign(out["effect_size"]) == out["expected_sign"]) & out["significant"]
    out["agrees"] = agrees.astype("boolean").where(out["expected_sign"] != 0, pd.NA)
    return out[_SPEC_COLUMNS]


def default_cell_values(inputs: _CurveInputs, population: str, context_source: str = "generated",
                        template_set: str = "original", layer_choice: str = "mean") -> pd.DataFrame:
    """The projected values of one cell as a long table ``population, group, word, dimension, z``
    (z-standardised over the population's words, population SD, as ``profiles.standardise``)."""
    c = inputs.cells
    hit = np.flatnonzero((c["context_source"] == context_source) & (c["template_set"] == template_set)
                         & (c["layer_choice"] == layer_choice))
    if not len(hit):
        raise ParameterError(f"no cell {context_source}/{template_set}/{layer_choice} in the curve inputs")
    M = inputs.values[population][hit[0]]
    Z = (M - M.mean(axis=0)) / M.std(axis=0)
    w = inputs.words[population]
    return pd.DataFrame({"population": population, "group": np.repeat(w["group"].to_numpy(), Z.shape[1]),
                         "word": np.repeat(w["word"].to_numpy(), Z.shape[1]),
                         "dimension": np.tile(inputs.dimensions, len(w)), "z": Z.ravel()})


def template_gap(specs: pd.DataFrame, context_source: str = "generated", layer_choice: str = "mean",
                 test_choice: str = "welch") -> pd.DataFrame:
    """The gap per template set at one context source, layer choice and test: does it
    change when the word is never token 0? Columns: ``population, dimension, template_set,
    effect_size, ci_low, ci_high, p, p_adj``."""
    s = specs[(specs["context_source"] == context_source) & (specs["layer_choice"] == layer_choice)
              & (specs["test_choice"] == test_choice)]
    return s[["population", "dimension", "template_set", "effect_size", "ci_low", "ci_high", "p", "p_adj"]
             ].reset_index(drop=True)


def name_gap_verdict(summary: pd.DataFrame, regression: pd.DataFrame, gaps: pd.DataFrame, population: str = "names",
                     dimensions: Sequence[str] = ("warmth", "competence"), alpha: float = 0.05) -> str:
    """One plain sentence per dimension: does the population's gap survive the controls?

    A dimension whose axis verdict (``axis_verdict`` in ``summary``) is not ``supported``
    is said so after the verdict, with ``axis_reading``. It *survives* when the gap keeps
    its sign and stays significant (p < alpha) with the token count in the regression
    (when token counts vary at all) and in both template sets where the word is not the
    first word (``not_first``, ``lead_in``); the share of agreeing specifications and the
    joint test's p come from ``summary``.
    """
    # The regression's gap is the female − male difference of positions z-scored over the whole population: its
    # unit names that SD, so that it is not read as Hedges' g (divided by the SD within each group; chapter 04 and the
    # front page), a different number of the same words.
    unit = f"SD of all {population}"
    lines = []
    for dim in check_word_list(dimensions, "dimensions"):
        reg = regression[(regression["population"] == population) & (regression["dimension"] == dim)]
        base = reg[(reg["model"] == "gender") & (reg["term"] != "n_tokens")]
        ctrl = reg[(reg["model"] == "gender + tokens") & (reg["term"] != "n_tokens")]
        gp = gaps[(gaps["population"] == population) & (gaps["dimension"] == dim)].set_index("template_set")
        sm = summary[(summary["population"] == population) & (summary["dimension"] == dim)]
        if base.empty or sm.empty:
            lines.append(f"{population}, {dim}: not measured in this run.")
            continue
        b = base.iloc[0]
        sign = np.sign(b["coef"])
        checks = []
        if len(ctrl):
            c = ctrl.iloc[0]
            checks.append((np.sign(c["coef"]) == sign and c["p"] < alpha,
                           f"with the token count controlled the gap is {number_text(c['coef'], signed=True)} {unit} "
                           f"(p {p_text(c['p'], relation=True)})"))
        else:  # token_regression leaves the control out only when every word has the same token count
            checks.append((True, "every word takes the same number of tokens, so the token count cannot explain it"))
        for tset in ("not_first", "lead_in"):
            if tset in gp.index:
                r = gp.loc[tset]
                checks.append((np.sign(r["effect_size"]) == sign and r["p_adj"] < alpha,
                               f"with the {value_label(tset)} templates g = "
                               f"{number_text(r['effect_size'], signed=True)} "
                               f"(Holm p {p_text(r['p_adj'], relation=True)})"))
        s = sm.iloc[0]
        share = ("" if pd.isna(s["share_agree_significant"]) else
                 f" {percent_text(s['share_agree_significant'])} of {int(s['n_specs'])} specifications agree with the "
                 "paper "
                 f"and are significant (joint test p "
                 f"{permutation_p_text(s['n_agree_significant_p'], int(s['n_permutations']))}).")
        if b["p"] >= alpha:
            verdict = "the gap is not significant to begin with"
        elif all(ok for ok, _ in checks):
            verdict = "the gap survives the controls"
        else:
            verdict = "the gap does not survive the controls"
        axis = s.get("axis_verdict")
        if isinstance(axis, str) and axis != "supported":
            verdict += f", but its axis is {s['axis_reading']}, so the gap is not read as a stereotype"
        lines.append(f"{population}, {dim}: gap {number_text(b['coef'], signed=True)} {unit} "
                     f"(p {p_text(b['p'], relation=True)}); "
                     + "; ".join(t for _, t in checks) + f": {verdict}." + share)
    return "\n".join(lines)


# --------------------------------------------------------------------------- per model


def timing_table(inputs: _CurveInputs, curve: _SpecificationCurve, validity_seconds: float,
                 started: float) -> pd.DataFrame:
    """Seconds per step of chapter 10 (``step, seconds``): the input steps, the curve with its joint test,
    the axis null, and ``total`` since ``started`` (a ``time.perf_counter()`` value)."""
    steps = {**inputs.seconds, "curve_and_joint_test": curve.seconds, "axis_validity": validity_seconds,
             "total": time.perf_counter() - started}
    return pd.DataFrame([{"step": k, "seconds": v} for k, v in steps.items()])


def robustness_summary(curve: _SpecificationCurve, validity: pd.DataFrame, model_id: str,
                       context_source: str = "generated", layer: str = "mean") -> pd.DataFrame:
    """Per population and dimension: the curve's summary plus the axis's verdict at the headline
    setting (``context_source``, ``layer``; ``validity``: ``axis_validity.axis_validity`` rows):
    ``axis_auc, axis_p, axis_verdict, axis_reading`` (``axis_validity.verdict_phrase``; NA for a
    dimension without a row) and ``share_layers_supported`` (share of the single layers whose
    verdict is ``supported``). Written as ``tables.NAMES.ROBUSTNESS_SUMMARY``."""
    v = validity[validity["context_source"] == context_source]
    head = v[v["layer"] == layer].set_index("dimension")
    per_layer = (v.loc[v["layer"] != layer, "verdict"] == "supported").groupby(v["dimension"]).mean()
    out = curve.summary.copy()
    out.insert(0, "model_id", model_id)
    out["axis_auc"] = out["dimension"].map(head["auc"])
    out["axis_p"] = out["dimension"].map(head["p"])
    out["axis_verdict"] = out["dimension"].map(head["verdict"])
    out["axis_reading"] = out["dimension"].map(pd.Series([verdict_phrase(r) for _, r in head.iterrows()],
                                                         index=head.index, dtype=object))
    out["share_layers_supported"] = out["dimension"].map(per_layer)
    return out
