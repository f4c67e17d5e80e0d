"""Benchmark: chapters 03, 05 and 10 against their floor, as ratios in one run.

A chapter's floor is what it cannot avoid: one forward pass over each distinct (context, word) pair it embeds,
in one length-sorted batched call, plus its statistics. For each chapter and model this script measures, in one
process:

* **cold**: the chapter's library calls (as its notebook makes them, default parameters) on an empty embedding
  cache (a temporary ``BIAS_CACHE_DIR`` whose ``models`` and ``dictionaries`` folders link to the real cache; model
  loading is not timed). Every batch the embedding engine computes is recorded, with its pairs' cache keys;
* **warm**: the same calls again, every embedding cached: the statistics and the cache reads;
* **embedding floor**: the distinct pairs recorded in the cold run, embedded once in one call without a cache.

Printed per chapter: cold, warm and floor seconds, ``cold / (floor + warm)`` (1.0 = nothing computed twice and
no batch wasted), the pairs computed in the cold run against the distinct ones (a pair computed twice shows here),
and the machine's load average (on a shared CPU every number grows).

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_chapters.py [--chapters 03 05 10] [--models ...]
[--limit N]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def chapter_03(m, dictionary, args) -> None:
    from bias_utils.profiles import axis_validity, space

    sp = space.build_space(m, dictionary, "generated", args.n_contexts, 0)
    result = space.direction_prediction(m, sp, n_contexts=args.n_contexts, layer="mean", limit=args.limit, seed=0,
                                        n_boot=2000, term_contexts="generated")
    space.accuracy_by_term_contexts(m, sp, result, term_contexts="generated", n_contexts=args.n_contexts,
                                    layer="mean", limit=args.limit, seed=0, n_boot=2000)
    axis_validity.axis_validity(m, sp, n_contexts=args.n_contexts, seed=0, limit=args.limit, n_permutations=200,
                                term_contexts="generated")


def chapter_05(m, dictionary, args) -> None:
    from bias_utils.profiles import layers

    layers.layers_by_context(m, dictionary, None, populations="names", templates=None, n_contexts=args.n_contexts,
                             seed=0, limit=args.limit, n_boot=200)


def chapter_10(m, dictionary, args) -> None:
    from bias_utils.profiles import axis_validity, robustness, tokenisation

    inputs, extras = robustness.collect_curve_inputs(m, dictionary, ("names", "terms"), n_contexts=args.n_contexts,
                                                     limit=args.limit, term_limit=None)
    robustness.specification_curve(inputs, n_permutations=200)
    for sp in extras["spaces"].values():
        axis_validity.validity_table(sp, extras["terms"], n_permutations=200)
    tokenisation.token_table(m, extras["population_embeddings"]["original"].words)


CHAPTERS = {"03": chapter_03, "05": chapter_05, "10": chapter_10}


class Recorder:
    """Wraps the embedding engine's batch loop (``embeddings.compute``, looked up at each call) to keep every
    pair it computes and the seconds it spends; the real loop runs unchanged."""

    def __init__(self, embeddings):
        self.embeddings, self.compute = embeddings, embeddings.compute
        self.pending: list = []
        self.seconds = 0.0

    def __call__(self, model, pending, *rest):
        t0 = time.perf_counter()
        self.pending.extend(pending)
        self.compute(model, pending, *rest)
        self.seconds += time.perf_counter() - t0

    def __enter__(self):
        self.embeddings.compute = self
        return self

    def __exit__(self, *exc):
        self.embeddings.compute = self.compute

    def floor(self, model) -> float:
        """Seconds to embed the distinct recorded pairs once, in one call, without a cache."""
        import numpy as np

        from bias_utils.models.embeddings import default_batch_size, layer_indices

        distinct: dict = {}  # key -> (row, key, token indices, inputs): each pair once, at its own row
        for _, key, idx, inputs in self.pending:
            distinct.setdefault(key, (len(distinct), key, idx, inputs))
        layers = layer_indices("all", model.n_layers)
        values = np.empty((len(distinct), len(layers), model.hidden_size), dtype=np.float32)
        t0 = time.perf_counter()
        self.compute(model, list(distinct.values()), layers, values, default_batch_size(model), None, False, 0)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=list(CHAPTERS), choices=list(CHAPTERS))
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct"])
    parser.add_argument("--limit", type=int, default=None, help="full-dictionary terms per dimension and pole")
    parser.add_argument("--n-contexts", type=int, default=5)
    args = parser.parse_args()

    real_cache = Path(os.environ.get("BIAS_CACHE_DIR") or Path(__file__).resolve().parents[1] / ".cache")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; limit={args.limit}")
    for name in args.models:
        for chapter in args.chapters:
            # a fresh embedding cache per chapter: each is measured as the first chapter to embed its pairs
            with tempfile.TemporaryDirectory(prefix="bench-chapters-") as tmp:
                for sub in ("models", "dictionaries"):
                    if (real_cache / sub).exists():
                        os.symlink(real_cache / sub, Path(tmp) / sub)
                os.environ["BIAS_CACHE_DIR"] = tmp  # read by paths.cache_dir() at every call
                from bias_utils.models import embeddings
                from bias_utils.models.loading import load_model
                from bias_utils.profiles import dictionaries

                m, dictionary = load_model(name), dictionaries.load_dictionary()
                with Recorder(embeddings) as recorder:
                    t0 = time.perf_counter()
                    CHAPTERS[chapter](m, dictionary, args)
                    cold = time.perf_counter() - t0
                t0 = time.perf_counter()
                CHAPTERS[chapter](m, dictionary, args)
                warm = time.perf_counter() - t0
                floor = recorder.floor(m)
            distinct = len({p[1] for p in recorder.pending})
            print(f"\n{name}, chapter {chapter}: cold {cold:.1f} s (embedding {recorder.seconds:.1f} s), "
                  f"warm {warm:.1f} s, embedding floor {floor:.1f} s")
            print(f"  cold / (floor + warm) = {cold / (floor + warm):.2f}; embedding / floor = "
                  f"{recorder.seconds / floor:.2f}; pairs computed {len(recorder.pending)}, distinct {distinct}; "
                  f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
