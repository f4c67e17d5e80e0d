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

**Conditions**, in the order they are computed (:func:`conditions`). Without erasure; LEACE at one hidden state, for
every ``layer_step``-th state counted down from the last (the default 3: ten states of a 30-state decoder; 1: every
state); LEACE at every state together. Then the controls, at the states the chapter reads, which the LEACE curve picks
(``erasure_statistics.picked_layers``: the state the rule names and the curve's largest effect), and at every state
together: a random subspace of the LEACE eraser's rank (an orthogonal projection), and LEACE fitted on the fit words'
labels shuffled (words, not contexts, permuted; seeded). At the same places, the eraser meant to remove the stereotype
and spare the fact (``erasers.selective_erasers``, 2DAMA's idea): LEACE of the occupation nouns' BLS majority with
the gendered terms' female − male direction projected out first and left alone, fitted on half the occupations and
measured on the other half, both ways (``erasure_measures.cross_fitted``): never on the nouns it was fitted on.

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

**The primary, stated before the results** (``erasure_statistics.tradeoff_table``): per single-state LEACE erasure
and for every state together, the change in ρ(next-word log-ratio, BLS share) against the change in cross-entropy,
the factual share beside it, each change with a 95% percentile interval from resampling the units paired across the
two conditions; beside them the stereotype slope and the fact gap in one unit, with the share of each removed.
**The best trade-off** (``erasure_statistics.best_tradeoff_layer``): among the single-state LEACE erasures that add at
most ``erasure_statistics.MAX_COST`` nats per token and keep at least ``erasure_statistics.MIN_FACTS`` of the
gendered nouns on their side, the one whose ρ falls the most (a state where ρ does not fall never qualifies); where
none qualifies, none is named. Whatever it names, the chapter reads the curve's largest effect too
(``erasure_statistics.largest_effect_layer``, ``erasure_reading``).

**Cache.** Each condition's per-item values are one record of ``paths.cache_dir()/erasure/<key>/rows.jsonl``,
``<key>`` hashing the model, the fit, the inputs, the basis, :data:`_CODE_VERSION` and on a CPU the torch threads
(``models.embeddings.forward_threads``: another count may round float32 sums differently); records are appended under a
file lock after each condition: an interrupted run resumes at the first condition it had not finished, a rerun
computes nothing. The unhooked condition reads the embeddings' and the next word's own caches (chapters 04 and 11
filled them); an erased one computes with those caches off (its states are not reused, and would take a hundred
megabytes a condition).

**Nothing computed twice** (:func:`erasure_measures.record_unhooked`, :func:`models.hooks.replaying`). An erasure at
one hidden state ``s`` leaves every block below it as it was: every pass of its condition (the names' and the nouns'
template states, the next word, the cross-entropy) starts from the state ``s`` that one unhooked recording run
computed on the same batches, and the names' and nouns' states below ``s`` are that run's, instead of recomputing the
blocks below ``s`` for each erasure there. The replayed values equal the recomputed ones to the bit (a test: the same
kernels on the same batches), and the replay checks each pass's input ids against the recorded ones. The recording
stays in memory for the run: about 45 MB per erased state for SmolLM2 (0.45 GB at the default ``layer_step``). The
erased conditions measure the held-out names only; the fit names are embedded once, for the fit.

Where each part lives: the hooks, which know nothing of gender, in ``models.hooks``; the erasers, their fit and
the probe in ``intrinsic_extrinsic.erasers``; the inputs and the measure of one condition in
``intrinsic_extrinsic.erasure_measures``; the statistics, the rule and the largest effect in
``intrinsic_extrinsic.erasure_statistics``; the sentences and the chart in ``intrinsic_extrinsic.erasure_reading``;
chapter 11's long form written again under the erasures the chapter reads (:meth:`_Erasure.long_form`) in
``intrinsic_extrinsic.erasure_long_form``; here the parameters, the conditions and the run that names the fit set and
the inputs in one cache key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core import paths, tables
from ..core.cache import RecordStore, stable_hash
from ..core.errors import ParameterError, check_positive_int, check_seed
from ..core.results import write_tables
from ..core.stats import MIN_N_BOOT, check_n_boot
from ..models.embeddings import embed_words, forward_threads
from ..models.hooks import state_modules
from ..models.loading import check_model, resolve_model
from ..profiles.population_profiles import DEFAULT_TEMPLATES
from ..profiles.populations import load_populations, occupation_shares
from .erasers import (
    ALL,
    ERASURES,
    FOLDS,
    SELECTIVE,
    at_layer,
    condition_erasers,
    fit_erasers,
    halves,
    read_fit,
    selective_erasers,
    write_fit,
)
from .erasure_long_form import long_form_under_erasure
from .erasure_measures import (
    FACT_PAIRS,
    N_SENTENCES,
    Inputs,
    Unhooked,
    cross_fitted,
    measure_condition,
    neutral_sentences,
    record_unhooked,
    split_names,
    template_contexts,
)
from .erasure_reading import curve_table, describe_tradeoff, probe_by_state, tradeoff_chart
from .erasure_statistics import best_tradeoff_layer, largest_effect_layer, picked_layers, probe_table, tradeoff_table

__all__ = [
    "erasure_tradeoff",
]

#: Bumped when what a cached condition holds, or how it is computed, changes (2: every pass of a single-state
#: condition starts from the unhooked state there, the names' and nouns' passes too; 3: the cross-entropy reduced
#: one row per token, closer to float64).
_CODE_VERSION = 3
#: The smallest ``limit`` (occupations, sentences, held-out names per group and fact pairs) a run accepts.
_MIN_LIMIT = FOLDS
#: The controls, run where the chapter reads LEACE (:func:`conditions`).
_CONTROLS = ("random", "shuffled")
_WORD_COLUMNS = ["population", "group", "word", "role"]


# --------------------------------------------------------------------------- parameters


def check_erasure(model, *, layer_step=3, n_boot: int = 1000, seed: int = 0, limit=None) -> None:
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


# --------------------------------------------------------------------------- the run


def _basis_hash(basis) -> str:
    """What the warmth and competence projections depend on: the basis's space, dimensions, layers and numbers."""
    digest = hashlib.sha256(np.ascontiguousarray(basis.pinv, dtype=np.float64).tobytes()).hexdigest()[:16]
    return stable_hash([basis.space, list(basis.dimensions), list(basis.layers), digest])


def conditions(states: Sequence[int], picked: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The conditions in the order they are computed: the unhooked model, LEACE at each of ``states`` and at every
    state together (the primary curve first, so an interrupted run has it), then the controls at the ``picked``
    states (``erasure_statistics.picked_layers`` of the curve: the rule's and the largest effect's) and at every
    state together, with the selective eraser, cross-fitted, at the same places."""
    leace = [("leace", str(h)) for h in states] + [("leace", ALL)]
    return [("none", "none"), *leace, *[(e, place) for place in [*picked, ALL] for e in (*_CONTROLS, SELECTIVE)]]


def erasure_tradeoff(model, basis, *, layer_step: int = 3, n_boot: int = 1000, seed: int = 0,
                     limit: int | None = None, progress: bool = True) -> _Erasure:
    """Erase the gender concept from ``model`` (a decoder: a ``LoadedModel`` or a name) and measure both sides
    (module docstring): the LEACE erasers fitted per hidden state on the Study 1 populations, applied at every
    ``layer_step``-th state counted down from the last, one at a time, and at every state together; a random
    subspace of the same rank and LEACE fitted on shuffled labels at the state the rule names, at the curve's largest
    effect and at every state; per condition the probe on the held-out names, the names' warmth and competence gaps
    on ``basis`` (the unhooked model's ``warmth_competence`` basis, ``space.build_space``), the occupation nouns'
    position and next-word log-ratio against their BLS share, the facts kept and the cross-entropy on neutral text;
    changes with intervals from ``n_boot`` paired resamples (``seed`` draws them, the held-out sentences, the random
    subspaces and the shuffled labels). ``limit``: None measures every BLS occupation, neutral sentence, held-out
    name and fact pair; a number, the first that many of each (a quick look: the fit stays whole). The parameters
    are checked before the model loads. Cached per condition: an interrupted run resumes, a rerun computes nothing."""
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
    params = {"model_id": model.model_id, "version": _CODE_VERSION, "seed": seed,
              "fit": {"names": fit_names, "terms": terms}, "templates": list(DEFAULT_TEMPLATES), "names": inputs.names,
              "facts": inputs.facts, "occupations": inputs.occupations, "sentences": inputs.sentences,
              "basis": _basis_hash(basis)}
    if (threads := forward_threads(model)) is not None:
        params["cpu_threads"] = threads
    store = RecordStore(paths.cache_dir() / "erasure", params, lambda r: (r["erasure"], r["layer"]),
                        required=("erasure", "layer", "values"), hash_length=24)
    with store.lock():
        fit = read_fit(store.dir / "erasers.npz", model.n_layers)
        if fit is None:
            fit = fit_erasers(np.concatenate(states), np.concatenate(labels), np.concatenate(words), seed)
            write_fit(store.dir / "erasers.npz", fit)
        done = {condition: r["values"] for condition, r in store.load().items()}
        run = _Run(model, inputs, fit, store, done, progress,
                   lambda: _fit_selective(model, inputs, term_means["female"] - term_means["male"]))
        curve = conditions(chosen)
        run.compute(curve)
        # the controls' places depend on the curve: its point estimates pick them (one resample: no interval read)
        picked = picked_layers(tradeoff_table({c: done[c] for c in curve}, inputs, tokens, fit.ranks,
                                              model.model_id, n_boot=1, seed=seed))
        wanted = conditions(chosen, picked)
        run.compute(wanted)
        run.close()
    table = tradeoff_table({c: done[c] for c in wanted}, inputs, tokens, fit.ranks, model.model_id,
                           n_boot=n_boot, seed=seed)
    roles = [("names", g, w, "fit") for g, ws in fit_names.items() for w in ws]
    roles += [("names", g, w, "held out") for g, ws in held.items() for w in ws]
    roles += [("terms", g, w, "fit") for g, ws in terms.items() for w in ws]
    roles += [("facts", g, w, "facts kept") for i, g in enumerate(("female", "male")) for w in
              [p[i] for p in pairs]]
    return _Erasure(table, pd.DataFrame(roles, columns=_WORD_COLUMNS), model.model_id, chosen,
                    probe_table({c: done[c] for c in wanted}, model.model_id), fit, list(inputs.occupations),
                    store.dir)


def _fit_selective(model, inputs: Inputs, fact: np.ndarray) -> tuple[dict, dict]:
    """The selective erasers of every hidden state (``erasers.selective_erasers``), fitted on the occupation nouns in
    the profile templates (their states as the book caches them) with ``fact`` [S, H] the direction spared."""
    contexts, targets = template_contexts(inputs.occupations, "noun")
    emb = embed_words(model, contexts, targets, progress=False)
    index = np.repeat(np.arange(len(inputs.occupations)), len(DEFAULT_TEMPLATES))
    return selective_erasers(emb.values[emb.kept], index[emb.kept], inputs.shares, fact,
                             range(1, model.n_layers + 1))


class _Run:
    """The conditions of one run as they are computed: each appended to the ``store`` when done (``done`` holds
    every record, cached or new); the unhooked passes that the single-state conditions start from are recorded once
    per state, for the states the conditions still to compute need; the selective erasers are fitted
    (``fit_selective``) when a condition first needs them."""

    def __init__(self, model, inputs: Inputs, fit, store: RecordStore, done: dict, progress: bool, fit_selective):
        self.model, self.inputs, self.fit, self.store, self.done = model, inputs, fit, store, done
        self.fit_selective, self.selective = fit_selective, None
        self.unhooked: dict[int, Unhooked] = {}
        self.bar = tqdm(desc=f"erasure ({model.name})", unit="condition", disable=not progress)
        self.key = store.dir.name[:8]

    def compute(self, wanted: Sequence[tuple[str, str]]) -> None:
        todo = [c for c in wanted if c not in self.done]
        self.bar.total = len(wanted)
        self.bar.n = len(wanted) - len(todo)
        self.bar.refresh()
        # every single-state erasure at one state shares its unhooked blocks below: recorded once, replayed for each
        single = sorted({int(layer) for erasure, layer in todo if erasure != "none" and layer != ALL}
                        - set(self.unhooked))
        if single:
            recorded = record_unhooked(self.model, self.inputs, single)
            self.unhooked.update({s: recorded for s in single})
        for erasure, layer in todo:
            start = (int(layer), self.unhooked[int(layer)]) if erasure != "none" and layer != ALL else None
            tag = f"{erasure}-{layer}-{self.key}"
            if erasure == SELECTIVE:
                self.selective = self.selective or self.fit_selective()
                first, second = (measure_condition(self.model, self.inputs, at_layer(half, layer), f"{tag}-{k}", start)
                                 for k, half in enumerate(self.selective))
                self.done[(erasure, layer)] = cross_fitted(first, second, halves(self.inputs.shares))
            else:
                self.done[(erasure, layer)] = measure_condition(self.model, self.inputs,
                                                                condition_erasers(self.fit, erasure, layer), tag, start)
            self.store.append([{"erasure": erasure, "layer": layer, "values": self.done[(erasure, layer)]}])
            self.bar.update(1)

    def close(self) -> None:
        self.unhooked.clear()
        self.bar.close()


@dataclass
class _Erasure:
    """What :func:`erasure_tradeoff` finds: ``tradeoff`` (``erasure_statistics.tradeoff_table``), ``words``
    (``population, group, word, role``: the fit set, the held-out names, the facts' nouns), ``model_id``, the
    single ``states`` erased, the held-out names' ``probe`` at every hidden state of every condition
    (``erasure_statistics.probe_table``), the ``fit`` (``erasers.fit_erasers``: LEACE and its controls at every
    state, which :meth:`erasers` hands out), the BLS ``occupations`` it measured and the ``cache`` folder of its
    records (``paths.cache_dir()/erasure/<key>``: a test copies it to resume a run stopped short)."""

    tradeoff: pd.DataFrame
    words: pd.DataFrame
    model_id: str
    states: list[int]
    probe: pd.DataFrame
    fit: object = None
    occupations: list[str] = field(default_factory=list)
    cache: Path | None = None

    def erasers(self, erasure: str, layer: str | None) -> dict:
        """The erasers of one condition, for ``models.hooks.erasing`` (another measure under the same erasure, such as
        the long form's): ``erasure`` one of ``erasers.ERASURES``, ``layer`` a hidden state as text or ``"all"``
        (:attr:`best_layer` or :attr:`largest_layer` name the chapter's two); None or ``"none"`` gives no eraser."""
        if layer is None or erasure == "none":
            return {}
        if erasure not in ERASURES:
            raise ParameterError(f"erasure must be one of {list(ERASURES)} (the selective eraser is two fits, one per "
                                 f"half of the occupations), got {erasure!r}")
        return condition_erasers(self.fit, erasure, layer)

    @property
    def best_layer(self) -> str | None:
        """The hidden state of the best trade-off (``erasure_statistics.best_tradeoff_layer``), None where no erasure
        qualifies."""
        return best_tradeoff_layer(self.tradeoff)

    @property
    def largest_layer(self) -> str | None:
        """The hidden state of the curve's largest effect (``erasure_statistics.largest_effect_layer``)."""
        return largest_effect_layer(self.tradeoff)

    def best(self) -> pd.DataFrame:
        """The table of the states the chapter reads (the rule's and the largest effect's): the unhooked model and the
        erasures at those states, one row per measure."""
        picked = picked_layers(self.tradeoff)
        rows = self.tradeoff[self.tradeoff["layer"].isin(picked) | (self.tradeoff["erasure"] == "none")]
        return rows.reset_index(drop=True)

    def curve(self) -> pd.DataFrame:
        """The curve and its controls, one row per erasure (``erasure_reading.curve_table``)."""
        return curve_table(self.tradeoff)

    def probe_by_state(self) -> pd.DataFrame:
        """The held-out names' probe at every hidden state, without erasure and under LEACE at the states the chapter
        reads and at every state (``erasure_reading.probe_by_state``)."""
        return probe_by_state(self.probe, picked_layers(self.tradeoff))

    def long_form(self, model, **settings):
        """What ``model`` (the decoder this erasure was fitted on) writes at length about one person in each of
        :attr:`occupations` under LEACE and its random control at :attr:`largest_layer` and :attr:`best_layer`,
        beside the unhooked model: ``erasure_long_form.long_form_under_erasure``, whose keyword ``settings``
        (``instructions``, ``n_samples``, ``max_new_tokens``, ``seed``, ``n_boot``, ``cache``, ``progress``) it
        takes."""
        return long_form_under_erasure(model, self, occupations=self.occupations, **settings)

    def write(self, folder: str | Path) -> list[Path]:
        """Write the words, the trade-off and the probe as parquet + CSV under ``folder``."""
        return write_tables(folder, {tables.NAMES.ERASURE_WORDS: self.words, tables.NAMES.ERASURE_TRADEOFF:
                                     self.tradeoff, tables.NAMES.ERASURE_PROBE: self.probe})

    def describe(self) -> str:
        """Markdown reading the trade-off and the probe (``erasure_reading.describe_tradeoff``)."""
        return describe_tradeoff(self.tradeoff, self.model_id, self.probe)

    def chart(self) -> alt.VConcatChart:
        """The trade-off chart (``erasure_reading.tradeoff_chart``)."""
        return tradeoff_chart(self.tradeoff, self.model_id)
