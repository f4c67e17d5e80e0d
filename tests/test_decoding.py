"""The decoding loop against its golden sample (``tests/fixtures/generation_golden.json``).

The file was written by ``scripts/write_generation_golden.py`` with the loop as it was before it moved onto the
device (the commit it names): SmolLM2, 24 BOLD prompts, 40 tokens, the audit's sampling settings, raw prompts (with
the stored states), a chat template, and the screened output projection. The code under test must give the same
completions byte for byte, the same expected counts to 1e-6 and the same stored states to 1e-5 on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bias_utils.bold_prompts import load_profession_prompts
from bias_utils.generation import completion_states, generate

GOLDEN = Path(__file__).parent / "fixtures" / "generation_golden.json"
CASES = ("raw", "chat", "screened")


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def smol(golden):
    from bias_utils.models import load_model

    model = load_model(golden["model"])
    assert model.model_id == golden["model_id"], "the golden sample was written with other weights"
    return model


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_completions_counts_and_states_equal_the_golden_sample(golden, smol, case, tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the sample was written: matrix kernels may accumulate differently with more
    try:
        want = golden["cases"][case]
        rows = want["rows"]
        table = load_profession_prompts().iloc[::golden["step"]].head(len(rows))
        assert table["prompt_id"].tolist() == [r["prompt_id"] for r in rows]
        prompts = table["prompt"].tolist()
        got = generate(smol, prompts, prompt_ids=table["prompt_id"].tolist(), cache=tmp_path, progress=False,
                       chat=want["chat"], screen=want["screen"], **golden["settings"])
    finally:
        torch.set_num_threads(threads)
    assert got["completion"].tolist() == [r["completion"] for r in rows]
    assert got["n_tokens"].tolist() == [r["n_tokens"] for r in rows]
    assert got["finish_reason"].tolist() == [r["finish_reason"] for r in rows]
    for column in ("expected_male", "expected_female"):
        np.testing.assert_allclose(got[column], [r[column] for r in rows], rtol=0, atol=1e-6)
    # The sample has teeth: some completions start with whitespace and some rows carry real expected mass.
    assert case == "chat" or any(r["completion"][:1].isspace() for r in rows)
    assert max(r["expected_male"] + r["expected_female"] for r in rows) > 0.1
    if "states" in want:
        states = completion_states(smol.model_id, prompts, got["completion"].tolist(), cache=tmp_path)
        # The file's projections: three random unit vectors, numpy seed 0 (scripts/write_generation_golden.py).
        vectors = np.random.default_rng(0).standard_normal((smol.hidden_size, 3))
        vectors /= np.linalg.norm(vectors, axis=0)
        for part, values in want["states"].items():
            ours = np.einsum("nlh,hk->nlk", states[part].astype(np.float64), vectors)
            np.testing.assert_allclose(ours, np.array(values, dtype=np.float64), rtol=1e-5, atol=1e-5)
