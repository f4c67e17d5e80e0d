"""The Study 1 defaults are the paper's main setting, and the default profile equals an
independent computation of the authors' procedure from the published contexts.

The independent computation below shares nothing with the pipeline but the loaded
model: it reads the published JSONL itself, takes ``examples[:5]`` per (term, synset),
runs one context per forward pass, finds the word through the tokenizer's word ids
(the pipeline uses character offsets), averages subwords, contexts and senses, inverts
the stacked pole differences with numpy's pinv, averages the projections over all
hidden states, standardises over the names (ddof 0) and tests with scipy's Student t.
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch
from scipy import stats as sps

from bias_utils.core.data import resolve
from bias_utils.profiles import contexts, space
from bias_utils.profiles import population_profiles as profiles

# The authors' utils.TEMPLATES, with the name's slot (names take no article).
AUTHORS_TEMPLATES = ["this is {}", "that is {}", "there is {}", "the person is {}", "here is {}",
                     "{} is here", "{} is there"]
SEVEN = ["sociability", "morality", "ability", "agency", "status", "politics", "religion"]
COMPOSITES = {"warmth": ["sociability", "morality"], "competence": ["ability", "agency"]}


def test_study1_defaults_are_the_papers_main_setting():
    assert inspect.signature(space.build_space).parameters["source"].default == "generated"
    assert inspect.signature(contexts.build_contexts).parameters["source"].default == "generated"
    assert inspect.signature(contexts.build_contexts).parameters["n_contexts"].default == 5
    assert profiles.DEFAULT_TEMPLATES == tuple(t.format("{word}") for t in AUTHORS_TEMPLATES)


def _published():
    with open(resolve("schuster_generated_contexts"), encoding="utf-8") as f:
        return {(e["term"], e["synset"]): e["examples"][:5] for e in map(json.loads, f)}


def _word_vector(loaded, context: str, word: str) -> np.ndarray:
    """[hidden states, hidden] mean over the word's tokens, found through word ids."""
    tok = loaded.tokenizer
    enc = tok(context, return_tensors="pt")
    word_ids = enc.word_ids()
    target = word.lower()
    idx = None
    for wid in dict.fromkeys(w for w in word_ids if w is not None):
        pos = [i for i, w in enumerate(word_ids) if w == wid]
        if tok.decode(enc["input_ids"][0][pos]).strip().lower() == target:
            idx = pos
            break
    assert idx is not None, (context, word)
    with torch.no_grad():
        states = loaded.backbone()(**enc, output_hidden_states=True).hidden_states
    return torch.stack([h[0, idx].mean(0) for h in states]).double().numpy()


def _independent_profile(loaded, dictionary, names):
    published = _published()
    senses = []
    for _, row in dictionary.iterrows():
        vecs = [_word_vector(loaded, c, row.term) for c in published[(row.term, row.synset)]]
        senses.append((row.dimension, row.direction, np.mean(vecs, axis=0)))

    def pole(dims, direction):
        return np.mean([v for d, r, v in senses if d in dims and r == direction], axis=0)

    bases = {"dimensions": [[d] for d in SEVEN], "warmth_competence": list(COMPOSITES.values())}
    words = [(g, w) for g, ws in names.items() for w in ws]
    x = np.stack([np.mean([_word_vector(loaded, t.format(w), w) for t in AUTHORS_TEMPLATES], axis=0)
                  for _, w in words])  # [words, states, hidden]
    out = {}
    for space_name, members in bases.items():
        dims = SEVEN if space_name == "dimensions" else list(COMPOSITES)
        A = np.stack([pole(m, "high") - pole(m, "low") for m in members], axis=1)  # [states, dims, hidden]
        proj = np.stack([x[:, s] @ np.linalg.pinv(A[s].T).T for s in range(A.shape[0])], axis=1)
        mean = proj.mean(axis=1)  # [words, dims]: mean over all hidden states
        z = (mean - mean.mean(0)) / mean.std(0)
        female = np.array([g == "female" for g, _ in words])
        for j, d in enumerate(dims):
            out[d] = (z[female, j].mean(), z[~female, j].mean(), sps.ttest_ind(z[female, j], z[~female, j]).pvalue)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["minilm-l6", "smollm2-135m-instruct"])
def test_default_profile_equals_independent_computation(model_name, seed_dictionary):
    from bias_utils.models.loading import load_model
    from bias_utils.profiles.dictionaries import _MIN_POLE_SIZE
    from bias_utils.profiles.populations import _load_populations

    # The fewest terms a pole may have (one sense each), the first eight names per group.
    dictionary = (seed_dictionary.drop_duplicates(["dimension", "direction", "term"])
                  .groupby(["dimension", "direction"], sort=False).head(_MIN_POLE_SIZE).reset_index(drop=True))
    names = {g: ws[:8] for g, ws in _load_populations("names").items()}
    loaded = load_model(model_name)

    sp = space.build_space(loaded, dictionary)  # every default: generated contexts, 5 per sense
    res = profiles.run_profiles(loaded, sp.bases, populations={"names": names})
    expected = _independent_profile(loaded, dictionary, names)

    stats = res.stats.set_index("dimension")
    assert sorted(stats.index) == sorted(expected)
    for dim, (female, male, p) in expected.items():
        row = stats.loc[dim]
        assert (row.group_a, row.group_b) == ("female", "male")
        assert row.mean_a == pytest.approx(female, abs=1e-3), dim
        assert row.mean_b == pytest.approx(male, abs=1e-3), dim
        assert row.p_student == pytest.approx(p, abs=1e-3, rel=1e-2), dim
