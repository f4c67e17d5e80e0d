"""A local llama.cpp server (via ``xllamacpp``) for a GGUF file.

Used by the tests of the OpenAI-compatible backend and by the generation
benchmark, and handy for users who want an OpenAI-compatible endpoint on one
machine::

    with llama_server(loaded.gguf_path, n_parallel=16) as server:
        df = generate(OpenAIEndpoint(server.base_url, parallel=16), prompts)

The server binds 127.0.0.1 on a free port chosen by the OS and runs in
background threads of this process; leaving the ``with`` block stops it and
frees the port.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import requests

__all__: list[str] = []


@dataclass(frozen=True)
class _LlamaServer:
    #: e.g. ``http://127.0.0.1:45629`` (no ``/v1``; :class:`OpenAIEndpoint` adds it)
    base_url: str
    gguf_path: Path
    n_parallel: int


@contextmanager
def llama_server(
    gguf_path: str | os.PathLike,
    *,
    n_parallel: int = 4,
    ctx_per_slot: int = 512,
    n_threads: int | None = None,
    verbose: bool = False,
) -> Iterator[_LlamaServer]:
    """Serve ``gguf_path`` on 127.0.0.1 (free port) with ``n_parallel`` slots of ``ctx_per_slot`` tokens."""
    try:
        import xllamacpp as xlc  # deferred: an optional extra, imported only when a server is started
    except ImportError as exc:  # an optional extra: say how to get it
        raise ImportError("llama_server needs xllamacpp: pip install xllamacpp (or bias-profiles[serve])") from exc
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
    params = xlc.CommonParams()
    params.model.path = str(gguf_path)
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; listening_address reports it
    params.n_parallel = n_parallel
    params.n_ctx = n_parallel * ctx_per_slot  # llama.cpp splits the context evenly between slots
    threads = n_threads or os.cpu_count() or 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = 3 if verbose else -1
    server = xlc.Server(params)
    try:
        base_url = server.listening_address
        _wait_healthy(base_url)
        yield _LlamaServer(base_url=base_url, gguf_path=gguf_path, n_parallel=n_parallel)
    finally:
        # The C++ destructor joins the server threads and closes the socket;
        # this frame holds the only reference, so deleting it stops the server now.
        del server


def _wait_healthy(base_url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(f"{base_url}/health", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp server at {base_url} did not become healthy within {timeout:.0f} s")
        time.sleep(0.1)
