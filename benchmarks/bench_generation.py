"""Generation speed: the original audit's loop vs ``bias_utils.models.generation`` vs a llama.cpp server.

Usage::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_generation.py [--model smollm2-135m-instruct]

On a fixed slice of 64 BOLD profession prompts (every 159th row), 100 new
tokens, temperature 0.7, top-k 50, top-p 0.9 (the audit's ``generate`` call
with transformers' default top-k), all in one process:

(a) the original audit's approach: one prompt per ``model.generate(do_sample=True)``
    call (on the first ``--baseline-prompts`` prompts only, to keep the run short;
    tokens/s does not depend on how many prompts the loop sees);
(b) ``generate(model, prompts)``: length-bucketed batches, KV cache, rows leaving
    the batch when they finish, the exact top-k-restricted nucleus sampler, and
    for large vocabularies the screened output projection (``ScreenedHead``);
(f) the same with ``screen=False``: the whole vocabulary scored in float32 (the
    state before the screen), and how many completions are identical to (b);
(c) the same GGUF served by llama.cpp (xllamacpp, 16 parallel slots) through our
    OpenAI-compatible backend;
(d) the sampling step alone on one real batch of logits: ours vs transformers'
    temperature + top-k + top-p warpers followed by ``torch.multinomial``;
(g) ``generate(..., statistics=False)``: without the expected counts and mean
    hidden states that (b) accumulates in its decoding loop; (b) and (g) each
    write a fresh cache (so (b) includes writing the states), and (b) / (g) is
    what the accumulation costs;
(h) chapter 08's embedding step on (b)'s completions (completion and prompt
    alone): before, ``completions.completion_embeddings(stored=False)``
    re-embeds them (cold embedding cache); after, it reads the states (b)
    stored;
(i) the statistics' bookkeeping alone, per step, without the forward pass: the
    state sums and the token classification of 64 rows (random tokens and
    states; ``decoding.StateSums`` with its per-token tables);
(e) the compute floor: the forward passes alone for the same rows and the same
    number of tokens per row as (b) produced, in the same batches, with the
    KV cache, rows leaving as they reach their count, and a trivial sampler
    (argmax) over the full float32 logits. (f) / (e) is what our loop, sampler
    and bookkeeping add; (b) can beat (e) because the screen skips most of the
    float32 output projection.

Peak RSS of the process and the load average are printed: on a shared machine
only ratios from the same run mean anything.

Tokens are counted the same way everywhere: every sampled token, including a
final end-of-sequence token. Each engine gets a short warm-up first (the first
batches on CPU are several times slower). Throughput on a shared machine is
noisy: compare the ratios, printed from the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import torch

from bias_utils.audit.bold_prompts import load_profession_prompts
from bias_utils.intrinsic_extrinsic import completions
from bias_utils.models.decoding import auto_batch_size
from bias_utils.models.endpoints import OpenAIEndpoint
from bias_utils.models.generation import generate
from bias_utils.models.loading import load_model
from bias_utils.models.sampling import sample_tokens
from bias_utils.models.serving import llama_server

SETTINGS = dict(max_new_tokens=100, temperature=0.7, top_p=0.9, top_k=50)


def _sampled_tokens(df) -> int:
    return int(df["n_tokens"].sum() + (df["finish_reason"] == "stop").sum())


def baseline_loop(m, prompts: list[str]) -> tuple[int, float]:
    """The original audit: one ``generate`` call per prompt, stock sampling."""
    tok = m.tokenizer
    torch.manual_seed(0)
    n, start = 0, time.perf_counter()
    for prompt in prompts:
        enc = tok(prompt, return_tensors="pt").to(m.device)
        out = m.model.generate(**enc, do_sample=True, temperature=SETTINGS["temperature"], top_p=SETTINGS["top_p"],
                               top_k=SETTINGS["top_k"],
                               max_new_tokens=SETTINGS["max_new_tokens"], pad_token_id=tok.pad_token_id)
        n += out.shape[1] - enc["input_ids"].shape[1]
    return n, time.perf_counter() - start


def ours(m, prompts: list[str], batch_size: int | None, screen: bool | str = "auto", cache=False,
         statistics: bool = True):
    start = time.perf_counter()
    df = generate(m, prompts, seed=0, batch_size=batch_size, cache=cache, progress=False, screen=screen,
                  statistics=statistics, **SETTINGS)
    return _sampled_tokens(df), time.perf_counter() - start, df


def embedding_step(m, df, stored: bool) -> float:
    """Seconds for chapter 08's two ``completion_embeddings`` calls (completion in context, prompt alone)."""
    start = time.perf_counter()
    for part in ("completion", "prompt"):
        completions.completion_embeddings(m, df, part=part, stored=stored)
    return time.perf_counter() - start


@torch.inference_mode()
def forward_floor(m, prompts: list[str], steps: list[int], batch_size: int | None) -> tuple[int, float]:
    """Forward passes only: row i runs ``steps[i]`` decoding steps, batched by prompt length as ``generate`` does."""
    from transformers import DynamicCache

    encoded = [m.tokenizer(p)["input_ids"] for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: (len(encoded[i]), i))
    if batch_size is None:
        batch_size = auto_batch_size(m, max(map(len, encoded)) + SETTINGS["max_new_tokens"], len(prompts))
    pad = m.tokenizer.pad_token_id or 0
    start = time.perf_counter()
    for b in range(0, len(order), batch_size):
        rows = order[b:b + batch_size]
        width = max(len(encoded[i]) for i in rows)
        ids = torch.tensor([[pad] * (width - len(encoded[i])) + encoded[i] for i in rows], device=m.device)
        mask = torch.tensor([[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in rows], device=m.device)
        pos = (mask.cumsum(-1) - 1).clamp_(min=0)
        left = torch.tensor([steps[i] for i in rows], device=m.device)
        past = DynamicCache()
        while True:
            logits = m.model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=past,
                             use_cache=True, logits_to_keep=1).logits[:, -1]
            left -= 1
            keep = (left > 0).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            if keep.numel() < left.numel():
                past.batch_select_indices(keep)
                logits, mask, pos, left = logits[keep], mask[keep], pos[keep], left[keep]
            ids = logits.argmax(-1, keepdim=True)
            pos = pos[:, -1:] + 1
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
    if m.device.type == "cuda":
        torch.cuda.synchronize(m.device)
    return sum(steps), time.perf_counter() - start


def bookkeeping_step(m, n: int = 64, steps: int = 80) -> float:
    """CPU milliseconds per step of the state sums and token classification alone (no forward pass)."""
    from bias_utils.models.decoding import StateSums, token_tables

    gen = torch.Generator().manual_seed(0)
    n_states, width = m.n_layers + 1, 12
    ids = torch.randint(m.tokenizer.vocab_size, (steps, n), generator=gen).to(m.device)
    hidden = [tuple(torch.randn(n, 1, m.hidden_size, generator=gen).to(m.device) for _ in range(n_states))
              for _ in range(4)]
    tables = token_tables(m.tokenizer, m.model.get_output_embeddings().weight.shape[0]).to(m.device)
    sums = StateSums(n, tables, [[1.0 / width] * width] * n, m.device)
    sums.read_prompt(tuple(torch.randn(n, width, m.hidden_size, generator=gen).to(m.device)
                           for _ in range(n_states)), width)
    start = time.process_time()
    for t in range(steps):
        sums.read_tokens(hidden[t % 4])
        sums.drew(ids[t])
    sums.means(torch.arange(n, device=m.device))
    return (time.process_time() - start) / steps * 1e3


def served(m, prompts: list[str], parallel: int) -> tuple[int, float]:
    with llama_server(m.gguf_path, n_parallel=parallel, ctx_per_slot=256, n_threads=torch.get_num_threads()) as srv:
        endpoint = OpenAIEndpoint(srv.base_url, parallel=parallel)
        generate(endpoint, prompts[:parallel], seed=99, max_new_tokens=8, cache=False, progress=False)  # warm-up
        start = time.perf_counter()
        df = generate(endpoint, prompts, seed=0, cache=False, progress=False, **SETTINGS)
        return _sampled_tokens(df), time.perf_counter() - start


def sampler_step(m, prompts: list[str], repeats: int = 10) -> tuple[float, float]:
    """Milliseconds per sampling step on a real [batch, vocab] logits tensor: ours vs the stock warpers
    + multinomial."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    enc = m.tokenizer(prompts, return_tensors="pt", padding=True).to(m.device)
    with torch.inference_mode():
        logits = m.model(**enc).logits[:, -1].float()
    uniforms = torch.rand(logits.shape[0], dtype=torch.float64).to(m.device)
    temp, top_k = TemperatureLogitsWarper(SETTINGS["temperature"]), TopKLogitsWarper(SETTINGS["top_k"])
    top_p = TopPLogitsWarper(SETTINGS["top_p"])

    def stock():
        return torch.multinomial(torch.softmax(top_p(None, top_k(None, temp(None, logits.clone()))), dim=-1), 1)

    def mine():
        return sample_tokens(logits, uniforms, SETTINGS["temperature"], SETTINGS["top_p"], SETTINGS["top_k"])

    times = {}
    for name, fn in (("stock", stock), ("ours", mine)):
        fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        if m.device.type == "cuda":
            torch.cuda.synchronize(m.device)
        times[name] = (time.perf_counter() - start) / repeats * 1e3
    return times["stock"], times["ours"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--n-prompts", type=int, default=64)
    parser.add_argument("--baseline-prompts", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=None, help="default: decoding.auto_batch_size")
    parser.add_argument("--parallel", type=int, default=16, help="llama.cpp server slots")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch and llama.cpp alike (default: torch's choice); on a machine "
                             "shared with other jobs 1 thread can be several times faster than 2 (OpenMP spinning)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    table = load_profession_prompts()
    prompts = table["prompt"].iloc[:: len(table) // args.n_prompts].head(args.n_prompts).tolist()
    m = load_model(args.model)
    print(f"model {m.model_id}; {len(prompts)} BOLD prompts; {SETTINGS}; torch threads {torch.get_num_threads()}")

    # A fresh cache for (b), (g) and (h): the states (b) stores, a cold embedding cache for (h)'s re-embedding.
    os.environ["BIAS_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-generation-")
    generate(m, prompts[:8], seed=99, max_new_tokens=8, cache=False, progress=False)  # warm-up
    rows = []
    n, t = baseline_loop(m, prompts[: args.baseline_prompts])
    rows.append((f"(a) one prompt per model.generate ({args.baseline_prompts} prompts)", n, t))
    n, t, df = ours(m, prompts, args.batch_size, cache=True)
    rows.append(("(b) bias_utils.models.generation.generate", n, t))
    n, t, bare = ours(m, prompts, args.batch_size, cache=tempfile.mkdtemp(prefix="bench-bare-"), statistics=False)
    rows.append(("(g) the same, statistics=False (no counts, no states)", n, t))
    same_bare = int((bare["completion"] == df["completion"]).sum())
    n, t, plain = ours(m, prompts, args.batch_size, screen=False)
    rows.append(("(f) the same, screen=False (full float32 head)", n, t))
    same = int((plain["completion"] == df["completion"]).sum())
    steps = (df["n_tokens"] + (df["finish_reason"] == "stop")).tolist()
    n, t = forward_floor(m, prompts, steps, args.batch_size)
    rows.append(("(e) floor: forward passes alone, same rows and tokens", n, t))
    if m.gguf_path is not None:
        n, t = served(m, prompts, args.parallel)
        rows.append((f"(c) llama.cpp server, {args.parallel} slots, OpenAI backend", n, t))
    else:
        print("(c) skipped: the model has no GGUF file")

    print(f"\n{'engine':58s} {'tokens':>7s} {'seconds':>8s} {'tok/s':>7s}")
    for name, n, t in rows:
        print(f"{name:58s} {n:7d} {t:8.1f} {n / t:7.1f}")
    speed = {name[:3]: n / t for name, n, t in rows}
    print(f"\nours / one-prompt loop: {speed['(b)'] / speed['(a)']:.2f}x")
    print(f"ours / screen=False: {speed['(b)'] / speed['(f)']:.2f}x; identical completions {same}/{len(df)}")
    print(f"ours / floor: {speed['(b)'] / speed['(e)']:.2f}x of the floor's tokens/s; "
          f"screen=False / floor: {speed['(f)'] / speed['(e)']:.2f}x")
    if "(c)" in speed:
        print(f"ours / llama.cpp server: {speed['(b)'] / speed['(c)']:.2f}x")
    print(f"(b) / (g), generation time with / without the expected counts and states: "
          f"{speed['(g)'] / speed['(b)']:.3f}; identical completions {same_bare}/{len(df)}")
    before, after = embedding_step(m, df, stored=False), embedding_step(m, df, stored=True)
    print(f"(h) chapter 08's embedding step: re-embedding {before:.1f} s, stored states {after:.2f} s "
          f"({before / after:.0f}x)")
    print(f"(i) the statistics' bookkeeping alone: {bookkeeping_step(m):.1f} CPU ms per step for 64 rows")
    stock_ms, ours_ms = sampler_step(m, prompts)
    print(f"(d) sampling step on [{len(prompts)}, vocab] logits: stock warpers+multinomial {stock_ms:.1f} ms, "
          f"ours {ours_ms:.1f} ms ({stock_ms / ours_ms:.2f}x)")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
