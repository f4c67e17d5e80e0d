"""The book machinery on a tiny real notebook: run keys, skips, manifests, toc."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from bias_utils import book, data, rendering

FIXTURE = Path(__file__).parent / "fixtures" / "book" / "tiny.ipynb"


@pytest.fixture()
def tiny(tmp_path):
    """A private copy of the tiny notebook (tests edit it) and a run for it."""
    nb = tmp_path / "notebooks" / "tiny.ipynb"
    nb.parent.mkdir()
    shutil.copy(FIXTURE, nb)
    out_dir = tmp_path / "results" / "m"
    run = book.Run(
        label="m/tiny", notebook=nb, output=tmp_path / "book" / "models" / "m" / "tiny.ipynb",
        parameters={"x": 1, "output_dir": str(out_dir)}, model={"name": "m", "model_id": "m@1", "slug": "m"},
        results=out_dir,
    )
    return run, out_dir


def _executed(run, env):
    return [m["label"] for m in book.execute_runs([run], env, log=lambda *_: None)]


@pytest.mark.slow
def test_unchanged_run_skips_and_changes_reexecute(tiny):
    run, out_dir = tiny
    env = book.Environment.current()
    assert _executed(run, env) == ["m/tiny"]
    assert pd.read_csv(out_dir / "tiny.csv")["y"].tolist() == [1 * 2 + 0]
    assert _executed(run, env) == []  # nothing changed

    run.parameters = {**run.parameters, "x": 3}
    assert _executed(run, env) == ["m/tiny"]
    assert pd.read_csv(out_dir / "tiny.csv")["y"].tolist() == [3 * 2 + 0]
    assert _executed(run, env) == []

    nb = nbformat.read(run.notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("A new closing remark."))
    nbformat.write(nb, run.notebook)
    assert _executed(run, env) == ["m/tiny"]

    # a module the notebook does not import (tiny imports no bias_utils module) changes nothing;
    # the renderer it is injected with does
    other_module = dataclasses.replace(env, modules={**env.modules, "bold": "0" * 64})
    assert _executed(run, other_module) == []
    changed_code = dataclasses.replace(env, modules={**env.modules, "rendering": "0" * 64})
    assert _executed(run, changed_code) == ["m/tiny"]
    changed_lists = dataclasses.replace(changed_code, data_lists="another data list")
    assert _executed(run, changed_lists) == ["m/tiny"]

    run.depends_on = ("an upstream run key",)
    assert _executed(run, changed_code) == ["m/tiny"]


@pytest.mark.slow
def test_failed_run_is_recorded_and_rerun_when_inputs_change(tiny):
    run, _ = tiny
    env = book.Environment.current()
    run.parameters = {**run.parameters, "x": "not a number"}  # "str" * 2 + 0 raises TypeError
    [manifest] = book.execute_runs([run], env, log=lambda *_: None)
    assert manifest["status"] == "failed"
    assert "TypeError" in manifest["error"]
    assert _executed(run, env) == []  # unchanged inputs would fail the same way
    run.parameters = {**run.parameters, "x": 2}
    assert _executed(run, env) == ["m/tiny"]
    assert json.loads(run.manifest_path.read_text())["status"] == "ok"


@pytest.mark.slow
def test_manifest_fields_and_offline_chart_output(tiny):
    run, out_dir = tiny
    env = book.Environment.current()
    book.execute_runs([run], env, log=lambda *_: None)
    manifest = json.loads(run.manifest_path.read_text())
    assert manifest["status"] == "ok"
    assert manifest["run_key"] == run.key(env)
    assert manifest["model"]["model_id"] == "m@1"
    # effective parameters: the override plus the notebook's own defaults
    assert manifest["parameters"]["x"] == 1
    assert manifest["parameters"]["seed"] == "0"
    assert manifest["seeds"] == {"seed": "0"}
    assert manifest["data_sha256"] == {k: f.sha256 for k, f in data.manifest().items()}
    assert manifest["packages"]["papermill"] and manifest["packages"]["pandas"] == pd.__version__
    assert len(manifest["git"]["commit"]) == 40
    assert manifest["wall_time_s"] > 0
    assert manifest["notebook_sha256"] == book.cache.sha256_file(run.notebook)

    executed = nbformat.read(run.output, as_version=4)
    assert "remove-cell" in executed.cells[0].metadata["tags"]
    html = [o["data"]["text/html"] for c in executed.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert len(html) == 1
    assert "window.vegaEmbed" in html[0] and "cdn." not in html[0]


@pytest.mark.slow
def test_executed_notebook_is_presented_for_reading(tiny, tmp_path):
    """Tags findings-first, shows no absolute path, links the CSV the run wrote; idempotent."""
    run, out_dir = tiny
    book.execute_runs([run], book.Environment.current(), log=lambda *_: None)
    assert json.loads(run.manifest_path.read_text())["tables"] == ["tiny.csv"]
    replacements = book.path_replacements(tmp_path / "book", tmp_path / "results")
    assert book.present_notebook(run, replacements) is True
    assert book.present_notebook(run, replacements) is False  # nothing left to change

    executed = nbformat.read(run.output, as_version=4)
    tags = {c.source.splitlines()[0]: c.metadata.get("tags", []) for c in executed.cells if c.cell_type == "code"}
    assert "remove-cell" in tags["import bias_utils.rendering"]
    assert "remove-cell" in tags["# Parameters"]  # papermill's injected cell
    assert "hide-cell" in tags["x = 1"]  # the parameters cell, behind a toggle
    assert "hide-input" in tags["from pathlib import Path"]  # the chart shows, its code folds away
    text = nbformat.writes(executed)
    assert str(tmp_path) not in text
    injected = next(c.source for c in executed.cells if c.source.startswith("# Parameters"))
    assert 'output_dir = "results/m"' in injected  # the test's results folder lies outside the project
    link = executed.cells[-1]
    assert "[tiny.csv](tables/tiny.csv)" in link.source
    assert (run.output.parent / "tables" / "tiny.csv").read_bytes() == (out_dir / "tiny.csv").read_bytes()


@pytest.mark.slow
def test_run_logs_no_false_parameter_warnings(tiny, caplog, capfd):
    """A commented default papermill cannot parse draws no warning; the kernel starts without
    the unencrypted-TCP warning (IPC transport)."""
    run, _ = tiny
    nb = nbformat.read(run.notebook, as_version=4)
    nb.cells[1].source = nb.cells[1].source.replace("limit = None", 'limit = None   # None = {"all": [...]}')
    nbformat.write(nb, run.notebook)
    run.parameters = {**run.parameters, "limit": 3}
    with caplog.at_level("WARNING"):
        assert _executed(run, book.Environment.current()) == ["m/tiny"]
    assert json.loads(run.manifest_path.read_text())["status"] == "ok"
    assert [r.getMessage() for r in caplog.records if r.name.startswith("papermill")] == []
    assert "without encryption" not in capfd.readouterr().err


def test_presentation_tags_by_output():
    code = nbformat.v4.new_code_cell
    stream = lambda name: nbformat.v4.new_output("stream", name=name, text="x\n")  # noqa: E731
    display = nbformat.v4.new_output("display_data", data={"text/plain": "1"})
    error = nbformat.v4.new_output("error", ename="E", evalue="v", traceback=[])
    assert book.presentation_tag(code("a = 1")) == "remove-cell"
    assert book.presentation_tag(code("import x", outputs=[stream("stderr")])) == "remove-cell"
    assert book.presentation_tag(code("print(n)", outputs=[stream("stdout")])) == "hide-cell"
    assert book.presentation_tag(code("settings", outputs=[display])) == "hide-cell"  # a bare repr
    table = nbformat.v4.new_output("execute_result", data={"text/html": "<table/>", "text/plain": "t"})
    assert book.presentation_tag(code("df", outputs=[stream("stdout"), table])) == "hide-input"
    assert book.presentation_tag(code("boom()", outputs=[table, error])) is None
    assert book.presentation_tag(code("x = 1", metadata={"tags": ["parameters"]})) == "hide-cell"
    assert book.presentation_tag(code("x = 2", metadata={"tags": ["injected-parameters"]})) == "remove-cell"


def test_key_finding_moves_after_the_opening_text():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    key = {"tags": [book.FINDING_TAG]}
    nb = nbformat.v4.new_notebook(cells=[
        code("p = 1", metadata={"tags": ["parameters"]}), md("# Title"), code("a = load()"), md("## Method"),
        code("figure", metadata=key), md("reading", metadata=key), code("more")])
    book.findings_first(nb)
    order = [c.source for c in nb.cells]
    assert order == ["p = 1", "# Title", "figure", "reading", "a = load()", "## Method", "more"]
    book.findings_first(nb)
    assert [c.source for c in nb.cells] == order
    plain = nbformat.v4.new_notebook(cells=[md("# T"), code("x")])
    book.findings_first(plain)
    assert [c.source for c in plain.cells] == ["# T", "x"]


def test_headers_wrap_after_underscores_only():
    html = ('<table><thead><tr><th class="col_heading level0">share_agree_significant</th>'
            '<th>p_<b>adj_x</b></th></tr></thead><tbody><tr><td>a_b</td></tr></tbody></table>')
    once = book.break_headers(html)
    assert '<th class="col_heading level0">share_<wbr>agree_<wbr>significant</th>' in once
    assert "<th>p_<wbr><b>adj_<wbr>x</b></th>" in once and "<td>a_b</td>" in once
    assert book.break_headers(once) == once


def test_paths_are_shown_relative_to_the_project():
    root = str(book.paths.ROOT)
    replacements = [(root + "/results", "results"), (root, "."), ("/home/u", "~")]
    assert book._strip_paths(f"wrote {root}/results/m/a.csv", replacements) == "wrote results/m/a.csv"
    assert book._strip_paths(f"cwd {root}/notebooks and {root}", replacements) == "cwd notebooks and ."
    assert book._strip_paths("/home/u/x, /home/user2", replacements) == "~/x, /home/user2"


def test_progress_forwarder_throttles_and_keeps_long_bars_only():
    now = [0.0]
    lines = []
    fwd = book.ProgressForwarder(log=lines.append, interval=10, clock=lambda: now[0])
    bar = "embedding: {p:3d}%|####      | {i}/50 [00:{t:02d}<00:30,  2.00it/s]"
    fwd.write("warming up\n")  # not a bar
    fwd.write("\r" + bar.format(p=100, i=50, t=2))  # a quick bar that ended within the interval
    now[0] = 11
    fwd.write("\r" + bar.format(p=20, i=10, t=11))
    now[0] = 12
    fwd.write("\r" + bar.format(p=24, i=12, t=12))  # throttled
    now[0] = 30
    fwd.write("\r" + bar.format(p=100, i=50, t=30) + "\n")
    assert lines == ["      embedding: 20%|#### | 10/50 [00:11<00:30, 2.00it/s]",
                     "      embedding: 100%|#### | 50/50 [00:30<00:30, 2.00it/s]"]


def _fixture_models():
    return [
        {"name": "dec", "model_id": "dec@1", "slug": "dec", "can_generate": True, "weight_sha256": "ab"},
        {"name": "enc", "model_id": "org/enc@2", "slug": book.model_slug("org/enc@2"), "can_generate": False},
    ]


def _fixture_specs(notebooks_dir: Path):
    for stem in ("a_study", "b_generate", "c_once", "d_cross"):
        shutil.copy(FIXTURE, notebooks_dir / f"{stem}.ipynb")
    return (
        book.NotebookSpec("a_study", "A"),
        book.NotebookSpec("b_generate", "B", generates=True),
        book.NotebookSpec("c_once", "C", scope="once"),
        book.NotebookSpec("d_cross", "D", scope="cross"),
        book.NotebookSpec("e_missing", "E"),
    )


def test_plan_applies_notebooks_per_model_and_quick_parameters(tmp_path):
    specs = _fixture_specs(tmp_path)
    messages = []
    runs = book.plan_runs(_fixture_models(), quick=True, book_dir=tmp_path / "book", results_dir=tmp_path / "r",
                          notebooks_dir=tmp_path, specs=specs, log=messages.append)
    labels = [r.label for r in runs]
    assert labels == ["dec/a_study", "dec/b_generate", "org__enc__2/a_study",
                      f"{book.REPLICATION_SLUG}/c_once", f"{book.CROSS_SLUG}/d_cross"]
    assert any("e_missing.ipynb does not exist" in m for m in messages)
    assert any("b_generate skipped for enc" in m for m in messages)
    first = runs[0]
    # only declared parameters are passed: the fixture declares limit but not n_contexts or n_boot
    assert first.parameters == {"limit": book.QUICK_PARAMETERS["limit"], "output_dir": str(tmp_path / "r" / "dec")}
    assert runs[1].depends_on == ("dec/a_study",)
    assert runs[-1].depends_on == tuple(labels[:-1])
    env = book.Environment(modules={}, data_lists="d", packages={}, data={})
    book.resolve_dependency_keys(runs, env)
    assert runs[1].depends_on == (runs[0].key(env),)


def test_toc_from_runs(tmp_path):
    specs = _fixture_specs(tmp_path)
    book_dir = tmp_path / "book"
    models = _fixture_models()
    runs = book.plan_runs(models, book_dir=book_dir, results_dir=tmp_path / "r", notebooks_dir=tmp_path,
                          specs=specs, log=lambda *_: None)
    for run in runs[:-1]:  # the cross-model run has not produced a notebook
        run.output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURE, run.output)
    for name in ("methods_profiles", "limitations"):
        (book_dir / f"{name}.md").write_text(f"# {name}\n")
    for model in models:
        book.write_model_page(book_dir, model, [r for r in runs if r.model.get("slug") == model["slug"]])

    toc = book.make_toc(book_dir, models, runs)
    assert toc["root"] == "index"
    parts = {p["caption"]: [c["file"] for c in p["chapters"]] for p in toc["parts"]}
    assert parts == {
        "Background": ["methods_profiles"],
        "Replication of the published BOLD audit": [f"models/{book.REPLICATION_SLUG}/c_once"],
        "Model: dec": ["models/dec/index", "models/dec/a_study", "models/dec/b_generate"],
        "Model: enc": ["models/org__enc__2/index", "models/org__enc__2/a_study"],
        "Discussion": ["limitations"],
    }
    (book_dir / "data.md").write_text("# Data\n")
    toc = book.make_toc(book_dir, models, runs)
    assert toc["parts"][0]["chapters"][0] == {"file": "data"}
    page = (book_dir / "models" / "dec" / "index.md").read_text()
    assert "dec@1" in page and "| a_study | not run |" in page


def test_model_slug_rejects_reserved_and_maps_repo_ids():
    assert book.model_slug("HuggingFaceTB/SmolLM2-135M@abc:fp32") == "HuggingFaceTB__SmolLM2-135M__abc__fp32"
    with pytest.raises(ValueError, match="cannot be used as a folder name"):
        book.model_slug(book.CROSS_SLUG)


def test_vega_bundle_written_once(tmp_path):
    target = rendering.write_vega_bundle(tmp_path)
    text = target.read_text()
    assert "window.vegaEmbed" in text and text.startswith("(function () {")
    mtime = target.stat().st_mtime_ns
    assert rendering.write_vega_bundle(tmp_path).stat().st_mtime_ns == mtime


def test_code_modules_follow_imports_transitively(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("%matplotlib inline\nfrom bias_utils import bold\nimport bias_utils.plots")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    modules = book.code_modules(path)
    # bold imports lexicon and stats itself; plots imports cache; book is never a dependency
    assert {"__init__", "rendering", "bold", "plots", "lexicon", "stats", "cache"} <= set(modules)
    assert "space" not in modules and "crossmodel" not in modules and "book" not in modules
    nb.cells[1].source = "def broken(:"
    nbformat.write(nb, path)
    assert set(book.code_modules(path)) == {p.stem for p in book.PACKAGE_DIR.glob("*.py")} - {"book"}


def test_tables_in_the_book_show_readable_digits():
    assert [rendering.readable_number(x) for x in (1.58444, -0.0017, 3.2e-9, 12345.6, 0.0, 250.04, 0.5)] == \
        ["1.58", "-0.002", "3.2e-09", "12346", "0", "250.0", "0.500"]
    assert [rendering.readable_number(x) for x in (3, True, "a", float("nan"))] == ["3", "True", "a", "nan"]
    rendering.enable()
    try:
        html = pd.DataFrame({"g": [1.58444], "p": [0.0000123], "n": [12]}).to_html()
        styled = pd.DataFrame({"g": [1.58444], "n": [12]}).style.to_html()
    finally:
        pd.reset_option("display.float_format")
        pd.reset_option("styler.format.formatter")
        pd.reset_option("display.max_colwidth")
    assert ">1.58<" in html and ">1.2e-05<" in html and ">12<" in html
    assert ">1.58<" in styled and ">12<" in styled
