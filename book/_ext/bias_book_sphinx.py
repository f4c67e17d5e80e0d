"""Small Sphinx fixes for an offline book (loaded by ``_config.yml``).

- sphinx-thebe registers its inline configuration script twice in some builds
  (``const THEBE_JS_URL`` declared twice: a SyntaxError in every page's
  console); identical scripts are emitted once.
- The footer's copyright year is the year of the build (UTC, or of
  ``SOURCE_DATE_EPOCH`` when set), not a year typed into ``_config.yml``.
- pydata-sphinx-theme loads ``fontawesome.js`` (1.5 MB) on every page only so that
  projects can register custom icons; its stylesheet already draws the standard
  icons (the theme's buttons) from the Font Awesome webfonts, and this book has
  no custom icon, so the script tag is left out of every page. The vega bundle (0.9 MB) is left
  out of the pages that draw no chart.
- The theme loads the search index (``searchindex.js``, the whole book's words) on every page, for a
  search-as-you-type box this book does not enable; the search button leads to the search page, which
  loads it itself, so every other page leaves it out.
- A chart's static image (``figures/<hash>.svg`` beside its page, shown inside ``<noscript>``) is
  referenced from raw HTML, which Sphinx does not follow: the ``figures`` folders are copied into
  the site at the same place relative to their page.
- A chapter (a page with a section ``what-this-chapter-finds``, which ``bias_utils.book.presentation`` gives every
  executed notebook) opens with that section; each of its other top sections is wrapped in a closed
  ``<details class="bias-section">`` whose summary is the section's heading, so the page is as long as its findings
  and figures until a reader opens a section (``_static/book.js`` redraws the charts of a section on opening,
  and opens the section a link points into).
- "Previous" and "next" stay inside a model's part of the table of contents (a part captioned
  :data:`MODEL_PART`, as ``bias_utils.book.build`` captions them): the last chapter of one model leads to the page
  after the models' parts (the cross-model chapter), not into another model's first chapter, and a model's first
  chapter back to the page before them.
- A shell command wraps at a space on a narrow screen, never at a hyphen inside a word (``bias-profiles``,
  ``smollm2-135m-instruct``: a wrapped line a reader copies would run as two commands): in a bash block each word with
  a hyphen is one inline box (:func:`unbroken_words`), broken inside only when it is longer than a line.
"""

import os
import re
import shutil
import time
from pathlib import Path

#: The chart bundle (``bias_utils.report.rendering.BUNDLE_PATH``; the extension does not import the package).
VEGA_BUNDLE = "vendor/vega-bundle.js"
#: The theme's Font Awesome script tag (``<script defer src="…/fontawesome.js?digest=…"></script>``).
ICON_SCRIPT = re.compile(r'<script\b[^>]*\bsrc="[^"]*/scripts/fontawesome\.js(?:\?[^"]*)?"[^>]*>\s*</script>\s*')


#: The section a chapter opens with, and the sections that stay open beside it (the CSV links).
OPEN_SECTIONS = ("what-this-chapter-finds", "tables-of-this-chapter")
_SECTION_TAG = re.compile(r"<section\b[^>]*>|</section>")
_SECTION_ID = re.compile(r'\bid="([^"]*)"')
_SECTION_HEAD = re.compile(r"\s*(<h2\b.*?</h2>)", re.S)


def closed_sections(body: str) -> str:
    """``body`` with every second-level section of a chapter other than :data:`OPEN_SECTIONS` inside a closed
    ``<details class="bias-section">`` (its heading the summary); a page without the opening section is returned as
    it is. Idempotent."""
    if 'id="what-this-chapter-finds"' not in body or 'class="bias-section"' in body:
        return body
    out, stack, last = [], [], 0
    for m in _SECTION_TAG.finditer(body):
        out.append(body[last:m.start()])
        last = m.end()
        if m.group(0) == "</section>":
            wrapped = stack.pop() if stack else False
            out.append("</details></section>" if wrapped else "</section>")
            continue
        head = _SECTION_HEAD.match(body, m.end())
        ident = _SECTION_ID.search(m.group(0))
        wrap = bool(head) and (ident is None or ident.group(1) not in OPEN_SECTIONS)
        stack.append(wrap)
        if wrap:
            out.append(m.group(0) + '<details class="bias-section"><summary>' + head.group(1) + "</summary>")
            last = head.end()
        else:
            out.append(m.group(0))
    out.append(body[last:])
    return "".join(out)


_BASH_BLOCK = re.compile(r'(<div class="highlight-(?:bash|shell)\b[^"]*">.*?</pre>)', re.S)
_HYPHENATED = re.compile(r"(?<![\w&;-])([^\s<>]*\w-[^\s<>]+)(?=\s|<|$)")


def unbroken_words(body: str) -> str:
    """``body`` with each word that holds a hyphen, in the text of a bash block, wrapped in a ``bias-word`` span (an
    inline box in ``_static/book.css``); markup and other blocks are left as they are. Idempotent."""
    def block(m: re.Match) -> str:
        parts = re.split(r"(<[^>]*>)", m.group(1))
        words = [p if p.startswith("<") else _HYPHENATED.sub(r'<span class="bias-word">\1</span>', p) for p in parts]
        return "".join(words)

    return body if 'class="bias-word"' in body else _BASH_BLOCK.sub(block, body)


def _close_sections(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = unbroken_words(closed_sections(context["body"]))


def _page_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        # the same inline script is registered once with filename None and once with ""
        key = (getattr(script, "filename", str(script)) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    # the vega bundle (0.9 MB) only where a chart is drawn
    if "bias-vega-chart" not in context.get("body", ""):
        unique = [s for s in unique if not str(getattr(s, "filename", s) or "").endswith(VEGA_BUNDLE)]
    context["script_files"] = unique


#: How ``bias_utils.book.build`` begins the caption of a model's part of the table of contents.
MODEL_PART = "Model: "


def within_models(root: str, parts: list[tuple[str, list[str]]], docname: str
                  ) -> tuple[str | None, str | None] | None:
    """The pages "previous" and "next" lead to from ``docname`` in the reading order (``root``, then each of
    ``parts``: a caption and its pages), except across two model parts: a model part's first page leads back to the
    page before the run of model parts, its last page on to the page after it (None: no page after it). None for a
    page outside the parts."""
    order = [root] + [doc for _, docs in parts for doc in docs]
    if docname not in order[1:]:
        return None
    caption = {doc: c for c, docs in parts for doc in docs}
    model = lambda doc: caption.get(doc, "").startswith(MODEL_PART)  # noqa: E731
    i = order.index(docname)

    def step(j: int, way: int) -> str | None:
        if model(docname) and 0 <= j < len(order) and model(order[j]) and caption[order[j]] != caption[docname]:
            while 0 <= j < len(order) and model(order[j]):
                j += way
        return order[j] if 0 <= j < len(order) else None

    return step(i - 1, -1), step(i + 1, 1)


def _toc_parts(app) -> list[tuple[str, list[str]]]:
    """The root document's toctrees (one per part of ``_toc.yml``): each caption and its pages, in order."""
    from sphinx import addnodes

    doctree = app.env.get_doctree(app.config.root_doc)
    return [(node.get("caption") or "", [doc for _, doc in node["entries"]])
            for node in doctree.findall(addnodes.toctree)]


def _neighbours(app, pagename, templatename, context, doctree):
    found = within_models(app.config.root_doc, _toc_parts(app), pagename)
    if found is None:
        return
    for key, target in zip(("prev", "next"), found):
        if target is None:
            context[key] = None
        elif target in app.env.titles:
            context[key] = {"link": app.builder.get_relative_uri(pagename, target),
                            "title": app.builder.render_partial(app.env.titles[target])["title"]}


def build_year() -> int:
    return time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))).tm_year


def _copyright_year(app, config):
    config.copyright = str(build_year())


#: The theme's search index tag (``<script src="…searchindex.js"></script>``).
SEARCH_INDEX_SCRIPT = re.compile(r'<script\b[^>]*\bsrc="[^"]*searchindex\.js"[^>]*>\s*</script>\s*')


def without_icon_script(html: str) -> str:
    return ICON_SCRIPT.sub("", html)


def without_search_index(html: str) -> str:
    return SEARCH_INDEX_SCRIPT.sub("", html)


def _drop_icon_script(app):
    # The tag is written by the theme's layout template, not registered with add_js_file,
    # so it is removed from the rendered page.
    templates = getattr(app.builder, "templates", None)
    if app.builder.format != "html" or templates is None:
        return
    render = templates.render

    def rendered(template, context):
        page = without_icon_script(render(template, context))
        return page if context.get("pagename") == "search" else without_search_index(page)

    templates.render = rendered


def copy_figures(srcdir, outdir) -> list[Path]:
    """Copy every ``figures/*.svg`` under ``srcdir`` (the build folder aside) to the same place in ``outdir``."""
    srcdir, outdir, copied = Path(srcdir), Path(outdir), []
    for image in sorted(srcdir.rglob("figures/*.svg")):
        rel = image.relative_to(srcdir)
        if rel.parts[0].startswith(("_build", ".")):
            continue
        target = outdir / rel
        if not target.exists() or target.read_bytes() != image.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(image, target)
        copied.append(target)
    return copied


def _copy_figures(app, exception):
    if exception is None and app.builder.format == "html":
        copy_figures(app.srcdir, app.outdir)


def setup(app):
    app.connect("html-page-context", _close_sections, priority=800)
    app.connect("html-page-context", _neighbours)
    app.connect("html-page-context", _page_scripts, priority=900)
    # before Sphinx's own SOURCE_DATE_EPOCH correction (priority 800)
    app.connect("config-inited", _copyright_year, priority=700)
    app.connect("builder-inited", _drop_icon_script)
    app.connect("build-finished", _copy_figures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
