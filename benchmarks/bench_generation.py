"""Generation speed: the original audit's loop vs ``bias_utils.generation`` vs a llama.cpp server.

Usage::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_generation.py [--model smollm2-135m-instruct]

On a fixed slice of 64 BOLD profession prompts (every 159th row), 100 new
tokens, temperature 0.7, top-p 0.9, all in one process:

(a) the original audit's approach: one prompt per ``model.generate(do_sample=True)``
    call (on the first ``--baseline-prompts`` prompts only, to keep the run short;
    tokens/s does not depend on how many prompts the loop sees);
(b) ``generate(model, prompts)``: length-bucketed batches, KV cache, rows leaving
    the batch when they finish, the exact top-k-restricted nucleus sampler;
(c) the same GGUF served by llama.cpp (xllamacpp, 16 parallel slots) through our
    OpenAI-compatible backend;
(d) the sampling step alone on one real batch of logits: ours vs transformers'
    temperature + top-p warpers followed by ``torch.multinomial``.

Tokens are counted the same way everywhere: every sampled token, including a
final end-of-sequence token. Each engine gets a short warm-up first (the first
batches on CPU are several times slower). Throughput on a shared machine is
noisy: compare the ratios, printed from the same run.
"""

from __future__ import annotations

import argparse
import time

import torch

from bias_utils.bold import load_profession_prompts
from bias_utils.generation import OpenAIEndpoint, generate, sample_tokens
from bias_utils.models import load_model
from bias_utils.serving import llama_server

SETTINGS = dict(max_new_tokens=100, temperature=0.7, top_p=0.9)


def _sampled_tokens(df) -> int:
    return int(df["n_tokens"].sum() + (df["finish_reason"] == "stop").sum())


def baseline_loop(m, prompts: list[str]) -> tuple[int, float]:
    """The original audit: one ``generate`` call per prompt, stock sampling."""
    tok = m.tokenizer
    torch.manual_seed(0)
    n, start = 0, time.perf_counter()
    for prompt in prompts:
        enc = tok(prompt, return_tensors="pt")
        out = m.model.generate(**enc, do_sample=True, temperature=SETTINGS["temperature"], top_p=SETTINGS["top_p"],
                               max_new_tokens=SETTINGS["max_new_tokens"], pad_token_id=tok.pad_token_id)
        n += out.shape[1] - enc["input_ids"].shape[1]
    return n, time.perf_counter() - start


def ours(m, prompts: list[str], batch_size: int | None) -> tuple[int, float]:
    start = time.perf_counter()
    df = generate(m, prompts, seed=0, batch_size=batch_size, cache=False, progress=False, **SETTINGS)
    return _sampled_tokens(df), time.perf_counter() - start


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
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    enc = m.tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        logits = m.model(**enc).logits[:, -1].float()
    uniforms = torch.rand(logits.shape[0], dtype=torch.float64)
    temp, top_p = TemperatureLogitsWarper(SETTINGS["temperature"]), TopPLogitsWarper(SETTINGS["top_p"])

    def stock():
        return torch.multinomial(torch.softmax(top_p(None, temp(None, logits.clone())), dim=-1), 1)

    def mine():
        return sample_tokens(logits, uniforms, SETTINGS["temperature"], SETTINGS["top_p"])

    times = {}
    for name, fn in (("stock", stock), ("ours", mine)):
        fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        times[name] = (time.perf_counter() - start) / repeats * 1e3
    return times["stock"], times["ours"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--n-prompts", type=int, default=64)
    parser.add_argument("--baseline-prompts", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=None, help="default: generation.auto_batch_size")
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

    generate(m, prompts[:8], seed=99, max_new_tokens=8, cache=False, progress=False)  # warm-up
    rows = []
    n, t = baseline_loop(m, prompts[: args.baseline_prompts])
    rows.append((f"(a) one prompt per model.generate ({args.baseline_prompts} prompts)", n, t))
    n, t = ours(m, prompts, args.batch_size)
    rows.append(("(b) bias_utils.generation.generate", n, t))
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
    if "(c)" in speed:
        print(f"ours / llama.cpp server: {speed['(b)'] / speed['(c)']:.2f}x")
    stock_ms, ours_ms = sampler_step(m, prompts)
    print(f"(d) sampling step on [{len(prompts)}, vocab] logits: stock warpers+multinomial {stock_ms:.1f} ms, "
          f"ours {ours_ms:.1f} ms ({stock_ms / ours_ms:.2f}x)")


if __name__ == "__main__":
    main()
