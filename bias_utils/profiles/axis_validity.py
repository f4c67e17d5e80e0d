"""Does an axis carry its meaning? The extra terms' ranking against a pole-label null.

An axis of the stereotype space is *read* (a profile gap on it is reported as a
stereotype) only when it orders the full dictionary's extra terms by pole better
than axes built from shuffled seed labels do. This module is the one place that
decides it; chapters 03, 04, 08, 09, 10, every chart and the front page call
:func:`unreadable_axes` / :func:`verdict_phrase` on the table :func:`axis_validity` writes.

**Statistic.** The rank AUC of the extra terms' projections against their pole
labels (high = positive; Mann-Whitney U / (n_high n_low), ties count 0.5). The
profiles are z-standardised per dimension, so a common offset of all projections
cancels in every gap; the AUC is invariant to it, the raw accuracy (projection > 0
predicts high, Table 2) is not. With unbalanced poles the raw accuracy's null also
sits near the larger pole's share, not at 0.5.

**Null.** The seed senses' pole labels are permuted within the axis's dimension
(within each member dimension for warmth/competence) ``n_permutations`` times;
each permutation's poles are averaged from the cached sense embeddings (Eq. 2),
the axis's direction is replaced by their difference (Eq. 3; the other axes stay)
and the axis's row of the pseudo-inverse is recomputed, batched over permutations
and layers (:func:`pinv_row`); the terms are re-projected.

**Verdicts** (:data:`VERDICTS`), per space, dimension and layer:

* ``supported``: ``p < alpha`` with ``p = (1 + #{null AUC >= observed}) / (1 + K)``
  (its floor ``p_floor = 1 / (K + 1)``; printed "≤ p_floor" there);
* ``untestable``: a pole has fewer than :data:`MIN_POLE_TERMS` covered extra terms
  (a user dimension without extra terms has rows with 0 and 0);
* ``not shown``: otherwise, with ``detectable_auc``: an observed AUC *above* it
  would have reached ``p < alpha`` against this null at this n. It is the
  ``(c + 1)``-th largest null AUC, ``c`` being the most null AUCs that may reach
  the observed one while ``(1 + c) / (K + 1) < alpha`` (about the null's
  ``1 - alpha`` quantile); NaN when K is too small for any p below alpha.

The raw accuracy stays as Table 2's replication figure (``raw_accuracy`` beside
``majority_share``, its baseline: the larger pole's share), with the old gate's
p and verdict (``raw_p``, ``raw_verdict``) under the same permutations, so the
book can show how verdicts change.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..core.errors import ParameterError, check_count, is_number
from ..core.precision import interval_text, number_text
from ..core.stats import permutation_p, permutation_p_text
from . import projection
from .dictionaries import load_full_dictionary_terms

__all__ = [
    "MIN_POLE_TERMS", "describe_verdicts", "axis_validity", "unreadable_axes", "validity_by_source",
    "validity_layer", "verdict_table",
]

#: The table chapter 03 writes in the model's results folder; every later chapter reads it.
VERDICTS = ("supported", "not shown", "untestable")
#: Fewest covered extra terms per pole for a verdict other than ``untestable``.
MIN_POLE_TERMS = 10
#: Columns of :func:`axis_validity` (:func:`validity_table` without ``term_contexts``).
_COLUMNS = ["model_id", "context_source", "term_contexts", "space", "dimension", "layer", "auc", "null_mean",
           "null_low", "null_high", "p", "p_floor", "n_high", "n_low", "n_terms", "n_permutations",
           "detectable_auc", "verdict", "raw_accuracy", "majority_share", "raw_p", "raw_verdict"]


# --------------------------------------------------------------------------- the statistic and its null


def _rank_auc(values: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Rank AUC of every column of ``values`` [n, ...] against ``high`` [n] (True = high pole):
    the share of (high, low) pairs where the high term projects higher, ties 0.5."""
    values, high = np.asarray(values, dtype=np.float64), np.asarray(high, bool)
    n_high, n_low = int(high.sum()), int((~high).sum())
    ranks = sps.rankdata(values, axis=0)  # average ranks: a tie adds 0.5 per pair
    return (ranks[high].sum(axis=0) - n_high * (n_high + 1) / 2) / (n_high * n_low)


def _auc_null_test(values: np.ndarray, high: np.ndarray, alpha: float = 0.05) -> dict[str, np.ndarray]:
    """The verdict of one axis from its projections: ``values`` [n, ..., K + 1] holds the
    extra terms' projections on the real axis (last index 0) and on the K permuted ones;
    ``high`` [n] their poles. Vectorised over the middle axes (layers).

    Returns arrays over the middle axes: ``auc, null_mean, null_low, null_high`` (2.5/97.5
    percentiles), ``p, p_floor, detectable_auc, verdict, raw_accuracy, raw_p, raw_verdict``,
    and the ints ``n_high, n_low, n_terms, n_permutations``, ``majority_share`` (module docstring).
    """
    values, high = np.asarray(values, dtype=np.float64), np.asarray(high, bool)
    if values.ndim < 2 or values.shape[0] != len(high) or values.shape[-1] < 2:
        raise ValueError(f"values of shape {values.shape} need [n_terms={len(high)}, ..., 1 + n_permutations >= 2]")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    K = values.shape[-1] - 1
    shape = values.shape[1:-1]
    n_high, n_low = int(high.sum()), int((~high).sum())
    nan = np.full(shape, np.nan)
    out = {"n_high": n_high, "n_low": n_low, "n_terms": n_high + n_low, "n_permutations": K, "p_floor": 1 / (K + 1),
           "majority_share": max(n_high, n_low) / (n_high + n_low) if n_high + n_low else np.nan}
    if n_high and n_low:
        auc = _rank_auc(values, high)
        obs, null = auc[..., 0], auc[..., 1:]
        # The most null AUCs that may reach the observed one with (1 + c) / (K + 1) < alpha.
        c = int(np.ceil(alpha * (K + 1) - 1e-9)) - 2
        detectable = -np.sort(-null, axis=-1)[..., c] if c >= 0 else nan
        out.update(auc=obs, null_mean=null.mean(axis=-1), null_low=np.percentile(null, 2.5, axis=-1),
                   null_high=np.percentile(null, 97.5, axis=-1), p=permutation_p(obs, null),
                   detectable_auc=detectable)
    else:
        out.update(auc=nan, null_mean=nan, null_low=nan, null_high=nan, p=nan, detectable_auc=nan)
    if n_high + n_low:
        raw = ((values > 0) == high.reshape((-1,) + (1,) * (values.ndim - 1))).mean(axis=0)
        out.update(raw_accuracy=raw[..., 0], raw_p=permutation_p(raw[..., 0], raw[..., 1:]))
        out["raw_verdict"] = np.where(out["raw_p"] < alpha, "passed", "failed")
    else:
        out.update(raw_accuracy=nan, raw_p=nan, raw_verdict=np.full(shape, "untested"))
    testable = min(n_high, n_low) >= MIN_POLE_TERMS
    out["verdict"] = np.where(not testable, "untestable", np.where(out["p"] < alpha, "supported", "not shown"))
    return out


# --------------------------------------------------------------------------- the batched basis rebuild


def _shuffled_high(senses: pd.DataFrame, idx: np.ndarray, n_permutations: int, rng) -> np.ndarray:
    """[K, len(idx)] bool: the high label after permuting the labels within each member dimension."""
    dims = senses["dimension"].to_numpy()[idx]
    high = (senses["direction"].to_numpy()[idx] == "high")
    out = np.empty((n_permutations, len(idx)), bool)
    for k in range(n_permutations):
        h = high.copy()
        for dim in dict.fromkeys(dims):
            pos = np.flatnonzero(dims == dim)
            h[pos] = high[rng.permutation(pos)]
        out[k] = h
    return out


def _pinv_row(directions: np.ndarray, d: int) -> np.ndarray:
    """Row ``d`` of ``pinv(A.T)`` for every stacked basis ``A = directions[..., :, :]`` ([..., D, H]).

    For ``A`` of full row rank, ``pinv(A.T) = (A A.T)^-1 A``, so row ``d`` is the
    ``d``-th row of the inverse Gram matrix times ``A``: a D x D solve instead of an
    SVD of the H x D matrix. A singular Gram matrix falls back to ``numpy.linalg.pinv``.
    """
    A = np.asarray(directions, dtype=np.float64)
    G = A @ np.swapaxes(A, -1, -2)
    e = np.zeros(G.shape[:-1] + (1,))
    e[..., d, 0] = 1.0
    try:
        coef = np.linalg.solve(G, e)[..., 0]  # G is symmetric: its inverse's row d is this column
    except np.linalg.LinAlgError:
        return np.linalg.pinv(np.swapaxes(A, -1, -2))[..., d, :]
    return np.einsum("...f,...fh->...h", coef, A)


def _null_projections(space, basis: projection.PolarBasis, d: int, members, X: np.ndarray, rng,
                      n_permutations: int, chunk: int) -> np.ndarray:
    """Projections [n, L, K + 1] of ``X`` [n, L, H] on axis ``d`` of ``basis`` (index 0) and on
    its ``n_permutations`` rebuilds from shuffled seed labels of the ``members`` dimensions."""
    S = space.sense_emb
    usable = space.senses["n_embedded"].to_numpy() > 0
    idx = np.flatnonzero(usable & space.senses["dimension"].isin(members).to_numpy())
    H = _shuffled_high(space.senses, idx, n_permutations, rng).astype(np.float64)  # [K, n]
    flat = S[idx].reshape(len(idx), -1)
    W = np.empty((n_permutations + 1,) + basis.pinv[:, d].shape)  # [K+1, L, H]
    W[0] = basis.pinv[:, d]
    for k0 in range(0, n_permutations, chunk):
        h = H[k0:k0 + chunk]
        diff = (h @ flat / h.sum(axis=1, keepdims=True)
                - (1 - h) @ flat / (1 - h).sum(axis=1, keepdims=True)).reshape(len(h), *S.shape[1:])
        directions = np.repeat(basis.directions[None], len(h), axis=0)  # [k, L, D, H]
        directions[:, :, d] = diff
        W[1 + k0:1 + k0 + len(h)] = _pinv_row(directions, d)
    return np.stack([X[:, li] @ W[:, li].T for li in range(len(basis.layers))], axis=1)


def validity_table(space, terms, *, n_permutations: int = 200, seed: int = 0, alpha: float = 0.05,
                   chunk: int = 50) -> pd.DataFrame:
    """:func:`auc_null_test` of every axis of every basis of ``space`` at every layer and the
    mean over layers (``layer`` = hidden-state index or ``"mean"``, the mean of the
    projections), on the embedded extra terms ``terms`` (``space.TermEmbeddings``).
    An axis without covered terms has its rows too, verdict ``untestable``.
    Columns: :data:`COLUMNS` without ``term_contexts``.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations!r}")
    rng = np.random.default_rng(seed)
    ok = terms.table["n_embedded"].to_numpy() > 0
    X, table = terms.X[ok], terms.table[ok].reset_index(drop=True)
    rows = []
    for space_name, basis in space.bases.items():
        groups = projection.space_groups(space.senses, space_name)
        labels = [*map(str, basis.layers), "mean"]
        for d, axis in enumerate(basis.dimensions):
            sel = table["dimension"].isin(groups[axis]).to_numpy()
            high = (table.loc[sel, "direction"] == "high").to_numpy()
            if sel.any():  # no draws for an axis without terms: the other axes keep their permutations
                vals = _null_projections(space, basis, d, groups[axis], X[sel], rng, n_permutations, chunk)
                vals = np.concatenate([vals, vals.mean(axis=1, keepdims=True)], axis=1)  # [n, L+1, K+1]
            else:
                vals = np.empty((0, len(labels), n_permutations + 1))
            res = _auc_null_test(vals, high, alpha)
            for i, label in enumerate(labels):
                rows.append({"model_id": space.model_id, "context_source": space.source, "space": space_name,
                             "dimension": axis, "layer": label,
                             **{k: (v[i] if isinstance(v, np.ndarray) else v) for k, v in res.items()}})
    out = pd.DataFrame(rows, columns=[c for c in _COLUMNS if c != "term_contexts"])
    for col in ("n_high", "n_low", "n_terms", "n_permutations"):
        out[col] = out[col].astype(int)
    return out


def axis_validity(model, space, *, n_contexts: int = 5, seed: int = 0, limit: int | None = None,
                  n_permutations: int = 200, alpha: float = 0.05, term_contexts: str = "generated") -> pd.DataFrame:
    """:func:`validity_table` of ``space`` on the full dictionary's extra terms of the
    dimensions that feed its axes, embedded in ``term_contexts`` by
    ``space.term_embeddings`` (the same terms, order and coverage rule as Table 2's
    ``space.direction_prediction`` with the same ``limit`` and ``seed``, so the
    embeddings come from its cache). One row per (space, dimension, layer): :data:`COLUMNS`.
    """
    # deferred: space loads torch and transformers; the readers of the table (crossmodel, summary) do not need them.
    from .space import check_terms, term_embeddings

    check_terms(model, n_contexts=n_contexts, seed=seed, limit=limit, term_contexts=term_contexts)
    check_count(n_permutations, "n_permutations", minimum=1)
    if not is_number(alpha) or not 0 < alpha < 1:
        raise ParameterError(f"alpha must be a number in (0, 1), got {alpha!r}")

    members = {m for name in space.bases for ms in projection.space_groups(space.senses, name).values() for m in ms}
    terms = load_full_dictionary_terms()
    emb = term_embeddings(model, terms[terms["dimension"].isin(members)], n_contexts=n_contexts, seed=seed,
                          term_contexts=term_contexts, limit=limit)
    table = validity_table(space, emb, n_permutations=n_permutations, seed=seed, alpha=alpha)
    table.insert(2, "term_contexts", term_contexts)
    return table[_COLUMNS]


# --------------------------------------------------------------------------- reading the table


def validity_layer(space, layer) -> str:
    """The ``layer`` label of :func:`axis_validity`'s table for a notebook's ``layer`` parameter:
    ``"mean"``, ``"last"``, a hidden-state index, or ``"all"`` (then the last layer stands
    for the summary; the table itself has every layer)."""
    if layer == "mean":
        return "mean"
    layers = next(iter(space.bases.values())).layers
    return str(layers[-1] if layer in ("last", "all") else int(layer))


def _at_layer(table: pd.DataFrame, layer) -> pd.DataFrame:
    if "verdict" not in table:
        raise ValueError("the axis validity table has no 'verdict' column: it was written by an older version "
                         "(the raw-accuracy gate); run chapter 03 again")
    return table[table["layer"].astype(str) == str(layer)]


def unreadable_axes(table: pd.DataFrame, layer="mean") -> list[str]:
    """The dimensions of ``table`` (:func:`axis_validity` rows) whose verdict at ``layer``
    is not ``supported``: a gap on them is not read as a stereotype."""
    rows = _at_layer(table, layer)
    return sorted(set(rows.loc[rows["verdict"] != "supported", "dimension"]))


def _pole_terms(n: int, pole: str) -> str:
    return f"{n} covered {pole}-pole term{'' if n == 1 else 's'}"


def verdict_phrase(row) -> str:
    """The sentence fragment a chapter prints for one axis (a row of :func:`axis_validity`), e.g.
    ``supported (AUC 0.86, null 95% band 0.31–0.71, p ≤ 0.00498, n 120 high / 80 low)``,
    ``not shown to beat its null (AUC 0.58, null 95% band 0.35–0.74, p = 0.21; n 40 high / 12 low;
    detectable AUC 0.71)``, ``untestable (1 covered low-pole term; 10 needed)``."""
    r = row._asdict() if hasattr(row, "_asdict") else dict(row) if isinstance(row, Mapping) else row.to_dict()
    nh, nl = int(r["n_high"]), int(r["n_low"])
    if r["verdict"] == "untestable":
        short = [_pole_terms(n, pole) for n, pole in ((nh, "high"), (nl, "low")) if n < MIN_POLE_TERMS]
        return f"untestable ({' and '.join(short)}; {MIN_POLE_TERMS} per pole needed)"
    band = interval_text(r["null_low"], r["null_high"], r["auc"], "–")
    numbers = (f"AUC {number_text(r['auc'])}, null 95% band {band}, "
               f"p {permutation_p_text(r['p'], int(r['n_permutations']))}")
    if r["verdict"] == "supported":
        return f"supported ({numbers}, n {nh} high / {nl} low)"
    detectable = (f"detectable AUC {number_text(r['detectable_auc'])}" if pd.notna(r["detectable_auc"])
                  else f"no AUC could reach significance with {int(r['n_permutations'])} permutations")
    return f"not shown to beat its null ({numbers}; n {nh} high / {nl} low; {detectable})"


def verdict_table(table: pd.DataFrame, layer="mean") -> pd.DataFrame:
    """Per axis at ``layer``: ``space, dimension, auc, null_low, null_high, p, n_high, n_low,
    detectable_auc, verdict, reading`` (:func:`verdict_phrase`) beside the old gate's
    ``raw_accuracy, majority_share, raw_p, raw_verdict``. With several context sources or
    term contexts in ``table``, one row per combination (those columns first)."""
    rows = _at_layer(table, layer)
    keys = [c for c in ("context_source", "term_contexts") if c in rows and rows[c].nunique() > 1]
    cols = keys + ["space", "dimension", "auc", "null_low", "null_high", "p", "n_high", "n_low", "detectable_auc",
                   "verdict", "raw_accuracy", "majority_share", "raw_p", "raw_verdict"]
    out = rows[cols].reset_index(drop=True)
    out.insert(out.columns.get_loc("verdict") + 1, "reading", [verdict_phrase(r) for _, r in rows.iterrows()])
    return out


def describe_verdicts(verdicts: pd.DataFrame) -> str:
    """Markdown reading :func:`verdict_table`: a bullet per axis, its verdict beside the old raw-accuracy gate's
    (raw accuracy against the larger pole's share), then how many axes the two gates judge differently."""
    num = number_text
    changed = int(((verdicts["verdict"] == VERDICTS[0]) != (verdicts["raw_verdict"] == "passed")).sum())
    lines = [f"- **{r.dimension}**: {r.reading}. Raw accuracy {num(r.raw_accuracy)} against its baseline "
             f"{num(r.majority_share)} (the larger pole's share); the old raw-accuracy gate: {r.raw_verdict}."
             for r in verdicts.itertuples()]
    return "\n".join(lines) + (f"\n\n{changed} of {len(verdicts)} axes get a different verdict than under the old "
                               "raw-accuracy gate.")


def validity_by_source(model, spaces: Mapping[str, object], **kwargs) -> tuple[pd.DataFrame, float]:
    """``axis_validity`` of every context source's space (``kwargs``: its options), stacked
    in the order of ``spaces``, and the seconds it took. Written as ``tables.NAMES.ROBUSTNESS_AXIS_VALIDITY``."""
    t0 = time.perf_counter()
    table = pd.concat([axis_validity(model, sp, **kwargs) for sp in spaces.values()], ignore_index=True)
    return table, time.perf_counter() - t0
