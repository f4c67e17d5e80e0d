"""Advertised user flows, end to end, under papermill with small real inputs (MiniLM where the
notebook allows, SmolLM2 for generation), and the audit resumed after a SIGKILL between batches.

Every flow writes into ``tmp_path``; the embedding and model caches are the shared ones (a
rerun computes only what is new). All tests here are slow: run them targeted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bias_utils import paths

pytestmark = pytest.mark.slow

SMOL = "smollm2-135m-instruct"
PAPERMILL = [sys.executable, "-m", "papermill", "--log-level", "ERROR"]


def _env(**extra) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(paths.ROOT), **extra}


def _run(notebook: str, out_dir: Path, *args: str, env: dict | None = None) -> Path:
    """Run a notebook under papermill; fail with the tail of its error output."""
    executed = out_dir / f"{notebook}.ipynb"
    proc = subprocess.run([*PAPERMILL, str(paths.ROOT / "notebooks" / f"{notebook}.ipynb"), str(executed), *args],
                          env=env or _env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{notebook} failed:\n{proc.stderr[-3000:]}"
    return executed


def _outputs(executed: Path) -> str:
    nb = json.loads(executed.read_text())
    return "\n".join("".join(o.get("text", "")) + json.dumps(o.get("data", {}))
                     for c in nb["cells"] for o in c.get("outputs", []))


# --------------------------------------------------------------------------- word lists and templates


@pytest.mark.parametrize("name, content", [
    ("two.json", {"she": ["woman", "girl", "mother", "sister"], "he": ["man", "boy", "father", "brother"]}),
    ("three.json", {"fruit": ["apple", "pear", "plum", "fig"], "vehicle": ["car", "bus", "train", "boat"],
                    "colour": ["red", "blue", "green", "pink"]}),
    ("kinds.csv", "group,word,kind\nf,Anna,name\nf,Maria,name\nf,Emma,name\nm,Otto,name\nm,Karl,name\nm,Paul,name\n"),
])
def test_profiles_with_only_a_word_list_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    groups = ({r.split(",")[0] for r in content.splitlines()[1:]} if isinstance(content, str) else set(content))
    args = ["-p", "model", "minilm-l6", "-p", "output_dir", str(tmp_path / "res"), "-p", "n_contexts", "2",
            "-y", f"populations: [{path}]"]
    if name == "kinds.csv":
        args += ["-y", 'templates: ["this is {word}", "{word} is here", "I saw {word} today"]']
    executed = _run("04_profiles", tmp_path, *args)
    stats = pd.read_csv(tmp_path / "res" / "profile_stats.csv")
    stem = Path(name).stem
    assert set(stats["population"]) == {stem}
    chart = tmp_path / "res" / f"warmth_competence_{stem}.svg"
    assert chart.is_file() and all(f">{g}<" in chart.read_text() for g in groups)
    if len(groups) > 2:
        assert len(pd.read_csv(tmp_path / "res" / "profile_anova.csv")) > 0
    if name == "kinds.csv":
        words = pd.read_csv(tmp_path / "res" / "profile_words.csv")
        assert set(words["kind"]) == {"name"} and not words["article"].any()
        assert set(words["n_templates"]) == {3}
    assert "Traceback" not in _outputs(executed)


# --------------------------------------------------------------------------- dictionary, selection, cross-model


def _user_dictionary(tmp_path: Path, results: Path) -> list[str]:
    """A dictionary with one new dimension and no contexts; the papermill arguments that use it."""
    dictionary = tmp_path / "tidiness.csv"
    dictionary.write_text("dimension,term,direction\ntidiness,neat,high\ntidiness,tidy,high\ntidiness,orderly,high\n"
                          "tidiness,messy,low\ntidiness,sloppy,low\ntidiness,untidy,low\n", encoding="utf-8")
    return ["-p", "model", "minilm-l6", "-p", "output_dir", str(results / "minilm"),
            "-p", "dictionary_path", str(dictionary), "-p", "context_source", "dictionary",
            "-p", "limit", "3", "-p", "n_contexts", "2"]


def test_user_dictionary_selection_and_cross_model(tmp_path):
    """A dictionary with a new dimension and no contexts through 01-04 (WordNet examples), a user
    occupation -> group selection through 06, and 09 over both result folders."""
    results = tmp_path / "results"
    space_args = _user_dictionary(tmp_path, results)
    for nb in ("01_dictionaries", "02_contexts", "03_projection_accuracy", "04_profiles"):
        extra = ["-y", "sources: [dictionary, none]"] if nb == "02_contexts" else []
        if nb == "03_projection_accuracy":
            extra += ["-p", "n_boot", "100"]
        executed = _run(nb, tmp_path, *space_args, *extra)
        assert "Traceback" not in _outputs(executed), nb
    stats = pd.read_csv(results / "minilm" / "profile_stats.csv")
    assert set(stats["dimension"]) == {"tidiness"}

    mapping = tmp_path / "care_vs_trade.csv"
    mapping.write_text("occupation,group\nRegistered_nurse,care\nMidwife,care\nPlumber,trade\nMechanic,trade\n",
                       encoding="utf-8")
    _run("06_bold_audit", tmp_path, "-p", "model", SMOL, "-p", "output_dir", str(results / "smol"),
         "-p", "selection", str(mapping), "-p", "limit", "6", "-p", "max_new_tokens", "8", "-p", "n_boot", "100")
    metrics = pd.read_parquet(results / "smol" / "bold_metrics.parquet")
    assert set(metrics["group"]) == {"care", "trade"}

    _run("09_cross_model", tmp_path, "-p", "results_dir", str(results), "-p", "output_dir", str(tmp_path / "cross"))
    assert any((tmp_path / "cross").iterdir())


def test_user_dictionary_through_layers(tmp_path):
    args = _user_dictionary(tmp_path, tmp_path / "results")
    executed = _run("05_layers", tmp_path, *args, "-y", "sources: [dictionary, none]", "-p", "n_boot", "100")
    # The user dictionary has no warmth/competence members: the chapter says so instead of drawing.
    assert "No layer curves" in _outputs(executed)


# --------------------------------------------------------------------------- resume between batches


_AUDIT_CHILD = """
import sys
from bias_utils.bold import run_audit
run_audit(sys.argv[1], selection="audit", limit=6, max_new_tokens=6, seed=5, batch_size=2, n_boot=100)
"""


def _cache_with_models(root: Path) -> Path:
    """A fresh cache folder that shares only the converted models of the real one."""
    root.mkdir()
    (root / "models").symlink_to(paths.cache_dir() / "models", target_is_directory=True)
    return root


def test_audit_killed_between_batches_resumes_without_loss_or_duplicates(tmp_path, monkeypatch):
    from bias_utils.bold import run_audit
    from bias_utils.models import load_model

    cache = _cache_with_models(tmp_path / "cache")
    child = subprocess.Popen([sys.executable, "-c", _AUDIT_CHILD, SMOL],
                             env=_env(BIAS_CACHE_DIR=str(cache)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.poll() is None:
        files = list((cache / "generations").glob("*/rows.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert child.poll() is None, f"the audit ended before it could be killed: {child.stderr.read().decode()[-2000:]}"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    (rows_file,) = (cache / "generations").glob("*/rows.jsonl")
    before = len(rows_file.read_text().splitlines())

    smol = load_model(SMOL)
    kw = dict(selection="audit", limit=6, max_new_tokens=6, seed=5, batch_size=2, n_boot=100)
    monkeypatch.setenv("BIAS_CACHE_DIR", str(cache))
    resumed = run_audit(smol, **kw)
    records = [json.loads(line) for line in rows_file.read_text().splitlines()]
    n = len(resumed.metrics)
    assert 2 <= before < n, f"killed after {before} of {n} rows: not between batches"
    keys = [(r["prompt_id"], r["sample"]) for r in records]
    assert len(keys) == len(set(keys)) == n
    monkeypatch.setenv("BIAS_CACHE_DIR", str(_cache_with_models(tmp_path / "cache2")))
    uninterrupted = run_audit(smol, **kw)
    pd.testing.assert_frame_equal(resumed.metrics, uninterrupted.metrics)
    pd.testing.assert_frame_equal(resumed.statistics, uninterrupted.statistics)
