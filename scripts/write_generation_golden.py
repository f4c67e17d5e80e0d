"""Write the decoding loop's golden sample: SmolLM2's completions, expected counts and stored states for a fixed
slice of BOLD prompts, as the code of the current commit produces them.

Usage (on a CPU, one thread)::

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/write_generation_golden.py [--out tests/fixtures/generation_golden.json]

``tests/test_decoding_golden.py`` regenerates the same sample with the code under test and compares: completions
byte for byte, expected counts and states within float32's bounds (``tests/float32_bounds.py``). The file was
written before the loop moved onto the
device (issue 29), so the test shows what that rewrite kept. Three cases: the audit's raw prompts (states and
counts; several completions start with a newline or a space), the same prompts with a chat template (counts only;
the prompt then ends in template tokens), and the screened output projection (``screen=True``).

The states are stored as projections: every layer's mean state (completion and prompt) times three fixed random
unit vectors (numpy seed 0), so the file stays small and a change of any pooled token moves them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

from bias_utils.audit.bold_prompts import load_profession_prompts
from bias_utils.models.generation import completion_states, generate
from bias_utils.models.loading import load_model

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"
#: Every 193rd BOLD profession prompt, the first 24: leading newlines, spaces and digits among the completions.
STEP, N_PROMPTS, N_CHAT, N_SCREENED = 193, 24, 16, 8
SETTINGS = dict(max_new_tokens=40, temperature=0.7, top_p=0.9, top_k=50, seed=0)
CASES = {"raw": dict(chat=False, screen="auto"), "chat": dict(chat=True, screen="auto"),
         "screened": dict(chat=False, screen=True)}


def projections(hidden_size: int) -> np.ndarray:
    """Three fixed random unit vectors ``[hidden, 3]``."""
    v = np.random.default_rng(0).standard_normal((hidden_size, 3))
    return v / np.linalg.norm(v, axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "generation_golden.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = load_profession_prompts().iloc[::STEP].head(N_PROMPTS)
    model = load_model(MODEL)
    vectors = projections(model.hidden_size)
    record = {"model": MODEL, "model_id": model.model_id, "torch": torch.__version__,
              "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip(),
              "step": STEP, "settings": SETTINGS, "cases": {}}
    for name, case in CASES.items():
        n = {"raw": N_PROMPTS, "chat": N_CHAT, "screened": N_SCREENED}[name]
        prompts, ids = table["prompt"].head(n).tolist(), table["prompt_id"].head(n).tolist()
        with tempfile.TemporaryDirectory() as cache:
            out = generate(model, prompts, prompt_ids=ids, cache=cache, progress=False, **case, **SETTINGS)
            rows = out[["prompt_id", "completion", "n_tokens", "finish_reason", "expected_male",
                        "expected_female"]].to_dict("records")
            entry = {**case, "rows": rows}
            if not case["chat"]:
                states = completion_states(model.model_id, prompts, out["completion"].tolist(), cache=cache)
                entry["states"] = {part: np.einsum("nlh,hk->nlk", states[part].astype(np.float64),
                                                   vectors).tolist() for part in ("completion", "prompt")}
        record["cases"][name] = entry
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
