"""Benchmark: one condition of chapter 12's long form under erasure (``intrinsic_extrinsic.erasure_long_form``) at its
defaults, cold, beside the unhooked condition, against the generation floor.

Work = ``erasure_long_form.texts_under`` for the 60 BLS occupations at the section's defaults (the biography, one
sample, up to ``audit.long_form.MAX_NEW_TOKENS`` new tokens, through the chat template), one condition at a time, each
cold (an empty generation cache): the unhooked model, then a random subspace of rank 1 (LEACE's rank for the binary
gender concept: its hook costs what LEACE's does) at the middle hidden state through ``models.hooks.erasing``. Floor =
the forward passes alone for the same chat-templated prompts and the erased condition's tokens per text
(``bench_generation.forward_floor``). The section writes two erased conditions per state chapter 12 reads (two or
four), the unhooked one from chapter 11's cache: its cost is two or four times the erased condition's.

Run: ``HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/bench_erasure_long_form.py
[--threads 1] [--limit 60]``
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from bench_long_form import chat_floor, cold_model
from concept_erasure import LeaceEraser

from bias_utils.audit import long_form
from bias_utils.intrinsic_extrinsic import erasure_long_form
from bias_utils.profiles.populations import occupation_shares


def main() -> None:
    args, m = cold_model(__doc__.splitlines()[0], "bench_erasure_long_form_")
    nouns = occupation_shares()["occupation"].head(args.limit).tolist()
    middle = m.n_layers // 2
    # the orthogonal projection off one random direction, in LEACE's form (what erasers' random control is)
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((m.hidden_size, 1)))
    u = torch.from_numpy(q)
    rank_one = {middle: LeaceEraser(u, u.T.contiguous(), None)}
    settings = {"instructions": erasure_long_form.ERASED_INSTRUCTIONS, "n_samples": erasure_long_form.ERASED_SAMPLES,
                "max_new_tokens": long_form.MAX_NEW_TOKENS, "seed": 0, "n_boot": 1000, "progress": False}
    print(f"{m.model_id}: {len(nouns)} occupations x {len(settings['instructions'])} instruction x "
          f"{settings['n_samples']} sample, up to {settings['max_new_tokens']} new tokens; torch threads "
          f"{torch.get_num_threads()} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    timed = {}
    for name, condition in (("unhooked", {}), (f"random subspace, rank 1, state {middle}", rank_one)):
        t0 = time.perf_counter()
        found = erasure_long_form.texts_under(m, {("bench", name): condition}, nouns, **settings)[("bench", name)]
        timed[name] = (time.perf_counter() - t0, found)
        tokens = int(found.texts["n_tokens"].sum())
        print(f"  {name}: {timed[name][0]:6.1f} s, {len(found.texts)} texts, {tokens:,} new tokens, "
              f"{tokens / timed[name][0]:.0f} tokens/s")
    seconds, found = timed[list(timed)[-1]]
    n_tokens, floor = chat_floor(m, found.texts)
    print(f"  floor (forward passes alone, {n_tokens:,} tokens): {floor:6.1f} s  -> erased / floor = "
          f"{seconds / floor:.2f}\n  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
