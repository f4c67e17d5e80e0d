"""How an executed notebook is presented in the book: what the chapter finds first, its other sections closed, cell
tags, paths, CSV links;
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
from ..core.results import display_name
from ..models.builtin_models import model_name
from ..report import rendering
from . import summary
from .runs import Run, relative_to_root

__all__: list[str] = []


#: Tags Jupyter Book 1.x reads from cell metadata; the builder sets them on the
#: executed copy, so the notebooks themselves stay plain and runnable.
_PRESENTATION_TAGS = ("remove-cell", "hide-cell", "hide-input", "remove-input")
#: Marks cells the builder added to an executed notebook (replaced on every build).
_ADDED_CELL_TAG = "bias-book-added"
#: Marks a notebook's key figure and its reading: the page opens with them (:func:`_open_with_findings`).
_FINDING_TAG = "key-finding"


#: The section a chapter opens with (:func:`_open_with_findings`): its primary numbers in at most
#: :data:`_MOST_SENTENCES` sentences, then its figures. Every other section of a chapter is closed until the reader
#: opens it (``book/_ext/bias_book_sphinx.py`` wraps each in a ``<details class="bias-section">``).
FINDS_HEADING = "What this chapter finds"
#: The closed sections the opening adds: the rest of the chapter's introduction (its method) and the chapter's
#: generated reading in full (the key-finding cells that are not figures).
_METHOD_HEADING = "How this chapter works"
_READING_HEADING = "The reading in full"
_MOST_SENTENCES = 5
#: Cell metadata keeping a Markdown cell's text as the notebook wrote it, before the opening split or demoted it.
_ORIGINAL = "bias_book_original"
_VEGA_LITE_PREFIX = "application/vnd.vegalite"
#: Cell metadata holding the text outputs the opening moved out of a figure cell into "The reading in full", each with
#: its place among the cell's outputs, so that a second presentation starts from them all (:func:`_reading_outputs`).
_MOVED_OUTPUTS = "bias_book_moved_outputs"
#: Cell metadata holding a key-finding cell's rank among them in the notebook as written: the opening moves the figures
#: up, and a second presentation reads the key cells in the first one's order (the first sentences they printed too).
_KEY_ORDER = "bias_book_key_order"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(])")
#: Where a sentence may end when a text is compared with what the first screen says ("... above 0. 1 model ...").
_ANY_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _is_figure(cell) -> bool:
    return cell.cell_type == "code" and any(k.startswith(_VEGA_LITE_PREFIX) for o in cell.get("outputs", [])
                                            for k in o.get("data", {}))


def _sentences(text: str, most: int = _MOST_SENTENCES) -> list[str]:
    """The first ``most`` sentences of the first paragraph of Markdown ``text`` (a heading or a table ends it); a
    text that opens with a bulleted list (a chapter's reading, one item per finding) gives its items' sentences."""
    lines, listing = [], None
    for line in text.strip().splitlines():
        stripped = line.strip()
        bullet = stripped.startswith(("- ", "* "))
        if listing is None and stripped:
            listing = bullet
        if not stripped or stripped.startswith(("#", "|", "```", ":::")) or (bullet and not listing):
            if lines:
                break
            continue
        lines.append(stripped[2:] if bullet else stripped)
    return [s.strip() for s in _SENTENCE_END.split(" ".join(lines)) if s.strip()][:most]


def _output_text(output) -> str:
    """The text an output reads as: its Markdown, or what the cell printed; "" for a figure, a table or a log."""
    text = output.get("data", {}).get("text/markdown") or (
        output.get("text") if output.get("output_type") == "stream" and output.get("name") == "stdout" else None)
    return "".join(text) if text else ""


def _all_outputs(cell) -> list:
    """A code cell's outputs as its run wrote them: the ones the opening moved out (:func:`_reading_outputs`) put back
    in their places."""
    outputs = list(cell.get("outputs", []))
    for earlier in cell.metadata.get(_MOVED_OUTPUTS, []):
        outputs.insert(earlier["at"], earlier["output"])
    return outputs


def _reading_sentences(cells) -> list[str]:
    """Fallback sentences of a chapter without a registered finding: the first sentences its key-finding cells
    printed (generated from its tables as the chapter runs), the ones an earlier presentation moved included."""
    for cell in cells:
        for output in _all_outputs(cell) if cell.cell_type == "code" else []:
            found = _sentences(_output_text(output))
            if found:
                return found
    return []


def _plain(text: str) -> str:
    """Markdown ``text`` as a reader sees its words: no emphasis marks, one space between words."""
    return " ".join(re.sub(r"[*_`]", "", text).split())


def _reading_outputs(cell, said: list[str]) -> list:
    """The text outputs of a figure ``cell`` that state a sentence the first screen states (``said``), taken out of
    the cell in place: the first screen shows the figure under ``said``, and the text goes to "The reading in full"
    instead of saying it twice. What an earlier presentation took out (kept in the cell's metadata with its place)
    is put back first, so that a second presentation decides again on the same outputs."""
    outputs = _all_outputs(cell)
    cell.metadata.pop(_MOVED_OUTPUTS, None)
    stated = _plain(" ".join(said))
    at = [i for i, o in enumerate(outputs)
          if any(s in stated for s in _ANY_SENTENCE_END.split(_plain(_output_text(o))) if s)]
    cell.outputs = [o for i, o in enumerate(outputs) if i not in at]
    if at:
        cell.metadata[_MOVED_OUTPUTS] = [{"at": i, "output": outputs[i]} for i in at]
    return [outputs[i] for i in at]


def _demoted(source: str) -> str:
    """Markdown headings one level lower (``## A`` -> ``### A``), so they stay inside the section they are moved
    into."""
    return re.sub(r"^(#{2,5}) ", lambda m: m.group(1) + "# ", source, flags=re.M)


def _open_with_findings(nb, sentences: list[str]) -> None:
    """Arrange a chapter to open with what it finds, in place: its title and first paragraph, then a section
    :data:`FINDS_HEADING` with ``sentences`` (at most :data:`_MOST_SENTENCES`; without any, the first sentences
    its key-finding cells printed) and the key-finding cells that draw a figure (in a chapter without a key finding,
    every cell that draws one); then a section
    :data:`_READING_HEADING` with the other key-finding cells and the text a figure cell printed that states a
    sentence of the opening (:func:`_reading_outputs`: the finding is stated once on the first screen), a section
    :data:`_METHOD_HEADING` with the rest of
    the introduction, and the chapter's own sections. Every section but the first is closed on the page. A notebook
    without a Markdown title is left as it is. Idempotent (a cell this adds carries :data:`_ADDED_CELL_TAG`, and the
    builder drops those before presenting again)."""
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), None)
    if first is None or not nb.cells[first].source.startswith("# "):
        return
    title = nb.cells[first]
    # the text as the notebook wrote it (a second presentation starts from it again)
    original = title.metadata.setdefault(_ORIGINAL, title.source)
    # a chapter without a tagged finding opens with its figures
    key = ([c for c in nb.cells if _FINDING_TAG in c.get("metadata", {}).get("tags", [])]
           or [c for c in nb.cells if _is_figure(c)])
    for rank, cell in enumerate(key):
        cell.metadata.setdefault(_KEY_ORDER, rank)
    key.sort(key=lambda c: c.metadata[_KEY_ORDER])
    moved = {id(c) for c in key}
    rest = [c for c in nb.cells[first + 1:] if id(c) not in moved]
    before = [c for c in nb.cells[:first] if id(c) not in moved]
    heading, _, body = original.partition("\n")
    paragraphs = [p for p in re.split(r"\n\s*\n", body.strip()) if p.strip()]
    lead = paragraphs[0] if paragraphs and not paragraphs[0].lstrip().startswith(("#", "- ", "* ", "|")) else ""
    method = paragraphs[1:] if lead else paragraphs
    title.source = heading + (f"\n\n{lead}" if lead else "")
    said = [s for s in sentences if s][:_MOST_SENTENCES] or _reading_sentences(key)[:_MOST_SENTENCES]

    def added(text: str, name: str):
        return nbformat.v4.new_markdown_cell(text, id=f"bias-book-{name}", metadata={"tags": [_ADDED_CELL_TAG]})

    finds = added(f"## {FINDS_HEADING}\n\n" + (" ".join(said) if said else
                                                  "This chapter's figures follow; each section below opens on a "
                                                  "click."), "finds")
    figures = [c for c in key if _is_figure(c)]
    # the figures' text after the other reading cells: a second presentation finds the figures moved up, and the
    # page stays the same
    reading = [c for c in key if not _is_figure(c)] + [
        nbformat.v4.new_code_cell("", id=f"bias-book-reading-{i}", metadata={"tags": [_ADDED_CELL_TAG]},
                                  outputs=[nbformat.from_dict(o) for o in moved])
        for i, cell in enumerate(figures) if (moved := _reading_outputs(cell, said))]
    for cell in reading:
        if cell.cell_type == "markdown":
            cell.source = _demoted(cell.metadata.setdefault(_ORIGINAL, cell.source))
    cells = before + [title, finds] + figures
    if reading:
        cells += [added(f"## {_READING_HEADING}\n\nWhat the chapter's analysis says, generated from its tables.",
                        "reading")] + reading
    cells += [added(f"## {_METHOD_HEADING}\n\n" + ("\n\n".join(method) if method else
                                                    "The steps behind the findings above, with this run's "
                                                    "parameters."), "method")]
    nb.cells = cells + rest




_NUMBERED = re.compile(r"^(\d{2}) · ")


def _chapter_title(nb, stem: str, model: str = "") -> None:
    """Number a chapter's title as the text numbers it (``04_profiles`` -> "04 · …", so the navigation shows the
    number the text refers to) and, with ``model`` (its name, :func:`bias_utils.models.builtin_models.model_name`),
    name the model it is about in parentheses (a title may end in a question mark: "How robust is this profile?
    (all-MiniLM-L6-v2)"), in place: the first line of the first Markdown cell, when it is a level-1 heading.
    Idempotent."""
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
_PLAIN_CELL = re.compile(r'(<td(?: data-role="[a-z]+")?>)([^<]*)(</td>)')


def _relabel(html_text: str) -> str:
    """Table headers (and a transposed table's row names) labelled by today's
    :data:`bias_utils.report.rendering.LABELS`:
    each cell that names its column (``data-column``, written by :func:`bias_utils.report.table_html.table_html`) gets
    :func:`~bias_utils.report.rendering.column_label` of it, a pivoted value after " · " kept, and each text cell
    its :func:`~bias_utils.report.rendering.value_label`; so a label changed after a run reaches its page without
    running it again. Idempotent."""
    def label(m: re.Match) -> str:
        old = m.group(4)
        kept = old[old.index(" · "):] if " · " in old else ""
        return m.group(1) + html.escape(rendering.column_label(html.unescape(m.group(3)))) + kept + m.group(5)

    def value(m: re.Match) -> str:
        return m.group(1) + html.escape(rendering.value_label(html.unescape(m.group(2)))) + m.group(3)

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
            found[cache.stable_hash(json.loads(spec_file.read_text(encoding="utf-8")))] = svg
    return found


def _renamed(text: str, names: dict[str, str]) -> str:
    """``text`` with each model's shown name (``display_name``: ``smollm2-135m-instruct``) replaced by the name
    running text gives it (``names``: ``SmolLM2-135M-Instruct``), as a whole word only (a results folder
    ``smollm2-135m-instruct--b179c9523d0e--fp32`` or a file name stays)."""
    for shown, name in names.items():
        text = re.sub(rf"(?<![\w.-]){re.escape(shown)}(?![\w-]|\.\w)", name, text)
    return text


def _named_titles(value, names: dict[str, str]):
    """A Vega-Lite spec with each model's shown name in its titles and description (its alt text and caption)
    replaced by its name (:func:`_renamed`), as the front page names it; its data are left as they are."""
    def renamed(text):
        if isinstance(text, str):
            return _renamed(text, names)
        return [renamed(t) for t in text] if isinstance(text, list) else text

    if isinstance(value, list):
        return [_named_titles(v, names) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in ("data", "datasets", "values"):
            out[key] = item
        elif key in ("title", "text", "subtitle", "description") and not isinstance(item, dict):
            out[key] = renamed(item)
        else:
            out[key] = _named_titles(item, names)
    return out


def _named_prose(text: str, names: dict[str, str]) -> str:
    """Markdown ``text`` with each model named as :func:`_renamed` names it, outside code spans (a command keeps its
    model's shown name)."""
    return "".join(piece if piece.startswith("`") else _renamed(piece, names)
                   for piece in re.split(r"(`[^`]*`)", text))


def _number_figures(nb, page_dir: Path, results: Path | None = None) -> int:
    """Number the charts of a page in reading order and give each a caption, alt text and a
    static image for readers without scripts (:func:`bias_utils.report.rendering.figure_html`), in place.

    The image is ``figures/<spec hash>.svg`` beside the page: the SVG the run saved for the same
    spec when there is one (``results``), else drawn from the spec with vl-convert. The figure's
    HTML is rebuilt from the Vega-Lite spec each output carries, so a page numbers its figures
    after :func:`_open_with_findings` has moved them. Returns the number of figures.
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
            key = cache.stable_hash(spec, length=16)
            image = Path(page_dir) / _FIGURES_DIR / f"{key}.svg"
            if not image.exists():
                saved = _saved_figures(results) if saved is None else saved
                image.parent.mkdir(parents=True, exist_ok=True)
                if cache.stable_hash(spec) in saved:
                    shutil.copyfile(saved[cache.stable_hash(spec)], image)
                else:
                    import vl_convert as vlc  # deferred: a large native library, needed only for unsaved charts

                    cache.atomic_write_text(image, vlc.vegalite_to_svg(spec))
            data["text/html"] = rendering.figure_html(spec, number, f"chart-{key}", f"{_FIGURES_DIR}/{key}.svg")
    return number


def _table_links_cell(tables: list[Path], page_dir: Path):
    """A markdown cell linking the CSV tables copied beside the chapter (``tables/<name>.csv``)."""

    links = " · ".join(f"[{t.name}]({t.relative_to(page_dir).as_posix()})" for t in tables)
    text = ("## Tables of this chapter\n\nThe full tidy tables this chapter wrote, as CSV "
            f"(columns documented in the text above): {links}")
    # a fixed id: presenting again must give the same file (a warm build changes nothing)
    return nbformat.v4.new_markdown_cell(text, id="bias-book-tables", metadata={"tags": [_ADDED_CELL_TAG]})


def present_notebook(run: "Run", replacements: list[tuple[str, str]], name_model: bool = True,
                     names: dict[str, str] | None = None) -> bool:
    """Prepare an executed notebook for reading, in place: its numbered title, naming its model unless
    ``name_model`` is False (:func:`chapter_title`), what the chapter finds first (:func:`_open_with_findings`), the
    run's parameter values (:func:`shown_parameters`), no repr (:func:`drop_reprs`), tags, paths, every model named
    as the front page names it in its charts' titles and captions and in the generated text (``names``: each model of
    the build by its shown name; default: the run's model), numbered figures (:func:`number_figures`), CSV links.

    Idempotent (rewritten only when something changes); the run's manifest
    lists the CSV tables it wrote, which are copied to ``tables/`` beside the
    page and linked from a last section. Returns whether the file changed.
    """

    before = run.output.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    nb.cells = [c for c in nb.cells if _ADDED_CELL_TAG not in c.get("metadata", {}).get("tags", [])]
    model = model_name(run.model["model_id"]) if name_model and run.model.get("model_id") else ""
    _chapter_title(nb, run.notebook.stem, model)
    _open_with_findings(nb, summary.chapter_findings(run.notebook.stem, run.results))
    _shown_parameters(nb)
    _drop_reprs(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = [t for t in cell.metadata.get("tags", []) if t not in _PRESENTATION_TAGS]
        tag = _presentation_tag(cell)
        cell.metadata["tags"] = tags + ([tag] if tag else [])
    strip = lambda text: strip_paths(text, replacements)  # noqa: E731
    # papermill records its input and output paths; the notebook is downloadable from the page
    nb.metadata = nbformat.from_dict(_map_strings(nb.metadata, strip))
    for cell in nb.cells:
        cell.source = strip(cell.source)
        if _MOVED_OUTPUTS in cell.metadata:
            cell.metadata[_MOVED_OUTPUTS] = [nbformat.from_dict(_map_strings(m, strip))
                                             for m in cell.metadata[_MOVED_OUTPUTS]]
        if "outputs" in cell:
            cell.outputs = [nbformat.from_dict(_map_strings(o, strip)) for o in cell.outputs]
            for o in cell.outputs:
                if "text/html" in o.get("data", {}):
                    o["data"]["text/html"] = _break_headers(_relabel(o["data"]["text/html"]))
    model_id = run.model.get("model_id")
    if names is None:
        names = {display_name(model_id): model_name(model_id)} if model_id else {}
    names = {shown: name for shown, name in names.items() if shown != name}
    for cell in [c for c in nb.cells if c.cell_type == "markdown"] if names else []:
        # the opening's sentences, read from the outputs before they were named
        if _ADDED_CELL_TAG in cell.metadata.get("tags", []):
            cell.source = _named_prose(cell.source, names)
    for output in [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])] if names else []:
        data = output.get("data", {})
        for kind in [k for k in data if k.startswith(_VEGA_LITE)]:
            data[kind] = _named_titles(data[kind], names)
        if "text/markdown" in data:
            data["text/markdown"] = _named_prose("".join(data["text/markdown"]), names)
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
    cache.atomic_write_text(run.output, after)
    return True


def write_if_changed(path: Path, text: str) -> Path:
    # Unchanged files keep their mtime, so Sphinx's incremental build and the
    # build key see no change.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        cache.atomic_write_text(path, text)
    return path
