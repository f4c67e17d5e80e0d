"""Benchmark: the exact next-word measure (``audit.next_word.next_word_table``) of the default build's occupations.

Work = what chapter 11 computes for one model: the 60 BLS occupation nouns and the nouns of the audit's primary
units (the BOLD person-noun occupations), each in the ten templates (``next_word_prompts.TEMPLATES``), with
``cache=False`` so every sentence is computed.

Floor = what this machine can do at best for the same work: the decoder's forward passes alone
(``model(input_ids, logits_to_keep=1)``) over exactly the token sequences ours reads, grouped by length (no padding),
in batches of ours' size, with tokenising done before the clock starts. ``ours / floor`` is the cost of everything
else (tokenising, the lexicon's token sets, the masses in float64, building the tables). Both run in this process,
after a warm-up; the floor runs twice (before and after ours) and the faster is kept, so a burst of load from other
jobs on the shared CPU does not flatter the ratio.

Neutral = what counting singular "they" and the neopronouns beside the female and male words adds (issue 48): the
gathered log-sum-exps of their tokens (``next_word_prompts.log_masses``' ``extra``), timed alone on float64 logits of
the run's batch shapes; it is part of ours, and its share of ours says how much the two lexicons cost (the issue asked
for at most 10%).

Reference = the obvious implementation: one sentence per forward pass, transformers' full logits
(``model(**enc).logits``) and a softmax over the vocabulary, timed on a subsample and extrapolated.

Run: ``HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_next_word.py``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from bias_utils.audit import next_word, next_word_prompts
from bias_utils.audit.occupation_units import unit_table
from bias_utils.intrinsic_extrinsic import bold_link
from bias_utils.models.embeddings import default_batch_size
from bias_utils.models.loading import load_model
from bias_utils.profiles.populations import occupation_shares


def default_nouns() -> list[str]:
    """The 60 BLS nouns and the nouns of the audit's primary units, as chapter 11 asks for them."""
    units = unit_table("audit")
    primary = [bold_link.occupation_noun(u) for u in units.loc[units["primary"], "unit"]]
    return list(dict.fromkeys(list(occupation_shares()["occupation"]) + primary)), len(primary)


def floor_seconds(m, sentences: list[str], batch_size: int) -> float:
    """Seconds of the forward passes alone (last position's logits) over the sentences, unpadded."""
    by_length: dict[int, list[list[int]]] = {}
    for s in sentences:
        ids = m.tokenizer(s)["input_ids"]
        by_length.setdefault(len(ids), []).append(ids)
    batches = [torch.tensor(rows[b:b + batch_size]) for rows in by_length.values()
               for b in range(0, len(rows), batch_size)]
    t0 = time.perf_counter()
    with torch.inference_mode():
        for ids in batches:
            m.model(input_ids=ids, attention_mask=torch.ones_like(ids), logits_to_keep=1)
    return time.perf_counter() - t0


def neutral_seconds(m, sentences: list[str], batch_size: int) -> float:
    """Seconds of the neutral lexicons' own work over the run's batches: the log-sum-exp of each lexicon's counted
    tokens, on random float64 logits of each batch's shape (the forward pass that gives the real ones is ours')."""
    found = next_word.next_word_table(m, ["nurse"], templates=next_word_prompts.TEMPLATES[:1], cache=False,
                                      progress=False)
    words = found.neutral_words[found.neutral_words["counted"] != "shared"]
    extra = [sorted(set(words.loc[words["lexicon"] == name, "token_id"]))
             for name in next_word_prompts.REFERENCE_LEXICONS]
    n_vocab = m.model.get_output_embeddings().weight.shape[0]
    lengths: dict[int, int] = {}
    for s in sentences:
        n = len(m.tokenizer(s)["input_ids"])
        lengths[n] = lengths.get(n, 0) + 1
    logits = [torch.randn(min(batch_size, count - b), n_vocab, dtype=torch.float64)
              for count in lengths.values() for b in range(0, count, batch_size)]
    t0 = time.perf_counter()
    for batch in logits:
        [torch.logsumexp(batch[:, ids], dim=1, keepdim=True) for ids in extra]
    return time.perf_counter() - t0


def reference_rate(m, sentences: list[str]) -> float:
    """Sentences per second, one at a time with the full logits and a float64 softmax."""
    t0 = time.perf_counter()
    with torch.inference_mode():
        for s in sentences:
            enc = m.tokenizer(s, return_tensors="pt")
            torch.softmax(m.model(**enc).logits[0, -1].double(), dim=0)
    return len(sentences) / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--ref-n", type=int, default=60, help="sentences timed with the reference loop")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    m = load_model(args.model)
    nouns, n_units = default_nouns()
    sentences = [t.replace("{occupation}", n) for n in nouns for t in next_word_prompts.TEMPLATES]
    size = default_batch_size(m)
    print(f"{m.model_id}: {len(nouns)} nouns (60 BLS + {n_units} primary units, {60 + n_units - len(nouns)} shared) "
          f"x {len(next_word_prompts.TEMPLATES)} templates = {len(sentences)} sentences; batch {size}; torch threads "
          f"{torch.get_num_threads()} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    next_word.next_word_table(m, nouns[:8], cache=False, progress=False)  # warm-up
    floor_before = floor_seconds(m, sentences, size)
    t0 = time.perf_counter()
    found = next_word.next_word_table(m, nouns, cache=False, progress=False)
    ours = time.perf_counter() - t0
    floor = min(floor_before, floor_seconds(m, sentences, size))
    neutral = neutral_seconds(m, sentences, size)
    rng = np.random.default_rng(0)
    ref = reference_rate(m, [sentences[i] for i in rng.choice(len(sentences), args.ref_n, replace=False)])
    print(f"  ours (next_word_table, cache=False): {ours:6.1f} s  ({len(found.prompts) / ours:.1f} sentences/s)\n"
          f"  floor (forward passes alone, unpadded, batch {size}): {floor:6.1f} s  -> ours / floor = "
          f"{ours / floor:.2f}x\n"
          f"  neutral lexicons (they forms, neopronouns; their log-sum-exps alone): {neutral:6.3f} s -> "
          f"{neutral / ours:.2%} of ours\n"
          f"  reference (one sentence per full forward pass + softmax): {ref:.1f} sentences/s, "
          f"{len(sentences) / ref:.0f} s extrapolated -> {len(sentences) / ref / ours:.1f}x slower than ours\n"
          f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
