"""How an executed notebook is presented in the book: the key finding first, cell tags, paths, CSV links;
and generated pages written only when their text changes."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import nbformat

from . import cache, paths
from .runs import Run, relative_to_root

__all__ = [
    "FINDING_TAG", "break_headers", "findings_first", "path_replacements", "present_notebook", "presentation_tag",
    "strip_paths", "table_links_cell", "write_if_changed",
]


#: Tags Jupyter Book 1.x reads from cell metadata; the builder sets them on the
#: executed copy, so the notebooks themselves stay plain and runnable.
PRESENTATION_TAGS = ("remove-cell", "hide-cell", "hide-input", "remove-input")
#: Marks cells the builder added to an executed notebook (replaced on every build).
ADDED_CELL_TAG = "bias-book-added"
#: Marks a notebook's key figure and its reading: the page shows them right after the opening text.
FINDING_TAG = "key-finding"


def findings_first(nb) -> None:
    """Move the cells tagged :data:`FINDING_TAG` (in their order) to just after the first
    Markdown cell, in place: the page opens with the chapter's finding while the notebook
    itself still runs top to bottom. Idempotent."""
    key = [c for c in nb.cells if FINDING_TAG in c.get("metadata", {}).get("tags", [])]
    if not key:
        return
    rest = [c for c in nb.cells if FINDING_TAG not in c.get("metadata", {}).get("tags", [])]
    first = next((i for i, c in enumerate(rest) if c.cell_type == "markdown"), -1)
    nb.cells = rest[:first + 1] + key + rest[first + 1:]


def presentation_tag(cell) -> str | None:
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


def path_replacements(book_dir: Path, results_dir: Path) -> list[tuple[str, str]]:
    """Absolute folders of this machine and how the book shows them, longest first.

    Folders inside the project show relative to its root; the results folder
    elsewhere (a test build) shows as ``results``; the cache as ``.cache``; the
    home directory as ``~``.
    """
    def shown(path: Path, outside: str) -> str:
        rel = relative_to_root(path)
        return rel.as_posix() if not rel.is_absolute() else outside

    folders = {
        Path(results_dir).resolve(): shown(Path(results_dir), "results"),
        Path(book_dir).resolve(): shown(Path(book_dir), "book"),
        paths.cache_dir().resolve(): shown(paths.cache_dir(), ".cache"),
        paths.raw_dir().resolve(): shown(paths.raw_dir(), "data/raw"),
        paths.nltk_data_dir().resolve(): shown(paths.nltk_data_dir(), "data/nltk_data"),
        Path(sys.prefix).resolve(): shown(Path(sys.prefix), ".venv"),
        paths.ROOT: ".",
        Path.home().resolve(): "~",
    }
    pairs = sorted(((str(k), v) for k, v in folders.items() if str(k) != "/"), key=lambda kv: -len(kv[0]))
    return pairs


def strip_paths(text: str, replacements: list[tuple[str, str]]) -> str:
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


def break_headers(html: str) -> str:
    """Let table headers wrap after underscores (``share_<wbr>agree_<wbr>significant``) so a wide
    table fits the page without breaking a header mid-word. Only header text changes (not its
    attributes or nested tags); idempotent."""

    def text_only(segment: str) -> str:
        parts = re.split(r"(<[^>]*>)", segment.replace("<wbr>", ""))
        return "".join(part if part.startswith("<") else part.replace("_", "_<wbr>") for part in parts)

    return _TH.sub(lambda m: m.group(1) + text_only(m.group(2)) + m.group(3), html)


def table_links_cell(tables: list[Path], page_dir: Path):
    """A markdown cell linking the CSV tables copied beside the chapter (``tables/<name>.csv``)."""

    links = " · ".join(f"[{t.name}]({t.relative_to(page_dir).as_posix()})" for t in tables)
    text = ("## Tables of this chapter\n\nThe full tidy tables this chapter wrote, as CSV "
            f"(columns documented in the text above): {links}")
    # a fixed id: presenting again must give the same file (a warm build changes nothing)
    return nbformat.v4.new_markdown_cell(text, id="bias-book-tables", metadata={"tags": [ADDED_CELL_TAG]})


def present_notebook(run: "Run", replacements: list[tuple[str, str]]) -> bool:
    """Prepare an executed notebook for reading, in place: the key finding first
    (:func:`findings_first`), tags, paths, CSV links.

    Idempotent (rewritten only when something changes); the run's manifest
    lists the CSV tables it wrote, which are copied to ``tables/`` beside the
    page and linked from a last section. Returns whether the file changed.
    """

    before = run.output.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    nb.cells = [c for c in nb.cells if ADDED_CELL_TAG not in c.get("metadata", {}).get("tags", [])]
    findings_first(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in cell.metadata.get("tags", []) if t not in PRESENTATION_TAGS]
        tag = presentation_tag(cell)
        cell.metadata["tags"] = tags + ([tag] if tag else [])
    strip = lambda text: strip_paths(text, replacements)  # noqa: E731
    # papermill records its input and output paths; the notebook is downloadable from the page
    nb.metadata = nbformat.from_dict(_map_strings(nb.metadata, strip))
    for cell in nb.cells:
        cell.source = strip(cell.source)
        if "outputs" in cell:
            cell.outputs = [nbformat.from_dict(_map_strings(o, strip)) for o in cell.outputs]
            for o in cell.outputs:
                if "text/html" in o.get("data", {}):
                    o["data"]["text/html"] = break_headers(o["data"]["text/html"])
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
        nb.cells.append(table_links_cell(tables, run.output.parent))
    after = nbformat.writes(nb)
    if after == before:
        return False
    cache.atomic_write_text(run.output, after)
    return True


def write_if_changed(path: Path, text: str) -> Path:
    # Unchanged files keep their mtime, so Sphinx's incremental build and the
    # build key see no change.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        cache.atomic_write_text(path, text)
    return path
