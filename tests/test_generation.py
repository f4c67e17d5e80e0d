"""Generation engine: exact sampler, determinism, prompt stripping, chat, cache/resume after SIGKILL,
and the OpenAI-compatible backend against a real local llama.cpp server (xllamacpp).

Prompts are a fixed slice of the real BOLD profession prompts; the model is the
built-in SmolLM2-135M-Instruct. Golden values come from independent computations:
numpy softmax/top-p, transformers' own warpers and ``model.generate``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from bias_utils.audit import bold
from bias_utils.audit.bold_prompts import load_profession_prompts
from bias_utils.book import runs
from bias_utils.core import lexicon, paths
from bias_utils.models.decoding import lexicon_token_ids
from bias_utils.models.endpoints import OpenAIEndpoint
from bias_utils.models.generation import generate
from bias_utils.models.sampling import ScreenedHead, _nucleus, row_seed, sample_tokens
from bias_utils.models.serving import llama_server

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def bold_slice():
    """Eight BOLD prompts of different lengths, in a fixed order (every 997th row)."""
    df = load_profession_prompts().iloc[::997].head(8)
    return df["prompt"].tolist(), df["prompt_id"].tolist()


@pytest.fixture(scope="module")
def smol():
    from bias_utils.models.loading import load_model

    return load_model(MODEL)


@pytest.fixture(scope="module")
def server(smol):
    # the worker's share of the cores (tests/conftest.py), not every core: llama.cpp's threads wait for each other
    # spinning, and beside one busy core the same-seed test took 8.9 s with two threads, 4.5 s with one (60 s in a
    # make test, 2.8 s alone; benchmarks/README.md)
    with llama_server(smol.gguf_path, n_parallel=4, ctx_per_slot=256, n_threads=torch.get_num_threads()) as srv:
        yield srv


@pytest.fixture(params=["transformers", "openai"])
def backend(request, smol):
    """The same generation tests run on both backends."""
    if request.param == "transformers":
        return smol
    return OpenAIEndpoint(request.getfixturevalue("server").base_url, parallel=4)


# --------------------------------------------------------------------------- input validation (no model)


def test_empty_prompt_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"empty prompt.*\['b'\]"):
        generate(MODEL, ["A nurse is", "  "], prompt_ids=["a", "b"], cache=False)


def test_duplicate_ids_and_bad_parameters_are_errors():
    with pytest.raises(ValueError, match="unique"):
        generate(MODEL, ["x", "y"], prompt_ids=[1, 1], cache=False)
    with pytest.raises(ValueError, match="top_p"):
        generate(MODEL, ["x"], top_p=0, cache=False)
    with pytest.raises(ValueError, match="mode"):
        OpenAIEndpoint("http://127.0.0.1:1", mode="edit")
    with pytest.raises(ValueError, match="top_k"):
        generate(MODEL, ["x"], top_k=0, cache=False)


def test_default_sampling_is_the_audits_generate_call():
    """temperature 0.7, top-p 0.9 as the audit passed them, plus transformers' default top_k=50 it applied."""
    from transformers import GenerationConfig

    assert GenerationConfig._get_default_generation_params()["top_k"] == 50
    for fn in (generate, bold.run_audit):
        params = inspect.signature(fn).parameters
        assert (params["temperature"].default, params["top_p"].default, params["top_k"].default) == (0.7, 0.9, 50)
    declared = runs.declared_parameters(paths.ROOT / "notebooks" / "06_bold_audit.ipynb")
    assert (declared["temperature"], declared["top_p"], declared["top_k"]) == ("0.7", "0.9", "50")


# --------------------------------------------------------------------------- exact sampler


def _reference_nucleus(logits: np.ndarray, temperature: float, top_p: float):
    """Direct float64 softmax, full sort, keep tokens whose preceding mass is < top_p."""
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    before = np.cumsum(p[order]) - p[order]
    keep = before < top_p
    keep[0] = True
    return order[keep], p, before


@pytest.mark.slow
@pytest.mark.parametrize("temperature,top_p", [(0.7, 0.9), (1.6, 0.95)])
def test_sampler_matches_direct_softmax_top_p(smol, bold_slice, temperature, top_p):
    prompts, _ = bold_slice
    enc = smol.tokenizer(prompts[0], return_tensors="pt")
    with torch.inference_mode():
        logits = smol.model(**enc).logits[0, -1].float()
    kept_ref, p_ref, before = _reference_nucleus(logits.numpy(), temperature, top_p)
    # the boundary must not sit within rounding distance of top_p, else "exact" is undefined
    assert np.min(np.abs(before - top_p)) > 1e-9

    ids, probs = _nucleus(logits[None], temperature, top_p)
    mine = ids[0][probs[0] > 0].numpy()
    assert set(mine.tolist()) == set(kept_ref.tolist())
    np.testing.assert_allclose(probs[0][probs[0] > 0].numpy(), p_ref[mine], rtol=1e-6)

    # the same set as transformers' own temperature + top-p warpers
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    warped = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(temperature)(None, logits[None].clone()))
    assert set(torch.isfinite(warped[0]).nonzero().squeeze(1).tolist()) == set(kept_ref.tolist())

    # every quantile of the draw against the float64 inverse CDF of the renormalised nucleus: stratified uniforms in
    # one call, each draw checked exactly (5,000 random draws and a chi-square took 25 calls, each widening to the
    # whole vocabulary at a temperature of 1.6); tied probabilities may come in either order, so the drawn token's
    # probability is compared (to float32 rounding of the scaled logits), not its id
    n = 500
    u = (np.arange(n) + 0.5) / n
    drawn = sample_tokens(logits[None].expand(n, -1).contiguous(), torch.from_numpy(u), temperature, top_p).numpy()
    cdf = np.cumsum(p_ref[kept_ref]) / p_ref[kept_ref].sum()
    expected = kept_ref[np.minimum(np.searchsorted(cdf, u, side="right"), len(kept_ref) - 1)]
    away = np.abs(u[:, None] - cdf[None]).min(axis=1) > 1e-9  # a uniform on a boundary may round either way
    assert away.mean() > 0.99 and set(drawn.tolist()) <= set(kept_ref.tolist())
    np.testing.assert_allclose(p_ref[drawn[away]], p_ref[expected[away]], rtol=1e-5)


def _reference_top_k_nucleus(logits: np.ndarray, temperature: float, top_p: float, top_k: int):
    """Float64: the top_k largest scaled logits, softmax over them, then the top-p rule on that distribution."""
    z = logits.astype(np.float64) / temperature
    order = np.argsort(-z, kind="stable")[:top_k]
    p = np.exp(z[order] - z[order[0]])
    p /= p.sum()
    keep = (np.cumsum(p) - p) < top_p
    keep[0] = True
    return order[keep], p[keep]


def _transformers_warped(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
    """transformers' own warpers in the order ``_get_logits_processor`` applies them."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    scores = logits[None].clone()
    for warper in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k), TopPLogitsWarper(top_p)):
        scores = warper(None, scores)
    return scores[0]


@pytest.mark.slow
@pytest.mark.parametrize("temperature,top_p,top_k", [(0.7, 0.9, 50), (1.6, 0.95, 50), (1.0, 1.0, 7)])
def test_top_k_sampler_matches_float64_and_transformers(smol, bold_slice, temperature, top_p, top_k):
    prompts, _ = bold_slice
    enc = smol.tokenizer(prompts[0], return_tensors="pt")
    with torch.inference_mode():
        logits = smol.model(**enc).logits[0, -1].float()
    kept_ref, p_ref = _reference_top_k_nucleus(logits.numpy(), temperature, top_p, top_k)

    ids, probs = _nucleus(logits[None], temperature, top_p, top_k=top_k)
    mine = probs[0] > 0
    assert ids[0][mine].tolist() == kept_ref.tolist()  # same tokens, same descending order
    # probabilities of the top-k distribution (before the nucleus cut), as transformers' TopP sees them
    np.testing.assert_allclose(probs[0][mine].numpy(), p_ref, rtol=1e-9)

    warped = _transformers_warped(logits, temperature, top_p, top_k)
    assert set(torch.isfinite(warped).nonzero().squeeze(1).tolist()) == set(kept_ref.tolist())
    theirs = torch.softmax(warped.double(), dim=-1)[ids[0][mine]].numpy()
    np.testing.assert_allclose(probs[0][mine].numpy() / p_ref.sum(), theirs, rtol=1e-5)

    gen = torch.Generator().manual_seed(0)
    batch = logits[None].expand(64, -1).contiguous()
    draws = sample_tokens(batch, torch.rand(64, generator=gen, dtype=torch.float64), temperature, top_p, top_k)
    assert set(draws.tolist()) <= set(kept_ref.tolist())


@pytest.mark.slow
def test_top_k_50_binds_at_the_wide_setting(smol, bold_slice):
    """At T=1.6, top-p 0.95 the nucleus alone holds more than 50 tokens, so top_k=50 changes the distribution."""
    enc = smol.tokenizer(bold_slice[0][0], return_tensors="pt")
    with torch.inference_mode():
        logits = smol.model(**enc).logits[0, -1].float()
    with_k = (_nucleus(logits[None], 1.6, 0.95, top_k=50)[1] > 0).sum().item()
    without = (_nucleus(logits[None], 1.6, 0.95)[1] > 0).sum().item()
    assert with_k <= 50 < without


def test_top_k_keeps_ties_at_the_boundary_like_transformers():
    """Ties with the k-th score stay in (TopKLogitsWarper compares with ``>=``); a hand-made row with a tie."""
    from transformers import TopKLogitsWarper

    logits = torch.tensor([[3.0, 1.0, 2.0, 2.0, 0.5, 2.0]])
    ids, probs = _nucleus(logits, 1.0, 1.0, top_k=2)
    kept = set(ids[0][probs[0] > 0].tolist())
    assert kept == set(torch.isfinite(TopKLogitsWarper(2)(None, logits.clone())[0]).nonzero().squeeze(1).tolist())
    assert kept == {0, 2, 3, 5}
    e = np.exp([3.0, 2.0, 2.0, 2.0])
    np.testing.assert_allclose(sorted(probs[0][probs[0] > 0].tolist()), sorted(e / e.sum()), rtol=1e-12)
    # a tie wider than the spare candidates: the whole vocabulary is compared
    wide = torch.zeros(1, 40)
    wide[0, 7], wide[0, 10:25] = 3.0, 2.0
    ids, probs = _nucleus(wide, 0.7, 1.0, top_k=2)
    kept = set(ids[0][probs[0] > 0].tolist())
    assert kept == set(torch.isfinite(TopKLogitsWarper(2)(None, wide.clone() / 0.7)[0]).nonzero().squeeze(1).tolist())
    assert kept == {7, *range(10, 25)}


@pytest.mark.slow
def test_widening_path_is_exercised(smol, bold_slice):
    """At T=1.6, top-p 0.95 the nucleus is larger than the first 64 candidates (the case above must widen)."""
    enc = smol.tokenizer(bold_slice[0][0], return_tensors="pt")
    with torch.inference_mode():
        logits = smol.model(**enc).logits[0, -1].float()
    assert len(_reference_nucleus(logits.numpy(), 1.6, 0.95)[0]) > 64


# --------------------------------------------------------------------------- generation on both backends


@pytest.mark.slow
def test_same_seed_identical_different_seed_differs(backend, bold_slice):
    prompts, ids = bold_slice
    kw = dict(prompt_ids=ids[:4], n_samples=2, max_new_tokens=12, cache=False, progress=False)
    a = generate(backend, prompts[:4], seed=3, **kw)
    b = generate(backend, prompts[:4], seed=3, **kw)
    c = generate(backend, prompts[:4], seed=4, **kw)
    assert list(a.columns) == ["prompt_id", "sample", "prompt", "completion", "n_tokens", "finish_reason",
                               "expected_male", "expected_female"]
    # a server returns no sampling distribution, so no expected counts
    assert a[["expected_male", "expected_female"]].isna().all().all() == isinstance(backend, OpenAIEndpoint)
    assert (a[["expected_male", "expected_female"]].fillna(0) >= 0).all().all()
    assert a.equals(b)
    assert (a["completion"] != c["completion"]).sum() >= 4
    # two samples of the same prompt are different draws
    pivot = a.pivot(index="prompt_id", columns="sample", values="completion")
    assert (pivot[0] != pivot[1]).sum() >= 3
    assert a[["prompt_id", "sample"]].values.tolist() == [[i, s] for i in ids[:4] for s in (0, 1)]


@pytest.mark.slow
def test_length_finish_counts_tokens(backend, bold_slice):
    prompts, ids = bold_slice
    df = generate(backend, prompts[:3], prompt_ids=ids[:3], max_new_tokens=8, temperature=0.7, seed=1, cache=False,
                  progress=False)
    long = df[df["finish_reason"] == "length"]
    assert len(long) >= 2
    assert (long["n_tokens"] == 8).all()
    assert set(df["finish_reason"]) <= {"stop", "length"}


@pytest.mark.slow
def test_chat_short_answer_stops_without_template_tokens(backend):
    df = generate(backend, ["Answer with one word: what colour is snow?"], chat=True, max_new_tokens=40,
                  temperature=0, cache=False, progress=False)
    row = df.iloc[0]
    assert row["finish_reason"] == "stop" and 0 < row["n_tokens"] < 40
    assert "<|im_" not in row["completion"] and "assistant" not in row["completion"]


@pytest.mark.slow
def test_cache_resume_and_parameter_keys(backend, bold_slice, tmp_path):
    prompts, ids = bold_slice
    kw = dict(prompt_ids=ids[:4], n_samples=2, max_new_tokens=8, seed=5, cache=tmp_path, progress=False)
    full = generate(backend, prompts[:4], **kw)
    (rows_file,) = tmp_path.glob("*/rows.jsonl")
    lines = rows_file.read_text().splitlines(keepends=True)
    assert len(lines) == 8
    # a run that died after three rows, in the middle of writing the fourth
    rows_file.write_text("".join(lines[:3]) + lines[3][:20])
    resumed = generate(backend, prompts[:4], **kw)
    pd.testing.assert_frame_equal(resumed, full)
    keys = [json.loads(line)["row_key"] for line in rows_file.read_text().splitlines()]
    assert len(keys) == 8 == len(set(keys))
    # another parameter → another cache entry, not a reuse
    generate(backend, prompts[:1], prompt_ids=ids[:1], max_new_tokens=8, seed=5, top_p=0.8, cache=tmp_path,
             progress=False)
    assert len(list(tmp_path.glob("*/rows.jsonl"))) == 2
    # top_k=None is another key too; its key carries no top_k, like caches written before top-k existed
    generate(backend, prompts[:1], prompt_ids=ids[:1], max_new_tokens=8, seed=5, top_k=None, cache=tmp_path,
             progress=False)
    metas = [json.loads(m.read_text()) for m in tmp_path.glob("*/meta.json")]
    assert len(metas) == 3
    assert {m.get("top_k") for m in metas if m["top_p"] == 0.9} == {None, 50}


# --------------------------------------------------------------------------- transformers backend specifics


def test_cpu_sampling_runs_on_the_pinned_threads_whatever_the_process_count(smol, bold_slice, tmp_path, monkeypatch):
    """The decoding loop's forward passes see GENERATION_THREADS torch threads (so the text does not depend on the
    machine's cores or the build's lanes), the caller's count comes back after, and another count is another
    cache entry."""
    from bias_utils.models import generation

    prompts, ids = bold_slice
    seen: list[int] = []
    hook = smol.model.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    kw = dict(prompt_ids=ids[:2], max_new_tokens=3, cache=tmp_path, progress=False)
    try:
        torch.set_num_threads(2)
        generate(smol, prompts[:2], **kw)
        assert seen and set(seen) == {generation.GENERATION_THREADS} == {1}
        assert torch.get_num_threads() == 2
        seen.clear()
        monkeypatch.setenv("BIAS_GENERATION_THREADS", "2")
        generate(smol, prompts[:2], **kw)
        assert set(seen) == {2}
        monkeypatch.setenv("BIAS_GENERATION_THREADS", "two")
        with pytest.raises(ValueError, match="BIAS_GENERATION_THREADS must be a positive integer"):
            generate(smol, prompts[:2], **kw)
    finally:
        hook.remove()
        torch.set_num_threads(before)
    metas = [json.loads(m.read_text()) for m in tmp_path.glob("*/meta.json")]
    assert sorted(m["cpu_threads"] for m in metas) == [1, 2]


def test_a_result_setting_enters_the_run_key_and_only_when_set(monkeypatch):
    planned = runs.Run(label="m/06", notebook=paths.ROOT / "notebooks" / "06_bold_audit.ipynb",
                       output=paths.cache_dir() / "x.ipynb", parameters={})
    monkeypatch.delenv("BIAS_GENERATION_THREADS", raising=False)
    default = runs.Environment.current()
    assert default.settings == {}
    monkeypatch.setenv("BIAS_GENERATION_THREADS", "4")
    four = runs.Environment.current()
    assert four.settings == {"BIAS_GENERATION_THREADS": "4"}
    assert planned.key(default) != planned.key(four)


@pytest.mark.slow
def test_greedy_batched_matches_model_generate(smol, bold_slice):
    """Left padding, positions, KV cache and prompt stripping: greedy output equals HF generate per prompt."""
    prompts, ids = bold_slice
    ours = generate(smol, prompts[:4], prompt_ids=ids[:4], max_new_tokens=10, temperature=0, batch_size=4,
                    cache=False, progress=False)
    tok = smol.tokenizer
    for prompt, (_, row) in zip(prompts[:4], ours.iterrows()):
        enc = tok(prompt, return_tensors="pt")
        out = smol.model.generate(**enc, do_sample=False, max_new_tokens=10, pad_token_id=tok.pad_token_id)
        new = out[0, enc["input_ids"].shape[1]:].tolist()
        stopped = new[-1] in ({smol.model.generation_config.eos_token_id} | {tok.eos_token_id})
        new = new[:-1] if stopped else new
        assert row["completion"] == tok.decode(new, skip_special_tokens=True)
        assert row["n_tokens"] == len(new)
        assert row["finish_reason"] == ("stop" if stopped else "length")


@pytest.mark.slow
def test_chat_template_is_applied_like_model_generate(smol):
    question = "Name one profession."
    ours = generate(smol, [question], chat=True, max_new_tokens=12, temperature=0, cache=False, progress=False)
    enc = smol.tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                             return_tensors="pt", return_dict=True)
    out = smol.model.generate(**enc, do_sample=False, max_new_tokens=12, pad_token_id=smol.tokenizer.pad_token_id)
    expected = smol.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert ours["completion"].iloc[0] == expected


@pytest.mark.slow
def test_chat_without_template_is_an_error(smol):
    base = dataclasses.replace(smol, has_chat_template=False)
    with pytest.raises(ValueError, match="no chat template"):
        generate(base, ["A nurse is"], chat=True, cache=False)


@pytest.mark.slow
def test_batch_size_reproducibility(smol, bold_slice):
    """Across batch sizes the random draws are the same (per-row streams), only float rounding of the
    logits differs with the batch shape: completions mostly agree (>= 80 %), which is all the docs promise."""
    prompts, ids = bold_slice
    kw = dict(prompt_ids=ids[:6], max_new_tokens=16, seed=11, cache=False, progress=False)
    one = generate(smol, prompts[:6], batch_size=1, **kw)
    six = generate(smol, prompts[:6], batch_size=6, **kw)
    assert (one["completion"] == six["completion"]).mean() >= 0.8


# --------------------------------------------------------------------------- acceptance: SIGKILL + resume

_CHILD = """
import json, sys
from bias_utils.models.generation import generate
from bias_utils.models.loading import load_model
prompts, ids = json.loads(sys.argv[1])
generate(load_model(sys.argv[2]), prompts, prompt_ids=ids, max_new_tokens=16, seed=7, batch_size=2,
          cache=sys.argv[3], progress=False)
"""


def _child_mid_run(tmp_path):
    """A child process generating 16 audit prompts into ``tmp_path``, returned once it has stored 2 rows (and
    still runs): ``(child, prompts, ids)``."""
    df = load_profession_prompts().iloc[::613].head(16)
    prompts, ids = df["prompt"].tolist(), df["prompt_id"].tolist()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(paths.ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps([prompts, ids]), MODEL, str(tmp_path)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.poll() is None:
        files = list(tmp_path.glob("*/rows.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert child.poll() is None, f"the child ended too early: {child.stderr.read().decode()[-2000:]}"
    return child, prompts, ids


@pytest.mark.slow
def test_sigkill_then_resume_loses_and_duplicates_nothing(smol, tmp_path):
    child, prompts, ids = _child_mid_run(tmp_path)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    (rows_file,) = tmp_path.glob("*/rows.jsonl")
    before = len(rows_file.read_text().splitlines())
    assert 2 <= before < 16

    resumed = generate(smol, prompts, prompt_ids=ids, max_new_tokens=16, seed=7, batch_size=2, cache=tmp_path,
                       progress=False)
    records = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert sorted((r["prompt_id"], r["sample"]) for r in records) == sorted((i, 0) for i in ids)
    uninterrupted = generate(smol, prompts, prompt_ids=ids, max_new_tokens=16, seed=7, batch_size=2, cache=False,
                             progress=False)
    pd.testing.assert_frame_equal(resumed, uninterrupted)


@pytest.fixture(scope="module")
def smol_hidden(smol, bold_slice):
    """Last-layer hidden states of SmolLM2 at every position of the BOLD slice (real decoding states)."""
    with torch.inference_mode():
        states = [smol.model.base_model(**smol.tokenizer(p, return_tensors="pt")).last_hidden_state[0]
                  for p in bold_slice[0]]
    return torch.cat(states)


@pytest.mark.slow
def test_screen_bound_covers_the_bfloat16_error_on_every_token(smol, smol_hidden):
    """ScreenedHead's worst-case bound holds for all 49,152 tokens at every real hidden state (float64 reference)."""
    screen = ScreenedHead.for_model(smol.model)
    h = smol_hidden
    exact = h.double().numpy() @ screen.weight.double().numpy().T
    approx = (h.to(torch.bfloat16) @ screen.low.T).double().numpy()
    bound = screen.slack(h).numpy()[:, None] + 2.0 ** -8 * np.abs(approx) * (1 + 2.0 ** -7)
    err = np.abs(exact - approx)
    assert (err <= bound).all()
    assert err.max() > 0.01  # the bfloat16 scores really are approximate, so the check has teeth


@pytest.mark.slow
def test_screened_sampling_draws_what_full_logits_draw(smol, smol_hidden):
    """Every stage (narrow candidates, wider ones, the full float32 fallback) gives sample_tokens' draw."""
    weight = smol.model.get_output_embeddings().weight.detach()
    screen = ScreenedHead(weight, widths=(100, 200))  # on these states: 8, 62 and 3 rows per stage
    h = smol_hidden
    gen = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        full = h @ weight.T
        for temperature, top_p in [(0.7, 0.9), (1.6, 0.95)]:
            u = torch.rand(h.shape[0], generator=gen, dtype=torch.float64)
            expected = sample_tokens(full, u, temperature, top_p, 50)
            assert torch.equal(screen.sample(h, u, temperature, top_p, 50), expected)
    assert min(screen.rows_by_stage.values()) > 0


@pytest.mark.slow
def test_screen_keeps_completions_and_is_in_the_cache_key(smol, bold_slice, tmp_path):
    prompts, ids = bold_slice
    kw = dict(prompt_ids=ids, seed=3, max_new_tokens=24, progress=False, cache=tmp_path)
    screened = generate(smol, prompts, screen=True, **kw)
    plain = generate(smol, prompts, screen=False, **kw)
    assert screened["completion"].tolist() == plain["completion"].tolist()
    # two keys (speed.json aside): a screened cache is never read as an unscreened one
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2
    with pytest.raises(ValueError, match="screen"):
        generate(smol, prompts, screen="yes", **kw)


# --------------------------------------------------------------------------- expected counts (issue 21)


#: BOLD prompts whose SmolLM2 completions held the most gendered words in a seed-0 build (tests use seed 1, so the
#: draws are new); gendered tokens are ~0.3% of steps elsewhere, too rare for a test with power.
GENDERED_PROMPTS = [
    "healthcare_occupations/Midwife/42", "metalworking_occupations/Blacksmith/9",
    "theatre_personnel/Theatrical_technician/0", "healthcare_occupations/Midwife/48",
    "healthcare_occupations/Midwife/44", "nursing_specialties/Graduate_nurse/0",
    "metalworking_occupations/Blacksmith/4", "engineering_branches/Audio_engineer/16",
    "healthcare_occupations/Midwife/3", "metalworking_occupations/Machinist/0",
    "healthcare_occupations/Physician_Assistant/2", "artistic_occupations/Architect/8",
    "engineering_branches/Combat_engineer/2", "industrial_occupations/Stationary_engineer/0",
    "scientific_occupations/Astronaut/6", "healthcare_occupations/Midwife/15",
]


def _vocab_lexicon_ids(tokenizer) -> dict[str, set[int]]:
    """Independent of ``lexicon_token_ids``: byte-level BPE spells a leading space as "Ġ" in its vocabulary."""
    vocab = tokenizer.get_vocab()
    out = {}
    for name, words in lexicon.GENDER_LEXICONS.items():
        forms = {f"{space}{case(w)}" for w in words for space in ("", "Ġ") for case in (str.lower, str.capitalize)}
        out[name] = {vocab[f] for f in forms if f in vocab}
    return out


def _lexicon_groups(smol) -> torch.Tensor:
    ids, _ = lexicon_token_ids(smol.tokenizer)
    groups = torch.zeros(2, smol.model.get_output_embeddings().weight.shape[0], dtype=torch.bool)
    for g, name in enumerate(("male", "female")):
        groups[g, ids[name]] = True
    return groups


@pytest.mark.slow
def test_lexicon_token_ids_and_coverage(smol):
    ids, coverage = lexicon_token_ids(smol.tokenizer)
    assert {k: set(v) for k, v in ids.items()} == _vocab_lexicon_ids(smol.tokenizer)
    assert set(coverage.columns) == {"lexicon", "word", "variant", "n_tokens", "single_token", "token_id",
                                     "first_token_id"}
    assert len(coverage) == 4 * 26  # every word in four variants (no word is its own capitalisation)
    single = coverage[coverage.single_token]
    assert set(single["token_id"]) == set(ids["male"]) | set(ids["female"])
    assert (single["first_token_id"] == single["token_id"]).all()
    for row in coverage[~coverage.single_token].itertuples():  # a longer variant's first piece, by the tokenizer
        assert row.first_token_id == smol.tokenizer(row.variant, add_special_tokens=False)["input_ids"][0]
    assert (coverage.loc[~coverage.single_token, "n_tokens"] > 1).all()
    # " gentleman" is one SmolLM2 token, "gentleman" without the space is not
    gent = coverage[coverage.word == "gentleman"].set_index("variant")["single_token"]
    assert gent[" gentleman"] and not gent["gentleman"]


@pytest.mark.slow
def test_expected_mass_is_the_probability_of_the_sampled_distribution(smol, smol_hidden):
    """The mass equals the lexicon's probability under transformers' own warpers (full head and ScreenedHead)."""
    groups = _lexicon_groups(smol)
    weight = smol.model.get_output_embeddings().weight.detach()
    screen = ScreenedHead(weight, widths=(100, 200))
    prompts = load_profession_prompts().set_index("prompt_id").loc[GENDERED_PROMPTS[:4], "prompt"]
    with torch.inference_mode():
        gendered = [smol.model.base_model(**smol.tokenizer(p, return_tensors="pt")).last_hidden_state[0]
                    for p in prompts]
    h = torch.cat([smol_hidden, *gendered])
    gen = torch.Generator().manual_seed(2)
    largest = 0.0
    with torch.inference_mode():
        full = h @ weight.T
        for temperature, top_p, top_k in [(0.7, 0.9, 50), (1.6, 0.95, 50), (1.0, 1.0, None)]:
            u = torch.rand(h.shape[0], generator=gen, dtype=torch.float64)
            tokens, mass = sample_tokens(full, u, temperature, top_p, top_k, groups=groups)
            assert torch.equal(tokens, sample_tokens(full, u, temperature, top_p, top_k))  # the draw is unchanged
            warped = full.clone()
            from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

            for warper in (TemperatureLogitsWarper(temperature), *([TopKLogitsWarper(top_k)] if top_k else []),
                           TopPLogitsWarper(top_p)):
                warped = warper(None, warped)
            probs = torch.softmax(warped.double(), dim=-1)
            ref = (probs @ groups.double().T).numpy()
            np.testing.assert_allclose(mass.numpy(), ref, rtol=1e-4, atol=1e-7)
            largest = max(largest, ref.max())
            if top_k is not None:
                s_tokens, s_mass = screen.sample(h, u, temperature, top_p, top_k, groups=groups)
                assert torch.equal(s_tokens, tokens)
                np.testing.assert_allclose(s_mass.numpy(), mass.numpy(), rtol=1e-5, atol=1e-9)
        assert largest > 0.05  # some real states put real mass on the lexicon, so the check has teeth
        greedy, g_mass = sample_tokens(full, None, 0, 1.0, None, groups=groups)
        assert torch.equal(g_mass, groups[:, greedy].T.double())
    assert min(screen.rows_by_stage.values()) > 0


#: How far the decode loop's float32 logits (left-padded batch, KV cache) may be from one sequence's full forward
#: pass: a bound a hundred times the ~1e-5 that float32 rounding through 30 layers gives logits of magnitude ~20.
_LOGIT_SLACK = 1e-3


def _step_masses(logits: torch.Tensor, sets: torch.Tensor, temperature: float, top_p: float, top_k: int
                 ) -> np.ndarray:
    """``[edges, sets]``: each token set's probability under the sampling distribution at these float32 ``logits``
    [vocabulary] (temperature, top-k, top-p: transformers' warpers give the first row), and under every nucleus
    that logits moved by :data:`_LOGIT_SLACK` could give instead: the edge at each rank whose cumulative probability
    lies that close to ``top_p`` (a probability moves by at most slack / (2 T)), and the k-th token swapped with the
    next where their logits lie that close."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warped = logits[None].clone()
    for warper in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k), TopPLogitsWarper(top_p)):
        warped = warper(None, warped)
    options = [torch.isfinite(warped[0])]
    values, order = torch.topk(logits.double(), top_k + 1)
    margin = 2 * _LOGIT_SLACK / temperature
    candidates = [[*range(top_k)]]
    if values[top_k - 1] - values[top_k] < 2 * _LOGIT_SLACK:
        candidates.append([*range(top_k - 1), top_k])
    for ranks in candidates:
        probs = torch.softmax(values[ranks] / temperature, dim=0)
        head = torch.cumsum(probs, dim=0)  # descending: the nucleus is the first r tokens, head[r - 1] >= top_p
        for r in range(1, top_k + 1):
            if abs(float(head[r - 1]) - top_p) < margin or (r > 1 and abs(float(head[r - 2]) - top_p) < margin):
                kept = torch.zeros_like(options[0])
                kept[order[ranks[:r]]] = True
                options.append(kept)
    out = []
    for kept in options:
        probs = torch.softmax(torch.where(kept, logits / temperature, -torch.inf).double(), dim=0)
        out.append((sets.double() @ probs).numpy())
    return np.array(out)


@pytest.mark.slow
def test_expected_counts_are_the_lexicons_probability_at_every_step_the_loop_visited(smol):
    """E[sampled lexicon tokens] = the expected counts the decode loop adds up, checked exactly instead of by sampling.

    Given the prefix, each step writes a counted token with the probability of the counted set under the sampling
    distribution (a spaced variant anywhere, a bare one where the text so far ends a word), so the sampled count
    minus the sum of those probabilities over the steps a row visited is a martingale with mean 0: the expected
    counts are right when that sum is. The sum is recomputed here independently of the loop: for each sampled row,
    the prompt and what it drew in one forward pass of that sequence alone (no padding, no KV cache), the sampling
    distribution at each step by transformers' own warpers, its word starts by decoding the text, and the step that
    drew the stop token counted too. (This replaced a comparison of sampled with expected counts over 16 prompts x
    16 samples x 64 tokens, within 3 SD: an estimator 20% off failed it with power ~0.85; here any error beyond the
    float32 slack fails: checked to fail where the loop ignores word starts or undercounts by 5%.) Where that slack
    could move the top-k or nucleus edge, every edge it could give bounds the step.
    """
    # the decode loop: generate keeps no token ids
    from bias_utils.models.decoding import _decode_batch, _stop_ids, token_tables

    temperature, top_p, top_k = 0.7, 0.9, 50  # the audit's settings
    prompts = load_profession_prompts().set_index("prompt_id").loc[GENDERED_PROMPTS, "prompt"]
    rows = [(pid, s) for pid in GENDERED_PROMPTS for s in range(2)]
    _, coverage = lexicon_token_ids(smol.tokenizer)
    single = coverage[coverage["single_token"]]
    spaced = {g: sorted(single[(single.lexicon == g) & single.variant.str.startswith(" ")].token_id.astype(int))
              for g in ("male", "female")}
    bare = {g: sorted(single[(single.lexicon == g) & ~single.variant.str.startswith(" ")].token_id.astype(int))
            for g in ("male", "female")}
    groups = torch.zeros(4, smol.model.get_output_embeddings().weight.shape[0], dtype=torch.bool)
    for g, name in enumerate(("male", "female")):
        groups[g, spaced[name]] = True
        groups[2 + g, bare[name]] = True
    uniforms = torch.stack([torch.rand(64, dtype=torch.float64, generator=torch.Generator().manual_seed(
        row_seed(1, pid, s))) for pid, s in rows])
    encoded = [smol.tokenizer(prompts[pid])["input_ids"] for pid, _ in rows]
    stop, tables = torch.tensor(sorted(_stop_ids(smol))), token_tables(smol.tokenizer, groups.shape[1])
    new, stopped, mass, _ = _decode_batch(smol, encoded, uniforms, stop, temperature, top_p, top_k, groups=groups,
                                          tables=tables)

    low, high = np.zeros((len(rows), 2)), np.zeros((len(rows), 2))
    for r, (prompt, drawn) in enumerate(zip(encoded, new)):
        with torch.inference_mode():
            logits = smol.model(input_ids=torch.tensor([prompt + drawn])).logits[0, len(prompt) - 1:].float()
        text = smol.tokenizer.decode(prompt[-1:])
        for step in range(len(drawn) + stopped[r]):
            at_start = not text or not (text[-1].isalnum() or text[-1] == "_")
            masses = _step_masses(logits[step], groups, temperature, top_p, top_k)
            counts = masses[:, :2] + at_start * masses[:, 2:]
            low[r] += counts.min(axis=0)
            high[r] += counts.max(axis=0)
            if step < len(drawn):
                text = smol.tokenizer.decode([drawn[step]]) or text
    # d mass / d logit_j = p_j (1{j counted} - mass) / T: a nucleus kept, at most slack / (2 T) a step
    slack = np.array([(len(d) + s) * _LOGIT_SLACK / (2 * temperature) for d, s in zip(new, stopped)])[:, None]
    outside = (mass < low - slack) | (mass > high + slack)
    assert not outside.any(), (np.argwhere(outside), mass[outside], low[outside], high[outside])
    assert high.sum() - low.sum() < 0.05 * low.sum(), "the nucleus edges widen the check by 5% or more"
    assert low.max() > 1.0  # real rows put real mass on the lexicons, so the check has teeth


@pytest.mark.slow
def test_a_second_run_on_the_same_rows_waits_for_the_first_and_computes_nothing(smol, tmp_path, capfd):
    """While one process is filling the cache for these prompts, a second ``generate`` on the same rows waits
    for its lock (cache.file_lock, per request) and then reads the rows: each is stored once."""
    child, prompts, ids = _child_mid_run(tmp_path)
    second = generate(smol, prompts, prompt_ids=ids, max_new_tokens=16, seed=7, batch_size=2, cache=tmp_path,
                      progress=False)
    assert child.wait() == 0
    assert "waiting for another run" in capfd.readouterr().err
    (rows_file,) = tmp_path.glob("*/rows.jsonl")
    keys = [json.loads(line)["row_key"] for line in rows_file.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 16
    again = generate(smol, prompts, prompt_ids=ids, max_new_tokens=16, seed=7, batch_size=2, cache=tmp_path,
                     progress=False)
    pd.testing.assert_frame_equal(second, again)
