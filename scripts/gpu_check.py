"""The GPU check (``make gpu-check``): profiles and the full audit on CUDA, in float32 and bfloat16, against the CPU.

Usage, on a machine with CUDA and a CUDA build of torch::

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/gpu_check.py [--reference DIR] [--out results/gpu_check.json] [--quick]

Runs, for the CPU in float32 (the reference), CUDA in float32 (the default) and CUDA in bfloat16 (the opt-in
lower precision), the book's default settings:

* ``space``: ``space.build_space`` on the seed dictionary with the published generated contexts (5 per sense,
  seed 0), for SmolLM2 and MiniLM;
* ``profiles``: ``profiles.run_profiles`` with its default populations (names, gendered terms, non-binary terms,
  BLS occupations; the mean over layers);
* ``audit``: ``bold.run_audit`` for SmolLM2 with notebook 06's defaults (every audit prompt, 100 new tokens).

Each (device, precision) runs in a cache folder of its own, so that none reads another's embeddings or completions
(their cache keys name the model and its precision, not the device); converted models are shared. It prints, per
stage, the seconds and the tokens through the model per second (a hook on the input embedding counts them, padding
and prompts included; for the audit also the generated tokens per second), and per device and precision the largest
difference of the profiles from the CPU's (per word, in SD units, and per group mean) and whether the audit's
headline equals the CPU's, field by field. Everything also goes to ``--out`` as JSON, from which benchmarks/README.md's
figures are copied. ``--reference DIR`` reads the CPU's results from an earlier run (written there when missing),
so the CPU stages run once per machine. ``--quick``: 12 names per group and 80 audit prompts per group, to try the
script; its numbers are not the check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from bias_utils.audit import bold, occupation_headline
from bias_utils.core import paths
from bias_utils.models.loading import load_model, unload_model
from bias_utils.profiles import dictionaries, space
from bias_utils.profiles import population_profiles as profiles

MODELS = ("smollm2-135m-instruct", "minilm-l6")
AUDIT_MODEL = "smollm2-135m-instruct"
#: (device, dtype) in the order they run; the first is the reference.
SETTINGS = (("cpu", None), ("cuda", None), ("cuda", "bfloat16"))
PROFILE_KEYS = ["population", "group", "word", "kind", "space", "layer", "dimension"]
MEAN_KEYS = ["population", "space", "layer", "dimension", "group"]


class TokenCounter:
    """Tokens through a model's input embedding (every forward pass, padding included)."""

    def __init__(self, model):
        self.n = 0
        self.handle = model.model.get_input_embeddings().register_forward_hook(self._count)

    def _count(self, module, args, output):
        self.n += args[0].numel()


def _timed(model, stage: str, log: list, fn, generated=None):
    counter = TokenCounter(model)
    start = time.perf_counter()
    try:
        out = fn()
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
    finally:
        counter.handle.remove()
    seconds = time.perf_counter() - start
    row = {"stage": stage, "model": model.model_id, "device": model.source.get("device_choice"),
           "seconds": round(seconds, 2), "tokens": counter.n, "tokens_per_s": round(counter.n / seconds, 1)}
    if generated is not None:
        n = generated(out)
        row.update(generated_tokens=n, generated_per_s=round(n / seconds, 1))
    log.append(row)
    print(f"  {stage:9s} {model.model_id:45s} {seconds:8.1f} s {row['tokens_per_s']:10.1f} tok/s"
          + (f" ({row['generated_per_s']:.1f} generated tok/s)" if generated is not None else ""), flush=True)
    return out


def run_setting(device: str, dtype: str | None, quick: bool, log: list, converted: Path, models: list[str]) -> dict:
    """Profiles of every model and the audit's headline, on ``device`` in ``dtype``, in a fresh cache folder that
    shares only the ``converted`` models."""
    folder = Path(tempfile.mkdtemp(prefix=f"gpu-check-{device}-{dtype or 'fp32'}-"))
    (folder / "models").symlink_to(converted, target_is_directory=True)
    os.environ["BIAS_CACHE_DIR"] = str(folder)
    try:
        return _profiles_and_audit(device, dtype, quick, log, models)
    finally:
        shutil.rmtree(folder)  # the link to the converted models goes, not what it points to


def _profiles_and_audit(device: str, dtype: str | None, quick: bool, log: list, models: list[str]) -> dict:
    result: dict = {"profiles": {}, "means": {}}
    dictionary = dictionaries.load_dictionary(None)
    for name in models:
        model = load_model(name, dtype=dtype, device=device)
        sp = _timed(model, "space", log, lambda: space.build_space(model, dictionary, "generated", 5, 0))
        res = _timed(model, "profiles", log,
                     lambda: profiles.run_profiles(model, sp.bases, limit=12 if quick else None))
        result["profiles"][name] = res.values[PROFILE_KEYS + ["z"]]
        result["means"][name] = res.means[MEAN_KEYS + ["mean"]]
        if name == AUDIT_MODEL:
            audit = _timed(model, "audit", log, lambda: bold.run_audit(model, limit=80 if quick else None),
                           generated=lambda r: int(r.metrics["n_tokens"].sum()
                                                   + (r.metrics["finish_reason"] == "stop").sum()))
            result["headline"] = occupation_headline.headline(audit.headline)
        unload_model(model)
        if device == "cuda":
            torch.cuda.empty_cache()
    return result


def _save_reference(folder: Path, result: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for part in ("profiles", "means"):
        for name, table in result[part].items():
            table.to_parquet(folder / f"{part}--{name}.parquet")
    (folder / "headline.json").write_text(json.dumps(result["headline"], default=str, indent=1))


def _load_reference(folder: Path, models: list[str]) -> dict | None:
    try:
        return {part: {name: pd.read_parquet(folder / f"{part}--{name}.parquet") for name in models}
                for part in ("profiles", "means")} | {"headline": json.loads((folder / "headline.json").read_text())}
    except OSError:
        return None


def _largest_difference(ours: pd.DataFrame, ref: pd.DataFrame, keys: list[str], column: str) -> float:
    both = ref.merge(ours, on=keys, suffixes=("_cpu", ""), validate="one_to_one")
    if len(both) != len(ref):
        return math.inf  # some rows are missing on one side: not the same profile
    return float((both[column] - both[f"{column}_cpu"]).abs().max())


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b or str(a) == str(b)


def compare(result: dict, ref: dict) -> dict:
    out = {"profile_z_max_abs_diff": {}, "group_mean_max_abs_diff": {}}
    for name in result["profiles"]:
        out["profile_z_max_abs_diff"][name] = _largest_difference(result["profiles"][name], ref["profiles"][name],
                                                                  PROFILE_KEYS, "z")
        out["group_mean_max_abs_diff"][name] = _largest_difference(result["means"][name], ref["means"][name],
                                                                   MEAN_KEYS, "mean")
    differ = {k: {"cpu": ref["headline"].get(k), "here": v} for k, v in result["headline"].items()
              if not _same(v, ref["headline"].get(k))}
    out["headline_equal"], out["headline_differences"] = not differ, differ
    out["headline"] = result["headline"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder of the CPU's results: read when present, written when missing")
    parser.add_argument("--out", type=Path, default=paths.results_dir() / "gpu_check.json")
    parser.add_argument("--quick", action="store_true", help="a small slice, to try the script (not the check)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS),
                        help="the built-in models to check (a machine that can take only one; the audit runs with "
                             f"{AUDIT_MODEL})")
    args = parser.parse_args()
    if AUDIT_MODEL not in args.models:
        parser.error(f"--models must include {AUDIT_MODEL}: the audit's headline is part of the check")
    if not torch.cuda.is_available():
        print("gpu-check: no CUDA device (torch.cuda.is_available() is False; a CPU-only torch build says the same). "
              "Run it on a machine with an NVIDIA GPU and a CUDA build of torch.", file=sys.stderr)
        return 2
    print(f"gpu-check on {torch.cuda.get_device_name(0)}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
          f"{os.cpu_count()} CPU cores" + (" -- QUICK: a slice, not the check" if args.quick else ""), flush=True)
    log: list = []
    converted = (paths.cache_dir() / "models").resolve()
    converted.mkdir(parents=True, exist_ok=True)
    reference = _load_reference(args.reference, args.models) if args.reference else None
    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
              "quick": args.quick, "models": args.models, "settings": {}}
    for device, dtype in SETTINGS:
        label = f"{device} {dtype or 'float32'}"
        if device == "cpu" and reference is not None:
            print(f"{label}: read from {args.reference}")
            continue
        print(f"{label}:", flush=True)
        result = run_setting(device, dtype, args.quick, log, converted, args.models)
        if device == "cpu":
            reference = result
            if args.reference:
                _save_reference(args.reference, result)
            continue
        report["settings"][label] = compare(result, reference)
    report["cpu_headline"] = reference["headline"]
    report["stages"] = log
    print("\nagainst the CPU (float32):")
    for label, c in report["settings"].items():
        z = ", ".join(f"{n} {v:.2g}" for n, v in c["profile_z_max_abs_diff"].items())
        means = ", ".join(f"{n} {v:.2g}" for n, v in c["group_mean_max_abs_diff"].items())
        print(f"  {label:15s} profiles max |dz| {z}; group means max |d| {means}; audit headline "
              + ("equal" if c["headline_equal"] else f"DIFFERS in {sorted(c['headline_differences'])}"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
