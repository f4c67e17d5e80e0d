"""What each condition of chapter 12's erasure is measured on, and the measure itself.

The inputs every condition shares (:class:`Inputs`): the held-out names (every other name of each group,
:func:`split_names`), the 60 BLS occupations, the explicitly gendered nouns of the facts kept (:data:`FACT_PAIRS`)
and the neutral sentences of the capability measure (:func:`neutral_sentences`), with the unhooked model's
female − male terms' means and the warmth and competence basis. :func:`measure_condition` takes one condition's per-item
values on them under its erasers (``models.hooks.erasing``): the words' states in the profile templates
(:func:`_template_states`, as chapter 04 embeds them), the next word after the occupations and the fact nouns and the
sentences' cross-entropy (:func:`writing_passes`, :func:`sentence_nll`). An erasure at one hidden state starts every
one of those passes from the unhooked state there (:func:`record_unhooked`, ``models.hooks.replaying``): the blocks
below it compute what they computed without the erasure.

Apart from the conditions, their statistics and the trade-off (``intrinsic_extrinsic.erasure``), which read these
values, and from the erasers (``intrinsic_extrinsic.erasers``), which :func:`measure_condition` only applies.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from concept_erasure import LeaceEraser

from ..audit.next_word import next_word_table
from ..core.data import resolve
from ..core.lexicon import GENDER_LEXICONS, tokenize
from ..models.embeddings import default_batch_size
from ..models.hooks import Recording, erasing, recording, replaying
from ..profiles.contexts import bold_sentences
from ..profiles.gender_direction import gender_position
from ..profiles.population_profiles import DEFAULT_TEMPLATES, fill_template, population_embeddings
from ..profiles.populations import takes_article
from ..profiles.projection import projection_table
from .erasers import probe_accuracy

__all__: list[str] = []

#: The explicitly gendered nouns of the facts kept, (female, male); none is one of the fit's gendered terms.
FACT_PAIRS: tuple[tuple[str, str], ...] = (
    ("queen", "king"), ("wife", "husband"), ("niece", "nephew"), ("princess", "prince"), ("bride", "groom"),
    ("granddaughter", "grandson"), ("lady", "gentleman"), ("mom", "dad"), ("girlfriend", "boyfriend"),
    ("nun", "monk"), ("empress", "emperor"), ("duchess", "duke"), ("stepmother", "stepfather"),
    ("godmother", "godfather"), ("schoolgirl", "schoolboy"), ("widow", "widower"), ("baroness", "baron"),
    ("landlady", "landlord"), ("stepdaughter", "stepson"), ("grandma", "grandpa"),
    ("businesswoman", "businessman"), ("spokeswoman", "spokesman"), ("policewoman", "policeman"),
)
#: Held-out neutral sentences for the capability measure, drawn with the run's seed (its change is paired across
#: the conditions, so a hundred give it a narrow interval).
N_SENTENCES = 100


def split_names(names: Mapping[str, Sequence[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(fit, held_out)``: per group, the names of odd rank (1, 3, ...) and of even rank, so both halves span the
    frequency ranks."""
    return ({g: list(w[0::2]) for g, w in names.items()}, {g: list(w[1::2]) for g, w in names.items()})


def neutral_sentences(n: int, seed: int) -> list[str]:
    """``n`` BOLD Wikipedia sentences about professions, drawn with ``seed`` among those without a word of the
    audit's gendered lexicons (``core.lexicon``): text whose prediction asks nothing of gender."""
    gendered = {w for words in GENDER_LEXICONS.values() for w in words}
    pool = [s for s in bold_sentences(resolve("bold_profession_wiki")) if not gendered & set(tokenize(s))]
    pool = sorted(set(pool))
    return [pool[i] for i in np.random.default_rng(seed).choice(len(pool), n, replace=False)]


def template_contexts(words: Sequence[str], kind: str) -> tuple[list[str], list[str]]:
    """Every word in every profile template, as chapter 04 embeds it: ``(contexts, targets)``, word-major."""
    pairs = [(fill_template(t, w, takes_article(w, kind)), w) for w in words for t in DEFAULT_TEMPLATES]
    return [c for c, _ in pairs], [w for _, w in pairs]


def _template_states(model, words: Sequence[str], kind: str, *, cache: bool) -> np.ndarray:
    """The words' states at every hidden state, averaged over the templates a word was located in, as chapter 04's
    profiles average them (``population_profiles.population_embeddings``): [n, S, H] in the order of ``words`` (a
    word located in none is NaN)."""
    emb = population_embeddings(model, {"words": {"all": list(words)}}, kind=kind, cache=cache, progress=False)
    row = dict(zip(emb.words["word"], range(len(emb.words))))
    states = np.full((len(words), *emb.values.shape[1:]), np.nan, dtype=emb.values.dtype)
    for i, word in enumerate(words):
        if word in row:
            states[i] = emb.values[row[word]]
    return states


def writing_passes(model, inputs, cache: bool = False) -> tuple[pd.DataFrame, np.ndarray]:
    """The next-word table of the occupations and the fact nouns and the sentences' cross-entropy: the passes
    :func:`models.hooks.recording` records and :func:`models.hooks.replaying` replays, in this one order (``cache``:
    the next word's own cache, for the unhooked model only)."""
    written = next_word_table(model, inputs.occupations + inputs.facts, cache=cache, progress=False).occupations
    return written, sentence_nll(model, inputs.sentences)


def sentence_nll(model, sentences: Sequence[str]) -> np.ndarray:
    """Per sentence, the summed negative log-likelihood (nats) of its tokens after the first, from float32 logits:
    batches of sentences of similar length (sorted), padded on the right, where causal attention leaves every real
    token's logits as they are unpadded and the padding is not scored."""
    encoded = [model.tokenizer(s)["input_ids"] for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
    size = default_batch_size(model)
    pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
    nll = np.zeros(len(encoded))
    with torch.inference_mode():
        for b in range(0, len(order), size):
            batch = order[b:b + size]
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, :len(encoded[i])] = torch.tensor(encoded[i])
                mask[row, :len(encoded[i])] = 1
            ids, mask = ids.to(model.device), mask.to(model.device)
            logits = model.model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            # one row per token: over the transposed [batch, vocabulary, tokens] layout torch's float32 reduction
            # was off float64 by up to 7.2e-3 nats a sentence, over this one by up to 8e-4 (benchmarks/README.md)
            lost = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                     reduction="none").view(len(batch), -1)
            nll[batch] = (lost * mask[:, 1:]).sum(dim=1).double().cpu().numpy()
    return nll


@dataclass
class Inputs:
    """What every condition measures: the held-out names (``names``, ``name_labels`` 1 female), the BLS occupations
    with their shares, the fact nouns (female then male of each pair), the neutral sentences, and from the unhooked
    model the female − male terms' means (``female``, ``male`` [S, H]) and the warmth and competence ``basis``."""

    names: list[str]
    name_labels: np.ndarray
    occupations: list[str]
    shares: np.ndarray
    facts: list[str]
    sentences: list[str]
    female: np.ndarray
    male: np.ndarray
    basis: object


@dataclass
class Unhooked:
    """The unhooked passes a single-state condition starts from (:func:`record_unhooked`): their ``recorded`` input
    ids and states, and the held-out names' and occupation nouns' template states at every hidden state (``names``,
    ``nouns`` [n, S, H]), which serve the states below the erased one."""

    recorded: Recording
    names: np.ndarray
    nouns: np.ndarray


def _passes(model, inputs: Inputs, cache: bool, start: tuple[int, Unhooked] | None = None
            ) -> tuple[np.ndarray, np.ndarray, pd.DataFrame, np.ndarray]:
    """Every forward pass of one condition, in the one order :func:`record_unhooked` records: the names' and the
    nouns' template states [n, S, H], then the writing passes. ``start``: ``(state, unhooked)``, every pass starts
    from the unhooked state there (:func:`models.hooks.replaying`), and the names' and nouns' states below it, which
    an erasure there leaves as they were, are the unhooked ones."""
    with replaying(model, start[1].recorded, start[0]) if start is not None else nullcontext():
        names = _template_states(model, inputs.names, "name", cache=cache)
        nouns = _template_states(model, inputs.occupations, "noun", cache=cache)
        written, nll = writing_passes(model, inputs, cache)
    if start is not None:
        state, unhooked = start
        names[:, :state], nouns[:, :state] = unhooked.names[:, :state], unhooked.nouns[:, :state]
    return names, nouns, written, nll


def record_unhooked(model, inputs: Inputs, states: Sequence[int]) -> Unhooked:
    """One unhooked run of every pass of a condition, recording ``states`` (``models.hooks.recording``): what the
    single-state conditions at those states start from. Its caches are off, so that its batches are the ones the
    replays run."""
    with recording(model, states) as recorded:
        names, nouns, _, _ = _passes(model, inputs, cache=False)
    return Unhooked(recorded, names, nouns)


def measure_condition(model, inputs: Inputs, erasers: Mapping[int, LeaceEraser], tag: str,
                      start: tuple[int, Unhooked] | None = None) -> dict:
    """One condition's per-item values, under :func:`models.hooks.erasing` (the unhooked model's caches serve the
    condition without erasers): ``probe`` (per hidden state), ``warmth``, ``competence`` (per held-out name),
    ``position``, ``log_ratio`` (per occupation), ``facts`` (per fact noun), ``nll`` (per sentence). ``start``:
    ``(state, unhooked)``, the passes start from the unhooked state there (:func:`_passes`)."""
    with erasing(model, erasers, tag):
        names, nouns, written, nll = _passes(model, inputs, not erasers, start)
    ratio = dict(zip(written["occupation"], written["log_ratio"]))
    basis = inputs.basis
    projected = projection_table(basis, names[:, list(basis.layers)], pd.DataFrame({"word": inputs.names}), "mean")
    wide = projected.pivot_table(index="word", columns="dimension", values="value", sort=False).loc[inputs.names]
    position = gender_position(nouns, inputs.female[None], inputs.male[None]).mean(axis=1)
    return {"probe": [probe_accuracy(names[:, s], inputs.name_labels) for s in range(names.shape[1])],
            "warmth": wide["warmth"].tolist(), "competence": wide["competence"].tolist(),
            "position": position.tolist(), "log_ratio": [ratio[o] for o in inputs.occupations],
            "facts": [ratio[f] for f in inputs.facts], "nll": nll.tolist()}


def cross_fitted(first: Mapping[str, list], second: Mapping[str, list], first_half: np.ndarray) -> dict:
    """One record of a cross-fitted condition from its two runs (``first``: under the eraser fitted on the first
    half of the occupations, ``second``: on the second): each occupation's ``position`` and ``log_ratio`` from the
    run whose eraser was not fitted on it (``first_half``: True for the first half's occupations); every other value
    (names, facts, sentences) the mean of the two runs."""
    out = {}
    for key, values in first.items():
        a, b = np.asarray(values, dtype=float), np.asarray(second[key], dtype=float)
        out[key] = (np.where(first_half, b, a) if key in ("position", "log_ratio") else (a + b) / 2).tolist()
    return out
