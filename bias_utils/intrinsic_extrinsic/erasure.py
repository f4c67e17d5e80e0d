"""Erasing the gender concept: does the inside drive what the model writes? (chapter 12)

Chapter 11 correlates, across the 60 BLS occupations, where a decoder places an occupation on its female − male
direction with what it writes next after a sentence about it. A correlation across nouns cannot say that the inside
drives the writing; an intervention can. This module removes the model's linear gender concept from its hidden
states and measures, on the same inputs, what changes inside, in the writing, in the facts it keeps and in its
capability.

**The fit, stated before the results** (:func:`erasers.fit_erasers`). Per hidden state, LEACE (Belrose et al. 2023,
``concept_erasure.LeaceFitter``, pinned; its defaults: affine, covariance shrinkage, the trace constraint) is fitted on
the states the book already computes and caches for Study 1 (``models.embeddings.embed_words``, every hidden state,
chapter 04's contexts): each word in each of the seven profile templates (``DEFAULT_TEMPLATES``), its state averaged
over its tokens, labelled female or male. The fit set is the 9 + 9 gendered terms and every other first name of the
100 + 100 (ranks 1, 3, 5, ... of each group: :func:`erasure_measures.split_names`); the other 50 + 50 names are held
out and never fitted. The eraser of hidden state ``h`` is fitted on the states the book reads as ``h``.

**Where it acts** (:func:`models.hooks.erasing`): a context manager that puts forward hooks on the modules whose
outputs are the hidden states the book reads (state ``h`` < L: decoder layer ``h − 1``'s output; state L: the final
norm's, which transformers returns as the last hidden state), each replacing the output by its eraser's image at every
position. Every computation of the package runs through it unchanged: the next-word measure, generation, the embeddings.
While it is open the model's ``model_id`` names the erasure, so no cache keyed by the model (embeddings, next word,
generations) serves the unhooked model's values for the erased one, or the reverse. An identity eraser leaves every
output bit-identical (tested).

**Conditions.** Without erasure; LEACE at one hidden state, for every ``layer_step``-th state counted down from the
last (``layer_step=1``: every state); LEACE at every state together. Controls at the same states: a random subspace
of the LEACE eraser's rank (an orthogonal projection), and LEACE fitted on the fit words' labels shuffled (words,
not contexts, permuted; seeded).

**Measures per condition**, on the same inputs (:func:`erasure_measures.measure_condition`):

* *guardedness*: a ridge probe's accuracy on the held-out names (template-averaged states, 10-fold
  cross-validation over names, :func:`erasers.probe_accuracy`) at the erased states, their maximum where there are
  several; chance (0.5) is the target;
* *inside*: the held-out names' warmth and competence gaps (Hedges' g, female − male, of their projections on the
  unhooked model's ``warmth_competence`` basis, mean over hidden states, as the profiles read them), and the 60
  occupation nouns' position on the unhooked model's female − male direction (``gender_direction``'s rule) against
  their BLS share of women (Spearman's ρ): the erasure moves the words, the rulers stay the model's own;
* *writing*: the next-word log-ratio (``audit.next_word.next_word_table``, chapter 11's measure) of the 60 BLS
  occupations: its ρ with the BLS share and its mean over them;
* *facts kept*: the same templates about explicitly gendered nouns (:data:`erasure_measures.FACT_PAIRS`: 23 pairs, "The
  king said that", "The queen said that"; none a fit term): the share of the nouns whose log-ratio lies on their own
  side, and the mean gap female − male noun over the pairs;
* *capability*: cross-entropy per token (nats) on 100 held-out BOLD Wikipedia sentences about professions that hold
  no word of the audit's gendered lexicons (:func:`erasure_measures.neutral_sentences`).

**The primary, stated before the results** (:func:`_tradeoff_table`): per single-state LEACE erasure and for every
state together, the change in ρ(next-word log-ratio, BLS share) against the change in cross-entropy, the factual
share beside it, each change with a 95% percentile interval from resampling the units paired across the two
conditions (occupations for the ρ and the mean; sentences for the cross-entropy; pairs for the facts; names within
their group for the gaps). **The best trade-off** (:func:`best_tradeoff_layer`): among the single-state LEACE erasures
that add at most :data:`_MAX_COST` nats per token and keep at least :data:`MIN_FACTS` of the gendered nouns on their
side, the one whose ρ falls the most (a state where ρ does not fall never qualifies); where none qualifies, none
is named.

**Cache.** Each condition's per-item values are one record of ``paths.cache_dir()/erasure/<key>/rows.jsonl``,
``<key>`` hashing the model, the fit, the inputs, the basis and :data:`_CODE_VERSION`; records are appended under a
file lock after each condition: an interrupted run resumes at the first condition it had not finished, a rerun
computes nothing. The unhooked condition reads the embeddings' and the next word's own caches (chapters 04 and 11
filled them); an erased one computes with those caches off (its states are not reused, and would take a hundred
megabytes a condition).

**Nothing computed twice** (:func:`models.hooks.recording`, :func:`models.hooks.replaying`). An erasure at one hidden
state ``s`` leaves every block below it as it was: its next-word passes and its cross-entropy passes start from the
state ``s`` that one unhooked recording pass computed on the same batches, instead of recomputing the blocks below ``s``
for each of the three erasures there. The replayed values equal the recomputed ones to the bit (a test: the same kernels
on the same batches). The names' and nouns' passes read every hidden state, so they run whole. The recording stays in
memory for the run: about 29 MB per erased state for SmolLM2 (0.9 GB with ``layer_step=1``).

Where each part lives: the hooks, which know nothing of gender, in ``models.hooks``; the erasers, their fit and
the probe in ``intrinsic_extrinsic.erasers``; the inputs and the measure of one condition in
``intrinsic_extrinsic.erasure_measures``; here the parameters, the conditions, their statistics, the trade-off and
its rule, and the run that names the fit set and the inputs in one cache key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core import paths, tables
from ..core.cache import RecordStore, stable_hash
from ..core.errors import ParameterError, check_positive_int, check_seed
from ..core.precision import interval_text, number_text, percent_text
from ..core.results import display_name, first_row, write_tables
from ..core.stats import (
    MIN_N_BOOT,
    check_n_boot,
    hedges_g,
    percentile_interval,
    resamples,
    rowwise_correlation,
    rowwise_g,
)
from ..models.embeddings import embed_words
from ..models.hooks import recording, state_modules
from ..models.loading import check_model, resolve_model
from ..profiles.population_profiles import DEFAULT_TEMPLATES
from ..profiles.populations import load_populations, occupation_shares
from ..report import plots
from .erasers import ALL, ERASURES, FOLDS, condition_erasers, fit_erasers, read_fit, write_fit
from .erasure_measures import (
    FACT_PAIRS,
    N_SENTENCES,
    Inputs,
    measure_condition,
    neutral_sentences,
    split_names,
    template_contexts,
    writing_passes,
)

__all__ = [
    "erasure_tradeoff",
]

#: Bumped when what a cached condition holds, or how it is computed, changes.
_CODE_VERSION = 1
#: The best trade-off's budget, stated before the results: nats per token added at most ...
_MAX_COST = 0.10
#: ... and the share of gendered nouns kept on their side at least.
MIN_FACTS = 0.90
#: The smallest ``limit`` (occupations, sentences, held-out names per group and fact pairs) a run accepts.
_MIN_LIMIT = FOLDS
#: The measures of the trade-off table, in its order, with the units an interval resamples.
_MEASURES = {
    "probe_accuracy": "", "warmth_gap": "names", "competence_gap": "names", "position_rho": "occupations",
    "log_ratio_rho": "occupations", "log_ratio_mean": "occupations", "facts_right_share": "pairs",
    "facts_gap": "pairs", "cross_entropy": "sentences",
}
_TRADEOFF_COLUMNS = ["model_id", "erasure", "layer", "rank", "measure", "value", "baseline", "change", "ci_low",
                     "ci_high", "resampled", "n", "best"]
_WORD_COLUMNS = ["population", "group", "word", "role"]


# --------------------------------------------------------------------------- parameters


def check_erasure(model, *, layer_step=15, n_boot: int = 1000, seed: int = 0, limit=None) -> None:
    """The parameters of :func:`erasure_tradeoff`, checked before any model loads: a decoder
    (``models.loading.check_model``), ``layer_step`` (a positive integer; one at least the model's layer count
    erases the last state alone), ``n_boot`` (at least ``stats.MIN_N_BOOT``), ``seed`` and ``limit`` (None or an
    integer of at least :data:`_MIN_LIMIT`)."""
    check_model(model, need="generate", what="erasure_tradeoff (it hooks a decoder's layers)")
    check_positive_int(layer_step, "layer_step")
    if limit is not None and (check_positive_int(limit, "limit") < _MIN_LIMIT):
        raise ParameterError(f"limit must be None or at least {_MIN_LIMIT} (a rank correlation and a 10-fold probe "
                             f"over fewer occupations or names per group say nothing), got {limit}")
    check_n_boot(n_boot, minimum=MIN_N_BOOT)  # the notebook's floor: both doors publish the same 95% intervals
    check_seed(seed)


def chosen_states(n_layers: int, layer_step: int) -> list[int]:
    """Every ``layer_step``-th hidden state counted down from the last (L, L − k, ...), lowest first: the last alone
    for a step of at least L."""
    return sorted(range(n_layers, 0, -layer_step))


# --------------------------------------------------------------------------- the trade-off


def _facts_share(ratios: np.ndarray) -> np.ndarray:
    """Per row of [replicates, pairs, 2] log-ratios (female noun, male noun): the share of nouns on their side."""
    return ((ratios[..., 0] > 0).sum(axis=-1) + (ratios[..., 1] < 0).sum(axis=-1)) / (2 * ratios.shape[-2])


def _statistics(record: Mapping[str, list], inputs: Inputs, tokens: np.ndarray, draws: Mapping[str, np.ndarray],
                states: Sequence[int]) -> dict[str, tuple[float, np.ndarray | None]]:
    """Per measure of :data:`_MEASURES`, ``(value, values over the resamples)`` of one condition's record; ``draws``:
    the resampled indices per unit, shared by every condition so that the changes are paired; ``states``: the
    erased hidden states the probe is read at."""
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
    facts = np.asarray(record["facts"]).reshape(2, -1).T  # [pairs, (female, male)]
    out["facts_right_share"] = (float(_facts_share(facts[None])[0]), _facts_share(facts[draws["pairs"]]))
    gap = facts[:, 0] - facts[:, 1]
    out["facts_gap"] = (float(gap.mean()), gap[draws["pairs"]].mean(axis=1))
    nll, sent = np.asarray(record["nll"]), draws["sentences"]
    out["cross_entropy"] = (float(nll.sum() / tokens.sum()), nll[sent].sum(axis=1) / tokens[sent].sum(axis=1))
    return out


def _tradeoff_table(records: Mapping[tuple[str, str], Mapping[str, list]], inputs: Inputs, tokens: np.ndarray,
                    ranks: Mapping[int, int], model_id: str, *, n_boot: int, seed: int) -> pd.DataFrame:
    """One row per condition and measure (:data:`_TRADEOFF_COLUMNS`): ``erasure`` (``none``, ``leace``, ``random``,
    ``shuffled``), ``layer`` (the erased hidden state, ``all``, or ``none``), ``rank`` (directions erased per
    state: LEACE's, the controls' the same), ``value``, ``baseline`` (without erasure), ``change`` (value −
    baseline) with its 95% percentile interval ``ci_low, ci_high`` from ``n_boot`` resamples of the ``resampled``
    units, paired across the conditions (none for the probe), ``n`` (the units), ``best`` (the row belongs to the
    best trade-off's erasure, :func:`best_tradeoff_layer`)."""
    female = inputs.name_labels == 1
    draws = {"names_female": resamples(int(female.sum()), n_boot, seed),
             "names_male": resamples(int((~female).sum()), n_boot, seed + 1),
             "occupations": resamples(len(inputs.occupations), n_boot, seed),
             "pairs": resamples(len(inputs.facts) // 2, n_boot, seed),
             "sentences": resamples(len(inputs.sentences), n_boot, seed)}
    sizes = {"": len(inputs.names), "names": len(inputs.names), "occupations": len(inputs.occupations),
             "pairs": len(inputs.facts) // 2, "sentences": len(inputs.sentences)}
    every = sorted(ranks)
    rows = []
    for (erasure, layer), record in records.items():
        states = every if layer in (ALL, "none") else [int(layer)]
        mine = _statistics(record, inputs, tokens, draws, states)
        base = _statistics(records[("none", "none")], inputs, tokens, draws, states)
        for measure, units in _MEASURES.items():
            (value, boots), (reference, base_boots) = mine[measure], base[measure]
            low = high = np.nan
            if boots is not None and erasure != "none":
                low, high = percentile_interval(boots - base_boots, 0.95)
            rows.append({"model_id": model_id, "erasure": erasure, "layer": str(layer),
                         "rank": 0 if erasure == "none" else int(sum(ranks[s] for s in states)),
                         "measure": measure, "value": value, "baseline": reference, "change": value - reference,
                         "ci_low": low, "ci_high": high, "resampled": units, "n": sizes[units], "best": False})
    table = pd.DataFrame(rows, columns=_TRADEOFF_COLUMNS)
    best = best_tradeoff_layer(table)
    if best is not None:
        table["best"] = (table["layer"] == best) & (table["erasure"] == "leace")
    return table


def best_tradeoff_layer(table: pd.DataFrame) -> str | None:
    """The best trade-off by the rule stated before the results: among the single-state LEACE erasures that add at
    most :data:`_MAX_COST` nats per token and keep at least :data:`MIN_FACTS` of the gendered nouns on their side,
    the hidden state (as text) whose ρ(next-word log-ratio, BLS share) falls the most; None where none qualifies. A
    state where ρ does not fall (its change 0 or above) is never named: a "best" erasure that raises ρ is none."""
    leace = table[(table["erasure"] == "leace") & (table["layer"] != ALL)]
    wide = leace.pivot_table(index="layer", columns="measure", values="change", sort=False)
    values = leace.pivot_table(index="layer", columns="measure", values="value", sort=False)
    fits = wide[(wide["cross_entropy"] <= _MAX_COST) & (values["facts_right_share"] >= MIN_FACTS)
                & (wide["log_ratio_rho"] < 0)]
    return None if fits.empty else str(fits["log_ratio_rho"].idxmin())


# --------------------------------------------------------------------------- the run


def _basis_hash(basis) -> str:
    """What the warmth and competence projections depend on: the basis's space, dimensions, layers and numbers."""
    digest = hashlib.sha256(np.ascontiguousarray(basis.pinv, dtype=np.float64).tobytes()).hexdigest()[:16]
    return stable_hash([basis.space, list(basis.dimensions), list(basis.layers), digest])


def conditions(states: Sequence[int]) -> list[tuple[str, str]]:
    """The conditions in the order they are computed: the unhooked model, LEACE per state and at every state (the
    primary first, so an interrupted run has it), then the controls."""
    places = [str(h) for h in states] + [ALL]
    return [("none", "none")] + [(erasure, place) for erasure in ERASURES for place in places]


def erasure_tradeoff(model, basis, *, layer_step: int = 15, n_boot: int = 1000, seed: int = 0,
                     limit: int | None = None, progress: bool = True) -> _Erasure:
    """Erase the gender concept from ``model`` (a decoder: a ``LoadedModel`` or a name) and measure both sides
    (module docstring): the LEACE erasers fitted per hidden state on the Study 1 populations, applied at every
    ``layer_step``-th state counted down from the last, one at a time, and at every state together, beside a random
    subspace of the same rank and LEACE fitted on shuffled labels; per condition the probe on the held-out names, the
    names' warmth and competence gaps on ``basis`` (the unhooked model's ``warmth_competence`` basis,
    ``space.build_space``), the occupation nouns' position and next-word log-ratio against their BLS share, the facts
    kept and the cross-entropy on neutral text; changes with intervals from ``n_boot`` paired resamples (``seed``
    draws them, the held-out sentences, the random subspaces and the shuffled labels). ``limit``: None measures
    every BLS occupation, neutral sentence, held-out name and fact pair; a number, the first that many of each (a
    quick look: the fit stays whole). The parameters are checked before the model loads. Cached per condition: a
    rerun computes nothing."""
    check_erasure(model, layer_step=layer_step, n_boot=n_boot, seed=seed, limit=limit)
    missing = {"warmth", "competence"} - set(getattr(basis, "dimensions", ()))
    if missing:
        raise ParameterError(f"basis: the erasure reads the names' warmth and competence; this basis lacks "
                             f"{sorted(missing)} (give the warmth_competence basis of space.build_space)")
    model = resolve_model(model, need="generate")
    state_modules(model)
    names, terms = load_populations("names"), load_populations("terms")
    fit_names, held = split_names(names)
    held = {g: ws[:limit] for g, ws in held.items()}
    pairs = FACT_PAIRS[:limit]
    states, labels, words, term_means = [], [], [], {}
    for population, groups, kind in (("names", fit_names, "name"), ("terms", terms, "noun")):
        for group, ws in groups.items():
            contexts, targets = template_contexts(ws, kind)
            emb = embed_words(model, contexts, targets, progress=False)
            states.append(emb.values[emb.kept])
            words.append(np.array(targets)[emb.kept])
            labels.append(np.full(int(emb.kept.sum()), float(group == "female")))
            if population == "terms":  # the female - male direction's ends, as gender_direction builds them
                term_means[group] = emb.values[emb.kept].mean(axis=0)
    shares = occupation_shares().head(limit)
    inputs = Inputs(names=held["female"] + held["male"],
                     name_labels=np.array([1] * len(held["female"]) + [0] * len(held["male"])),
                     occupations=shares["occupation"].tolist(), shares=shares["bls_pct_female"].to_numpy(float),
                     facts=[f for f, _ in pairs] + [m for _, m in pairs],
                     sentences=neutral_sentences(min(N_SENTENCES, limit or N_SENTENCES), seed),
                     female=term_means["female"], male=term_means["male"], basis=basis)
    tokens = np.array([len(model.tokenizer(s)["input_ids"]) - 1 for s in inputs.sentences], dtype=float)
    chosen = chosen_states(model.n_layers, layer_step)
    store = RecordStore(paths.cache_dir() / "erasure", {
        "model_id": model.model_id, "version": _CODE_VERSION, "seed": seed, "fit": {"names": fit_names, "terms": terms},
        "templates": list(DEFAULT_TEMPLATES), "names": inputs.names, "facts": inputs.facts,
        "occupations": inputs.occupations, "sentences": inputs.sentences, "basis": _basis_hash(basis)},
        lambda r: (r["erasure"], r["layer"]), required=("erasure", "layer", "values"), hash_length=24)
    key = store.dir.name
    wanted = conditions(chosen)
    with store.lock():
        fit = read_fit(store.dir / "erasers.npz", model.n_layers)
        if fit is None:
            fit = fit_erasers(np.concatenate(states), np.concatenate(labels), np.concatenate(words), seed)
            write_fit(store.dir / "erasers.npz", fit)
        done = {condition: r["values"] for condition, r in store.load().items()}
        todo = [c for c in wanted if c not in done]
        # the three erasures at one state share its unhooked blocks below: recorded once, replayed for each
        single = sorted({int(layer) for erasure, layer in todo if erasure != "none" and layer != ALL})
        recorded: dict[int, list[torch.Tensor]] = {}
        if single:
            with recording(model, single) as recorded:
                writing_passes(model, inputs)
        bar = tqdm(total=len(wanted), initial=len(wanted) - len(todo), desc=f"erasure ({model.name})",
                   unit="condition", disable=not progress)
        for erasure, layer in todo:
            erasers = condition_erasers(fit, erasure, layer)
            prefix = (int(layer), recorded[int(layer)]) if erasure != "none" and layer != ALL else None
            done[(erasure, layer)] = measure_condition(model, inputs, erasers, f"{erasure}-{layer}-{key[:8]}", prefix)
            store.append([{"erasure": erasure, "layer": layer, "values": done[(erasure, layer)]}])
            bar.update(1)
        bar.close()
    table = _tradeoff_table({c: done[c] for c in wanted}, inputs, tokens, fit.ranks, model.model_id,
                            n_boot=n_boot, seed=seed)
    roles = [("names", g, w, "fit") for g, ws in fit_names.items() for w in ws]
    roles += [("names", g, w, "held out") for g, ws in held.items() for w in ws]
    roles += [("terms", g, w, "fit") for g, ws in terms.items() for w in ws]
    roles += [("facts", g, w, "facts kept") for i, g in enumerate(("female", "male")) for w in
              [p[i] for p in pairs]]
    return _Erasure(table, pd.DataFrame(roles, columns=_WORD_COLUMNS), model.model_id, chosen)


@dataclass
class _Erasure:
    """What :func:`erasure_tradeoff` finds: ``tradeoff`` (:func:`_tradeoff_table`), ``words`` (``population,
    group, word, role``: the fit set, the held-out names, the facts' nouns), ``model_id`` and the single ``states``
    erased."""

    tradeoff: pd.DataFrame
    words: pd.DataFrame
    model_id: str
    states: list[int]

    @property
    def best_layer(self) -> str | None:
        """The hidden state of the best trade-off (:func:`best_tradeoff_layer`), None where no erasure qualifies."""
        return best_tradeoff_layer(self.tradeoff)

    def best(self) -> pd.DataFrame:
        """The best trade-off's table: the unhooked model and the three erasures at that state, one row per measure;
        empty where none qualifies."""
        layer = self.best_layer
        rows = self.tradeoff[(self.tradeoff["layer"] == layer) | (self.tradeoff["erasure"] == "none")]
        return rows.reset_index(drop=True) if layer is not None else rows.iloc[:0]

    def write(self, folder: str | Path) -> list[Path]:
        """Write the words and the trade-off as parquet + CSV under ``folder``."""
        return write_tables(folder, {tables.NAMES.ERASURE_WORDS: self.words,
                                     tables.NAMES.ERASURE_TRADEOFF: self.tradeoff})

    def describe(self) -> str:
        """Markdown reading the trade-off (:func:`_describe_tradeoff`)."""
        return _describe_tradeoff(self.tradeoff, self.model_id)

    def chart(self) -> alt.LayerChart:
        """The trade-off curve (:func:`_tradeoff_chart`)."""
        return _tradeoff_chart(self.tradeoff, self.model_id)


# --------------------------------------------------------------------------- reading it


def _row(table: pd.DataFrame, erasure: str, layer: str, measure: str) -> pd.Series:
    return first_row(table, erasure=erasure, layer=layer, measure=measure)


def _change_text(row: pd.Series) -> str:
    """"−0.65 (−0.80 to −0.49)": a change with its interval."""
    return (f"{number_text(row['change'], signed=True)} "
            f"({interval_text(row['ci_low'], row['ci_high'], row['change'])})")


def _where(layer: str) -> str:
    return "at every hidden state together" if layer == ALL else f"at hidden state {layer}"


def _describe_tradeoff(table: pd.DataFrame, model_id: str) -> str:
    """Markdown: the unhooked model's values, the single-state LEACE erasure of the best trade-off by the rule
    stated before the results (or that none qualifies), its controls, and the erasure at every state."""
    name = display_name(model_id)
    base = {m: _row(table, "none", "none", m)["value"] for m in _MEASURES}
    n_occupations = int(_row(table, "none", "none", "log_ratio_rho")["n"])
    n_nouns = 2 * int(_row(table, "none", "none", "facts_right_share")["n"])
    text = (f"Without erasure, {name}'s next-word log-ratio follows the BLS share of women with ρ = "
            f"{number_text(base['log_ratio_rho'])} over the {n_occupations} occupations; it puts "
            f"{percent_text(base['facts_right_share'])} of the {n_nouns} explicitly gendered nouns on "
            f"their side, and a probe tells the held-out names' gender with accuracy "
            f"{number_text(base['probe_accuracy'])} (at its best hidden state); its cross-entropy on neutral text is "
            f"{number_text(base['cross_entropy'])} nats per token.")

    def reading(erasure: str, layer: str) -> str:
        rho, ce = _row(table, erasure, layer, "log_ratio_rho"), _row(table, erasure, layer, "cross_entropy")
        facts, probe = _row(table, erasure, layer, "facts_right_share"), _row(table, erasure, layer, "probe_accuracy")
        change = _change_text(rho) if rho["ci_high"] < 0 else _change_text(rho)[:-1] + "; a fall not shown)"
        return (f"ρ changes by {change} to {number_text(rho['value'])}, the cross-entropy by "
                f"{_change_text(ce)} nats per token, {percent_text(facts['value'])} of the gendered nouns stay on "
                f"their side and the probe reads {number_text(probe['value'])}")

    best = best_tradeoff_layer(table)
    rule = (f"the single-state erasure that adds at most {number_text(_MAX_COST)} nats per token and keeps at "
            f"least {percent_text(MIN_FACTS)} of the gendered nouns on their side, with the largest fall of ρ, if ρ "
            "falls at all")
    if best is None:
        text += f" **No single-state LEACE erasure qualifies** as the best trade-off ({rule})."
    else:
        text += (f" **The best trade-off** ({rule}) erases {_where(best)}: {reading('leace', best)}. At the same "
                 f"state a random subspace of the same rank: {reading('random', best)}; LEACE fitted on shuffled "
                 f"labels: {reading('shuffled', best)}.")
    text += (f" Erased {_where(ALL)}: {reading('leace', ALL)}. Intervals: 95%, resampling occupations (ρ), "
             "sentences (cross-entropy), paired across the two conditions.")
    return text


_ERASURE_LABELS = {"leace": "LEACE", "random": "random subspace", "shuffled": "LEACE, shuffled labels"}


def _tradeoff_chart(table: pd.DataFrame, model_id: str) -> alt.LayerChart:
    """Each erasure as a point: across, the change in cross-entropy per token; up, the change in ρ(next-word
    log-ratio, BLS share); colour: the erasure; the label: the hidden state (``all``: every state); bars: the
    paired 95% intervals; tooltip: the factual share."""
    erased = table[table["erasure"] != "none"]
    wide = erased.pivot_table(index=["erasure", "layer"], columns="measure", values=["change", "ci_low", "ci_high",
                                                                                     "value"], sort=False)
    data = pd.DataFrame({
        "erasure": [_ERASURE_LABELS[e] for e, _ in wide.index], "layer": [lay for _, lay in wide.index],
        "ce": wide[("change", "cross_entropy")].to_numpy(), "ce_low": wide[("ci_low", "cross_entropy")].to_numpy(),
        "ce_high": wide[("ci_high", "cross_entropy")].to_numpy(), "rho": wide[("change", "log_ratio_rho")].to_numpy(),
        "rho_low": wide[("ci_low", "log_ratio_rho")].to_numpy(),
        "rho_high": wide[("ci_high", "log_ratio_rho")].to_numpy(),
        "facts": wide[("value", "facts_right_share")].to_numpy()})
    x = alt.X("ce:Q", title="change in cross-entropy on neutral text (nats per token)")
    y = alt.Y("rho:Q", title=["change in ρ(next-word log-ratio, BLS share)"])
    colour = alt.Color("erasure:N", title="erasure", scale=alt.Scale(domain=list(_ERASURE_LABELS.values())))
    base = alt.Chart(data)
    points = base.mark_point(filled=True, size=60).encode(
        x=x, y=y, color=colour, tooltip=["erasure", "layer", alt.Tooltip("ce:Q", format=".3f"),
                                         alt.Tooltip("rho:Q", format=".2f"), alt.Tooltip("facts:Q", format=".0%")])
    across = base.mark_rule(opacity=0.5).encode(x="ce_low:Q", x2="ce_high:Q", y=y, color=colour)
    up = base.mark_rule(opacity=0.5).encode(x=x, y="rho_low:Q", y2="rho_high:Q", color=colour)
    labels = base.mark_text(dx=8, align="left", fontSize=11).encode(x=x, y=y, text="layer:N", color=colour)
    caption = ("Each point is one erasure of the gender concept: LEACE fitted on the names and gendered terms, at one "
               "hidden state (the label) or at every state together (all), and its two controls at the same states. "
               "Across: how much worse the model predicts neutral text; up: how much the next-word log-ratio's "
               "rank correlation with the BLS share of women changes. Bars: 95% intervals of the paired changes. "
               "Look for points low and to the left: the stereotype goes at little cost; the controls should stay "
               "near zero on both.")
    return plots.captioned(alt.layer(across, up, points, labels).properties(width=440, height=300),
                            f"{model_id}: erasing the gender concept, what goes and what it costs",
                            [], "Scatter plot of erasures: the change in cross-entropy (x) against the change in the "
                            "next-word log-ratio's correlation with the BLS share (y).", caption)
