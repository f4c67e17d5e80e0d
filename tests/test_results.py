"""Result tables land complete, in both formats, in one folder per model."""

import pandas as pd
import pytest

from bias_utils.core import results


def test_write_table_roundtrips_exact_types_and_writes_csv(tmp_path):
    df = pd.DataFrame({"dimension": ["warmth", "competence"], "p": [1e-18, 0.25], "n": [200, 200]})
    pq, csv = results.write_table(df, tmp_path / "stats")
    assert (pq.name, csv.name) == ("stats.parquet", "stats.csv")
    pd.testing.assert_frame_equal(results._read_table(tmp_path / "stats"), df)
    pd.testing.assert_frame_equal(pd.read_csv(csv), df)


def test_model_slug_maps_hub_ids_and_refuses_reserved_names():
    assert results.model_slug("HuggingFaceTB/SmolLM2-135M@abc:fp32") == "HuggingFaceTB__SmolLM2-135M__abc__fp32"
    assert results.model_slug("minilm-l6--53aa51172d14--fp32") == "minilm-l6--53aa51172d14--fp32"
    for bad in (*results._RESERVED_FOLDERS, "///"):
        with pytest.raises(ValueError, match="folder name"):
            results.model_slug(bad)


def test_output_folder_defaults_to_results_per_model(tmp_path, monkeypatch):
    monkeypatch.setenv("BIAS_RESULTS_DIR", str(tmp_path))
    assert results.output_folder("org/model@1") == tmp_path / "org__model__1"
    assert results.output_folder("org/model@1", tmp_path / "mine") == tmp_path / "mine"
    assert (tmp_path / "mine").is_dir()


def test_display_name_drops_hash_owner_and_default_dtype_wherever_an_id_stands():
    assert results.display_name("smollm2-135m-instruct--b179c9523d0e--fp32") == "smollm2-135m-instruct"
    # a hub model's folder slug (owner__name) and a non-default dtype
    assert results.display_name("Qwen__Qwen2.5-0.5B-Instruct--7ae557604adf--bf16") == "Qwen2.5-0.5B-Instruct (bf16)"
    assert results.display_name("BOLD audit: minilm-l6--53aa51172d14--fp32 (mean layer)") == \
        "BOLD audit: minilm-l6 (mean layer)"
    assert results.display_name("names--warmth") == "names--warmth"  # no weight hash: not a model id


def test_first_row_matches_every_given_column_and_none_matches_any():
    from bias_utils.core.results import first_row
    t = pd.DataFrame({"test": ["a", "b", "b"], "measure": ["x", "x", "y"], "value": [1, 2, 3]})
    assert first_row(t, test="b")["value"] == 2
    assert first_row(t, test="b", measure="y")["value"] == 3
    assert first_row(t, test="b", measure=None)["value"] == 2
    assert first_row(t, test="c") is None and first_row(t.iloc[:0], test="a") is None
