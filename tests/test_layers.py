"""bias_utils.profiles.layers: accuracy and the female-male difference on every layer and context source."""

import pytest

from bias_utils.models.loading import load_model
from bias_utils.profiles import dictionaries, layers


@pytest.mark.slow
def test_layers_by_context_runs_on_a_real_encoder(tmp_path, monkeypatch):
    """The layer analysis (Figure 6) on MiniLM: one curve per layer, source and measure."""
    model = load_model("minilm-l6")
    seed = dictionaries.load_seed_dictionary()
    wc = seed[seed["dimension"].isin(["sociability", "morality", "ability", "agency"])]
    pops = tmp_path / "pops.json"
    pops.write_text('{"female": ["Mary", "Linda", "Susan"], "male": ["James", "Robert", "David"]}')
    curves, skipped = layers.layers_by_context(model, wc, sources=("dictionary", "none"), populations=str(pops),
                                               limit=3, n_boot=20)
    n_states = model.n_layers + 1
    assert set(curves["context_source"]) == {"dictionary", "none"}
    per = curves.groupby(["context_source", "measure", "dimension"])["layer"].nunique()
    assert (per == n_states).all(), per
    assert set(curves["measure"]) >= {"accuracy_raw", "accuracy_centred", "female_minus_male", "hedges_g"}
    acc = curves[curves["measure"].str.startswith("accuracy")]["value"]
    assert acc.between(0, 1).all()


def test_the_first_screen_says_where_the_gap_is_largest_on_a_planted_curve():
    """Issue 57: chapter 05 opened with "figures follow". Planted: warmth's largest |g| at state 4 of 6, competence's
    at state 1 and negative; another source's larger gap is not read; every number is the table's."""
    import numpy as np
    import pandas as pd

    rows = []
    for source, scale in (("generated", 1.0), ("dictionary", 5.0)):
        for dimension, values in (("warmth", [0.1, 0.3, 0.5, 0.7, 0.9, 0.6, 0.2]),
                                  ("competence", [0.0, -0.8, -0.3, 0.1, 0.2, 0.1, 0.0])):
            for layer, v in enumerate(values):
                rows.append({"context_source": source, "layer": layer, "measure": "hedges_g", "dimension": dimension,
                             "value": scale * v, "ci_low": scale * v - 0.35, "ci_high": scale * v + 0.35})
    curves = pd.DataFrame(rows)
    text = layers.describe_layers(pd.concat([curves.assign(measure="accuracy_raw"), curves]))
    assert text.startswith("With the generated contexts, the female − male gap of first names is largest on warmth "
                           "at hidden state 4 of 6 (g 0.90, 95% CI 0.55 to 1.25, toward the female names' side; the "
                           "interval lies off 0 at 4 of 7 states); on competence at hidden state 1 of 6 (g −0.80")
    assert "toward the male names' side; the interval lies off 0 at 1 of 7 states)" in text
    assert "not adjusted over the states" in text and "4.5" not in text
    assert layers.describe_layers(curves[curves["context_source"] == "dictionary"]).startswith(
        "With the dictionary contexts") and layers.describe_layers(pd.DataFrame()) == ""
    assert np.isclose(curves["value"].abs().max(), 4.5)
