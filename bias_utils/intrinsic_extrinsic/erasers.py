"""The erasers of chapter 12's erasure and their fit: LEACE per hidden state and its two controls.

Per hidden state three erasers, fitted once per run on the fit set's states (:func:`fit_erasers`): LEACE (Belrose
et al. 2023, ``concept_erasure.LeaceFitter``, pinned; its defaults: affine, covariance shrinkage, the trace
constraint) of the binary gender labels; LEACE of the labels shuffled over words; and the orthogonal projection off a
random subspace of LEACE's rank. Each is kept in compact form (I − P as the few directions it moves), so a hook costs
one or two products per token and the whole fit is stored as one small npz beside the run's records
(:func:`write_fit`, :func:`read_fit`). :func:`condition_erasers` says which of them a condition applies, and
:func:`probe_accuracy` is the guardedness check every condition reports: can a ridge probe still tell the held-out
names' gender.

Apart from the conditions and the trade-off (``intrinsic_extrinsic.erasure``) because the fit is one computation
with its own storage, and the probe its one check; apart from the hooks (``models.hooks``) because those apply any
eraser and know nothing of gender.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from concept_erasure import LeaceEraser, LeaceFitter

from ..core.cache import read_npz, write_npz

__all__: list[str] = []

#: Folds of the held-out names' probe.
FOLDS = 10
ERASURES = ("leace", "random", "shuffled")
#: The eraser meant to remove the stereotype and spare the fact (:func:`selective_erasers`), cross-fitted.
SELECTIVE = "selective"
ALL = "all"
#: The BLS share of women above which an occupation is majority female: the selective eraser's label.
_MAJORITY = 50.0


def _identity_eraser(dim: int) -> LeaceEraser:
    """The eraser of rank 0: it changes nothing."""
    return LeaceEraser(torch.zeros(dim, 0, dtype=torch.float64), torch.zeros(0, dim, dtype=torch.float64), None)


def _rank(eraser: LeaceEraser) -> int:
    """How many directions ``eraser`` moves (its I − P's rank, in the compact form of :func:`_leace`)."""
    return int(eraser.proj_left.shape[1])


def _random_eraser(dim: int, rank: int, rng: np.random.Generator) -> LeaceEraser:
    """The orthogonal projection off a random subspace of ``rank`` dimensions."""
    q, _ = np.linalg.qr(rng.standard_normal((dim, rank)))
    u = torch.from_numpy(q)
    return LeaceEraser(u, u.T.contiguous(), None)


def _leace(x: np.ndarray, z: np.ndarray) -> LeaceEraser:
    """LEACE of the binary labels ``z`` from ``x`` [n, H], fitted in float64 with concept-erasure's defaults, in
    compact form: I − P as the directions that carry it. Where the trace constraint mixes LEACE with an orthogonal
    projection, concept-erasure stores I − P by its full SVD (H columns, all but one or two of them zero); the
    columns above 1e-6 of the largest are kept, so a hook costs one or two products per token, not an H × H one."""
    eraser = LeaceFitter.fit(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(z.astype(np.float64))[:, None]
                             ).eraser
    size = eraser.proj_left.norm(dim=0) * eraser.proj_right.norm(dim=1)
    keep = size > 1e-6 * size.max() if len(size) and float(size.max()) > 0 else torch.zeros(len(size), dtype=bool)
    return LeaceEraser(eraser.proj_left[:, keep].contiguous(), eraser.proj_right[keep].contiguous(), eraser.bias)


@dataclass
class _Fit:
    """The erasers of every hidden state 1..L: ``leace``, ``random``, ``shuffled`` (``{state: eraser}``), with
    ``ranks`` (the LEACE eraser's rank per state)."""

    leace: dict[int, LeaceEraser]
    random: dict[int, LeaceEraser]
    shuffled: dict[int, LeaceEraser]
    ranks: dict[int, int]


def fit_erasers(states: np.ndarray, labels: np.ndarray, words: np.ndarray, seed: int) -> _Fit:
    """The three erasers of every hidden state 1..S−1 from per-context ``states`` [n, S, H] (state 0, the token
    embeddings, is not erased) with binary ``labels`` [n] and each context's ``words`` [n]: LEACE; LEACE on the labels
    permuted over words (every context of a word keeps one label); a random orthogonal projection of LEACE's rank."""
    rng = np.random.default_rng(seed)
    unique, index = np.unique(words, return_inverse=True)
    word_label = np.zeros(len(unique))
    word_label[index] = labels
    shuffled = rng.permutation(word_label)[index]
    fit = _Fit({}, {}, {}, {})
    for h in range(1, states.shape[1]):
        fit.leace[h] = _leace(states[:, h], labels)
        fit.shuffled[h] = _leace(states[:, h], shuffled)
        fit.ranks[h] = _rank(fit.leace[h])
        fit.random[h] = _random_eraser(states.shape[2], fit.ranks[h], rng)
    return fit


def write_fit(path: Path, fit: _Fit) -> None:
    """Store every eraser of ``fit`` (compact: a few directions each) as one npz."""
    arrays = {}
    for kind in ERASURES:
        for h, eraser in getattr(fit, kind).items():
            arrays[f"{kind}_{h}_left"] = eraser.proj_left.numpy()
            arrays[f"{kind}_{h}_right"] = eraser.proj_right.numpy()
            if eraser.bias is not None:
                arrays[f"{kind}_{h}_bias"] = eraser.bias.numpy()
    write_npz(path, **arrays)


def read_fit(path: Path, n_layers: int) -> _Fit | None:
    """The erasers :func:`write_fit` stored for states 1..``n_layers``; None where absent or corrupt."""
    stored = read_npz(path, required=[f"{k}_{h}_left" for k in ERASURES for h in range(1, n_layers + 1)])
    if stored is None:
        return None
    fit = _Fit({}, {}, {}, {})
    for kind in ERASURES:
        for h in range(1, n_layers + 1):
            bias = stored.get(f"{kind}_{h}_bias")
            getattr(fit, kind)[h] = LeaceEraser(torch.from_numpy(stored[f"{kind}_{h}_left"]),
                                                torch.from_numpy(stored[f"{kind}_{h}_right"]),
                                                None if bias is None else torch.from_numpy(bias))
    fit.ranks.update({h: _rank(e) for h, e in fit.leace.items()})
    return fit


def _spared(eraser: LeaceEraser, direction: np.ndarray) -> LeaceEraser:
    """``eraser`` restricted to the complement of ``direction``: it neither reads nor moves a state along it
    (I − P becomes Q (I − P) Q, Q the projection off the direction)."""
    f = torch.from_numpy(direction / np.linalg.norm(direction)).to(eraser.proj_left.dtype)
    left = eraser.proj_left - torch.outer(f, f @ eraser.proj_left)
    right = eraser.proj_right - torch.outer(eraser.proj_right @ f, f)
    return LeaceEraser(left.contiguous(), right.contiguous(), eraser.bias)


def halves(shares: np.ndarray) -> np.ndarray:
    """The selective eraser's cross-fitting halves of the occupations: True for the first, every other occupation
    in the order of their BLS share (ranks 1, 3, 5, ...), so both halves span the shares."""
    first = np.zeros(len(shares), dtype=bool)
    first[np.argsort(shares, kind="stable")[0::2]] = True
    return first


def selective_erasers(states: np.ndarray, occupation: np.ndarray, shares: np.ndarray, fact: np.ndarray,
                      layers) -> tuple[dict[int, LeaceEraser], dict[int, LeaceEraser]]:
    """The erasers meant to remove the stereotype and spare the fact (2DAMA's idea, Limisiewicz et al. 2025): per
    hidden state ``h`` of ``layers``, LEACE of the occupations' BLS majority (share above :data:`_MAJORITY`) from
    the occupation nouns' per-context ``states`` [n, S, H] (``occupation`` [n]: each context's occupation index
    into ``shares``) with the fact direction ``fact[h]`` (the gendered terms' female − male mean) projected out
    first, and the eraser then restricted to its complement (:func:`_spared`). Two fits, cross-fitted
    (:func:`halves`): ``(fitted on the first half, fitted on the second)``; each measures the other half's
    occupations, never the nouns it was fitted on."""
    first = halves(shares)[occupation]
    label = (shares[occupation] > _MAJORITY).astype(float)
    out: tuple[dict, dict] = ({}, {})
    for h in layers:
        f = fact[h] / np.linalg.norm(fact[h])
        x = states[:, h] - np.outer(states[:, h] @ f, f)
        for k, rows in enumerate((first, ~first)):
            out[k][h] = _spared(_leace(x[rows], label[rows]), fact[h])
    return out


def condition_erasers(fit: _Fit, erasure: str, layer) -> dict[int, LeaceEraser]:
    """The erasers of one condition: none for ``erasure="none"``, else ``fit``'s of that kind at ``layer``
    (:func:`at_layer`)."""
    return {} if erasure == "none" else at_layer(getattr(fit, erasure), layer)


def at_layer(erasers: dict[int, LeaceEraser], layer) -> dict[int, LeaceEraser]:
    """Of per-state ``erasers``, the one at ``layer`` (a hidden state), or all of them (``"all"``)."""
    return dict(erasers) if layer == ALL else {int(layer): erasers[int(layer)]}


def probe_accuracy(x: np.ndarray, y: np.ndarray, folds: int = FOLDS) -> float:
    """Cross-validated accuracy of a ridge classifier of ``y`` (0/1) from ``x`` [n, H]: ``folds`` folds stratified by
    class (by order within each class), the ridge penalty the training rows' mean squared centred norm (the dual
    form: n is far below H). Rows with a NaN are left out; NaN with fewer than two per class."""
    keep = ~np.isnan(x).any(axis=1)
    x, y = x[keep].astype(np.float64), y[keep].astype(int)
    if min((y == 0).sum(), (y == 1).sum()) < 2:
        return float("nan")
    fold = np.empty(len(y), dtype=int)
    for c in (0, 1):
        fold[y == c] = np.arange((y == c).sum()) % folds
    target = 2.0 * y - 1
    correct = 0
    for f in range(folds):
        train, test = fold != f, fold == f
        if not test.any():
            continue
        mu, t_mean = x[train].mean(axis=0), target[train].mean()
        xc = x[train] - mu
        gram = xc @ xc.T
        alpha = np.linalg.solve(gram + np.trace(gram) / len(xc) * np.eye(len(xc)), target[train] - t_mean)
        score = (x[test] - mu) @ (xc.T @ alpha) + t_mean
        correct += int(((score > 0) == (y[test] == 1)).sum())
    return correct / len(y)
