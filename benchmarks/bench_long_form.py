"""Benchmark: chapter 11's long-form section (``audit.long_form``) at its defaults, cold and warm, against its floor.

Work = what the section computes for one model in a default build: ``long_form_table`` for the 60 BLS occupations
(the built-in instructions, ``N_SAMPLES`` samples each, up to ``MAX_NEW_TOKENS`` new tokens, through the chat
template), then its link with the next word (a next-word table computed before the clock starts, as the chapter has
it by then), the reading, the chart as Vega-Lite JSON and the example texts. **Cold**: an empty generation cache
(``BIAS_CACHE_DIR`` is a fresh folder). **Warm**: the same again, every text read from the cache.

Floor = the generation's compute floor (``bench_generation.forward_floor``): the decoder's forward passes alone for
the same chat-templated prompts and the same number of tokens per text as ours produced, in batches of ours' size,
with the KV cache and a trivial argmax sampler. ``cold / floor`` is what sampling, bookkeeping, counting, the
intervals and the reading add; the acceptance asks the cold section to fit in 3 minutes on 2 cores.

``--limit N`` measures the first N occupations only (on a busy machine, where the whole section would take an hour;
the section's time at its defaults is then about 60 / N times it, and ``cold / floor`` does not depend on N).

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_long_form.py [--threads 2] [--limit 10]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import pandas as pd
import torch
from bench_generation import forward_floor

from bias_utils.audit import long_form, next_word
from bias_utils.models.decoding import auto_batch_size
from bias_utils.models.loading import load_model
from bias_utils.profiles.populations import load_populations, occupation_shares


def bls_values() -> pd.DataFrame:
    """The 60 BLS occupations with their group and share of women, as chapter 04's check gives them to chapter 11."""
    group = {noun: g for g, nouns in load_populations("occupations").items() for noun in nouns}
    shares = occupation_shares()
    return shares.assign(group=shares["occupation"].map(group))


def section(m, values: pd.DataFrame, exact: pd.DataFrame):
    """Seconds of the section's work (module docstring) and its measure."""
    t0 = time.perf_counter()
    found = long_form.long_form_table(m, list(values["occupation"]), progress=False)
    link = found.link(exact, values)
    link.describe()
    link.chart().to_dict()
    link.examples()
    return time.perf_counter() - t0, found


def cold_model(description: str, prefix: str):
    """``(args, model)``: the long-form benchmarks' options (``--model``, ``--threads``, ``--limit``) parsed, torch's
    threads set, the caches pointed at a fresh folder (every text computed cold) and the model loaded."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--limit", type=int, default=None, help="the first N occupations only (default: all 60)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ["BIAS_CACHE_DIR"] = tempfile.mkdtemp(prefix=prefix)
    return args, load_model(args.model)


def chat_floor(m, texts: pd.DataFrame) -> tuple[int, float]:
    """``bench_generation.forward_floor`` for long-form ``texts`` (their ``prompt`` through the chat template, their
    ``n_tokens`` new tokens each): ``(tokens, seconds)``."""
    templated = [m.tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                  tokenize=False) for p in texts["prompt"]]
    steps = [max(1, int(n)) for n in texts["n_tokens"]]
    longest = max(len(m.tokenizer(t)["input_ids"]) for t in templated) + long_form.MAX_NEW_TOKENS
    return forward_floor(m, templated, steps, auto_batch_size(m, longest, len(templated)))


def main() -> None:
    args, m = cold_model(__doc__.splitlines()[0], "bench_long_form_")
    values = bls_values().head(args.limit)
    exact = next_word.next_word_table(m, list(values["occupation"]), progress=False).occupations
    print(f"{m.model_id}: {len(values)} occupations x {len(long_form.INSTRUCTIONS)} instructions x "
          f"{long_form.N_SAMPLES} samples, up to {long_form.MAX_NEW_TOKENS} new tokens; torch threads "
          f"{torch.get_num_threads()} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    cold, found = section(m, values, exact)
    warm, _ = section(m, values, exact)
    n_tokens, floor = chat_floor(m, found.texts)
    print(f"  cold section: {cold:6.1f} s  ({found.texts['n_tokens'].sum():,} new tokens, "
          f"{found.texts['n_tokens'].sum() / cold:.0f} tokens/s)\n"
          f"  warm section (every text cached): {warm:6.1f} s\n"
          f"  floor (forward passes alone, {n_tokens:,} tokens): {floor:6.1f} s  -> cold / floor = {cold / floor:.2f}\n"
          f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
