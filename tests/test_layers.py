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
