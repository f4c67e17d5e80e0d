"""bias_utils.models.embeddings: word location per tokenizer family, batching exactness, cache behaviour.

Golden values come from running the model's backbone directly on one context at a
time and averaging the hidden states at hand-listed token positions (read off the
tokenizations shown in the comments), never from embed_words itself.

The float32 comparisons use bounds derived from the arithmetic (``float32_bounds``), not
fitted to one CPU: a word's states within ``pooled_state_tolerance`` of its tokens' states
(measured here: up to 0.2 of it), the token embedding's mean of rows within
``mean_tolerance``; each has a companion check showing that a real change (a block's matrix
scaled by 1.001, the rows by 1 + 1e-5) leaves the bound.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
from float32_bounds import bound_ratio, first_mlp_output, mean_tolerance, pooled_state_tolerance, scaled, token_states

from bias_utils.models import builtin_models
from bias_utils.models.embeddings import embed_words, find_word, token_indices
from bias_utils.models.loading import _LoadedModel, load_model
from bias_utils.profiles.dictionaries import load_seed_dictionary

MISSING = ("the only friendly person here", "kind")

# (context, word, token positions) -- contexts from the seed dictionary and name templates.
SMOLLM2_CASES = [
    ("an open-minded curiosity", "open-minded", [1, 2, 3]),  # an Ġopen - minded Ġcuriosity
    ("open-minded impartiality", "Open-Minded", [0, 1, 2]),  # mixed case; word at position 0
    ("a god-fearing and law-abiding people", "god-fearing", [1, 2, 3, 4]),  # a Ġgod - f earing ...
    ("This is Mary.", "Mary", [2]),  # This Ġis ĠMary .
    ("Christopher is here", "Christopher", [0, 1]),  # Christ opher Ġis Ġhere
    ("MARY met mary and Mary.", "Mary", [0]),  # first of three occurrences
]
MINILM_CASES = [
    ("an open-minded curiosity", "open-minded", [2, 3, 4]),  # [CLS] an open - minded curiosity [SEP]
    # [CLS] a god - fearing and law - ab ##idi ##ng
    ("a god-fearing and law-abiding people", "law-abiding", [6, 7, 8, 9, 10]),
    ("This is Mary.", "MARY", [3]),  # lower-cased vocabulary
    ("Christopher is here", "Christopher", [1]),
    ("MARY met mary and Mary.", "mary", [1]),  # first occurrence
]


def _direct(m: _LoadedModel, context: str, positions: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The word's mean hidden states ``[layers, hidden]`` from one forward pass of the context alone, and how far
    another float32 computation of them may differ, per element: ``float32_bounds.pooled_state_tolerance`` of the
    word's token states (each token's ``2 sqrt(N_l + 1) u ||h_l||``, N_l from the context's length, plus the mean's
    own rounding). A decoder's attention-sink token (~2e4 activations) carries its large norm into its bound."""
    tokens, n_tokens = token_states(m, context, positions)
    return tokens.mean(0), pooled_state_tolerance(tokens, m, n_tokens)


def _within(got: np.ndarray, ref: np.ndarray, tol: np.ndarray) -> None:
    """|got - ref| <= tol elementwise."""
    assert (ratio := bound_ratio(got, ref, tol)) <= 1, f"{ratio:.3g} times the bound"


def _assert_a_scaled_block_is_caught(m: _LoadedModel, context: str, positions: list[int]) -> float:
    """Companion of the bound: with the first block's MLP output matrix scaled by 1.001 the word's states leave
    ``_direct``'s tolerance (by 5x to 85x on SmolLM2 and MiniLM). The weights are restored. Returns the ratio."""
    ref, tol = _direct(m, context, positions)
    with scaled(first_mlp_output(m).weight, 1.001):
        changed, _ = _direct(m, context, positions)
    ratio = bound_ratio(changed, ref, tol)
    assert ratio > 1, f"{m.name}: a block scaled by 1.001 stays within the tolerance ({ratio:.2f} of it)"
    return ratio


# --------------------------------------------------------------------------- locating words


@pytest.mark.parametrize(
    "context, word, span",
    [
        ("This is Mary.", "Mary", (8, 12)),
        ("MARY met Mary", "mary", (0, 4)),  # first occurrence, case-insensitive
        ("Maryland and Mary", "Mary", (13, 17)),  # not inside a longer word
        ("an open-minded curiosity", "Open-minded", (3, 14)),
        ("a god-fearing  people", "god-fearing", (2, 13)),
        ("she is kind  hearted", "kind hearted", (7, 20)),  # any whitespace between parts
        ("an open minded curiosity", "open-minded", None),
        ("the only friendly person here", "kind", None),
    ],
)
def test_find_word(context, word, span):
    assert find_word(context, word) == span


def test_token_indices_ignores_special_tokens_and_counts_leading_space():
    # [BOS] This Ġis ĠMary . -- offsets as a byte-level BPE tokenizer reports them.
    offsets = [(0, 0), (0, 4), (4, 7), (7, 12), (12, 13)]
    assert token_indices(offsets, (8, 12)) == [3]
    assert token_indices(offsets, (0, 4)) == [1]
    assert token_indices([(0, 0), (0, 1), (1, 2)], (2, 3)) == []


def test_unequal_lengths_rejected():
    with pytest.raises(ValueError, match="2 contexts but 1 words"):
        embed_words(_tiny_sentencepiece_model(), ["a b", "c d"], ["a"])


# --------------------------------------------------------------------------- SentencePiece (tiny trained model)


def _seed_contexts() -> list[str]:
    return [c for cs in load_seed_dictionary().contexts for c in cs]


_TINY: dict = {}


def _tiny_sentencepiece_model() -> _LoadedModel:
    """A real SentencePiece unigram model trained on the seed dictionary's contexts, as a fast
    tokenizer (Metaspace ``▁`` + BOS, like Gemma/Llama), on a small random Llama."""
    if "m" in _TINY:
        return _TINY["m"]
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers import models as tk_models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_seed_contexts()), model_writer=buf, vocab_size=400,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tk = Tokenizer(tk_models.Unigram(vocab, unk_id=sp.unk_id(), byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tk.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", sp.bos_id())])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                  pad_token="</s>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=sp.get_piece_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = LlamaForCausalLM(cfg).eval()
    _TINY["sp"] = sp
    _TINY["m"] = _LoadedModel(name="tiny-sentencepiece", model_id="tiny-sentencepiece-test", model=model, tokenizer=tok,
                             kind="decoder", device=torch.device("cpu"), dtype=torch.float32, n_layers=2,
                             hidden_size=32, source={"type": "test"})
    return _TINY["m"]


SP_CASES = [
    ("an open-minded curiosity", "open-minded"),
    ("a god-fearing and law-abiding people", "god-fearing"),
    ("a god-fearing and law-abiding people", "LAW-ABIDING"),
    ("This is Mary.", "Mary"),
    ("Christopher is here", "Christopher"),
    ("MARY met mary and Mary.", "Mary"),
]


def test_sentencepiece_alignment_matches_sentencepiece_library():
    m = _tiny_sentencepiece_model()
    sp = _TINY["sp"]
    for context, word in SP_CASES:
        enc = m.tokenizer(context, return_offsets_mapping=True)
        pieces = m.tokenizer.convert_ids_to_tokens(enc["input_ids"])
        assert pieces[0] == "<s>" and pieces[1:] == sp.encode_as_pieces(context)  # the wrap is faithful
        idx = token_indices(enc["offset_mapping"], find_word(context, word))
        # Independent reading: the chosen pieces spell the first occurrence of the word.
        spelled = "".join(pieces[i] for i in idx).replace("▁", " ").strip()
        start = context.lower().index(word.lower())
        assert spelled == context[start:start + len(word)]
        assert 0 not in idx  # <s> never counts


@pytest.mark.parametrize("side", ["right", "left"])
def test_sentencepiece_batched_equals_direct(side):
    m = _tiny_sentencepiece_model()
    contexts = [c for c, _ in SP_CASES] + [MISSING[0]]
    words = [w for _, w in SP_CASES] + [MISSING[1]]
    m.tokenizer.padding_side = side
    try:
        got = embed_words(m, contexts, words, batch_size=4, cache=False, progress=False)
    finally:
        m.tokenizer.padding_side = "right"
    for k, (context, word) in enumerate(SP_CASES):
        enc = m.tokenizer(context, return_offsets_mapping=True)
        idx = token_indices(enc["offset_mapping"], find_word(context, word))
        _within(got.values[k], *_direct(m, context, idx))
        # Layer 0 is the token embedding itself: the mean of the pieces' embedding rows, a lookup (exact) and a mean
        # (float32_bounds.mean_tolerance: at most k + 1 roundings per computation).
        rows = m.model.get_input_embeddings().weight[[enc["input_ids"][i] for i in idx]].detach().numpy()
        _within(got.values[k, 0], rows.mean(0), mean_tolerance(rows))
    if side == "right":  # the bound still catches a real change (the last case's word)
        _assert_a_scaled_block_is_caught(m, context, idx)
    assert list(got.skipped.pair_index) == [len(SP_CASES)] and np.isnan(got.values[-1]).all()
    assert "not found" in got.skipped.reason.iloc[0]
    assert got.kept.tolist() == [True] * len(SP_CASES) + [False]


# --------------------------------------------------------------------------- real models


def check_model(m: _LoadedModel, cases) -> None:
    contexts = [c for c, _, _ in cases] + [MISSING[0]]
    words = [w for _, w, _ in cases] + [MISSING[1]]
    refs = [_direct(m, c, pos) for c, _, pos in cases]  # (states, tolerance)
    original = m.tokenizer.padding_side
    for side in ("right", "left"):
        m.tokenizer.padding_side = side
        try:
            got = embed_words(m, contexts, words, batch_size=len(contexts), cache=False, progress=False)
            one = embed_words(m, contexts, words, batch_size=1, cache=False, progress=False)
        finally:
            m.tokenizer.padding_side = original
        assert got.values.shape == (len(contexts), m.n_layers + 1, m.hidden_size) and got.values.dtype == np.float32
        for k, (_, _, pos) in enumerate(cases):
            # batched, one at a time and direct: three float32 computations, each within the bound of the exact one
            ref, tol = refs[k]
            _within(got.values[k], ref, tol)
            _within(got.values[k], one.values[k], tol)
            assert got.n_tokens[k] == len(pos)
        assert np.isnan(got.values[-1]).all() and list(got.skipped.pair_index) == [len(cases)]
    _assert_a_scaled_block_is_caught(m, cases[0][0], cases[0][2])


@pytest.mark.slow
def test_smollm2_byte_level_bpe_alignment_and_batching():
    m = load_model("smollm2-135m-instruct")
    check_model(m, SMOLLM2_CASES)
    # Layer 0 is the token embedding: check the located tokens by name.
    got = embed_words(m, ["This is Mary.", "an open-minded curiosity"], ["Mary", "open-minded"], layers=[0],
                      cache=False, progress=False)
    emb = m.model.get_input_embeddings().weight
    for k, tokens in enumerate([["ĠMary"], ["Ġopen", "-", "minded"]]):
        rows = emb[m.tokenizer.convert_tokens_to_ids(tokens)].detach().numpy()
        tol = mean_tolerance(rows)  # a lookup is exact; the mean of k rows takes at most k + 1 roundings
        _within(got.values[k, 0], rows.mean(0), tol)
        # companion: the rows scaled by 1 + 1e-5 (a changed embedding matrix) leave the bound (by 20x to 40x)
        changed = (rows * np.float32(1 + 1e-5)).mean(0)
        assert bound_ratio(changed, got.values[k, 0], tol) > 1, tokens


@pytest.mark.slow
def test_minilm_wordpiece_alignment_and_batching():
    m = load_model("minilm-l6")
    check_model(m, MINILM_CASES)


@pytest.mark.slow
def test_gemma_sentencepiece_tokenizer_when_installed():
    if not builtin_models.is_installed("gemma-3-270m"):
        pytest.skip("gemma-3-270m is not installed "
                    "(make test installs only smollm2-135m-instruct, minilm-l6 and the context generator)")
    tok = load_model("gemma-3-270m").tokenizer
    for context, word, pieces in [("This is Mary.", "Mary", ["▁Mary"]), ("MARY met Mary", "mary", None),
                                  ("an open-minded curiosity", "open-minded", None)]:
        enc = tok(context, return_offsets_mapping=True)
        idx = token_indices(enc["offset_mapping"], find_word(context, word))
        got = tok.convert_ids_to_tokens([enc["input_ids"][i] for i in idx])
        assert "".join(got).replace("▁", " ").strip().lower() == word.lower()
        assert pieces is None or got == pieces
        assert enc["offset_mapping"][0] == (0, 0) and 0 not in idx  # <bos>


@pytest.mark.slow
def test_cache_hit_computes_nothing_and_corrupt_shard_is_recomputed(tmp_path, monkeypatch):
    m = load_model("minilm-l6")
    monkeypatch.setenv("BIAS_CACHE_DIR", str(tmp_path))
    contexts = _seed_contexts()[:40] + [MISSING[0]]
    seed = load_seed_dictionary()
    words = [t for t, cs in zip(seed.term, seed.contexts) for _ in cs][:40] + [MISSING[1]]
    rows = []
    hook = m.backbone().register_forward_hook(lambda mod, args, kwargs, out: rows.append(kwargs["input_ids"].shape[0]),
                                              with_kwargs=True)
    try:
        # An "interrupted" run that finished only the first half...
        half = embed_words(m, contexts[:20], words[:20], batch_size=8, progress=False)
        assert sum(rows) == half.kept.sum()
        rows.clear()
        # ...is resumed: only the missing pairs are computed.
        first = embed_words(m, contexts, words, batch_size=8, progress=False)
        assert sum(rows) == first.kept.sum() - half.kept.sum() > 0
        np.testing.assert_array_equal(first.values[:20], half.values)
        rows.clear()
        again = embed_words(m, contexts, words, batch_size=8, progress=False)
        assert rows == []
        np.testing.assert_array_equal(again.values, first.values)
        assert again.skipped.equals(first.skipped)

        shards = sorted((tmp_path / "embeddings" / m.model_id).rglob("*.npz"))
        victim = shards[0]
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # truncated by a crash
        again = embed_words(m, contexts, words, batch_size=8, progress=False)
        assert 0 < sum(rows) <= 8
        # a recomputed pair (in another batch) that differs from its stored vector does so within its tokens' bound
        for k in np.flatnonzero(first.kept & (again.values != first.values).any(axis=(1, 2))):
            enc = m.tokenizer(contexts[k], return_offsets_mapping=True)
            idx = token_indices(enc["offset_mapping"], find_word(contexts[k], words[k]))
            _within(again.values[k], first.values[k], _direct(m, contexts[k], idx)[1])
    finally:
        hook.remove()


@pytest.mark.slow
def test_a_pair_asked_for_twice_in_one_call_is_computed_once(isolated_cache):
    """One term in two senses asks for the same (context, word) twice: one forward row, the same vector twice."""
    m = load_model("minilm-l6")
    seed = load_seed_dictionary()
    contexts = _seed_contexts()[:6]
    words = [t for t, cs in zip(seed.term, seed.contexts) for _ in cs][:6]
    rows = []
    hook = m.backbone().register_forward_hook(lambda mod, args, kwargs, out: rows.append(kwargs["input_ids"].shape[0]),
                                              with_kwargs=True)
    try:
        twice = embed_words(m, contexts + contexts[:3], words + words[:3], batch_size=4, progress=False)
    finally:
        hook.remove()
    assert twice.kept.all() and sum(rows) == 6
    np.testing.assert_array_equal(twice.values[6:], twice.values[:3])
    (index,) = isolated_cache.glob("embeddings/*/*/index.jsonl")
    assert sum(len(json.loads(line)["keys"]) for line in index.read_text().splitlines()) == 6


_TWO_RUNS_CHILD = """
import sys, time
from pathlib import Path
import numpy as np
from bias_utils.profiles.dictionaries import load_seed_dictionary
from bias_utils.models.embeddings import embed_words
from bias_utils.models.loading import load_model
d = load_seed_dictionary().head(300)
contexts = [list(c)[0] for c in d["contexts"]]
m = load_model("minilm-l6")
Path(sys.argv[1] + ".ready").touch()
while not Path(sys.argv[2]).exists():  # both start embedding together, whatever their load times were
    time.sleep(0.01)
emb = embed_words(m, contexts, d["term"].tolist(), progress=False)
np.save(sys.argv[1], np.asarray(emb.values))
"""


@pytest.mark.slow
def test_two_runs_on_one_cache_compute_once(tmp_path):
    """Two processes started together on an empty cache: the second waits for the first's lock and reads its
    vectors, so every pair is computed and stored once, and both get the same values."""
    import os
    import subprocess
    import sys
    import time

    from bias_utils.core import paths

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(paths.cache_dir() / "models", target_is_directory=True)
    env = {**os.environ, "BIAS_CACHE_DIR": str(cache), "PYTHONPATH": str(paths.ROOT)}
    go = tmp_path / "go"
    runs = [subprocess.Popen([sys.executable, "-c", _TWO_RUNS_CHILD, str(tmp_path / f"run{k}.npy"), str(go)],
                             env=env, stderr=subprocess.PIPE, text=True) for k in (0, 1)]
    while not all((tmp_path / f"run{k}.npy.ready").exists() for k in (0, 1)):
        assert all(r.poll() is None for r in runs), [r.communicate()[1] for r in runs]
        time.sleep(0.05)
    go.touch()
    errors = [r.communicate()[1] for r in runs]
    assert all(r.returncode == 0 for r in runs), errors
    (index,) = cache.glob("embeddings/*/*/index.jsonl")
    keys = [k for line in index.read_text().splitlines() for k in json.loads(line)["keys"]]
    assert len(keys) == len(set(keys)) > 0
    assert sum("waiting for another run" in e for e in errors) == 1
    np.testing.assert_array_equal(np.load(tmp_path / "run0.npy"), np.load(tmp_path / "run1.npy"))
