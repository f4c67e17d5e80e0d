"""The decoding loop: its golden sample, its per-token tables, its device placement.

``tests/fixtures/generation_golden.json`` was written by ``scripts/write_generation_golden.py`` with the loop as it
was before it moved onto the device (the commit it names): SmolLM2, 24 BOLD prompts, 40 tokens, the audit's
sampling settings, raw prompts (with the stored states), a chat template, and the screened output projection. On
the CPU the code under test must give the same completions byte for byte, and the same expected counts and stored
states within float32's bounds. Tests marked ``cuda`` run the same sample, the sampler and a model split between the
GPU and the CPU on a CUDA device, and skip elsewhere (``conftest.py``).

The counts and states are compared within bounds derived from float32's arithmetic (``float32_bounds``), the same
on every CPU and on CUDA (another vendor's kernels, or the GPU's, accumulate in another order); the companion test
shows that those bounds still catch a real change.
"""

from __future__ import annotations

import json
from pathlib import Path

import float32_bounds as bounds
import numpy as np
import pytest
import torch

from bias_utils.audit.bold_prompts import load_profession_prompts
from bias_utils.models import decoding
from bias_utils.models.embeddings import embed_words
from bias_utils.models.generation import completion_states, generate
from bias_utils.models.sampling import sample_step, sample_tokens

GOLDEN = Path(__file__).parent / "fixtures" / "generation_golden.json"
CASES = ("raw", "chat", "screened")


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def one_thread():
    """One CPU thread, as the sample was written: matrix kernels may accumulate in another order with more (and on
    a machine shared with other jobs two spinning threads are several times slower than one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _load(golden, device, **options):
    from bias_utils.models.loading import load_model

    model = load_model(golden["model"], device=device, **options)
    assert model.model_id == golden["model_id"], "the golden sample was written with other weights"
    return model


def _golden_table(golden, n_rows: int):
    return load_profession_prompts().iloc[::golden["step"]].head(n_rows)


def _run_golden_case(golden, model, case, cache, n_rows=None):
    """The case's completions and its stored states (``None`` without) from the code under test, for its first
    ``n_rows`` prompts (all: ``None``)."""
    want = golden["cases"][case]
    rows = want["rows"][:n_rows]
    table = _golden_table(golden, len(rows))
    assert table["prompt_id"].tolist() == [r["prompt_id"] for r in rows]
    prompts = table["prompt"].tolist()
    got = generate(model, prompts, prompt_ids=table["prompt_id"].tolist(), cache=cache, progress=False,
                   chat=want["chat"], screen=want["screen"], **golden["settings"])
    states = None
    if "states" in want:
        states = completion_states(model.model_id, prompts, got["completion"].tolist(), cache=cache)
    return got, states


def _projections(hidden_size: int) -> np.ndarray:
    """The file's projections: three random unit vectors, numpy seed 0 (scripts/write_generation_golden.py)."""
    vectors = np.random.default_rng(0).standard_normal((hidden_size, 3))
    return vectors / np.linalg.norm(vectors, axis=0)


def _count_rtol(golden, case, model, n_rows: int) -> np.ndarray:
    """Per stored row, the expected counts' relative bound (below), from one forward pass of the stored text with
    the model as it is."""
    rows = golden["cases"][case]["rows"][:n_rows]
    texts = [p + r["completion"] for p, r in zip(_golden_table(golden, len(rows))["prompt"], rows)]
    settings = golden["settings"]
    return bounds.log_probability_tolerance(bounds.logit_errors(model, texts, top=settings["top_k"]),
                                            settings["temperature"])


def _golden_violations(golden, case, model, got, states, vectors=None, rtol=None) -> dict[str, float]:
    """The largest ratio of |ours - stored| to its float32 bound, per compared quantity (at most 1 passes), over
    the rows whose completion is the stored one (``same``: their count; a changed token changes everything after).

    * expected counts: a sum over the steps of the probabilities of the lexicon's tokens, each of whose logs errs
      by at most twice its logit's bound over the temperature (``float32_bounds.log_probability_tolerance``), so a
      count errs by that much relative to itself (``rtol``: :func:`_count_rtol` of ``model`` when not given);
    * states: the mean hidden state at every layer times three unit vectors, within twice the componentwise bound
      of a state after that many blocks (``float32_bounds.projection_tolerance``)."""
    want = golden["cases"][case]
    rows = want["rows"][:len(got)]
    rtol = _count_rtol(golden, case, model, len(rows)) if rtol is None else rtol
    same = got["completion"].to_numpy() == np.array([r["completion"] for r in rows])
    out = {"same": int(same.sum())}
    for column in ("expected_male", "expected_female"):
        stored = np.array([r[column] for r in rows])
        ratio = np.abs(got[column].to_numpy() - stored) / (rtol * stored + np.finfo(float).tiny)
        out[column] = float(np.max(ratio[same]))
    vectors = _projections(model.hidden_size) if vectors is None else vectors
    prompts = _golden_table(golden, len(rows))["prompt"]
    n_tokens = max(len(model.tokenizer(p + r["completion"])["input_ids"]) for p, r in zip(prompts, rows))
    for part, values in want.get("states", {}).items():
        ours = states[part][same].astype(np.float64)
        tolerance = bounds.projection_tolerance(ours, vectors, model, n_tokens)
        out[part] = float(np.max(np.abs(ours @ vectors - np.array(values)[:len(rows)][same]) / tolerance))
    return out


def _assert_golden(golden, case, model, got, states):
    want = golden["cases"][case]
    rows = want["rows"]
    assert got["completion"].tolist() == [r["completion"] for r in rows]
    assert got["n_tokens"].tolist() == [r["n_tokens"] for r in rows]
    assert got["finish_reason"].tolist() == [r["finish_reason"] for r in rows]
    violations = _golden_violations(golden, case, model, got, states)
    assert violations.pop("same") == len(rows) and max(violations.values()) <= 1, violations


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_completions_counts_and_states_equal_the_golden_sample(golden, case, tmp_path):
    rows = golden["cases"][case]["rows"]
    # The sample has teeth: some completions start with whitespace and some rows carry real expected mass.
    assert case == "chat" or any(r["completion"][:1].isspace() for r in rows)
    assert max(r["expected_male"] + r["expected_female"] for r in rows) > 0.1
    model = _load(golden, "cpu")
    got, states = _run_golden_case(golden, model, case, tmp_path)
    _assert_golden(golden, case, model, got, states)


@pytest.mark.slow
def test_the_golden_bounds_catch_a_real_change(golden, tmp_path):
    """The bounds above let float32's rounding through, not a change of the computation: on the raw case's first
    four prompts, one layer's MLP output matrix scaled by 1.001 and the projections rotated by 1e-4 rad keep every
    completion and break the states' bound. The counts' bound (1% to 2% of a count) is wider than what the byte
    equality of the completions catches first: the temperature raised by 0.2% changes a completion."""
    model = _load(golden, "cpu")
    got, states = _run_golden_case(golden, model, "raw", tmp_path / "same", n_rows=4)
    rtol = _count_rtol(golden, "raw", model, 4)  # the unchanged model's bound, for every run below
    unchanged = _golden_violations(golden, "raw", model, got, states, rtol=rtol)
    assert unchanged.pop("same") == 4 and max(unchanged.values()) <= 1, unchanged

    with bounds.scaled(bounds.first_mlp_output(model).weight, 1.001):
        scaled = _golden_violations(golden, "raw", model, *_run_golden_case(golden, model, "raw",
                                                                            tmp_path / "scaled", n_rows=4), rtol=rtol)
    assert scaled["same"] == 4 and min(scaled["prompt"], scaled["completion"]) > 1, scaled

    turned = bounds.rotated(_projections(model.hidden_size).T, 1e-4, seed=1).T
    rotated = _golden_violations(golden, "raw", model, got, states, turned, rtol=rtol)
    assert min(rotated["prompt"], rotated["completion"]) > 1, rotated

    hotter = {**golden, "settings": {**golden["settings"], "temperature": golden["settings"]["temperature"] * 1.002}}
    warm = _golden_violations(golden, "raw", model, *_run_golden_case(hotter, model, "raw", tmp_path / "hot",
                                                                      n_rows=4), rtol=rtol)
    assert warm["same"] < 4, warm


# --------------------------------------------------------------------------- per-token tables


def _kinds_from_text(tokenizer, prompt_ids, new_ids) -> list[int]:
    """What the previous loop did at every step: decode prompt + completion so far, and classify the token by the
    text it added (lead: the text so far is only whitespace and leading punctuation; blank: it added whitespace
    or nothing; else word)."""
    head = tokenizer.decode(prompt_ids, skip_special_tokens=True)
    # every prefix decoded in one batch call: the same texts as one decode per step, without its per-call overhead
    fulls = tokenizer.batch_decode([prompt_ids + new_ids[:j + 1] for j in range(len(new_ids))],
                                   skip_special_tokens=True)
    kinds, before = [], ""
    for j, full in enumerate(fulls):
        text = full[len(head):] if full.startswith(head) else tokenizer.decode(new_ids[:j + 1],
                                                                               skip_special_tokens=True)
        piece, before = text[len(before):], text
        lead = not text.lstrip().lstrip(decoding._LEADING_PUNCTUATION).lstrip()
        kinds.append(decoding._LEAD if lead else decoding._BLANK if not piece.strip() else decoding._WORD)
    return kinds


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "gemma-3-270m"])
def test_token_tables_classify_tokens_as_decoding_the_text_did(golden, name):
    """The tables (computed once per tokenizer) give every token of real completions the kind that decoding the
    whole text at every step gave, and the word-start rule that decoding each token gave; the one known difference
    is a character split across tokens (the text decoding called its completing tokens blank)."""
    from bias_utils.models import builtin_models
    from bias_utils.models.loading import load_tokenizer

    if not builtin_models.is_installed(name):
        pytest.skip(f"{name} is not installed (python -m bias_utils.models install {name})")
    # the tokenizer alone, no weights: the tables of ids past it (the output projection's padding rows) are empty
    # text, and no text's tokens reach them
    tok = load_tokenizer(name)
    tables = decoding.token_tables(tok, len(tok))
    texts = [r["completion"] for case in golden["cases"].values() for r in case["rows"]]
    texts += ["\n\n, - \"Quoted\" cafe and naive", "  ...) and then 'he' said", " \t-\n--x", ",\n\n", "\n- **Bold**",
              "“Quoted” café 日本語 🙂"]
    prompts = load_profession_prompts()["prompt"].iloc[::500].tolist()
    seen = set()
    for i, text in enumerate(texts):
        prompt_ids = tok(prompts[i % len(prompts)])["input_ids"]
        new_ids = tok(text, add_special_tokens=False)["input_ids"]
        lead = torch.zeros((), dtype=torch.long)
        start = bool(tables.starts_word(torch.tensor(prompt_ids[-1:]), torch.ones(1, dtype=torch.float64)))
        for t, want in zip(new_ids, _kinds_from_text(tok, prompt_ids, new_ids)):
            lead = tables.lead[lead, t]
            ours = decoding._LEAD if lead != decoding._PAST else decoding._BLANK if tables.blank[t] else decoding._WORD
            if ours != want:
                assert "\ufffd" in tok.decode([t]) and (want, ours) == (decoding._BLANK, decoding._WORD), (text, t)
            seen.add(want)
            alone = tok.decode([t])
            want_start = start if not alone else not (alone[-1].isalnum() or alone[-1] == "_")
            start = bool(tables.starts_word(torch.tensor([t]), torch.tensor([float(start)])))
            assert start == want_start, (text, t)
    assert seen == {decoding._LEAD, decoding._BLANK, decoding._WORD}


# --------------------------------------------------------------------------- sampler without host waits


def test_sample_step_flags_a_top_k_tie_that_sample_tokens_rescans():
    """A tie at the k-th logit wider than the spare candidates: ``sample_step`` says it is unsure (without asking
    the device), and ``sample_tokens`` draws from the whole tie; without such a tie it is sure and draws the same."""
    wide = torch.zeros(1, 40)
    wide[0, 7], wide[0, 10:25] = 3.0, 2.0
    tie = torch.zeros(1, 40, dtype=torch.bool)
    tie[0, 10:25] = True
    u = torch.tensor([0.9], dtype=torch.float64)
    _, partial, unsure = sample_step(wide, u, 0.7, 1.0, top_k=2, groups=tie)
    assert bool(unsure)
    exact, mass = sample_tokens(wide, u, 0.7, 1.0, top_k=2, groups=tie)
    share = 15 * np.exp(-1 / 0.7) / (1 + 15 * np.exp(-1 / 0.7))  # the 15 tied tokens against the top one
    np.testing.assert_allclose(mass.item(), share, rtol=1e-12)
    assert partial.item() < share and 10 <= exact.item() < 25  # u = 0.9 > 1 - share: a tied token
    u = torch.tensor([0.9, 0.95], dtype=torch.float64)
    plain = torch.arange(40, dtype=torch.float32).repeat(2, 1)
    ids, mass, unsure = sample_step(plain, u, 0.7, 0.9, top_k=5, groups=torch.ones(1, 40, dtype=torch.bool))
    assert not bool(unsure)
    assert ids.tolist() == sample_tokens(plain, u, 0.7, 0.9, top_k=5).tolist()
    np.testing.assert_allclose(mass.numpy(), 1.0)


# --------------------------------------------------------------------------- models larger than the device


def _assert_same_decoding(whole, split, n_prompts: int, n_tokens: int, same_kernels: bool) -> None:
    """The split model writes the whole one's completions, with its expected counts: equal where both run the same
    kernels on the same inputs (the CPU's layers, wherever the weights wait), else within float32's bound."""
    prompts = load_profession_prompts()["prompt"].iloc[::997].head(n_prompts).tolist()
    a = generate(whole, prompts, max_new_tokens=n_tokens, cache=False, progress=False)
    b = generate(split, prompts, max_new_tokens=n_tokens, cache=False, progress=False)
    assert a["completion"].tolist() == b["completion"].tolist()
    counts = ["expected_male", "expected_female"]
    if same_kernels:
        np.testing.assert_array_equal(a[counts], b[counts])
        return
    texts = [p + c for p, c in zip(prompts, a["completion"])]
    rtol = bounds.log_probability_tolerance(bounds.logit_errors(whole, texts), temperature=0.7)  # generate's
    assert (np.abs(a[counts].to_numpy() - b[counts].to_numpy()) <= rtol[:, None] * a[counts].to_numpy()).all()


@pytest.mark.slow
def test_a_model_split_by_max_memory_decodes_and_embeds_as_the_whole_one(golden):
    """``max_memory`` forces accelerate's ``device_map="auto"``: on this CPU, the first layers stay in memory and
    the rest wait on disk. The split model writes the same completions and expected counts, and gives the same
    word embeddings, as the whole model."""
    whole = _load(golden, "cpu")
    split = _load(golden, "auto", max_memory={"cpu": "250MB"})
    places = set(split.source["device_map"].values())
    assert {"cpu", "disk"} <= places, places
    assert split.source["device_choice"].startswith("device_map=auto fp32")
    _assert_same_decoding(whole, split, n_prompts=4, n_tokens=16, same_kernels=True)
    contexts, words = ["The nurse said she was tired.", "My uncle is a carpenter."], ["nurse", "carpenter"]
    np.testing.assert_array_equal(embed_words(whole, contexts, words, cache=False, progress=False).values,
                                  embed_words(split, contexts, words, cache=False, progress=False).values)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_cuda_float32_gives_the_golden_sample(golden, case, tmp_path):
    """On CUDA in float32 (the default): the CPU's completions, and its expected counts and state sums within the
    same float32 bounds (the GPU's kernels are one more accumulation order), everything on the device."""
    model = _load(golden, "cuda")
    assert model.device.type == "cuda" and model.dtype == torch.float32
    got, states = _run_golden_case(golden, model, case, tmp_path)
    _assert_golden(golden, case, model, got, states)


@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_sampler_draws_what_the_cpu_draws(golden):
    """The sampler on CUDA, fed the CPU's logits and uniforms: the same tokens and the same lexicon mass."""
    from bias_utils.models.decoding import _word_start_sets, lexicon_token_ids

    model = _load(golden, "cpu")
    prompts = load_profession_prompts()["prompt"].iloc[::397].head(16).tolist()
    model.tokenizer.padding_side = "left"
    enc = model.tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        logits = model.model(**enc).logits[:, -1].float()
    groups = _word_start_sets(lexicon_token_ids(model.tokenizer)[1], logits.shape[1])
    u = torch.rand(len(prompts), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for top_p, top_k in ((0.9, 50), (0.95, None), (1.0, 7)):
        cpu_ids, cpu_mass = sample_tokens(logits, u, 0.7, top_p, top_k, groups=groups)
        gpu_ids, gpu_mass = sample_tokens(logits.cuda(), u.cuda(), 0.7, top_p, top_k, groups=groups.cuda())
        step_ids, step_mass, _ = sample_step(logits.cuda(), u.cuda(), 0.7, top_p, top_k, groups=groups.cuda())
        assert gpu_ids.device.type == "cuda"
        assert cpu_ids.tolist() == gpu_ids.tolist() == step_ids.tolist()
        np.testing.assert_allclose(gpu_mass.cpu().numpy(), cpu_mass.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(step_mass.cpu().numpy(), cpu_mass.numpy(), rtol=0, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_model_split_between_gpu_and_cpu_decodes_as_the_whole_one(golden):
    """A model larger than its share of the GPU (forced by ``max_memory``): accelerate keeps some layers on the
    CPU and runs them on the GPU; completions and expected counts are those of the model on the GPU whole."""
    whole = _load(golden, "cuda")
    split = _load(golden, "auto", max_memory={0: "150MiB", "cpu": "8GiB"})
    places = set(split.source["device_map"].values())
    assert "cpu" in places and places - {"cpu", "disk"}, places
    assert split.device.type == "cuda"
    _assert_same_decoding(whole, split, n_prompts=8, n_tokens=24, same_kernels=False)
