"""Small Sphinx fixes for an offline book (loaded by ``_config.yml``).

- sphinx-thebe registers its inline configuration script twice in some builds
  (``const THEBE_JS_URL`` declared twice: a SyntaxError in every page's
  console); identical scripts are emitted once.
"""


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        # the same inline script is registered once with filename None and once with ""
        key = (getattr(script, "filename", str(script)) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
