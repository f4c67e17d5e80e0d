"""How an executed notebook is presented in the book: the key finding first, cell tags, paths, CSV links;
and generated pages written only when their text changes."""

from __future__ import annotations

import ast
import html
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat

from ..core import cache, paths
from ..models.builtin_models import _model_name
from ..report import rendering
from .runs import _relative_to_root, _Run

__all__: list[str] = []


#: Tags Jupyter Book 1.x reads from cell metadata; the builder sets them on the
#: executed copy, so the notebooks themselves stay plain and runnable.
_PRESENTATION_TAGS = ("remove-cell", "hide-cell", "hide-input", "remove-input")
#: Marks cells the builder added to an executed notebook (replaced on every build).
_ADDED_CELL_TAG = "bias-book-added"
#: Marks a notebook's key figure and its reading: the page shows them right after the opening text.
_FINDING_TAG = "key-finding"


def _findings_first(nb) -> None:
    """Move the cells tagged :data:`FINDING_TAG` (in their order) to just after the chapter's opening
    Markdown, in place: the first Markdown cell and the Markdown cells that follow it directly (the question
    and how it is answered, the primary analysis stated before any result). The page opens with the
    method and then the chapter's finding, while the notebook itself still runs top to bottom. Idempotent."""
    key = [c for c in nb.cells if _FINDING_TAG in c.get("metadata", {}).get("tags", [])]
    if not key:
        return
    rest = [c for c in nb.cells if _FINDING_TAG not in c.get("metadata", {}).get("tags", [])]
    first = next((i for i, c in enumerate(rest) if c.cell_type == "markdown"), -1)
    while 0 <= first < len(rest) - 1 and rest[first + 1].cell_type == "markdown":
        first += 1
    nb.cells = rest[:first + 1] + key + rest[first + 1:]


_NUMBERED = re.compile(r"^(\d{2}) · ")


def _chapter_title(nb, stem: str, model: str = "") -> None:
    """Number a chapter's title as the text numbers it (``04_profiles`` -> "04 · …", so the navigation shows the
    number the text refers to) and, with ``model`` (its name, :func:`bias_utils.models._model_name`), name the model it
    is about in parentheses (a title may end in a question mark: "How robust is this profile? (all-MiniLM-L6-v2)"),
    in place: the first line of the
    first Markdown cell, when it is a level-1 heading. Idempotent."""
    number = re.match(r"\d{2}(?=_)", stem)
    cell = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if number is None or cell is None or not cell.source.startswith("# "):
        return
    heading, _, rest = cell.source.partition("\n")
    if _NUMBERED.match(heading[2:]):
        return
    title = heading[2:].strip() + (f" ({model})" if model else "")
    cell.source = f"# {number.group(0)} · {title}" + (f"\n{rest}" if rest else "")


def _shown_parameters(nb) -> None:
    """Write the values a run used into the notebook's ``parameters`` cell, in place.

    papermill passes a run's values in a cell of its own (``injected-parameters``), which the book
    removes; the ``parameters`` cell a reader expands would then show the notebook's defaults. Each
    assignment there whose name papermill set gets the run's value, its comment kept; a parameter
    the notebook does not declare is added at the end. Idempotent.
    """
    code = [c for c in nb.cells if c.cell_type == "code"]
    cell = next((c for c in code if "parameters" in c.metadata.get("tags", [])), None)
    injected = next((c for c in code if "injected-parameters" in c.metadata.get("tags", [])), None)
    if cell is None or injected is None:
        return
    values = {node.targets[0].id: ast.get_source_segment(injected.source, node.value)
              for node in ast.parse(injected.source).body
              if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}
    lines = cell.source.splitlines()
    for node in sorted(ast.parse(cell.source).body, key=lambda n: -n.lineno):
        # "name = value" or, annotated, "name: type = value"
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        name = target.id if isinstance(target, ast.Name) and getattr(node, "value", None) is not None else None
        if name not in values:
            continue
        first, last = node.value.lineno - 1, node.value.end_lineno - 1
        # the value may span lines; what follows it on its last line (a comment) stays
        lines[first:last + 1] = [lines[first][:node.value.col_offset] + values.pop(name)
                                 + lines[last][node.value.end_col_offset:]]
    lines += [f"{name} = {value}" for name, value in values.items()]
    source = "\n".join(lines)
    if source != cell.source:
        cell.source = source


def _drop_reprs(nb) -> None:
    """Remove, in place, the outputs that are only a Python repr (a value a cell returned or displayed with no
    other form than ``text/plain``: a dict of settings, a list of files, a number, a pandas Series): the page shows
    sentences, formatted tables and figures, never a repr. Printed text stays (the notebooks print sentences), and
    so does everything in a cell that raised. Idempotent."""
    for cell in nb.cells:
        outputs = cell.get("outputs", []) if cell.cell_type == "code" else []
        if any(o.get("output_type") == "error" for o in outputs):
            continue
        kept = [o for o in outputs if not (o.get("output_type") in ("execute_result", "display_data")
                                             and set(o.get("data", {})) <= {"text/plain"})]
        if len(kept) != len(outputs):
            cell.outputs = kept


def _presentation_tag(cell) -> str | None:
    """The Jupyter Book tag for one executed code cell: findings shown, plumbing hidden.

    The papermill-injected parameters are removed, the ``parameters`` cell is
    collapsed behind a toggle; a cell with a figure, a table or a generated
    reading keeps its output and hides its code; a cell that only printed or
    returned plain text (setup, counts, a dict of settings) folds away whole; a cell without output is removed (the
    downloadable notebook keeps it). A cell that raised shows its code.
    """
    tags = cell.get("metadata", {}).get("tags", [])
    if "injected-parameters" in tags or "bias-book-renderer" in tags:
        return "remove-cell"
    if "parameters" in tags:
        return "hide-cell"
    outputs = [o for o in cell.get("outputs", [])
               if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    if any(o.get("output_type") == "error" for o in outputs):
        return None
    # a figure, an HTML table or Markdown is a finding; a bare repr (a dict of settings) is not
    if any(set(o.get("data", {})) - {"text/plain"} for o in outputs):
        return "hide-input"
    return "hide-cell" if outputs else "remove-cell"


def _path_replacements(book_dir: Path, results_dir: Path) -> list[tuple[str, str]]:
    """Absolute folders of this machine and how the book shows them, longest first.

    Folders inside the project show relative to its root; the results folder
    elsewhere (a test build) shows as ``results``; the cache as ``.cache``; the
    home directory as ``~``.
    """
    def shown(path: Path, outside: str) -> str:
        rel = _relative_to_root(path)
        return rel.as_posix() if not rel.is_absolute() else outside

    folders = {
        Path(results_dir).resolve(): shown(Path(results_dir), "results"),
        Path(book_dir).resolve(): shown(Path(book_dir), "book"),
        paths._cache_dir().resolve(): shown(paths._cache_dir(), ".cache"),
        paths._raw_dir().resolve(): shown(paths._raw_dir(), "data/raw"),
        paths._nltk_data_dir().resolve(): shown(paths._nltk_data_dir(), "data/nltk_data"),
        Path(sys.prefix).resolve(): shown(Path(sys.prefix), ".venv"),
        paths._ROOT: ".",
        Path.home().resolve(): "~",
    }
    pairs = sorted(((str(k), v) for k, v in folders.items() if str(k) != "/"), key=lambda kv: -len(kv[0]))
    return pairs


def _strip_paths(text: str, replacements: list[tuple[str, str]]) -> str:
    for absolute, shown in replacements:
        if absolute in text:
            # "<root>/x" becomes "x", not "./x"; "/rootfs" is not "/root"
            text = text.replace(absolute + "/", "" if shown == "." else shown + "/")
            text = re.sub(re.escape(absolute) + r"(?![\w.-])", shown, text)
    return text


def _map_strings(value, fn):
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


_TH = re.compile(r"(<th\b[^>]*>)(.*?)(</th>)", re.S)


def _break_headers(html: str) -> str:
    """Let table headers wrap after underscores (``share_<wbr>agree_<wbr>significant``) so a wide
    table fits the page without breaking a header mid-word. Only header text changes (not its
    attributes or nested tags); idempotent."""

    def text_only(segment: str) -> str:
        parts = re.split(r"(<[^>]*>)", segment.replace("<wbr>", ""))
        return "".join(part if part.startswith("<") else part.replace("_", "_<wbr>") for part in parts)

    return _TH.sub(lambda m: m.group(1) + text_only(m.group(2)) + m.group(3), html)


_NAMED_CELL = re.compile(r'(<(th|td)\b[^>]*\bdata-column="([^"]*)"[^>]*>)(.*?)(</\2>)', re.S)
# a text cell of a DataFrame table (not a number, no markup inside: a highlighted sentence stays as it is)
_PLAIN_CELL = re.compile(r"(<td>)([^<]*)(</td>)")


def _relabel(html_text: str) -> str:
    """Table headers (and a transposed table's row names) labelled by today's
    :data:`bias_utils.report.rendering.LABELS`:
    each cell that names its column (``data-column``, written by :func:`bias_utils.report.rendering.table_html`) gets
    :func:`~bias_utils.report.rendering._column_label` of it, a pivoted value after " · " kept, and each text cell
    its :func:`~bias_utils.report.rendering._value_label`; so a label changed after a run reaches its page without
    running it again. Idempotent."""
    def label(m: re.Match) -> str:
        old = m.group(4)
        kept = old[old.index(" · "):] if " · " in old else ""
        return m.group(1) + html.escape(rendering._column_label(html.unescape(m.group(3)))) + kept + m.group(5)

    def value(m: re.Match) -> str:
        return m.group(1) + html.escape(rendering._value_label(html.unescape(m.group(2)))) + m.group(3)

    return _PLAIN_CELL.sub(value, _NAMED_CELL.sub(label, html_text))


#: Folder beside a page holding its figures as static images (copied into the site by ``_ext``).
_FIGURES_DIR = "figures"
_VEGA_LITE = "application/vnd.vegalite"


def _saved_figures(results: Path | None) -> dict[str, Path]:
    """``{spec hash: SVG}`` of the charts a run saved with ``plots.save`` (``<stem>.vl.json`` beside ``<stem>.svg``)."""
    found = {}
    for spec_file in sorted(Path(results).glob("*.vl.json")) if results and Path(results).is_dir() else []:
        svg = spec_file.with_name(spec_file.name.removesuffix(".vl.json") + ".svg")
        if svg.exists():
            found[cache._stable_hash(json.loads(spec_file.read_text(encoding="utf-8")))] = svg
    return found


def _number_figures(nb, page_dir: Path, results: Path | None = None) -> int:
    """Number the charts of a page in reading order and give each a caption, alt text and a
    static image for readers without scripts (:func:`bias_utils.report.rendering._figure_html`), in place.

    The image is ``figures/<spec hash>.svg`` beside the page: the SVG the run saved for the same
    spec when there is one (``results``), else drawn from the spec with vl-convert. The figure's
    HTML is rebuilt from the Vega-Lite spec each output carries, so a page numbers its figures
    after :func:`findings_first` has moved them. Returns the number of figures.
    """
    saved, number = None, 0
    for cell in nb.cells:
        if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            kind = next((k for k in data if k.startswith(_VEGA_LITE)), None)
            if kind is None:
                continue
            number += 1
            spec = data[kind]
            key = cache._stable_hash(spec, length=16)
            image = Path(page_dir) / _FIGURES_DIR / f"{key}.svg"
            if not image.exists():
                saved = _saved_figures(results) if saved is None else saved
                image.parent.mkdir(parents=True, exist_ok=True)
                if cache._stable_hash(spec) in saved:
                    shutil.copyfile(saved[cache._stable_hash(spec)], image)
                else:
                    import vl_convert as vlc  # deferred: a large native library, needed only for unsaved charts

                    cache._atomic_write_text(image, vlc.vegalite_to_svg(spec))
            data["text/html"] = rendering._figure_html(spec, number, f"chart-{key}", f"{_FIGURES_DIR}/{key}.svg")
    return number


def _table_links_cell(tables: list[Path], page_dir: Path):
    """A markdown cell linking the CSV tables copied beside the chapter (``tables/<name>.csv``)."""

    links = " · ".join(f"[{t.name}]({t.relative_to(page_dir).as_posix()})" for t in tables)
    text = ("## Tables of this chapter\n\nThe full tidy tables this chapter wrote, as CSV "
            f"(columns documented in the text above): {links}")
    # a fixed id: presenting again must give the same file (a warm build changes nothing)
    return nbformat.v4.new_markdown_cell(text, id="bias-book-tables", metadata={"tags": [_ADDED_CELL_TAG]})


def _present_notebook(run: "_Run", replacements: list[tuple[str, str]], name_model: bool = True) -> bool:
    """Prepare an executed notebook for reading, in place: its numbered title, naming its model unless
    ``name_model`` is False (:func:`chapter_title`), the key finding first (:func:`findings_first`), the run's
    parameter values (:func:`shown_parameters`), no repr (:func:`drop_reprs`), tags, paths, numbered figures
    (:func:`number_figures`), CSV links.

    Idempotent (rewritten only when something changes); the run's manifest
    lists the CSV tables it wrote, which are copied to ``tables/`` beside the
    page and linked from a last section. Returns whether the file changed.
    """

    before = run.output.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    nb.cells = [c for c in nb.cells if _ADDED_CELL_TAG not in c.get("metadata", {}).get("tags", [])]
    model = _model_name(run.model["model_id"]) if name_model and run.model.get("model_id") else ""
    _chapter_title(nb, run.notebook.stem, model)
    _findings_first(nb)
    _shown_parameters(nb)
    _drop_reprs(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in cell.metadata.get("tags", []) if t not in _PRESENTATION_TAGS]
        tag = _presentation_tag(cell)
        cell.metadata["tags"] = tags + ([tag] if tag else [])
    strip = lambda text: _strip_paths(text, replacements)  # noqa: E731
    # papermill records its input and output paths; the notebook is downloadable from the page
    nb.metadata = nbformat.from_dict(_map_strings(nb.metadata, strip))
    for cell in nb.cells:
        cell.source = strip(cell.source)
        if "outputs" in cell:
            cell.outputs = [nbformat.from_dict(_map_strings(o, strip)) for o in cell.outputs]
            for o in cell.outputs:
                if "text/html" in o.get("data", {}):
                    o["data"]["text/html"] = _break_headers(_relabel(o["data"]["text/html"]))
    _number_figures(nb, run.output.parent, run.results)
    tables = []
    for name in (run.previous_manifest() or {}).get("tables", []):
        src = Path(run.results) / name
        if src.exists():
            dst = run.output.parent / "tables" / Path(name).name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                shutil.copyfile(src, dst)
            tables.append(dst)
    if tables:
        nb.cells.append(_table_links_cell(tables, run.output.parent))
    after = nbformat.writes(nb)
    if after == before:
        return False
    cache._atomic_write_text(run.output, after)
    return True


def _write_if_changed(path: Path, text: str) -> Path:
    # Unchanged files keep their mtime, so Sphinx's incremental build and the
    # build key see no change.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        cache._atomic_write_text(path, text)
    return path
