"""The Study 1 defaults are the paper's main setting, and the default profile equals an
independent computation of the authors' procedure from the published contexts.

The independent computation below shares nothing with the pipeline but the loaded
model: it reads the published JSONL itself, takes ``examples[:5]`` per (term, synset),
runs one context per forward pass, finds the word through the tokenizer's word ids
(the pipeline uses character offsets), averages subwords, contexts and senses, inverts
the stacked pole differences with numpy's pinv, averages the projections over all
hidden states, standardises over the names (ddof 0) and tests with scipy's Student t.

The two agree within a bound propagated from the hidden states' float32 bounds through every
step (``_independent_profile``), not a tolerance fitted to one CPU (issue 46). Measured on AMD
EPYC: group means of z differ by at most 7e-8 (MiniLM) and 2.3e-6 (SmolLM2), Student p by
1.3e-7 and 1.4e-6, at most 1.6e-4 of their bounds: the bound adds every step's worst case
(MiniLM 1e-3 to 3e-3 on the z means, 2e-3 to 9e-3 on p; SmolLM2 4e-3 to 0.11 and 4e-4 to
0.14, the widest on ability, whose names' values spread least). Its companion: one sense of
ability left out of its pole leaves the bound on ability (51x on MiniLM, 29x on SmolLM2).

That bound is the forward passes' (one context per pass against the pipeline's batches): loose
enough that one sense of sociability left out stays within it. So the procedure itself is also
checked on the pipeline's own sense and name states (``_pipeline_inputs``): from there both
sides compute in float64 and differ by float64 rounding only. That bound is 4e-8 to 3e-7 on
MiniLM's z means and p, 5e-8 to 1.7e-5 on SmolLM2's (the pseudo-inverse's backward error,
counted at the largest state's size, dominates); measured at most 3.3e-9 and 4.7e-10 of it.
One sense left out of any of the seven dimensions' poles moves that dimension 2e5x to 3e6x
over it on MiniLM and 32x (agency) to 2e5x on SmolLM2.
"""

from __future__ import annotations

import inspect
import json

import float32_bounds as bounds
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


def _word_vector(loaded, context: str, word: str) -> tuple[np.ndarray, np.ndarray]:
    """[hidden states, hidden] mean over the word's tokens, found through word ids, and per element the bound on its
    difference from another float32 computation (the pipeline's, in batches), to be read through a projection:
    ``float32_bounds.pooled_component_tolerance`` of the tokens' states."""
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
    tokens = torch.stack([h[0, idx] for h in states], dim=1)  # [tokens, states, hidden]
    return (tokens.mean(0).double().numpy(),
            bounds.pooled_component_tolerance(tokens.numpy(), loaded, enc["input_ids"].shape[1]))


def _mean(pairs) -> tuple[np.ndarray, np.ndarray]:
    """The mean of (vector, bound) pairs and its bound: the mean of the bounds (an error of a mean is the mean of the
    errors; the float64 mean adds nothing worth counting)."""
    vectors, tolerances = zip(*pairs)
    return np.mean(vectors, axis=0), np.mean(tolerances, axis=0)


def _independent_inputs(loaded, dictionary, names):
    """The authors' procedure up to the axes: the senses' ``(dimension, direction, vector, bound)`` (both [states,
    hidden]), the names' group (female or not), template means ``x`` [words, states, hidden] and their bounds ``dx``
    (the pipeline averages the seven templates in float32: ``mean_tolerance`` more)."""
    published = _published()
    senses = []
    for _, row in dictionary.iterrows():
        vector, tol = _mean(_word_vector(loaded, c, row.term) for c in published[(row.term, row.synset)])
        senses.append((row.dimension, row.direction, vector, tol))
    words = [(g, w) for g, ws in names.items() for w in ws]
    x, dx = [], []
    for _, w in words:
        templates = [_word_vector(loaded, t.format(w), w) for t in AUTHORS_TEMPLATES]
        vector, tol = _mean(templates)
        x.append(vector)
        dx.append(tol + bounds.mean_tolerance(np.stack([v for v, _ in templates])))
    return senses, np.array([g == "female" for g, _ in words]), np.stack(x), np.stack(dx)


def _pipeline_inputs(sp, res):
    """The pipeline's own states as ``_independent_inputs``' tuple, with the bounds of two float64 computations of
    the same procedure from them (u = 2**-53, each of two sides, deterministic worst case): a pole's mean of ``k``
    senses errs by ``k u`` of the mean of their absolute values; the pseudo-inverse by SVD is that of a basis moved
    by ``H D u ||B||`` (backward stable, ``||B|| <= 2 sqrt(H D) max|S|``), carried on every sense; a name's
    projection (``H`` products) and the names' mean (``n`` terms) by ``(H + n) u`` of its absolute value."""
    u = 2.0**-53
    senses, S = sp.senses.reset_index(drop=True), sp.sense_emb
    hidden, dims, n = S.shape[2], len(SEVEN), len(res.embeddings.words)
    size = senses.groupby(["dimension", "direction"])["dimension"].transform("size").to_numpy()
    pinv_backward = hidden * dims * u * 2 * np.sqrt(hidden * dims) * np.abs(S).max()
    rows = [(r.dimension, r.direction, S[i], 2 * (size[i] * u * np.abs(S[i]) + pinv_backward))
            for i, r in enumerate(senses.itertuples(index=False))]
    x = res.embeddings.values.astype(np.float64)
    return rows, (res.embeddings.words["group"] == "female").to_numpy(), x, 2 * (hidden + n) * u * np.abs(x)


def _independent_profile(inputs, drop: int | None = None):
    """Per dimension ``(female mean z, male mean z, Student p)`` by the authors' procedure, each with the bound on
    how far the pipeline's may differ, propagated from the hidden states' float32 bounds (first order):

    * a pole: the mean of its senses' bounds; a pole difference (a column of the basis ``B_l``): its poles' added;
    * a name's projection at state ``l``, centred on the names' mean (an error of the axes common to every name
      cancels in the centring): ``float32_bounds.pseudo_inverse_projection_tolerance`` of ``x_l - mean x_l``, whose
      bound is the name's and the mean's; averaged over the states;
    * the standardisation: ``float32_bounds.centred_standardised_tolerance``;
    * a group's mean z: the mean of its names' bounds; Student's p: ``float32_bounds.student_p_tolerance``.

    ``drop``: the companion check's change, the sense of that index left out of its pole (the bounds are those of
    the unchanged computation)."""
    senses, female, x, dx = inputs

    def pole(dims, direction, leave=None):
        return _mean((v, t) for k, (d, r, v, t) in enumerate(senses) if d in dims and r == direction and k != leave)

    def basis(members, leave=None):
        high, low = zip(*[(pole(m, "high", leave), pole(m, "low", leave)) for m in members])
        return (np.stack([h[0] - lo[0] for h, lo in zip(high, low)], axis=2),  # [states, hidden, dims]
                np.stack([h[1] + lo[1] for h, lo in zip(high, low)], axis=2))

    out = {}
    for space_name, members in {"dimensions": [[d] for d in SEVEN], "warmth_competence": COMPOSITES.values()}.items():
        dims = SEVEN if space_name == "dimensions" else list(COMPOSITES)
        B, dB = basis(members)
        centred, d_centred = x - x.mean(0), dx + dx.mean(0)
        dc = np.mean([bounds.pseudo_inverse_projection_tolerance(B[s], dB[s], centred[:, s], d_centred[:, s])
                      for s in range(B.shape[0])], axis=0)  # [words, dims]
        if drop is not None:
            B, _ = basis(members, drop)
        mean = np.mean([x[:, s] @ np.linalg.pinv(B[s]).T for s in range(B.shape[0])], axis=0)  # [words, dims]
        z = (mean - mean.mean(0)) / mean.std(0)
        for j, d in enumerate(dims):
            dz = bounds.centred_standardised_tolerance(z[:, j], dc[:, j], mean[:, j].std())
            out[d] = ((z[female, j].mean(), dz[female].mean()), (z[~female, j].mean(), dz[~female].mean()),
                      (sps.ttest_ind(z[female, j], z[~female, j]).pvalue,
                       bounds.student_p_tolerance(z[female, j], z[~female, j], dz[female], dz[~female])))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["minilm-l6", "smollm2-135m-instruct"])
def test_default_profile_equals_independent_computation(model_name, seed_dictionary):
    """The pipeline's group means of z and Student p against the authors' procedure, each within the bound
    propagated from float32 (``_independent_profile``; the module docstring gives the measured shares); the
    companion: one sense of ability left out of its pole moves ability beyond it."""
    from bias_utils.models.loading import load_model
    from bias_utils.profiles.dictionaries import MIN_POLE_SIZE
    from bias_utils.profiles.populations import load_populations

    # The fewest terms a pole may have (one sense each), the first eight names per group.
    dictionary = (seed_dictionary.drop_duplicates(["dimension", "direction", "term"])
                  .groupby(["dimension", "direction"], sort=False).head(MIN_POLE_SIZE).reset_index(drop=True))
    names = {g: ws[:8] for g, ws in load_populations("names").items()}
    loaded = load_model(model_name)

    sp = space.build_space(loaded, dictionary)  # every default: generated contexts, 5 per sense
    res = profiles.run_profiles(loaded, sp.bases, populations={"names": names})
    inputs = _independent_inputs(loaded, dictionary, names)

    stats = res.stats.set_index("dimension")

    def ratios(expected) -> dict[str, list[float]]:
        """Per dimension, the pipeline's difference from ``expected`` over its bound: female, male mean z, p."""
        assert sorted(stats.index) == sorted(expected)
        found = {}
        for dim, ((female, d_female), (male, d_male), (p, d_p)) in expected.items():
            row = stats.loc[dim]
            assert (row.group_a, row.group_b) == ("female", "male")
            found[dim] = [abs(row.mean_a - female) / d_female, abs(row.mean_b - male) / d_male,
                          abs(row.p_student - p) / d_p]
        return found

    within = ratios(_independent_profile(inputs))
    assert all(max(r) <= 1 for r in within.values()), within
    # companion: one sense of ability left out of its pole moves ability beyond the bounds
    dropped = ratios(_independent_profile(inputs, drop=next(k for k, s in enumerate(inputs[0]) if s[0] == "ability")))
    assert max(dropped["ability"]) > 1, dropped

    # the procedure from the pipeline's own states, within float64 rounding; one sense left out of any dimension's
    # pole leaves that bound
    same = _pipeline_inputs(sp, res)
    exact = ratios(_independent_profile(same))
    assert all(max(r) <= 1 for r in exact.values()), exact
    for dim in SEVEN:
        moved = ratios(_independent_profile(same, drop=next(k for k, s in enumerate(same[0]) if s[0] == dim)))
        assert max(moved[dim]) > 1, (dim, moved[dim])

