"""Benchmark: per-layer word embeddings of the seed dictionary's contexts.

Reference = the original study's approach: one context per forward pass, no
padding, no cache (``get_word_embedding_by_layer`` in Schuster et al.'s
``utils.py``), here through the same backbone and the same word location so
that only the batching differs. Ours = :func:`bias_utils.models.embeddings.embed_words`
with ``cache=False``. Both run in this process on the same pairs, after a
warm-up (the first batches are 5-15x slower).

The reference loop is timed on a random subsample (``--ref-n``) and its rate
extrapolated to all pairs; the output says so. Differences are computed on that
subsample: the maximum absolute difference, and the maximum relative to each
vector's largest component (decoders without BOS carry ~2e4 "attention sink"
activations on the first token, where one float32 ulp is ~2e-3).

Floor = what this machine can do at best for the same work: the forward passes
alone over exactly the tokens ours feeds the model (decoder contexts cut after
the word, as ours does), grouped by exact length so no batch has padding, in
batches of ours' size, with tokenising, word location and gathering done before
the clock starts. ``ours / floor`` is the overhead of everything else (padding,
tokenising, locating, gathering the word's states).

The machine's load average is printed: on a CPU shared with other jobs, torch's
threads wait on each other and both rates drop (the many small operations of the
reference more so); ``--threads 1`` avoids that.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_embeddings.py [--threads 1]``
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import torch

from bias_utils.models.embeddings import default_batch_size, embed_words, find_word, token_indices
from bias_utils.models.loading import load_model
from bias_utils.profiles.dictionaries import load_seed_dictionary


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def reference(m, contexts, words, layers) -> np.ndarray:
    """One context per forward pass, as the original code does."""
    out = np.full((len(contexts), len(layers), m.hidden_size), np.nan, dtype=np.float32)
    backbone = m.backbone()
    with torch.inference_mode():
        for k, (context, word) in enumerate(zip(contexts, words)):
            span = find_word(context, word)
            if span is None:
                continue
            enc = m.tokenizer(context, return_tensors="pt", return_offsets_mapping=True, truncation=True)
            idx = token_indices(enc.pop("offset_mapping")[0].tolist(), span)
            hs = backbone(**enc, output_hidden_states=True).hidden_states
            out[k] = torch.stack([hs[layer][0, idx].mean(0) for layer in layers]).numpy()
    return out


def floor_seconds(m, contexts, words) -> float:
    """Seconds of the backbone's forward passes alone over ours' tokens, without padding."""
    by_length: dict[int, list[list[int]]] = {}
    for context, word in zip(contexts, words):
        span = find_word(context, word)
        if span is None:
            continue
        enc = m.tokenizer(context, return_offsets_mapping=True, truncation=True)
        idx = token_indices(enc["offset_mapping"], span)
        if not idx:
            continue
        ids = enc["input_ids"][:max(idx) + 1] if m.kind == "decoder" else enc["input_ids"]
        by_length.setdefault(len(ids), []).append(ids)
    size = default_batch_size(m)
    batches = [torch.tensor(rows[b:b + size]) for rows in by_length.values() for b in range(0, len(rows), size)]
    backbone = m.backbone()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for ids in batches:
            backbone(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    return time.perf_counter() - t0


def bench(name: str, contexts: list[str], words: list[str], ref_n: int, rng: np.random.Generator) -> dict:
    m = load_model(name)
    layers = list(range(m.n_layers + 1))
    warm = list(range(min(64, len(contexts))))
    reference(m, [contexts[i] for i in warm[:8]], [words[i] for i in warm[:8]], layers)
    embed_words(m, [contexts[i] for i in warm], [words[i] for i in warm], cache=False, progress=False)

    sample = np.sort(rng.choice(len(contexts), size=min(ref_n, len(contexts)), replace=False))
    sc, sw = [contexts[i] for i in sample], [words[i] for i in sample]
    t0 = time.perf_counter()
    ref = reference(m, sc, sw, layers)
    t_ref = time.perf_counter() - t0
    rss_ref = peak_rss_mb()

    t0 = time.perf_counter()
    ours = embed_words(m, contexts, words, cache=False, progress=True)
    t_ours = time.perf_counter() - t0
    rss_ours = peak_rss_mb()

    t_floor = floor_seconds(m, contexts, words)

    got = ours.values[sample]
    ok = ~np.isnan(ref[:, 0, 0])
    assert np.array_equal(ok, ~np.isnan(got[:, 0, 0])), "reference and ours skip different pairs"
    diff = np.abs(got[ok] - ref[ok])
    scale = np.maximum(1.0, np.abs(ref[ok]).max(axis=-1, keepdims=True))
    return {
        "model": m.model_id,
        "pairs": len(contexts),
        "skipped": len(ours.skipped),
        "ref_n": len(sample),
        "ref_rate": len(sample) / t_ref,
        "ours_rate": len(contexts) / t_ours,
        "ours_seconds": t_ours,
        "floor_seconds": t_floor,
        "ref_seconds_extrapolated": len(contexts) / (len(sample) / t_ref),
        "max_abs_diff": float(diff.max()),
        "max_rel_diff": float((diff / scale).max()),
        "peak_rss_mb_after_ref": rss_ref,
        "peak_rss_mb_after_ours": rss_ours,
        "output_mb": ours.values.nbytes / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "minilm-l6"])
    parser.add_argument("--ref-n", type=int, default=100, help="pairs timed with the reference loop (subsample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's choice); "
                             "1 is faster on a CPU shared with other jobs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    seed = load_seed_dictionary()
    contexts = [c for cs in seed.contexts for c in cs]
    words = [t for t, cs in zip(seed.term, seed.contexts) for _ in cs]
    print(f"seed dictionary: {len(seed)} senses, {len(contexts)} (context, term) pairs; "
          f"torch threads {torch.get_num_threads()} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(args.seed)
    for name in args.models:
        r = bench(name, contexts, words, args.ref_n, rng)
        print(
            f"\n{r['model']}: {r['pairs']} pairs ({r['skipped']} skipped: term not in its context)\n"
            f"  reference (1 context/forward): {r['ref_rate']:8.1f} contexts/s  "
            f"[timed on a random subsample of {r['ref_n']} pairs; "
            f"{r['ref_seconds_extrapolated']:.0f} s extrapolated to all]\n"
            f"  ours (batched, length-sorted): {r['ours_rate']:8.1f} contexts/s  "
            f"[all pairs, {r['ours_seconds']:.1f} s]\n"
            f"  floor (forward passes alone, no padding): {r['pairs'] / r['floor_seconds']:8.1f} contexts/s  "
            f"[{r['floor_seconds']:.1f} s]\n"
            f"  ours / reference: {r['ours_rate'] / r['ref_rate']:.1f}x faster; "
            f"ours / floor: {r['ours_seconds'] / r['floor_seconds']:.2f}x the floor's time\n"
            f"  max |ours - reference| on the subsample: {r['max_abs_diff']:.3g} absolute, "
            f"{r['max_rel_diff']:.3g} relative to each vector's largest component\n"
            f"  peak RSS: {r['peak_rss_mb_after_ref']:.0f} MB after reference, "
            f"{r['peak_rss_mb_after_ours']:.0f} MB after ours "
            f"(output array {r['output_mb']:.0f} MB)"
        )


if __name__ == "__main__":
    main()
