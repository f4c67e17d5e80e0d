"""Offline chart rendering for the book.

Altair's own HTML output fetches vega, vega-lite and vega-embed from a CDN
(unusable offline), and its ``inline`` template repeats a ~900 kB bundle in
every chart, which also breaks inside Jupyter Book pages. The book instead
loads one bundle, once, from its static files (:func:`write_vega_bundle`,
referenced by ``html_js_files`` in ``book/_config.yml``), and every chart is a
small HTML snippet that hands its spec to the global ``vegaEmbed``
(:func:`chart_html`). :func:`enable` registers that snippet as an Altair
renderer; :mod:`bias_utils.book` injects ``enable()`` into each notebook it
executes, so study notebooks need no rendering code of their own.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import altair as alt

from . import cache

__all__ = ["BUNDLE_PATH", "RENDERER", "chart_html", "enable", "vega_lite_version", "write_vega_bundle"]

RENDERER = "bias_book"
#: Bundle file, relative to the book's ``_static`` folder.
BUNDLE_PATH = "vendor/vega-bundle.js"
_EMBED_OPTIONS = {"mode": "vega-lite", "actions": {"export": True, "source": False, "compiled": False, "editor": False}}


def vega_lite_version() -> str:
    """The Vega-Lite version Altair writes specs for, e.g. ``"6.4"`` from ``v6.4.1``."""
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return f"{major}.{minor}"


def chart_html(spec: dict, element_id: str | None = None) -> str:
    """An HTML snippet drawing ``spec`` with the page's global ``vegaEmbed``.

    The script waits for the document to be parsed, so it works whether the
    bundle is loaded before it or deferred. A missing bundle or a bad spec is
    shown in the page and logged to the console rather than leaving a blank.
    """
    element_id = element_id or f"vis-{uuid.uuid4().hex}"
    # "</" inside a string literal would close the <script> element early.
    payload = json.dumps(spec, ensure_ascii=False).replace("</", "<\\/")
    options = json.dumps(_EMBED_OPTIONS)
    return f"""<div id="{element_id}" class="bias-vega-chart"></div>
<script type="text/javascript">
(function () {{
  var spec = {payload};
  function draw() {{
    var el = document.getElementById("{element_id}");
    if (typeof window.vegaEmbed !== "function") {{
      el.textContent = "Chart not drawn: the vega bundle ({BUNDLE_PATH}) is not loaded on this page.";
      console.error("vegaEmbed missing for #{element_id}");
      return;
    }}
    window.vegaEmbed(el, spec, {options}).catch(function (err) {{
      el.textContent = "Chart error: " + err.message;
      console.error(err);
    }});
  }}
  if (document.readyState === "loading") {{ document.addEventListener("DOMContentLoaded", draw); }} else {{ draw(); }}
}})();
</script>"""


def _renderer(spec: dict, **_metadata) -> dict:
    # The vega-lite JSON rides along so that JupyterLab (which ignores our
    # text/html when it has a native renderer) still draws the chart.
    return {"text/html": chart_html(spec), f"application/vnd.vegalite.v{vega_lite_version().split('.')[0]}+json": spec}


alt.renderers.register(RENDERER, _renderer)


def enable() -> None:
    """Make Altair charts in this kernel render through the book's global ``vegaEmbed``."""
    alt.renderers.enable(RENDERER)


def write_vega_bundle(static_dir: str | Path) -> Path:
    """Write the vega + vega-lite + vega-embed bundle (from vl-convert, no network) once.

    The bundle's top-level declarations are wrapped in a function scope, so
    they cannot collide with the theme's scripts; it publishes ``vegaEmbed``,
    ``vega`` and ``vegaLite`` on ``window``. Rewritten only when vl-convert or
    the targeted Vega-Lite version changes.
    """
    import vl_convert as vlc  # deferred: a large native library, needed only to write the bundle

    target = Path(static_dir) / BUNDLE_PATH
    stamp_path = target.with_suffix(".json")
    stamp = {"vl_convert": vlc.__version__, "vega_lite": vega_lite_version()}
    if target.exists() and stamp_path.exists():
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                return target
        except ValueError:
            pass  # unreadable stamp: rebuild below
    bundle = vlc.javascript_bundle(vl_version=vega_lite_version())
    cache.atomic_write_text(target, "(function () {\n" + bundle + "\n})();\n")
    cache.atomic_write_json(stamp_path, stamp)
    return target
