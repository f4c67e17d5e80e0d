"""The errors a user can meet are public classes: a user catches ``ParameterError`` or ``ModelError`` (or a
built-in error), never a name with a leading underscore that no documentation lists."""

from __future__ import annotations

import importlib
import inspect
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bias_utils.book import runs
from bias_utils.models.endpoints import OpenAIEndpoint


def test_no_module_defines_an_error_class_with_a_leading_underscore():
    found = set()
    for module in sorted(runs._package_modules()):
        if module.endswith(("__init__", "__main__")):
            continue
        mod = importlib.import_module(f"bias_utils.{module}")
        found |= {f"{module}.{name}" for name, obj in vars(mod).items()
                  if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == mod.__name__
                  and name.startswith("_")}
    assert found == set()


class _Busy(BaseHTTPRequestHandler):
    """A completions server that answers 503 to its first request, then one completion (or 400 on the path
    ``/v1/bad``)."""

    requests = 0

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).requests += 1
        status = 400 if self.path.startswith("/bad") else 503 if type(self).requests == 1 else 200
        body = json.dumps({"choices": [{"text": " she said", "finish_reason": "length"}],
                           "usage": {"completion_tokens": 2}} if status == 200 else {"error": "busy"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_busy_server_is_asked_again_and_a_refusal_is_a_runtime_error_naming_the_attempts():
    # the retries need no exception class of their own (it was _Retryable): what reaches a user is a RuntimeError
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        endpoint = OpenAIEndpoint(url, max_retries=2)
        answer = endpoint.complete("A nurse", chat=False, max_tokens=2, temperature=0.7, top_p=0.9, top_k=None,
                                   seed=0)
        assert answer == {"completion": " she said", "n_tokens": 2, "finish_reason": "length"}
        assert _Busy.requests == 2
        with pytest.raises(RuntimeError, match=r"rejected the request: HTTP 400"):
            OpenAIEndpoint(f"{url}/bad", max_retries=2).complete("A nurse", chat=False, max_tokens=2,
                                                                 temperature=0.7, top_p=0.9, top_k=None, seed=0)
        assert _Busy.requests == 3  # a 400 is not asked again
    finally:
        server.shutdown()
    with pytest.raises(RuntimeError, match=r"failed after 2 attempts: ConnectionError: "):
        OpenAIEndpoint("http://127.0.0.1:1", max_retries=1).complete("A nurse", chat=False, max_tokens=2,
                                                                     temperature=0.7, top_p=0.9, top_k=None, seed=0)
