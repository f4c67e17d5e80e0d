"""bias_utils.completions: the projection of a model's own completions (notebook 08)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as st

from bias_utils import bold, completions, dictionaries, replication, space
from bias_utils.models import load_model


@pytest.fixture(scope="module")
def smollm():
    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def published():
    """Three published completions per group, plus one empty completion (a recorded skip)."""
    c = replication.load_published_completions()
    rows = pd.concat([c[c.group == g].head(3) for g in (bold.MALE_GROUP, bold.FEMALE_GROUP)])
    empty = rows.iloc[[0]].assign(completion="")
    return pd.concat([rows, empty], ignore_index=True)[["group", "occupation", "prompt", "completion"]]


@pytest.mark.slow
def test_completion_embedding_is_mean_hidden_state_over_completion_tokens(smollm, published):
    values, layers, skipped = completions.completion_embeddings(smollm, published)
    assert values.shape == (len(published), smollm.n_layers + 1, smollm.hidden_size)
    assert skipped["reason"].str.contains("empty").tolist() == [True]
    assert np.isnan(values[-1]).all()

    # independent: run the backbone directly and average the states of the completion's tokens
    row = published.iloc[1]
    text = row.prompt.rstrip() + " " + row.completion.strip()
    start = len(row.prompt.rstrip()) + 1
    enc = smollm.tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    offsets = enc.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        hidden = smollm.backbone()(**enc.to(smollm.device), output_hidden_states=True).hidden_states
    idx = [i for i, (s, e) in enumerate(offsets) if e > s and e > start]
    direct = np.stack([h[0, idx].float().mean(0).cpu().numpy() for h in hidden])
    np.testing.assert_allclose(values[1], direct, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_completion_projection_and_stats_match_numpy_and_scipy(smollm, published):
    dictionary = dictionaries.load_dictionary(None)
    small = dictionary[dictionary.dimension.isin(["sociability", "morality", "ability", "agency"])]
    small = small.groupby(["dimension", "direction"]).head(2)
    sp = space.build_space(smollm, small, "dictionary", n_contexts=2, seed=0)
    basis = sp.bases["warmth_competence"]
    values, _, _ = completions.completion_embeddings(smollm, published)
    table = completions.completion_projection(basis, values, published, layer="mean")

    kept = ~np.isnan(values).any(axis=(1, 2))
    direct = np.mean([values[kept][:, layer] @ basis.pinv[layer].T for layer in range(len(basis.layers))], axis=0)
    wide = table.pivot_table(index=table.index // len(basis.dimensions), columns="dimension", values="value")
    for j, dim in enumerate(basis.dimensions):
        np.testing.assert_allclose(wide[dim].to_numpy(), direct[:, j], rtol=1e-5, atol=1e-6)
        z = (direct[:, j] - direct[:, j].mean()) / direct[:, j].std()
        np.testing.assert_allclose(table.loc[table.dimension == dim, "z"].to_numpy(), z, rtol=1e-5, atol=1e-6)

    result = completions.completion_projection_stats(table)
    for dim in basis.dimensions:
        d = table[table.dimension == dim]
        ref = st.ttest_ind(d.loc[d.group == bold.FEMALE_GROUP, "z"], d.loc[d.group == bold.MALE_GROUP, "z"],
                           equal_var=False)
        row = result[(result.dimension == dim) & (result.test == "welch_t")].iloc[0]
        assert row.statistic == pytest.approx(ref.statistic, rel=1e-9)
        assert row.p == pytest.approx(ref.pvalue, rel=1e-9)
    p = result[result.test == "welch_t"]["p"].to_numpy()
    holm = np.minimum(1, np.maximum.accumulate(np.sort(p) * np.arange(len(p), 0, -1)))
    assert sorted(result[result.test == "welch_t"]["p_adj"]) == pytest.approx(sorted(holm))


def test_completion_projection_requires_two_per_group():
    table = pd.DataFrame({"dimension": ["warmth"] * 3, "group": [bold.FEMALE_GROUP] * 2 + [bold.MALE_GROUP],
                          "z": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match="need at least 2 each"):
        completions.completion_projection_stats(table)
