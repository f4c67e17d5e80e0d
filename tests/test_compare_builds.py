"""scripts/compare_builds.py: two builds' tables compared cell by cell, with a tolerance from the float32 arithmetic
that lets a summation order's rounding through and names a real change."""

import importlib.util

import numpy as np
import pandas as pd

from bias_utils.core import paths

_spec = importlib.util.spec_from_file_location("compare_builds", paths.ROOT / "scripts" / "compare_builds.py")
compare_builds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_builds)


def _write(root, name, df):
    (root / "m").mkdir(parents=True, exist_ok=True)
    df.to_parquet(root / "m" / f"{name}.parquet", index=False)


def test_a_summation_orders_rounding_passes_and_a_real_change_is_named(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 1536)).astype(np.float32)
    w = rng.normal(size=1536).astype(np.float32)
    # the same float32 sums of 1,536 positive terms (a squared norm, a softmax's denominator) in two orders,
    # pairwise and one term after another: they round differently, within n eps of the sum
    terms = np.abs(x * w)
    one = terms.sum(axis=1, dtype=np.float32).astype(float)
    two = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1].astype(float)
    assert (one != two).any()  # the orders do round differently
    base = pd.DataFrame({"value": one, "text": [f"t{i}" for i in range(200)], "zero": 0.0})
    _write(tmp_path / "a", "t", base)
    _write(tmp_path / "b", "t", base.assign(value=two))
    text, failing = compare_builds.compare(tmp_path / "a", tmp_path / "b")
    assert failing == 0 and "beyond: 0" in text
    # companion: one value moved by 1e-3 relative, one completion changed: both named, nothing else
    changed = base.assign(value=two).copy()
    changed.loc[7, "value"] *= 1 + 1e-3
    changed.loc[3, "text"] = "another completion"
    _write(tmp_path / "c", "t", changed)
    text, failing = compare_builds.compare(tmp_path / "a", tmp_path / "c")
    assert failing == 1 and "m/t: 2 cells beyond tolerance" in text
    assert "row 7, value" in text and "row 3, text: 't3' | 'another completion'" in text
    # --exact: the rounding differences count too
    _, failing = compare_builds.compare(tmp_path / "a", tmp_path / "b", rtol=0.0, atol=0.0)
    assert failing == 1


def test_tables_in_one_build_only_and_other_shapes_are_named(tmp_path):
    _write(tmp_path / "a", "t", pd.DataFrame({"x": [1.0, np.nan, np.inf], "seconds": [1.0, 2.0, 3.0]}))
    _write(tmp_path / "b", "t", pd.DataFrame({"x": [1.0, np.nan, np.inf], "seconds": [9.0, 2.0, 3.0]}))
    _write(tmp_path / "b", "extra", pd.DataFrame({"x": [1.0]}))
    text, failing = compare_builds.compare(tmp_path / "a", tmp_path / "b")
    assert failing == 1 and "m/extra: only in B" in text and "identical to the bit: 3" in text
    assert "m/t: seconds measure the machine, not compared" in text  # wall-clock time is no result
    _write(tmp_path / "b", "t", pd.DataFrame({"x": [1.0, np.nan]}))
    text, _ = compare_builds.compare(tmp_path / "a", tmp_path / "b")
    assert "m/t: columns or rows differ" in text
