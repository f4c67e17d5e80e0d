"""POLAR change of basis onto stereotype dimensions (Schuster et al. 2024, Eqs. 1-5).

The pipeline, per layer of the model:

1. sense embedding ``s`` = mean of the word's contextual embeddings over its
   context examples (Eq. 1; subword averaging happens in ``embeddings``);
2. pole embedding ``p`` = mean of the sense embeddings of one
   (dimension, direction) pole (Eq. 2);
3. basis row ``a_h = p_high - p_low`` per dimension (Eq. 3);
4. a word embedding ``x`` (averaged over its own contexts, Eq. 4) is projected
   with ``d = pinv(A^T) x`` (Eq. 5), where ``A`` stacks the basis rows.

As in the authors' code the basis is built and pseudo-inverted separately at
every layer. Two spaces exist: the fine-grained ``"dimensions"`` (the
dictionary's own dimensions, 7 for the SCM dictionaries) and
``"warmth_competence"``, whose poles pool the senses of their subdimensions
(``dictionaries.COMPOSITES``).

Direction prediction (``direction_accuracy``) checks the space against the
full dictionary's extra terms: predicted direction = sign of a term's
projected value on its own dimension.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg

from ..core.errors import ParameterError, check_layer
from ..core.stats import bootstrap_ci
from .dictionaries import COMPOSITES
from .dictionaries import DIMENSIONS as DIMENSION_ORDER  # the paper's order; user dimensions follow

__all__: list[str] = []

_SPACES = ("dimensions", "warmth_competence")


@dataclass(frozen=True)
class PolarBasis:
    """A polar space at every layer.

    ``directions[l, d]`` is the high-minus-low pole difference of dimension ``d``
    at layer ``layers[l]``; ``pinv[l]`` is ``scipy.linalg.pinv(directions[l].T)``
    (shape [D, H]), so that ``pinv[l] @ x`` gives the polar coordinates of ``x``.
    ``poles`` lists how many senses entered each pole.
    """

    space: str
    dimensions: tuple[str, ...]
    directions: np.ndarray  # [L, D, H]
    pinv: np.ndarray  # [L, D, H]
    layers: tuple[int, ...]
    poles: pd.DataFrame = field(repr=False)  # dimension, direction, n_senses


def _sense_keys(contexts: pd.DataFrame) -> pd.DataFrame:
    missing = {"sense_id", "dimension", "term", "direction"} - set(contexts.columns)
    if missing:
        raise ParameterError(f"contexts table lacks column(s) {sorted(missing)}")
    return contexts


def sense_embeddings(emb_values: np.ndarray, contexts: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Eq. 1: average the per-context word embeddings of every sense.

    ``emb_values`` is [n_pairs, L, H] aligned row by row with ``contexts`` (one
    row per sense x context, columns ``sense_id, dimension, term, direction``);
    rows that could not be embedded are NaN and are left out of the mean.

    Returns ``(S, senses)``: ``S`` is [n_senses, L, H] float64 in the order of
    first appearance, and ``senses`` has ``sense_id, dimension, term,
    direction, n_contexts, n_embedded``. A sense with no embedded context keeps
    a NaN row and ``n_embedded == 0`` so callers can report it; the bases
    ignore it.
    """
    contexts = _sense_keys(contexts).reset_index(drop=True)
    values = np.asarray(emb_values)
    if values.ndim != 3 or len(values) != len(contexts):
        raise ParameterError(
            f"embeddings have shape {values.shape}; expected [n_pairs={len(contexts)}, layers, hidden]"
        )
    codes, uniques = pd.factorize(contexts["sense_id"], sort=False)
    ok = np.isfinite(values).all(axis=(1, 2))
    n_senses = len(uniques)
    sums = np.zeros((n_senses,) + values.shape[1:], dtype=np.float64)
    np.add.at(sums, codes[ok], values[ok].astype(np.float64))
    n_embedded = np.bincount(codes[ok], minlength=n_senses)
    with np.errstate(invalid="ignore", divide="ignore"):
        S = sums / n_embedded[:, None, None]
    S[n_embedded == 0] = np.nan
    first = contexts.groupby("sense_id", sort=False).first().reindex(uniques)
    senses = pd.DataFrame({
        "sense_id": uniques,
        "dimension": first["dimension"].to_numpy(),
        "term": first["term"].to_numpy(),
        "direction": first["direction"].to_numpy(),
        "n_contexts": np.bincount(codes, minlength=n_senses),
        "n_embedded": n_embedded,
    })
    return S, senses


def _ordered_dimensions(dims) -> list[str]:
    present = list(dict.fromkeys(dims))
    return [d for d in DIMENSION_ORDER if d in present] + [d for d in present if d not in DIMENSION_ORDER]


def space_groups(senses: pd.DataFrame, space: str = "dimensions",
                 composites: dict[str, tuple[str, ...]] | None = None) -> dict[str, tuple[str, ...]]:
    """Which dictionary dimensions feed each axis of ``space``."""
    if space == "dimensions":
        return {d: (d,) for d in _ordered_dimensions(senses["dimension"])}
    if space == "warmth_competence":
        composites = COMPOSITES if composites is None else composites
        present = set(senses["dimension"])
        lacking = {c: [s for s in subs if s not in present] for c, subs in composites.items()}
        lacking = {c: s for c, s in lacking.items() if s}
        if lacking:
            raise ParameterError(
                f"space 'warmth_competence' needs dimensions the dictionary lacks: {lacking}; "
                "use space='dimensions' for a dictionary with other dimensions")
        return dict(composites)
    raise ParameterError(f"unknown space {space!r}; choose one of {_SPACES}")


def polar_basis(sense_emb: np.ndarray, senses: pd.DataFrame, space: str = "dimensions", *,
                layers=None, composites: dict[str, tuple[str, ...]] | None = None) -> PolarBasis:
    """Eqs. 2-3 and the inverse of Eq. 5 at every layer.

    ``sense_emb``/``senses`` come from :func:`sense_embeddings`; ``layers`` names
    the layer axis (default ``0..L-1``, i.e. the embedding output is layer 0).
    Every pole needs at least one embedded sense, otherwise
    :class:`ParameterError` names the empty pole.
    """
    groups = space_groups(senses, space, composites)
    usable = senses["n_embedded"].to_numpy() > 0 if "n_embedded" in senses else np.ones(len(senses), bool)
    dims = senses["dimension"].to_numpy()
    dirs = senses["direction"].to_numpy()
    rows, pole_rows = [], []
    for axis, subdims in groups.items():
        poles = {}
        for direction in ("high", "low"):
            mask = usable & np.isin(dims, subdims) & (dirs == direction)
            pole_rows.append({"dimension": axis, "direction": direction, "n_senses": int(mask.sum())})
            if not mask.any():
                raise ParameterError(f"pole {direction} of {axis!r} ({'+'.join(subdims)}) has no embedded sense")
            poles[direction] = sense_emb[mask].mean(axis=0)  # Eq. 2, [L, H]
        rows.append(poles["high"] - poles["low"])  # Eq. 3
    directions = np.stack(rows, axis=1)  # [L, D, H]
    if not np.isfinite(directions).all():
        raise ParameterError("pole embeddings contain NaN/inf values")
    pinv = np.stack([linalg.pinv(directions[l].T) for l in range(directions.shape[0])])
    layers = tuple(range(directions.shape[0])) if layers is None else tuple(int(x) for x in layers)
    if len(layers) != directions.shape[0]:
        raise ParameterError(f"{len(layers)} layer labels for {directions.shape[0]} layers")
    return PolarBasis(space, tuple(groups), directions, pinv, layers, pd.DataFrame(pole_rows))


def _layer_index(basis: PolarBasis, layer) -> int:
    layer = check_layer(layer, layers=basis.layers)  # the one rule (errors.check_layer), with its message
    if layer == "last":
        return len(basis.layers) - 1
    return basis.layers.index(layer) if layer in basis.layers else len(basis.layers) + layer


def project(basis: PolarBasis, X: np.ndarray, layer="all") -> np.ndarray:
    """Eq. 5: polar coordinates of word embeddings ``X`` [n, L, H].

    ``layer``: ``"all"`` -> [n, L, D]; ``"mean"`` -> [n, D], the mean of the
    projected values over all layers (the original study's headline);
    ``"last"`` or a layer number -> [n, D] at that layer. NaN rows stay NaN.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 3 or X.shape[1:] != (basis.pinv.shape[0], basis.pinv.shape[2]):
        raise ParameterError(
            f"embeddings of shape {X.shape} do not match the basis ([n, {basis.pinv.shape[0]} layers, "
            f"{basis.pinv.shape[2]} hidden])")
    if layer in ("all", "mean"):
        out = np.einsum("ldh,nlh->nld", basis.pinv, X)
        return out if layer == "all" else out.mean(axis=1)
    i = _layer_index(basis, layer)
    return X[:, i, :] @ basis.pinv[i].T


def projection_table(basis: PolarBasis, X: np.ndarray, items: pd.DataFrame, layer="all") -> pd.DataFrame:
    """Tidy projections: one row per item x layer x dimension.

    Columns: the columns of ``items`` (aligned with ``X``), ``space``, ``layer``
    (an int, or ``"mean"``), ``dimension``, ``value``.
    """
    if len(items) != len(X):
        raise ParameterError(f"{len(items)} item rows for {len(X)} embeddings")
    P = project(basis, X, layer)
    if layer == "all":
        layer_labels = list(basis.layers)
    else:
        layer_labels = ["mean" if layer == "mean" else basis.layers[_layer_index(basis, layer)]]
        P = P[:, None, :]
    n, L, D = P.shape
    idx = np.repeat(np.arange(n), L * D)
    out = items.reset_index(drop=True).iloc[idx].reset_index(drop=True)
    out["space"] = basis.space
    out["layer"] = np.tile(np.repeat(np.array(layer_labels, dtype=object), D), n)
    out["dimension"] = np.tile(np.array(basis.dimensions, dtype=object), n * L)
    out["value"] = P.reshape(-1)
    return out


# ---------------------------------------------------------------- direction prediction

def own_dimension_values(bases: dict[str, PolarBasis], X: np.ndarray, terms: pd.DataFrame,
                         layer="all", composites: dict[str, tuple[str, ...]] | None = None) -> pd.DataFrame:
    """Projected value of every term on its own dimension (and on its composite).

    ``terms`` has ``term, dimension, direction`` aligned with ``X``. A term of a
    dimension that belongs to a composite (e.g. sociability -> warmth) gets a
    second row evaluated on the composite axis of the ``warmth_competence``
    basis. Terms whose embedding is NaN are left out here and must be reported
    by the caller from the embeddings' ``skipped`` table.

    Columns: ``term, dimension`` (the evaluated axis), ``term_dimension``
    (the dictionary's), ``direction, layer, value``.
    """
    composites = COMPOSITES if composites is None else composites
    parent = {sub: comp for comp, subs in composites.items() for sub in subs}
    keep = np.isfinite(np.asarray(X, dtype=np.float64)).all(axis=(1, 2))
    items = terms.reset_index(drop=True)[["term", "dimension", "direction"]].rename(
        columns={"dimension": "term_dimension"})
    frames = []
    for space, basis in bases.items():
        if space == "dimensions":
            target = items["term_dimension"]
        else:
            target = items["term_dimension"].map(parent)
        mask = keep & target.isin(basis.dimensions).to_numpy()
        if not mask.any():
            continue
        tab = projection_table(basis, X[mask], items[mask].assign(_target=target[mask].to_numpy()), layer)
        frames.append(tab[tab["dimension"] == tab["_target"]].drop(columns=["_target", "space"]))
    if not frames:
        raise ParameterError("no term could be evaluated: none of their dimensions is in the bases")
    out = pd.concat(frames, ignore_index=True)
    return out[["term", "dimension", "term_dimension", "direction", "layer", "value"]]


def _accuracy(values: np.ndarray, high: np.ndarray, centred: bool):
    """Accuracy as a function of resampled term indices (for ``stats.bootstrap_ci``)."""
    def statistic(idx: np.ndarray) -> float:
        idx = idx.astype(int)
        v = values[idx]
        cut = v.mean() if centred else 0.0
        return float(((v > cut) == high[idx]).mean())
    return statistic


def direction_accuracy(values: pd.DataFrame, *, n_boot: int = 2000, ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Accuracy of predicting each term's direction from the sign of its projection.

    ``values`` comes from :func:`own_dimension_values` (columns ``dimension,
    direction, layer, value``). Two cut-offs: ``raw`` predicts *high* when the
    value is > 0; ``centred`` subtracts first the mean projected value of all
    evaluated terms of that dimension (at that layer), i.e. the threshold is
    the dimension's mean. The CI is a percentile bootstrap over terms
    (``stats.bootstrap_ci``; the centring mean is recomputed in every resample).

    Returns ``dimension, layer, cutoff, accuracy, ci_low, ci_high, n,
    n_high, n_low``.
    """
    rows = []
    for (dimension, layer), g in values.groupby(["dimension", "layer"], sort=False):
        v = g["value"].to_numpy(dtype=np.float64)
        high = (g["direction"] == "high").to_numpy()
        for cutoff in ("raw", "centred"):
            acc, lo, hi = bootstrap_ci(np.arange(len(v)), _accuracy(v, high, cutoff == "centred"),
                                       n_boot=n_boot, seed=seed, level=ci)
            rows.append({"dimension": dimension, "layer": layer, "cutoff": cutoff, "accuracy": acc,
                         "ci_low": lo, "ci_high": hi, "n": len(v), "n_high": int(high.sum()),
                         "n_low": int(len(v) - high.sum())})
    out = pd.DataFrame(rows)
    order = {d: i for i, d in enumerate(list(DIMENSION_ORDER) + list(COMPOSITES))}
    out["_o"] = out["dimension"].map(order).fillna(len(order))
    out["_c"] = (out["cutoff"] == "centred").astype(int)
    return out.sort_values(["_o", "_c"], kind="stable").drop(columns=["_o", "_c"]).reset_index(drop=True)


def table2(accuracy: pd.DataFrame, cutoff: str = "raw") -> pd.DataFrame:
    """Wide table like the paper's Table 2: one row per model (and layer), one column per dimension."""
    a = accuracy[accuracy["cutoff"] == cutoff]
    index = [c for c in ("model_id", "context_source", "layer") if c in a.columns]
    wide = a.pivot_table(index=index, columns="dimension", values="accuracy", aggfunc="first")
    cols = [c for c in ("warmth", "competence") + DIMENSION_ORDER if c in wide.columns]
    cols += [c for c in wide.columns if c not in cols]
    return wide[cols].reset_index()
