"""Papermill reads every notebook's ``parameters`` cell as written, and every parameter is checked.

Papermill infers parameters with a line parser: a second ``=`` on a line (``x = None  # None = ...``)
makes it skip the line, and a run then warns ``Passed unknown parameter`` for a parameter the notebook
uses. These tests run papermill's own inspection, so a cell it cannot read fails here, not in a log.
"""

from __future__ import annotations

import ast
import logging

import nbformat
import papermill
import pytest

from bias_utils.book import runs
from bias_utils.core import paths

NOTEBOOKS = sorted((paths.ROOT / "notebooks").glob("*.ipynb"))

def _inspect(nb_path, caplog, monkeypatch) -> dict:
    """``papermill.inspect_notebook`` with its warnings captured (``bias_utils.book.build`` filters them out)."""
    for name in ("papermill", "papermill.translators"):
        monkeypatch.setattr(logging.getLogger(name), "filters", [])
    with caplog.at_level(logging.WARNING, logger="papermill"):
        inspected = papermill.inspect_notebook(str(nb_path))
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("papermill")
                and r.levelno >= logging.WARNING]
    assert not warnings, f"papermill cannot read {nb_path.name}'s parameters cell:\n" + "\n".join(warnings)
    return inspected


def _cells(nb_path) -> tuple[str, str]:
    """The source of the ``parameters`` cell and of the code cell after it (the notebook's check)."""
    cells = nbformat.read(nb_path, as_version=4).cells
    [index] = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    following = [c.source for c in cells[index + 1:] if c.cell_type == "code"]
    return cells[index].source, following[0] if following else ""


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_reads_every_parameter_without_warning(nb_path, caplog, monkeypatch):
    inspected = _inspect(nb_path, caplog, monkeypatch)
    assert list(inspected) == list(runs.declared_parameters(nb_path)), nb_path.name


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_infers_each_parameters_type_and_default(nb_path, caplog, monkeypatch):
    """Each parameter is annotated (papermill's ``--help-notebook`` shows the type), the annotation runs
    in a kernel, and papermill's default is the value the cell assigns."""
    inspected = _inspect(nb_path, caplog, monkeypatch)
    source, _ = _cells(nb_path)
    namespace: dict = {}
    exec(compile(source, f"{nb_path.name}:parameters", "exec"), namespace)  # literals and a typing import only
    untyped = [name for name, p in inspected.items() if p["inferred_type_name"] == "None"]
    assert not untyped, f"{nb_path.name}: parameters without a type annotation: {untyped}"
    assert set(namespace["__annotations__"]) == set(inspected), nb_path.name
    for name, parameter in inspected.items():
        assert ast.literal_eval(parameter["default"]) == namespace[name], (nb_path.name, name)


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_parameter_goes_through_the_notebooks_check(nb_path):
    """The cell after the parameters calls ``validation.check("<notebook stem>", ...)`` with every parameter by
    name, so a parameter cannot be added without its check."""
    _, check_cell = _cells(nb_path)
    calls = [node for node in ast.walk(ast.parse(check_cell)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "check"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "validation"]
    assert len(calls) == 1, f"{nb_path.name}: the cell after the parameters does not call validation.check"
    [call] = calls
    assert [ast.literal_eval(a) for a in call.args] == [nb_path.stem], \
        f"{nb_path.name}: validation.check takes the notebook's stem, then the parameters by keyword"
    # ``name=name``: the parameter itself, not a value derived from it
    passed = {kw.arg for kw in call.keywords if isinstance(kw.value, ast.Name) and kw.value.id == kw.arg}
    assert passed == set(runs.declared_parameters(nb_path)), nb_path.name
