"""Advertised user flows, end to end, under papermill with small real inputs (MiniLM where the
notebook allows, SmolLM2 for generation), and the audit resumed after a SIGKILL between batches.

Every flow writes into ``tmp_path``; the embedding and model caches are the shared ones (a
rerun computes only what is new). All tests here are slow: run them targeted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bias_utils.book import runs
from bias_utils.core import paths

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


def _declared_only(notebook: str, args: list[str]) -> list[str]:
    """The ``-p name value`` triples of ``args`` that ``notebook`` declares: a parameter it does not have stops it
    (01 has no ``context_source``, ``limit`` or ``n_contexts``; 05 no ``context_source``)."""
    declared = runs.declared_parameters(paths.ROOT / "notebooks" / f"{notebook}.ipynb")
    return [a for i in range(0, len(args), 3) if args[i + 1] in declared for a in args[i:i + 3]]


def test_user_dictionary_selection_and_cross_model(tmp_path):
    """A dictionary with a new dimension and no contexts through 01-04 (WordNet examples), a user
    occupation -> group selection through 06, and 09 over both result folders."""
    results = tmp_path / "results"
    space_args = _user_dictionary(tmp_path, results)
    for nb in ("01_dictionaries", "02_contexts", "03_projection_accuracy", "04_profiles"):
        extra = ["-y", "sources: [dictionary, none]"] if nb == "02_contexts" else []
        if nb == "03_projection_accuracy":
            extra += ["-p", "n_boot", "100"]
        executed = _run(nb, tmp_path, *_declared_only(nb, space_args), *extra)
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
    executed = _run("05_layers", tmp_path, *_declared_only("05_layers", args), "-y", "sources: [dictionary, none]",
                    "-p", "n_boot", "100")
    # The user dictionary has no warmth/competence members: the chapter says so instead of drawing.
    assert "No layer curves" in _outputs(executed)


# --------------------------------------------------------------------------- resume between batches


_AUDIT_CHILD = """
import sys
from bias_utils.audit.bold import run_audit
run_audit(sys.argv[1], selection="audit", limit=6, max_new_tokens=6, seed=5, batch_size=2, n_boot=100)
"""


def _cache_with_models(root: Path) -> Path:
    """A fresh cache folder that shares only the converted models of the real one."""
    root.mkdir()
    (root / "models").symlink_to(paths.cache_dir() / "models", target_is_directory=True)
    return root


def test_audit_killed_between_batches_resumes_without_loss_or_duplicates(tmp_path, monkeypatch):
    from bias_utils.audit.bold import run_audit
    from bias_utils.models.loading import load_model

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


# --------------------------------------------------------------------------- the README's dictionary, by default

EXAMPLE_DICTIONARY = "data/examples/user_dictionary_example.csv"


def test_readme_example_dictionary_through_03_and_04_with_default_parameters(tmp_path):
    """The README's example (a new dimension, tidiness, no contexts) with the paper's default
    context_source="generated": its senses have no published contexts, so the extra terms' generator writes them
    (cached, so 04 reuses 03's), and both chapters read a tidiness axis built from the user's eight terms. Only
    the run-size parameters are small; the path is the README's, relative to the repository root."""
    from bias_utils.profiles import contexts, dictionaries

    results = tmp_path / "results"
    common = ["-p", "dictionary_path", EXAMPLE_DICTIONARY, "-p", "output_dir", str(results),
              "-p", "n_permutations", "100"]
    executed = _run("03_projection_accuracy", tmp_path, *common, "-p", "limit", "3", "-p", "n_boot", "100")
    assert "Traceback" not in _outputs(executed)
    user = dictionaries.read_dictionary(paths.ROOT / EXAMPLE_DICTIONARY)
    poles = pd.read_csv(results / "poles.csv")
    tidiness = poles[(poles["dimension"] == "tidiness") & (poles["space"] == "dimensions")]
    # every user term got contexts (generated and kept) and sits on its pole
    assert tidiness.set_index("direction")["n_senses"].to_dict() == user.groupby("direction").size().to_dict()
    executed = _run("04_profiles", tmp_path, *common, "-p", "limit", "3", "-p", "term_limit", "3")
    assert "Traceback" not in _outputs(executed)
    stats = pd.read_csv(results / "profile_stats.csv")
    assert set(stats["dimension"]) == {"tidiness"}
    # The kept contexts per sense, as the closing note reports them (from the generation cache: nothing new).
    report = contexts.generation_report(contexts.build_contexts(user, "generated"))
    print(report.to_string(index=False))
    assert report["term"].tolist() == user["term"].tolist() and (report["n_kept"] > 0).all()


# --------------------------------------------------------------------------- a notebook opened in Jupyter


def _set_parameters(cell: dict, **values) -> None:
    """Edit the parameters cell as a person does: the value after ``name: type =`` on its line."""
    lines = "".join(cell["source"]).splitlines()
    for name, value in values.items():
        hits = [i for i, line in enumerate(lines) if re.match(rf"{name}\s*:", line)]
        assert len(hits) == 1, f"no single line for {name} in the parameters cell"
        head, _, rest = lines[hits[0]].partition("=")
        comment = rest[rest.index("  #"):] if "  #" in rest else ""
        lines[hits[0]] = f"{head}= {value!r}{comment}"
    cell["source"] = "\n".join(lines) + "\n"


def _jupyter_run(notebook: str, tmp_path: Path, edit, monkeypatch) -> None:
    """Execute ``notebook`` as Jupyter does (nbclient, working folder ``notebooks/``, no papermill) after
    ``edit(cells)`` changed its cells."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(paths.ROOT / "notebooks" / f"{notebook}.ipynb", as_version=4)
    edit(nb.cells)
    monkeypatch.setenv("PYTHONPATH", str(paths.ROOT))  # the kernel imports this checkout's package
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(paths.ROOT / "notebooks")}}).execute()
    nbformat.write(nb, tmp_path / f"{notebook}.ipynb")
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors


def _tagged(cells, tag: str) -> dict:
    return next(c for c in cells if tag in c.get("metadata", {}).get("tags", []))


def test_jupyter_parameters_cell_edited_with_the_readme_path(tmp_path, monkeypatch):
    """04 opened in Jupyter (working folder notebooks/), the README's relative path typed into the parameters
    cell: it resolves against the repository root, and the profile is on the user's dimension."""
    results = tmp_path / "results"

    def edit(cells):
        _set_parameters(_tagged(cells, "parameters"), model="minilm-l6", dictionary_path=EXAMPLE_DICTIONARY,
                        context_source="dictionary", output_dir=str(results), limit=3, term_limit=3,
                        n_permutations=100, n_contexts=2)

    _jupyter_run("04_profiles", tmp_path, edit, monkeypatch)
    assert set(pd.read_csv(results / "profile_stats.csv")["dimension"]) == {"tidiness"}


# Words whose WordNet examples contain them, so the dictionary source gives each a context.
TRY_HIGH, TRY_LOW = ["gregarious", "convivial", "jovial"], ["reclusive", "standoffish", "withdrawn"]


def test_jupyter_trying_words_cell_edited(tmp_path, monkeypatch):
    """03 opened in Jupyter with the words typed into the cell made for trying them: the chapter's pole table
    counts them on the sociability axis."""
    import nbformat

    from bias_utils.profiles import dictionaries

    cells = nbformat.read(paths.ROOT / "notebooks" / "03_projection_accuracy.ipynb", as_version=4).cells
    if not any("try-words" in c.get("metadata", {}).get("tags", []) for c in cells):
        pytest.skip("notebook 03 has no cell tagged try-words yet (helper E adds it; issue 24 item 2)")
    results = tmp_path / "results"

    def edit(cells):
        _set_parameters(_tagged(cells, "parameters"), model="minilm-l6", context_source="dictionary",
                        output_dir=str(results), limit=3, n_boot=100, n_permutations=100, n_contexts=2)
        cell = _tagged(cells, "try-words")
        source = "".join(cell["source"])
        assert 'high=[], low=[]' in source
        cell["source"] = source.replace("high=[], low=[]", f"high={TRY_HIGH}, low={TRY_LOW}")

    _jupyter_run("03_projection_accuracy", tmp_path, edit, monkeypatch)
    seed = dictionaries.load_seed_dictionary()
    seed_counts = seed[seed["dimension"] == "sociability"].groupby("direction").size()
    poles = pd.read_csv(results / "poles.csv")
    got = poles[(poles["dimension"] == "sociability") & (poles["space"] == "dimensions")].set_index("direction")
    assert got["n_senses"].to_dict() == {"high": seed_counts["high"] + 3, "low": seed_counts["low"] + 3}
