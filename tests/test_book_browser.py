"""The built book in a real browser: headless Chromium, driven over the DevTools protocol.

Builds the QUICK book for the test models (into the cache, so a rerun only
checks the run keys and finds the HTML up to date), then loads the index, a
model's profile chapter and the cross-model chapter from ``file://`` URLs.
Each page must draw every chart (an SVG or canvas of non-zero size), log no
console error or exception, and request nothing from the network. Screenshots
go to ``book/_build/screenshots/``.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from bias_utils import book, paths

pytestmark = [pytest.mark.slow, pytest.mark.browser]

TEST_MODELS = ["smollm2-135m-instruct", "minilm-l6"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = book.BOOK_DIR / "_build" / "screenshots"


class Browser:
    """Minimal Chrome DevTools protocol client for one page target."""

    def __init__(self):
        import websocket

        self.profile = tempfile.mkdtemp(prefix="bias-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "--window-size=1280,900",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start (no DevToolsActivePort)")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params):
        self.next_id += 1
        msg_id = self.next_id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.time() + 60
        while self.evaluate("document.readyState") != "complete":
            if time.time() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            time.sleep(0.2)

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, error log entries and non-file requests since :meth:`open`."""
        found = []
        for ev in self.events:
            method, params = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params["exceptionDetails"])[:500])
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(("file:", "data:", "blob:", "about:")):
                    found.append(f"network request: {url}")
        return found

    def screenshot(self, path: Path, clip: dict | None = None) -> None:
        """The page from the top (at most 6000 px), or the ``clip`` box (page coordinates) in view."""
        beyond = clip is None
        if clip is None:
            metrics = self.call("Page.getLayoutMetrics")["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": 1280, "height": min(int(metrics["height"]), 6000)}
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=beyond,
                         clip={**clip, "scale": 1})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def screenshot_charts(self, stem: str, limit: int = 3) -> None:
        """Close-ups of the first charts of the page, each scrolled into view: ``<stem>-chart<i>.png``."""
        n = self.evaluate("document.querySelectorAll('.bias-vega-chart').length")
        for i in range(min(n, limit)):
            box = self.evaluate(f"""(() => {{
                const el = document.querySelectorAll('.bias-vega-chart')[{i}];
                el.scrollIntoView({{block: 'start'}});
                const r = el.getBoundingClientRect();
                return {{x: r.left + window.scrollX, y: r.top + window.scrollY,
                         width: Math.min(r.width, 1280), height: Math.min(r.height, 880)}};
            }})()""")
            if box["width"] and box["height"]:
                self.screenshot(SCREENSHOTS / f"{stem}-chart{i + 1}.png",
                                {"x": max(0, box["x"] - 8), "y": max(0, box["y"] - 8),
                                 "width": box["width"] + 16, "height": box["height"] + 16})

    def close(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


CHART_STATE = """
(() => {
  const charts = [...document.querySelectorAll('.bias-vega-chart')];
  return charts.map(el => {
    const g = el.querySelector('svg.marks, canvas.marks, svg, canvas');
    const r = g ? g.getBoundingClientRect() : {width: 0, height: 0};
    return {id: el.id, drawn: !!g, width: r.width, height: r.height, text: el.innerText.slice(0, 200)};
  });
})()
"""


def wait_for_charts(browser: Browser, timeout: float = 30) -> list[dict]:
    deadline = time.time() + timeout
    while True:
        charts = browser.evaluate(CHART_STATE)
        if all(c["drawn"] and c["width"] > 0 and c["height"] > 0 for c in charts) or time.time() > deadline:
            return charts


QUICK_BOOK = paths.cache_dir() / "book-quick"


@pytest.fixture(scope="module")
def quick_book():
    """The QUICK book for the test models, built (or found up to date) in the cache."""
    book.make_book(TEST_MODELS, quick=True, book_dir=QUICK_BOOK, results_dir=paths.cache_dir() / "book-quick-results")
    html = QUICK_BOOK / "_build" / "html"
    assert (html / "index.html").exists()
    return html


def test_every_quick_run_succeeded(quick_book):
    manifests = [json.loads(p.read_text()) for p in sorted((QUICK_BOOK / "models").glob("*/*.run.json"))]
    assert len(manifests) >= 2 * 5 + 1  # Study 1 for both models and the cross-model chapter at least
    failed = {m["label"]: m["error"] for m in manifests if m["status"] != "ok"}
    assert failed == {}


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (make chromium)")
    b = Browser()
    yield b
    b.close()


def _page(html: Path, pattern: str) -> Path:
    found = sorted(html.glob(pattern))
    assert found, f"no page matching {pattern} in {html}"
    return found[0]


@pytest.mark.parametrize("name, pattern, min_charts", [
    ("index", "index.html", 0),
    ("profiles", "models/smollm2-135m-instruct*/04_profiles.html", 1),
    ("bold-audit", "models/smollm2-135m-instruct*/06_bold_audit.html", 1),
    ("completions", "models/smollm2-135m-instruct*/08_completion_profiles.html", 1),
    ("replication", f"models/{book.REPLICATION_SLUG}/07_bold_replication.html", 1),
    ("cross-model", f"models/{book.CROSS_SLUG}/*.html", 1),
])
def test_page_renders_offline(quick_book, browser, name, pattern, min_charts):
    page = _page(quick_book, pattern)
    browser.open(page.as_uri())
    charts = wait_for_charts(browser)
    browser.screenshot(SCREENSHOTS / f"{name}.png")
    browser.screenshot_charts(name)
    assert len(charts) >= min_charts, f"{page.name}: expected charts, found {len(charts)}"
    undrawn = [c for c in charts if not (c["drawn"] and c["width"] > 0 and c["height"] > 0)]
    assert not undrawn, f"{page.name}: charts not drawn: {undrawn}"
    assert browser.problems() == []
