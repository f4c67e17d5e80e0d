"""intrinsic_extrinsic.erasure, its erasers and measures, and models.hooks: the fitted eraser removes a planted
concept and a random one does not; the hooks change nothing with an identity eraser and erase exactly the state the
book reads; the probe, the paired intervals and the rule."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from concept_erasure import LeaceFitter

from bias_utils.book import runs
from bias_utils.core import cache, paths
from bias_utils.core.errors import ParameterError
from bias_utils.core.precision import percent_text
from bias_utils.core.stats import hedges_g, percentile_interval, resamples, rowwise_correlation, rowwise_g
from bias_utils.intrinsic_extrinsic import erasers, erasure, erasure_measures, erasure_reading, erasure_statistics
from bias_utils.models import hooks

MODEL = "smollm2-135m-instruct"


def _planted(n: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` states with a binary concept planted along one random direction, in correlated noise."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.repeat([0, 1], n // 2))
    mix = rng.standard_normal((dim, dim)) / np.sqrt(dim)
    direction = rng.standard_normal(dim)
    return rng.standard_normal((n, dim)) @ mix + np.outer(2.0 * y - 1, direction / np.linalg.norm(direction)), y


def _apply(eraser, x: np.ndarray) -> np.ndarray:
    return eraser(torch.from_numpy(x)).numpy()


@pytest.mark.slow
def test_the_fitted_eraser_leaves_a_planted_concept_at_chance_and_a_random_subspace_does_not():
    """Fit on one sample, probe another: LEACE removes the planted concept (probe at chance), the shuffled-label fit
    and a random subspace of the same rank leave it (probe far above chance)."""
    x, y = _planted(1000, 24, seed=7)
    x_fit, y_fit, x_new, y_new = x[:600], y[:600], x[600:], y[600:]
    fit = erasers.fit_erasers(x_fit[:, None, :].repeat(2, axis=1), y_fit.astype(float), np.arange(600), seed=0)
    assert fit.ranks[1] == 1
    before = erasers.probe_accuracy(x_new, y_new)
    after = erasers.probe_accuracy(_apply(fit.leace[1], x_new), y_new)
    random = erasers.probe_accuracy(_apply(fit.random[1], x_new), y_new)
    shuffled = erasers.probe_accuracy(_apply(fit.shuffled[1], x_new), y_new)
    assert before > 0.9
    assert abs(after - 0.5) < 0.08  # 400 points: a binomial SD of 0.025
    assert random > 0.85 and shuffled > 0.85


def test_the_probe_is_at_chance_without_a_concept_and_reads_a_clear_one():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200, 50))
    y = np.repeat([0, 1], 100)
    assert abs(erasers.probe_accuracy(x, y) - 0.5) < 0.12
    x[:, 0] += 4 * y
    assert erasers.probe_accuracy(x, y) > 0.95
    x[0] = np.nan
    assert erasers.probe_accuracy(x[:1], y[:1]) != erasers.probe_accuracy(x[:1], y[:1])  # NaN: too few rows


def test_identity_and_random_erasers_and_the_rank():
    eye = erasers._identity_eraser(8)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    assert torch.equal(eye(x), x)
    assert erasers._rank(eye) == 0
    u = erasers._random_eraser(8, 2, np.random.default_rng(0))
    assert erasers._rank(u) == 2
    # an orthogonal projection: applied twice, as once
    once = u(x)
    assert torch.allclose(u(once), once, atol=1e-12)


def test_the_vectorised_g_is_stats_hedges_g():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 1, 50), rng.normal(0, 1.3, 47)
    assert rowwise_g(a[None], b[None])[0] == pytest.approx(hedges_g(a, b)["effect_size"], rel=1e-12)


def test_the_chosen_states_count_down_from_the_last():
    assert erasure.chosen_states(30, 10) == [10, 20, 30]
    assert erasure.chosen_states(30, 15) == [15, 30]
    # the default: every third state, ten points on a 30-state decoder (issue 54)
    assert erasure.chosen_states(30, 3) == list(range(3, 31, 3))
    assert erasure.chosen_states(18, 10) == [8, 18]
    assert erasure.chosen_states(4, 1) == [1, 2, 3, 4]
    assert erasure.chosen_states(30, 100) == [30]


def test_held_out_names_alternate_by_rank():
    fit, held = erasure_measures.split_names({"f": ["a", "b", "c", "d", "e"], "m": ["v", "w", "x", "y"]})
    assert fit == {"f": ["a", "c", "e"], "m": ["v", "x"]} and held == {"f": ["b", "d"], "m": ["w", "y"]}


def test_neutral_sentences_hold_no_gendered_word_and_are_drawn_by_the_seed():
    first = erasure_measures.neutral_sentences(20, seed=0)
    assert len(set(first)) == 20 and first == erasure_measures.neutral_sentences(20, seed=0)
    assert first != erasure_measures.neutral_sentences(20, seed=1)
    assert not any({"he", "his", "she", "her", "man", "woman"} & set(s.lower().split()) for s in first)


def _tradeoff_rows(changes: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """A trade-off table of single-state LEACE rows: state -> (change of ρ, change of cross-entropy, facts share)."""
    rows = []
    for layer, (rho, ce, facts) in changes.items():
        for measure, change, value in (("log_ratio_rho", rho, 0.8 + rho), ("cross_entropy", ce, 4 + ce),
                                       ("facts_right_share", facts - 1, facts)):
            rows.append({"erasure": "leace", "layer": layer, "measure": measure, "change": change, "value": value})
    return pd.DataFrame(rows)


def test_the_best_trade_off_follows_the_rule_stated_in_advance():
    table = _tradeoff_rows({"10": (-0.2, 0.05, 1.0), "20": (-0.5, 0.08, 0.95), "30": (-0.7, 0.5, 1.0),
                            "all": (-0.9, 2.0, 0.5)})
    # 30 falls more but costs more than the budget; all is not a state
    assert erasure.best_tradeoff_layer(table) == "20"
    table = _tradeoff_rows({"10": (-0.2, 0.05, 0.8), "20": (-0.5, 0.3, 1.0)})
    assert erasure.best_tradeoff_layer(table) is None
    # issue 58: with layer_step=1000 or limit=10 the rule named a state where ρ rose (+0.18); a rise or no change
    # is never the best, and a fall beside it still is
    assert erasure.best_tradeoff_layer(_tradeoff_rows({"29": (0.18, 0.02, 1.0)})) is None
    assert erasure.best_tradeoff_layer(_tradeoff_rows({"15": (0.0, 0.02, 1.0), "29": (0.18, 0.02, 1.0)})) is None
    assert erasure.best_tradeoff_layer(_tradeoff_rows({"15": (-0.01, 0.02, 1.0), "29": (0.18, 0.0, 1.0)})) == "15"


@pytest.mark.slow
def test_the_paired_interval_of_a_change_in_rho_covers_the_truth_at_its_level():
    """Simulation: 60 units, two measures of one criterion with different noise; the percentile interval of the
    paired change in Spearman's ρ, resampling units, covers the change computed on a population of 200,000 in
    about 95% of 300 samples."""
    rng = np.random.default_rng(5)

    def sample(n):
        share = rng.uniform(0, 100, n)
        return share, share + rng.normal(0, 25, n), share + rng.normal(0, 60, n)

    big = sample(200_000)
    rho = [rowwise_correlation("spearman", v[None], big[0][None])[0] for v in big[1:]]
    truth = rho[1] - rho[0]
    covered = 0
    for i in range(300):
        share, before, after = sample(60)
        draws = resamples(60, 400, i)
        boots = (rowwise_correlation("spearman", after[draws], share[draws])
                 - rowwise_correlation("spearman", before[draws], share[draws]))
        low, high = percentile_interval(boots, 0.95)
        covered += low <= truth <= high
    assert 0.90 <= covered / 300 <= 0.99


def test_bad_parameters_are_refused_naming_them_before_a_model_loads():
    with pytest.raises(ParameterError, match="layer_step"):
        erasure.check_erasure(MODEL, layer_step=0)
    with pytest.raises(ParameterError, match="n_boot"):
        erasure.check_erasure(MODEL, n_boot=1)
    with pytest.raises(ParameterError, match="model"):
        erasure.check_erasure("minilm-l6")
    with pytest.raises(ParameterError, match=r"^limit must be None or at least 10 .* got 9$"):
        erasure.check_erasure(MODEL, limit=9)
    with pytest.raises(ParameterError, match="^limit"):
        erasure.check_erasure(MODEL, limit="12")
    erasure.check_erasure(MODEL, limit=10)


@pytest.mark.parametrize("n_boot", [2, 10, 99])
def test_the_library_door_refuses_the_resamples_the_notebook_refuses(n_boot):
    """erasure_tradeoff with n_boot=2 published "95%" intervals that excluded their own estimate; the library
    call now has the notebook's floor, refused before the model loads (no basis is looked at)."""
    from bias_utils.book import validation

    with pytest.raises(ParameterError, match=rf"^n_boot must be an integer >= 100 .* got {n_boot}$"):
        erasure.erasure_tradeoff(MODEL, None, n_boot=n_boot)
    with pytest.raises(ParameterError, match=rf"got {n_boot}$"):
        validation.check("12_erasure", model=MODEL, n_boot=n_boot)


@pytest.mark.parametrize("rows", [None, [("sociability", t, "high") for t in ("friendly", "warm", "sociable")]
                                  + [("sociability", t, "low") for t in ("cold", "distant", "unfriendly")]])
def test_a_dictionary_without_warmth_or_competence_is_refused_at_the_parameter_check(tmp_path, rows):
    """Chapter 12 with a dictionary that has no warmth and competence axes (the example's one "tidiness"
    dimension, or sociability alone) loaded the model and built the space before a bare KeyError
    'warmth_competence'; the parameter check now refuses it, naming the dictionary and what it lacks."""
    from bias_utils.book import validation

    path = paths.ROOT / "data" / "examples" / "user_dictionary_example.csv"
    if rows is not None:
        path = tmp_path / "sociability.csv"
        path.write_text("dimension,term,direction\n" + "".join(f"{d},{t},{s}\n" for d, t, s in rows))
    with pytest.raises(ParameterError, match=rf"^dictionary_path: {path} cannot give the warmth and competence "
                                             r"axes .* lacks: .*'competence': \['ability', 'agency'\]"):
        validation.check("12_erasure", model=MODEL, dictionary_path=str(path))


# --------------------------------------------------------------------------- with SmolLM2


@pytest.fixture(scope="module")
def smollm():
    from bias_utils.models.loading import load_model

    return load_model(MODEL)


@pytest.mark.slow
def test_an_identity_eraser_on_every_layer_leaves_every_output_bit_identical(smollm):
    """The next word, the embeddings and generation through the hooks of identity erasers on every state equal the
    unhooked model's to the bit, and the model's id says it is erased only while the hooks are on."""
    from bias_utils.audit.next_word import next_word_table
    from bias_utils.models.embeddings import embed_words
    from bias_utils.models.generation import generate

    nouns = ["nurse", "carpenter"]
    contexts, words = ["this is the nurse", "Mary is here"], ["nurse", "Mary"]
    prompts = ["The nurse said that", "The carpenter picked up"]
    identity = {h: erasers._identity_eraser(smollm.hidden_size) for h in range(1, smollm.n_layers + 1)}
    plain = (next_word_table(smollm, nouns, cache=False, progress=False).prompts,
             embed_words(smollm, contexts, words, cache=False, progress=False).values,
             generate(smollm, prompts, max_new_tokens=6, seed=0, cache=False, progress=False))
    original = smollm.model_id
    with hooks.erasing(smollm, identity, "identity") as hooked:
        assert hooked.model_id == f"{original}--erased-identity"
        erased = (next_word_table(hooked, nouns, cache=False, progress=False).prompts,
                  embed_words(hooked, contexts, words, cache=False, progress=False).values,
                  generate(hooked, prompts, max_new_tokens=6, seed=0, cache=False, progress=False))
    assert smollm.model_id == original
    pd.testing.assert_frame_equal(plain[0], erased[0], check_exact=True)
    assert np.array_equal(plain[1], erased[1])
    assert plain[2]["completion"].tolist() == erased[2]["completion"].tolist()


def _replay_inputs() -> SimpleNamespace:
    return SimpleNamespace(names=["Mary", "John", "Linda", "James"], occupations=["nurse", "carpenter", "pilot"],
                           facts=["king", "queen"],
                           sentences=["The hospital opened a new wing last year.", "Bridges need inspections."])


def _assert_replay_equals_computing(model, states):
    """Every pass of a condition (the names' and nouns' template states at every hidden state, the next word, the
    cross-entropy), started from the recorded unhooked state at each of ``states``, equals the same passes computed
    through every block, to the bit; and the erasure changed something to compare."""
    inputs = _replay_inputs()
    unhooked = erasure_measures.record_unhooked(model, inputs, states)
    rng = np.random.default_rng(0)
    for state in states:
        eraser = {state: erasers._random_eraser(model.hidden_size, 2, rng)}
        with hooks.erasing(model, eraser, "computed"):
            computed = erasure_measures._passes(model, inputs, cache=False)
        with hooks.erasing(model, eraser, "replayed"):
            replayed = erasure_measures._passes(model, inputs, cache=False, start=(state, unhooked))
        for a, b in (computed[0], replayed[0]), (computed[1], replayed[1]):
            assert np.array_equal(a, b, equal_nan=True)
        pd.testing.assert_frame_equal(computed[2], replayed[2], check_exact=True)
        assert np.array_equal(computed[3], replayed[3])
        assert not np.allclose(computed[0][:, state], unhooked.names[:, state], equal_nan=True)
    return inputs, unhooked


@pytest.mark.slow
def test_replaying_the_blocks_below_the_erased_state_equals_computing_them_to_the_bit(smollm):
    """An erasure at state 15 and at the last state: all of a condition's passes, started from the recorded unhooked
    state there, equal the ones computed through every block (issue 54: the names' and nouns' passes too)."""
    _assert_replay_equals_computing(smollm, [15, smollm.n_layers])


@pytest.mark.slow
def test_a_replay_that_does_not_follow_its_recording_is_refused_and_the_forward_comes_back(smollm):
    """Issue 54: a batch of the recorded shape with other ids (the names reordered), a pass more than recorded and
    passes left unused are each a RuntimeError; a forward put on a block's instance (as accelerate's device_map
    does) is the one there afterwards, and the class's own comes back where there was none."""
    inputs = _replay_inputs()
    unhooked = erasure_measures.record_unhooked(smollm, inputs, [15])
    reordered = SimpleNamespace(**{**vars(inputs), "names": ["John", "Mary", "James", "Linda"]})
    assert [len(n) for n in reordered.names] == [len(n) for n in inputs.names]
    with pytest.raises(RuntimeError, match=r"hidden state 15: pass 1 has input ids of shape .* other ids"), \
            hooks.replaying(smollm, unhooked.recorded, 15):
        erasure_measures._passes(smollm, reordered, cache=False)
    with pytest.raises(RuntimeError, match=r"pass \d+ has input ids of shape \(1, \d+\) where the recording holds "
                                           "none"), hooks.replaying(smollm, unhooked.recorded, 15):
        erasure_measures._passes(smollm, inputs, cache=False)
        erasure_measures.sentence_nll(smollm, ["Roads need repairs."])
    with pytest.raises(RuntimeError, match=r"hidden state 15: \d+ of the \d+ recorded passes were not replayed"), \
            hooks.replaying(smollm, unhooked.recorded, 15):
        erasure_measures._template_states(smollm, inputs.names, "name", cache=False)
    layers = smollm.backbone().layers
    own = layers[3].forward  # a forward on the instance, where accelerate puts its own

    def instance_forward(*args, **kwargs):
        return own(*args, **kwargs)

    layers[3].forward = instance_forward
    try:
        with hooks.replaying(smollm, unhooked.recorded, 15):
            erasure_measures._passes(smollm, inputs, cache=False)
        assert vars(layers[3])["forward"] is instance_forward
    finally:
        del layers[3].forward
    assert all("forward" not in vars(m) for m in [*layers, smollm.backbone().norm])
    again = erasure_measures._passes(smollm, inputs, cache=False)
    assert np.array_equal(again[0], unhooked.names, equal_nan=True)


@pytest.mark.slow
def test_the_replay_equals_computing_on_a_second_architecture():
    """Qwen2 (qwen2.5-coder-0.5b-instruct, 24 layers): the same to-the-bit check at a middle and the last state."""
    from bias_utils.models.loading import load_model

    qwen = load_model("qwen2.5-coder-0.5b-instruct")
    _assert_replay_equals_computing(qwen, [qwen.n_layers // 2, qwen.n_layers])


@pytest.mark.slow
@pytest.mark.shares_quick_book
def test_a_small_run_reads_its_curve_resumes_where_it_stopped_and_a_rerun_computes_nothing(smollm, tmp_path,
                                                                                            monkeypatch):
    """erasure_tradeoff on SmolLM2 as the QUICK book's chapter 12 runs it (the last state alone, layer_step 1000, and
    its ``limit`` of each input, so the suite computes these conditions once between the book and its tests): the
    curve first, then the controls and the selective eraser at the states it picked and at every state, each
    condition's record once in its store; a copy of the store stopped before its last condition (in a cache whose
    other folders are the suite's) resumes with that one alone and gives the same table to the bit (stopping earlier
    would test the same code at the cost of computing the conditions between twice); a rerun appends nothing."""
    from bias_utils.profiles import dictionaries, space

    # the QUICK book's basis, as conftest's smollm_quick_bases builds it (this module's smollm is its own instance)
    basis = space.build_space(smollm, dictionaries.load_dictionary(None), "generated", 2, 0).bases["warmth_competence"]
    quick = {"layer_step": 1000, "limit": runs.QUICK_PARAMETERS["limit"], "n_boot": 100, "progress": False}
    result = erasure.erasure_tradeoff(smollm, basis, **quick)
    picked = erasure_statistics.picked_layers(result.tradeoff)
    ran = list(dict.fromkeys(zip(result.tradeoff["erasure"], result.tradeoff["layer"])))
    assert ran == erasure.conditions([smollm.n_layers], picked)
    assert set(result.probe["state"]) == set(range(smollm.n_layers + 1))
    assert "LEACE was applied at 1 single hidden state of 30 (30)" in result.describe()
    with cache.file_lock(result.cache / "lock"):  # the store's own lock: another worker may be appending to it
        lines = (result.cache / "rows.jsonl").read_text().splitlines()
    keys = [(r["erasure"], r["layer"]) for r in map(json.loads, lines)]
    assert len(keys) == len(set(keys)) and set(ran) <= set(keys)  # whoever computed a condition first, once
    root = tmp_path / "cache"
    (root / "erasure").mkdir(parents=True)
    for folder in paths.cache_dir().iterdir():
        if folder.name != "erasure":
            (root / folder.name).symlink_to(folder)
    copy = root / "erasure" / result.cache.name
    shutil.copytree(result.cache, copy, ignore=shutil.ignore_patterns("rows.jsonl", "*lock"))
    line = dict(zip(keys, lines))
    rows = copy / "rows.jsonl"
    rows.write_text("".join(line[c] + "\n" for c in ran[:-1]))  # stopped before its last condition
    monkeypatch.setenv("BIAS_CACHE_DIR", str(root))
    resumed = erasure.erasure_tradeoff(smollm, basis, **quick)
    assert resumed.cache == copy
    pd.testing.assert_frame_equal(resumed.tradeoff, result.tradeoff, check_exact=True)
    assert len(rows.read_text().splitlines()) == len(ran)
    before = rows.read_bytes()
    again = erasure.erasure_tradeoff(smollm, basis, **quick)
    assert rows.read_bytes() == before
    pd.testing.assert_frame_equal(again.tradeoff, result.tradeoff, check_exact=True)


@pytest.mark.slow
def test_the_hook_erases_the_very_state_the_book_reads(smollm):
    """A LEACE eraser at hidden state h: the embeddings' states below h are the unhooked ones to the bit, state h is
    the eraser's image of the unhooked state (the word's token mean commutes with the affine map), a later state
    moved; at the last state (the final norm's output) the same."""
    from bias_utils.models.embeddings import embed_words

    contexts, words = ["this is the nurse", "that is Mary", "the person is the carpenter"], ["nurse", "Mary",
                                                                                            "carpenter"]
    plain = embed_words(smollm, contexts, words, cache=False, progress=False).values
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, smollm.hidden_size))
    z = np.repeat([0.0, 1.0], 20)
    x[z == 1, :5] += 3
    fitted = LeaceFitter.fit(torch.from_numpy(x), torch.from_numpy(z)[:, None]).eraser
    for h in (12, smollm.n_layers):
        with hooks.erasing(smollm, {h: fitted}, f"test-{h}"):
            hooked = embed_words(smollm, contexts, words, cache=False, progress=False).values
        assert np.array_equal(hooked[:, :h], plain[:, :h])
        expected = fitted(torch.from_numpy(plain[:, h].astype(np.float64))).numpy()
        assert np.allclose(hooked[:, h], expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
        if h < smollm.n_layers:
            assert not np.allclose(hooked[:, h + 1], plain[:, h + 1])


@pytest.mark.slow
def test_erasing_refuses_nesting_and_unknown_states(smollm):
    eye = {1: erasers._identity_eraser(smollm.hidden_size)}
    with pytest.raises(ParameterError, match="hidden states \\[0\\]"):
        with hooks.erasing(smollm, {0: eye[1]}, "x"):
            pass
    with hooks.erasing(smollm, eye, "outer"):
        with pytest.raises(ParameterError, match="already under an erasure"):
            with hooks.erasing(smollm, eye, "inner"):
                pass
    assert "--erased-" not in smollm.model_id


@pytest.mark.slow
def test_the_padded_batches_score_each_sentence_as_it_alone_is_scored(smollm):
    """The cross-entropy's batches, padded on the right, against one sentence per forward pass without padding, its
    log-softmax in float64. The tolerance is the arithmetic's: a batch's float32 logits differ from a lone pass's by
    rounding (about 1e-7 of a logit near 20, grown over 30 blocks to about 2e-5 nats a token, against about 3 nats a
    token here). Measured: at most 6.2e-6 of the sum over 41 sentences; the reduction over the transposed layout that
    it replaced was off by up to 8e-5 (0.0072 nats of a sentence's 90), and fails here (on one of these sentences,
    by 0.0013 of 41.6 nats, just past the tolerance)."""
    sentences = erasure_measures.neutral_sentences(5, seed=0) + ["A short one."]
    found = erasure_measures.sentence_nll(smollm, sentences)
    with torch.inference_mode():
        for sentence, nll in zip(sentences, found):
            ids = torch.tensor([smollm.tokenizer(sentence)["input_ids"]])
            logp = torch.log_softmax(smollm.model(input_ids=ids).logits[0, :-1].double(), dim=-1)
            alone = -logp.gather(1, ids[0, 1:, None]).sum().item()
            assert nll == pytest.approx(alone, rel=3e-5)


def test_notebook_12_checks_its_parameters_before_a_model_loads():
    from bias_utils.book import validation

    validation.check("12_erasure", model=MODEL, layer_step=15, n_boot=1000)
    with pytest.raises(ParameterError, match="layer_step"):
        validation.check("12_erasure", model=MODEL, layer_step="10")
    with pytest.raises(ParameterError, match="n_boot"):
        validation.check("12_erasure", model=MODEL, n_boot=50)
    with pytest.raises(ParameterError, match="model"):
        validation.check("12_erasure", model="minilm-l6")


def test_the_fitted_erasers_are_stored_and_read_back_exactly_and_a_corrupt_file_is_refitted(tmp_path):
    x, y = _planted(300, 12, seed=2)
    fit = erasers.fit_erasers(np.stack([x, 2 * x], axis=1), y.astype(float), np.arange(300), seed=0)
    path = tmp_path / "erasers.npz"
    erasers.write_fit(path, fit)
    back = erasers.read_fit(path, 1)
    probe = torch.from_numpy(x)
    for kind in erasers.ERASURES:
        assert torch.equal(getattr(back, kind)[1](probe), getattr(fit, kind)[1](probe))
    assert back.ranks == fit.ranks
    assert erasers.read_fit(path, 2) is None  # a state the file does not hold: fit again
    erasers.write_fit(path, fit)
    path.write_bytes(path.read_bytes()[:100])
    assert erasers.read_fit(path, 1) is None


def _records(plants: dict, states=(1, 2, 3, 4, 5, 6), n_occ: int = 60, seed: int = 0
             ) -> tuple[dict, erasure_measures.Inputs, np.ndarray]:
    """Per-item values of every condition on small inputs, with known effects planted: ``plants`` maps
    ``(erasure, layer)`` to ``(stereotype, fact, cost)``, the share of the log-ratio's slope on the BLS share taken
    away (its noise kept), the share of every fact noun's log-ratio taken away, and the factor added to every
    sentence's nll; every other condition is the unhooked model's values."""
    rng = np.random.default_rng(seed)
    n_names, n_pairs, n_sent = 20, 6, 12
    shares = rng.uniform(0, 100, n_occ)
    inputs = erasure_measures.Inputs(names=[f"n{i}" for i in range(n_names)],
                                     name_labels=np.repeat([1, 0], n_names // 2),
                                     occupations=[f"o{i}" for i in range(n_occ)], shares=shares,
                                     facts=[f"f{i}" for i in range(2 * n_pairs)],
                                     sentences=[f"s{i}" for i in range(n_sent)], female=None, male=None, basis=None)
    noise, facts = rng.normal(0, 0.2, n_occ), np.r_[rng.uniform(0.5, 2, n_pairs), -rng.uniform(0.5, 2, n_pairs)]
    nll = rng.uniform(20, 40, n_sent)
    base = {"probe": list(rng.uniform(0.5, 1, len(states) + 1)), "warmth": list(rng.normal(0, 1, n_names)),
            "competence": list(rng.normal(0, 1, n_names)), "position": list(shares / 50 + rng.normal(0, 1, n_occ))}

    def record(stereotype: float, fact: float, cost: float) -> dict:
        return {**base, "log_ratio": list((1 - stereotype) * shares / 50 + noise), "facts": list((1 - fact) * facts),
                "nll": list(nll * (1 + cost))}

    records = {("none", "none"): record(0, 0, 0)}
    for erasure_ in erasers.ERASURES:
        for layer in [str(s) for s in states] + ["all"]:
            records[(erasure_, layer)] = record(*plants.get((erasure_, layer), (0, 0, 0)))
    return records, inputs, rng.integers(10, 30, n_sent).astype(float)


#: Planted: at state 2 LEACE takes most of the stereotype and more of the fact, at a cost above the rule's budget
#: (the largest effect, entangled); at state 5 a smaller part of the stereotype and none of the fact, within the
#: budget (the rule's state, selective); everywhere together most of both.
_PLANTS = {("leace", "2"): (0.8, 0.95, 0.1), ("leace", "5"): (0.5, 0.0, 0.005), ("leace", "all"): (0.9, 0.9, 0.5)}


def test_the_tradeoff_table_pairs_each_change_with_the_unhooked_model_and_reads_it(tmp_path):
    records, inputs, tokens = _records(_PLANTS)
    table = erasure_statistics.tradeoff_table(records, inputs, tokens, {h: 1 for h in range(1, 7)}, "m", n_boot=200,
                                              seed=0)
    assert set(table["measure"]) == set(erasure_statistics.MEASURES)
    assert list(table.columns) == erasure_statistics.TRADEOFF_COLUMNS and set(table["depth"]) == {6}
    same = table[(table["erasure"] == "random") & (table["layer"] == "1") & (table["measure"] != "probe_accuracy")]
    assert (same["change"] == 0).all() and (same["ci_low"] == 0).all() and (same["ci_high"] == 0).all()
    base = table[table["erasure"] == "none"]
    assert (base["change"] == 0).all() and base["ci_low"].isna().all()
    # the nll of a sentence over its tokens, pooled: the cross-entropy is total nats over total tokens
    ce = base[base["measure"] == "cross_entropy"]["value"].iloc[0]
    assert ce == pytest.approx(sum(records[("none", "none")]["nll"]) / tokens.sum())
    moved = table[(table["erasure"] == "leace") & (table["layer"] == "2")].set_index("measure")
    assert moved.at["log_ratio_rho", "ci_high"] < 0 and moved.at["cross_entropy", "change"] == pytest.approx(ce / 10)
    # the slope per 100 points of share, by least squares (numpy's polyfit, an independent computation)
    slope = 100 * np.polyfit(inputs.shares, records[("none", "none")]["log_ratio"], 1)[0]
    assert moved.at["stereotype_slope", "baseline"] == pytest.approx(slope, rel=1e-9)
    # the fact gap: every noun's log-ratio scaled by 0.05 takes 95% of the gap, in every resample alike
    assert moved.at["fact_removed", "value"] == pytest.approx(0.95)
    assert moved.at["fact_removed", "ci_low"] == pytest.approx(0.95)
    assert moved.at["stereotype_removed", "ci_low"] < 0.8 < moved.at["stereotype_removed", "ci_high"]
    assert table.loc[table["best"], "layer"].unique().tolist() == ["5"]
    probe = erasure_statistics.probe_table(records, "m")
    assert len(probe) == 7 * len(records) and probe.loc[probe["erasure"] == "none", "accuracy"].tolist() == \
        records[("none", "none")]["probe"]
    x, y = _planted(200, 8, seed=1)
    fit = erasers.fit_erasers(np.repeat(x[:, None], 7, axis=1), y.astype(float), np.arange(200), seed=0)
    result = erasure._Erasure(table, pd.DataFrame(columns=erasure._WORD_COLUMNS), "m", [1, 2], probe, fit)
    # the erasers of one condition, as issue 55's long form takes them: the fit's own
    assert result.erasers("leace", result.largest_layer) == {2: fit.leace[2]}
    assert result.erasers("shuffled", "all") == fit.shuffled and result.erasers("leace", None) == {}
    with pytest.raises(ParameterError, match="^erasure must be one of"):
        result.erasers("selective", "5")
    assert (result.best_layer, result.largest_layer) == ("5", "2")
    by_state = result.probe_by_state()
    assert list(by_state.columns) == ["without erasure", "LEACE at state 2", "LEACE at state 5", "LEACE at every state"]
    assert by_state.index.tolist() == list(range(7))
    unhooked = records[("none", "none")]["probe"]
    assert (f"Inside: without erasure a probe reads the held-out names' gender at state 2 with accuracy "
            f"{erasure_reading.number_text(unhooked[2])} (at its best, state {int(np.argmax(unhooked))}") \
        in result.describe()
    weak = unhooked[2] < max(unhooked) - 0.1
    assert weak == ("less well than at its best state before any erasure" in result.describe())
    assert set(result.best()["layer"]) == {"none", "2", "5"}
    curve = result.curve().set_index(["erasure", "hidden state"])
    assert curve.at[("LEACE", "5"), "selective"] and not curve.at[("LEACE", "2"), "selective"]
    assert curve.at[("LEACE", "2"), "fact removed"] == "95% (95% to 95%)"
    assert len(result.chart().to_dict()["vconcat"]) == 3
    written = result.write(tmp_path)
    assert (tmp_path / "erasure_tradeoff.csv") in written


def test_a_planted_selective_concept_is_found_selective_and_an_entangled_one_is_not():
    records, inputs, tokens = _records(_PLANTS)
    table = erasure_statistics.tradeoff_table(records, inputs, tokens, {h: 1 for h in range(1, 7)}, "m", n_boot=200,
                                              seed=0)
    assert erasure_statistics.is_selective(table, "leace", "5")
    assert not erasure_statistics.is_selective(table, "leace", "2")  # entangled: more of the fact goes
    assert not erasure_statistics.is_selective(table, "leace", "all")  # both alike: no difference shown
    assert not erasure_statistics.is_selective(table, "random", "5")  # nothing removed
    # where the largest shown fall is the selective state, the front page says so with both shares
    only_5 = table[~((table["erasure"] == "leace") & table["layer"].isin(["2", "all"]))]
    at_5 = only_5[(only_5["erasure"] == "leace") & (only_5["layer"] == "5")].set_index("measure")["value"]
    assert (f"removing less of the gap between words like queen and king "
            f"({percent_text(at_5['fact_removed'])}) than of the stereotype "
            f"({percent_text(at_5['stereotype_removed'])}): a selective erasure") in \
        erasure_reading.front_page_clause(only_5, "Dec")
    assert "a selective erasure" not in erasure_reading.front_page_clause(table, "Dec")  # the largest, state 2, is not


def _page(table):
    from bias_utils.book import findings

    return findings.Page(["dec"], {"dec": "Dec"}, {"dec": True}, pd.DataFrame(columns=["model_id"]),
                         pd.DataFrame(columns=["model_id"]), pd.DataFrame(columns=["model_id"]), table)


def test_a_largest_effect_the_rule_does_not_name_is_what_the_front_page_and_the_chapter_say():
    """Issue 54's acceptance: state 2 shows the largest effect, the rule names state 5; the front page's sentence,
    the chapter's opening sentence and its reading lead with state 2 (where, ρ before and after, the cost as nats and
    as a share, the fact removed, the controls) and name the rule's state after it."""
    from bias_utils.book import findings

    records, inputs, tokens = _records(_PLANTS)
    table = erasure_statistics.tradeoff_table(records, inputs, tokens, {h: 1 for h in range(1, 7)}, "dec", n_boot=200,
                                              seed=0)
    rho = table[(table["erasure"] == "leace") & (table["layer"] == "2")
                & (table["measure"] == "log_ratio_rho")].iloc[0]
    before, after = erasure_reading.number_text(rho["baseline"]), erasure_reading.number_text(rho["value"])
    bullet = findings._erasure_bullet(_page(table))
    assert bullet.startswith("In {doc}`Dec </models/dec/12_erasure>`, erasing the gender concept at hidden state 2 of "
                             "6 (33% of the way up) weakens how its next word follows the share of women in an "
                             f"occupation, ρ from {before} to {after}, at +")
    assert "(+10% of its cross-entropy), but it also removes 95% of the gap between words like queen and king" in bullet
    assert "a random subspace and shuffled labels there change ρ by 0 and 0" in bullet
    assert bullet.endswith("the rule stated in advance names state 5, where the fall is shown.")
    # the chapter opens with the same sentence, its model named without a link to itself
    finding = next(f for f in findings.FINDINGS if f.key == "erasure")
    opening = finding.opens(_page(table), "dec")
    assert opening.startswith("In Dec, erasing the gender concept at hidden state 2 of 6 (33% of the way up) weakens")
    assert opening.endswith("the rule stated in advance names state 5, where the fall is shown")
    text = erasure_reading.describe_tradeoff(table, "dec")
    assert f"**The curve's largest effect** is at hidden state 2 of 6 (33% of the way up): ρ goes from {before} to " \
           f"{after}, a change of −" in text
    assert "At the same state a random subspace of the same rank changes ρ by 0 (0 to 0) at 0 nats per token" in text
    assert "95% (95% to 95%) of the fact: not selective" in text
    assert "names hidden state 5, where ρ changes by" in text
    assert ("the difference's interval above 0): LEACE at hidden state 5 of 6 (83% of the way up), 50% of the "
            "stereotype and 0% of the fact.") in text
    assert "The rule changed once since this chapter's first version" in text
    assert "LEACE was applied at 6 single hidden states of 6 (1, 2, 3, 4, 5, 6) and at all of them together" in text
    # the fall at the rule's state not shown: the front page still leads with the shown effect elsewhere
    small = {**_PLANTS, ("leace", "5"): (0.02, 0.0, 0.005)}
    records, inputs, tokens = _records(small)
    table = erasure_statistics.tradeoff_table(records, inputs, tokens, {h: 1 for h in range(1, 7)}, "dec", n_boot=200,
                                              seed=0)
    assert erasure_statistics.best_tradeoff_layer(table) == "5"
    bullet = findings._erasure_bullet(_page(table))
    assert "at hidden state 2 of 6 (33% of the way up) weakens" in bullet
    assert bullet.endswith("names state 5, where the fall is not shown.")


def test_the_front_page_says_when_no_state_shows_an_effect_and_when_everything_erased_loses_the_facts():
    from bias_utils.book import findings

    records, inputs, tokens = _records({("leace", "3"): (0.01, 0.0, 0.5), ("leace", "all"): (0.9, 0.9, 0.5)})
    table = erasure_statistics.tradeoff_table(records, inputs, tokens, {h: 1 for h in range(1, 7)}, "dec", n_boot=200,
                                              seed=0)
    bullet = findings._erasure_bullet(_page(table))
    assert "erasing the gender concept at no single hidden state is shown to weaken" in bullet
    assert "(the largest fall, at hidden state 3 of 6" in bullet and "no state meets the rule" in bullet
    everywhere = (table["erasure"] == "leace") & (table["layer"] == "all") & (table["measure"] == "facts_right_share")
    table.loc[everywhere, "value"] = 0.5
    assert findings._erasure_bullet(_page(table)).endswith("and erasing it at every layer also loses whether "
                                                          "\"the king\" is a he.")


def test_the_selective_eraser_removes_a_planted_stereotype_on_the_other_half_and_spares_the_fact():
    """Planted: occupation contexts whose states carry their BLS majority along one direction and the fact (the
    gendered terms' direction) along another, correlated with it. Fitted on one half, the eraser leaves the other
    half's majority at chance for a probe off the fact direction (along it, where the two are entangled, it is
    spared), neither moves nor reads a state along the fact direction, and the two fits are the two halves' (each
    fitted without the other's nouns)."""
    rng = np.random.default_rng(4)
    n_occ, per, dim = 60, 7, 16
    shares = rng.uniform(0, 100, n_occ)
    occupation = np.repeat(np.arange(n_occ), per)
    fact = np.zeros(dim)
    fact[0] = 1.0
    stereotype = np.zeros(dim)
    stereotype[:2] = [0.6, 0.8]  # entangled: partly along the fact direction
    label = 2.0 * (shares[occupation] > 50) - 1
    x = rng.standard_normal((len(occupation), dim)) + 3 * np.outer(label, stereotype)
    states = np.stack([x, x], axis=1)  # hidden states 0 and 1
    first, second = erasers.selective_erasers(states, occupation, shares, fact[None].repeat(2, axis=0), [1])
    half = erasers.halves(shares)
    assert half.sum() == 30 and np.array_equal(np.sort(shares[half]), np.sort(shares)[0::2])
    other = ~half[occupation]
    y = (label[other] > 0).astype(int)
    assert erasers.probe_accuracy(x[other], y) > 0.95
    erased = _apply(first[1], x[other])
    off_fact = erased - np.outer(erased @ fact, fact)
    assert abs(erasers.probe_accuracy(off_fact, y) - 0.5) < 0.12  # gone from the complement of the fact ...
    assert erasers.probe_accuracy(erased, y) > 0.8  # ... and kept where it runs along the fact: that is spared
    moved = _apply(first[1], x) - x
    assert np.abs(moved @ fact).max() < 1e-10  # nothing moves along the fact
    shifted = x + 5.0 * fact
    assert np.allclose(_apply(first[1], shifted) - _apply(first[1], x), 5.0 * fact, atol=1e-10)  # nor is it read
    changed = states.copy()
    changed[other] += rng.standard_normal(changed[other].shape)  # the second half's nouns, other states
    refit = erasers.selective_erasers(changed, occupation, shares, fact[None].repeat(2, axis=0), [1])
    assert torch.equal(refit[0][1].proj_right, first[1].proj_right)  # the first fit saw the first half alone
    assert not torch.equal(refit[1][1].proj_right, second[1].proj_right)
    assert not torch.equal(second[1].proj_right, first[1].proj_right)


def test_a_cross_fitted_record_takes_each_occupation_from_the_fit_that_did_not_see_it():
    first = {"log_ratio": [1.0, 2.0, 3.0], "position": [0.1, 0.2, 0.3], "nll": [10.0, 20.0], "probe": [0.5, 0.9]}
    second = {"log_ratio": [-1.0, -2.0, -3.0], "position": [-0.1, -0.2, -0.3], "nll": [30.0, 40.0],
              "probe": [0.7, 0.6]}
    merged = erasure_measures.cross_fitted(first, second, np.array([True, False, True]))
    assert merged == {"log_ratio": [-1.0, 2.0, -3.0], "position": [-0.1, 0.2, -0.3], "nll": [20.0, 30.0],
                      "probe": [0.6, 0.75]}


def test_the_conditions_run_the_curve_first_then_the_controls_where_it_picked():
    assert erasure.conditions([10, 20]) == [("none", "none"), ("leace", "10"), ("leace", "20"), ("leace", "all"),
                                            ("random", "all"), ("shuffled", "all"), ("selective", "all")]
    assert erasure.conditions([10, 20], ["10"])[4:] == [("random", "10"), ("shuffled", "10"), ("selective", "10"),
                                                        ("random", "all"), ("shuffled", "all"), ("selective", "all")]
