"""Benchmark: how long the robustness chapter's computation takes per model, cold vs warm.

For each model the whole chapter's work runs twice in this process
(:func:`bias_utils.profiles.robustness.collect_curve_inputs`, the specification curve with
its joint test, the axis null for every context source, the token counts):

* **cold**: on an empty embedding cache (a temporary ``BIAS_CACHE_DIR`` whose
  ``models`` and ``dictionaries`` folders link to the real cache, so only the
  embeddings start empty; model loading is not timed);
* **warm**: the same call again, every embedding now cached. This is also what
  the chapter costs in a book whose earlier chapters (03-05) embedded the same
  contexts, except for the lead-in templates.

Printed per model: seconds per step, the cold/warm ratio, and the share of the
warm run spent in the statistics (curve + axis null) rather than reading embeddings.
The machine's load average is printed too: on a shared CPU every number grows.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_robustness.py [--models ...] [--limit N] [--term-limit N]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def run_once(m, dictionary, args) -> dict:
    from bias_utils.profiles import axis_validity, robustness, tokenisation

    t0 = time.perf_counter()
    inputs, extras = robustness.collect_curve_inputs(m, dictionary, ("names", "terms"), n_contexts=args.n_contexts,
                                                     limit=args.limit, term_limit=args.term_limit)
    t1 = time.perf_counter()
    curve = robustness.specification_curve(inputs, n_permutations=args.n_permutations)
    t2 = time.perf_counter()
    for sp in extras["spaces"].values():
        axis_validity._validity_table(sp, extras["terms"], n_permutations=args.n_permutations)
    t3 = time.perf_counter()
    tokenisation.token_table(m, extras["population_embeddings"]["original"].words)
    t4 = time.perf_counter()
    return {**{f"inputs.{k}": v for k, v in inputs.seconds.items()}, "inputs": t1 - t0, "curve": t2 - t1,
            "axis_null": t3 - t2, "tokens": t4 - t3, "total": t4 - t0, "n_specs": len(curve.specs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "minilm-l6"])
    parser.add_argument("--limit", type=int, default=None, help="names per group (None: all 100)")
    parser.add_argument("--term-limit", type=int, default=None, help="extra terms per dimension and pole")
    parser.add_argument("--n-contexts", type=int, default=5)
    parser.add_argument("--n-permutations", type=int, default=200)
    args = parser.parse_args()

    real_cache = Path(os.environ.get("BIAS_CACHE_DIR") or Path(__file__).resolve().parents[1] / ".cache")
    with tempfile.TemporaryDirectory(prefix="bench-robustness-") as tmp:
        for sub in ("models", "dictionaries"):
            if (real_cache / sub).exists():
                os.symlink(real_cache / sub, Path(tmp) / sub)
        os.environ["BIAS_CACHE_DIR"] = tmp  # read by paths._cache_dir() at every call
        from bias_utils.models.loading import load_model
        from bias_utils.profiles import dictionaries

        dictionary = dictionaries.load_dictionary()
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; limit={args.limit}, "
              f"term_limit={args.term_limit}, n_contexts={args.n_contexts}, n_permutations={args.n_permutations}")
        grand = {"cold": 0.0, "warm": 0.0}
        for name in args.models:
            m = load_model(name)
            cold = run_once(m, dictionary, args)
            warm = run_once(m, dictionary, args)
            grand["cold"] += cold["total"]
            grand["warm"] += warm["total"]
            print(f"\n{name} ({cold['n_specs']} specification rows)")
            for key in cold:
                if key != "n_specs":
                    print(f"  {key:<24} cold {cold[key]:8.1f} s   warm {warm[key]:8.1f} s")
            stats = warm["curve"] + warm["axis_null"]
            print(f"  cold / warm = {cold['total'] / warm['total']:.1f}x; statistics are "
                  f"{stats / warm['total']:.0%} of the warm run")
        print(f"\nall models: cold {grand['cold'] / 60:.1f} min, warm {grand['warm'] / 60:.1f} min, "
              f"cold / warm = {grand['cold'] / grand['warm']:.1f}x; load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
