"""A built-in GGUF's conversion into a transformers folder, as the project does it (the metadata parsed once:
:mod:`bias_utils.models.gguf_parse`) against transformers alone (the baseline: the file parsed for the tokenizer, the
config and the weights, the name map built per submodule), each into a fresh empty cache, and whether the two folders
hold the same files to the byte (``conversion.json`` records the cache's own path to the GGUF, so it is compared with
that path left out).

It times ``loading.convert_gguf`` whole: the reads, the dequantisation and the writes. The baseline is the same
function with :func:`bias_utils.models.gguf_parse.parsed_once` standing aside (a ``nullcontext``), which is what the
conversion was before it.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/bench_conversion.py \
        [--models smollm2-135m-instruct qwen2.5-coder-0.5b-instruct]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from bias_utils.models import builtin_models, gguf_parse, loading


def _convert(name: str, cache: Path) -> tuple[float, Path]:
    os.environ["BIAS_CACHE_DIR"] = str(cache)
    weights = builtin_models.builtin_weights(builtin_models.BUILTIN_MODELS[name])
    start = time.perf_counter()
    folder = loading.convert_gguf(weights)
    return time.perf_counter() - start, folder


def _files(folder: Path) -> dict[str, bytes]:
    found = {p.name: p.read_bytes() for p in folder.iterdir()}
    record = json.loads(found["conversion.json"])
    record.pop("gguf")  # the path of the GGUF in this cache
    found["conversion.json"] = json.dumps(record, sort_keys=True).encode()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"])
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    once = gguf_parse.parsed_once
    for name in args.models:
        with tempfile.TemporaryDirectory() as base_dir, tempfile.TemporaryDirectory() as ours_dir:
            gguf_parse.parsed_once = contextlib.nullcontext
            try:
                base, base_folder = _convert(name, Path(base_dir))
            finally:
                gguf_parse.parsed_once = once
            ours, ours_folder = _convert(name, Path(ours_dir))
            same = _files(base_folder) == _files(ours_folder)
            print(f"{name}: transformers alone {base:.1f} s, parsed once {ours:.1f} s ({base / ours:.2f}x); "
                  f"the same files to the byte: {same}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
