"""The statistics of chapter 12's erasure: per condition and measure, the change from the unhooked model with a paired
interval, the stereotype and the fact it removes, and the two states the chapter reads.

**Per condition and measure** (:func:`tradeoff_table`): the value, the unhooked model's value and the change, with a
95% percentile interval from resampling the units paired across the two conditions (occupations for the ρ, the slope
and the mean; sentences for the cross-entropy; pairs for the facts; names within their group for the gaps).

**Stereotype against fact, in one unit** (DAMA's decomposition, Limisiewicz et al. 2024, on the same next-word
log-ratios): the *stereotype slope*, the log-ratio's least-squares slope on the BLS share of women over the
occupations (nats per 100 points of share), and the *fact gap*, the mean log-ratio gap of the female noun over the male
one over the pairs (nats). Per erasure the share of each removed (1 − erased / unhooked, each resample paired with the
unhooked model's on the same units) and their difference; an erasure is **selective** (:func:`is_selective`) when it
removes more of the stereotype than of the fact, the difference's interval above 0.

**The states the chapter reads.** The rule stated before the results names one (:func:`best_tradeoff_layer`); the
curve's largest effect is another (:func:`largest_effect_layer`), and the controls run at both (:func:`picked_layers`).

Apart from the run (``intrinsic_extrinsic.erasure``), which measures the conditions, and from its reading
(``intrinsic_extrinsic.erasure_reading``), which turns this table into sentences and a chart.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.stats import hedges_g, percentile_interval, resamples, rowwise_correlation, rowwise_g
from .erasers import ALL
from .erasure_measures import Inputs

__all__: list[str] = []

#: The best trade-off's budget, stated before the results: nats per token added at most ...
MAX_COST = 0.10
#: ... and the share of gendered nouns kept on their side at least.
MIN_FACTS = 0.90
#: The measures of the trade-off table, in its order, with the units an interval resamples.
MEASURES = {
    "probe_accuracy": "", "warmth_gap": "names", "competence_gap": "names", "position_rho": "occupations",
    "log_ratio_rho": "occupations", "log_ratio_mean": "occupations", "stereotype_slope": "occupations",
    "facts_right_share": "pairs", "facts_gap": "pairs", "cross_entropy": "sentences",
    "stereotype_removed": "occupations", "fact_removed": "pairs", "selectivity": "occupations, pairs",
}
#: The shares removed (1 − erased / unhooked) of the measure each is a share of.
_REMOVED = {"stereotype_removed": "stereotype_slope", "fact_removed": "facts_gap"}
TRADEOFF_COLUMNS = ["model_id", "erasure", "layer", "depth", "rank", "measure", "value", "baseline", "change",
                    "ci_low", "ci_high", "resampled", "n", "best"]


def _facts_share(ratios: np.ndarray) -> np.ndarray:
    """Per row of [replicates, pairs, 2] log-ratios (female noun, male noun): the share of nouns on their side."""
    return ((ratios[..., 0] > 0).sum(axis=-1) + (ratios[..., 1] < 0).sum(axis=-1)) / (2 * ratios.shape[-2])


def _slopes(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per row of ``y`` and ``x`` [replicates, n], the least-squares slope of ``y`` on ``x``, per 100 units of ``x``
    (NaN where a row's ``x`` is constant)."""
    xc = x - x.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100 * (xc * (y - y.mean(axis=1, keepdims=True))).sum(axis=1) / (xc * xc).sum(axis=1)


def _statistics(record: Mapping[str, list], inputs: Inputs, tokens: np.ndarray, draws: Mapping[str, np.ndarray],
                states: Sequence[int]) -> dict[str, tuple[float, np.ndarray | None]]:
    """Per measured (not derived) measure of :data:`MEASURES`, ``(value, values over the resamples)`` of one
    condition's record; ``draws``: the resampled indices per unit, shared by every condition so that the changes are
    paired; ``states``: the erased hidden states the probe is read at."""
    female = inputs.name_labels == 1
    out: dict[str, tuple[float, np.ndarray | None]] = {
        "probe_accuracy": (float(np.nanmax([record["probe"][s] for s in states])), None)}
    f_idx, m_idx = draws["names_female"], draws["names_male"]
    for dim in ("warmth", "competence"):
        v = np.asarray(record[dim])
        out[f"{dim}_gap"] = (hedges_g(v[female], v[~female])["effect_size"],
                             rowwise_g(v[female][f_idx], v[~female][m_idx]))
    occ = draws["occupations"]
    for name, key in (("position_rho", "position"), ("log_ratio_rho", "log_ratio")):
        v = np.asarray(record[key])
        out[name] = (float(rowwise_correlation("spearman", v[None], inputs.shares[None])[0]),
                     rowwise_correlation("spearman", v[occ], inputs.shares[occ]))
    ratio = np.asarray(record["log_ratio"])
    out["log_ratio_mean"] = (float(ratio.mean()), ratio[occ].mean(axis=1))
    out["stereotype_slope"] = (float(_slopes(ratio[None], inputs.shares[None])[0]),
                               _slopes(ratio[occ], inputs.shares[occ]))
    facts = np.asarray(record["facts"]).reshape(2, -1).T  # [pairs, (female, male)]
    out["facts_right_share"] = (float(_facts_share(facts[None])[0]), _facts_share(facts[draws["pairs"]]))
    gap = facts[:, 0] - facts[:, 1]
    out["facts_gap"] = (float(gap.mean()), gap[draws["pairs"]].mean(axis=1))
    nll, sent = np.asarray(record["nll"]), draws["sentences"]
    out["cross_entropy"] = (float(nll.sum() / tokens.sum()), nll[sent].sum(axis=1) / tokens[sent].sum(axis=1))
    return out


def _derived(mine: dict, base: dict) -> dict[str, tuple[float, np.ndarray]]:
    """The shares removed (:data:`_REMOVED`), each resample against the unhooked model's on the same units, and the
    selectivity: the stereotype's share removed minus the fact's (their resamples independent: other units)."""
    out = {}
    for name, of in _REMOVED.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = (1 - mine[of][0] / base[of][0], 1 - mine[of][1] / base[of][1])
    out["selectivity"] = (out["stereotype_removed"][0] - out["fact_removed"][0],
                          out["stereotype_removed"][1] - out["fact_removed"][1])
    return out


def tradeoff_table(records: Mapping[tuple[str, str], Mapping[str, list]], inputs: Inputs, tokens: np.ndarray,
                   ranks: Mapping[int, int], model_id: str, *, n_boot: int, seed: int) -> pd.DataFrame:
    """One row per condition and measure (:data:`TRADEOFF_COLUMNS`): ``erasure`` (``none``, ``leace``, ``random``,
    ``shuffled``, ``selective``), ``layer`` (the erased hidden state, ``all``, or ``none``), ``depth`` (the model's
    hidden states above the token embeddings, L: ``layer`` / ``depth`` is how far up the model it is), ``rank``
    (LEACE's directions erased per state, summed over the erased states: the controls erase as many; the selective
    eraser, fitted on other labels, is not counted apart), ``value``, ``baseline`` (without erasure), ``change``
    (value − baseline) with its 95% percentile interval ``ci_low, ci_high`` from ``n_boot`` resamples of the
    ``resampled`` units, paired across the conditions (none for the probe), ``n`` (the units; the occupations for the
    selectivity), ``best`` (the row belongs to the best trade-off's erasure, :func:`best_tradeoff_layer`). The
    shares removed and the selectivity are changes themselves: their ``baseline`` is 0, their ``change`` their
    ``value`` and the interval theirs."""
    female = inputs.name_labels == 1
    draws = {"names_female": resamples(int(female.sum()), n_boot, seed),
             "names_male": resamples(int((~female).sum()), n_boot, seed + 1),
             "occupations": resamples(len(inputs.occupations), n_boot, seed),
             "pairs": resamples(len(inputs.facts) // 2, n_boot, seed),
             "sentences": resamples(len(inputs.sentences), n_boot, seed)}
    sizes = {"": len(inputs.names), "names": len(inputs.names), "occupations": len(inputs.occupations),
             "pairs": len(inputs.facts) // 2, "sentences": len(inputs.sentences),
             "occupations, pairs": len(inputs.occupations)}
    every = sorted(ranks)
    rows = []
    for (erasure, layer), record in records.items():
        states = every if layer in (ALL, "none") else [int(layer)]
        mine = _statistics(record, inputs, tokens, draws, states)
        base = _statistics(records[("none", "none")], inputs, tokens, draws, states)
        derived = _derived(mine, base)
        for measure, units in MEASURES.items():
            low = high = np.nan
            if measure in derived:
                (value, boots), reference = derived[measure], 0.0
                if erasure != "none":
                    low, high = percentile_interval(boots, 0.95)
            else:
                (value, boots), (reference, base_boots) = mine[measure], base[measure]
                if boots is not None and erasure != "none":
                    low, high = percentile_interval(boots - base_boots, 0.95)
            rows.append({"model_id": model_id, "erasure": erasure, "layer": str(layer), "depth": max(ranks),
                         "rank": 0 if erasure == "none" else int(sum(ranks[s] for s in states)),
                         "measure": measure, "value": value, "baseline": reference, "change": value - reference,
                         "ci_low": low, "ci_high": high, "resampled": units, "n": sizes[units], "best": False})
    table = pd.DataFrame(rows, columns=TRADEOFF_COLUMNS)
    best = best_tradeoff_layer(table)
    if best is not None:
        table["best"] = (table["layer"] == best) & (table["erasure"] == "leace")
    return table


def probe_table(records: Mapping[tuple[str, str], Mapping[str, list]], model_id: str) -> pd.DataFrame:
    """Per condition (``erasure``, ``layer``) and hidden ``state`` 0..L, the held-out names' probe ``accuracy``
    (``erasers.probe_accuracy``): where the unhooked model's names' gender is decodable, and where an erasure leaves
    it."""
    return pd.DataFrame([{"model_id": model_id, "erasure": erasure, "layer": str(layer), "state": state,
                          "accuracy": accuracy} for (erasure, layer), record in records.items()
                         for state, accuracy in enumerate(record["probe"])],
                        columns=["model_id", "erasure", "layer", "state", "accuracy"])


def _single_leace(table: pd.DataFrame, values: str = "change") -> pd.DataFrame:
    """The single-state LEACE erasures, one row per hidden state (as text), one column per measure."""
    leace = table[(table["erasure"] == "leace") & (table["layer"] != ALL)]
    return leace.pivot_table(index="layer", columns="measure", values=values, sort=False)


def best_tradeoff_layer(table: pd.DataFrame) -> str | None:
    """The best trade-off by the rule stated before the results: among the single-state LEACE erasures that add at
    most :data:`MAX_COST` nats per token and keep at least :data:`MIN_FACTS` of the gendered nouns on their side,
    the hidden state (as text) whose ρ(next-word log-ratio, BLS share) falls the most; None where none qualifies. A
    state where ρ does not fall (its change 0 or above) is never named: a "best" erasure that raises ρ is none."""
    wide, values = _single_leace(table), _single_leace(table, "value")
    if wide.empty:
        return None
    fits = wide[(wide["cross_entropy"] <= MAX_COST) & (values["facts_right_share"] >= MIN_FACTS)
                & (wide["log_ratio_rho"] < 0)]
    return None if fits.empty else str(fits["log_ratio_rho"].idxmin())


def largest_fall(rho_changes: pd.Series) -> str | None:
    """The book's one rule for a curve's largest effect, whatever it costs, on one model's single-state erasures:
    ``rho_changes`` (the change of ρ(next-word log-ratio, BLS share), indexed by hidden state as text) -> the state
    where ρ falls the most; None where it falls at no state. Chapter 12, the front page and chapter 09's cross-model
    sentence all name the state this returns."""
    falls = rho_changes[rho_changes < 0]
    return None if falls.empty else str(falls.idxmin())


def largest_effect_layer(table: pd.DataFrame) -> str | None:
    """The curve's largest effect (:func:`largest_fall`) among the single-state LEACE erasures of a trade-off
    table."""
    wide = _single_leace(table)
    return largest_fall(wide["log_ratio_rho"]) if len(wide) else None


def picked_layers(table: pd.DataFrame) -> list[str]:
    """Where the controls must run: the rule's state and the largest effect's (each where there is one), lowest
    first."""
    return sorted({s for s in (best_tradeoff_layer(table), largest_effect_layer(table)) if s is not None}, key=int)


def is_selective(table: pd.DataFrame, erasure: str, layer: str) -> bool:
    """Whether the erasure removes more of the stereotype than of the fact: the share of the stereotype slope removed
    above the share of the fact gap removed, the 95% interval of their difference above 0."""
    row = table[(table["erasure"] == erasure) & (table["layer"] == layer) & (table["measure"] == "selectivity")]
    return bool(len(row)) and float(row["value"].iloc[0]) > 0 and float(row["ci_low"].iloc[0]) > 0
