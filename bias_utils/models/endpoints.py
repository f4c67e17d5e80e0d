"""OpenAI-compatible servers as a generation backend: ``/v1/completions`` or ``/v1/chat/completions`` of vLLM,
llama.cpp server, Ollama, TGI or OpenAI, with concurrent requests and retries (:class:`OpenAIEndpoint`,
:func:`run_http`). ``generation.generate`` takes an endpoint wherever it takes a model.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable

import requests

from .sampling import row_seed

__all__ = [
    "OpenAIEndpoint",
]


@dataclass(frozen=True)
class OpenAIEndpoint:
    """An OpenAI-compatible server (vLLM, llama.cpp, Ollama, TGI, OpenAI).

    ``base_url`` may end with or without ``/v1``. ``mode="chat"`` sends every
    prompt as a user message to ``/v1/chat/completions`` (as does
    ``generate(..., chat=True)``); ``"completions"`` sends raw text to
    ``/v1/completions``. ``parallel`` bounds concurrent requests (match the
    server's slots). Connection errors, timeouts, 429 and 5xx are retried
    ``max_retries`` times with exponential backoff; other HTTP errors raise.
    The API key, if any, is never part of a cache key.
    """

    base_url: str
    model: str = ""
    api_key: str | None = None
    mode: str = "completions"
    parallel: int = 8
    timeout: float = 600.0
    max_retries: int = 5

    def __post_init__(self) -> None:
        if self.mode not in ("completions", "chat"):
            raise ValueError(f"OpenAIEndpoint mode must be 'completions' or 'chat', got {self.mode!r}")
        if self.parallel < 1:
            raise ValueError(f"OpenAIEndpoint parallel must be >= 1, got {self.parallel}")

    @property
    def api_url(self) -> str:
        url = self.base_url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def model_id(self) -> str:
        parsed = urllib.parse.urlsplit(self.api_url)
        return f"openai:{parsed.netloc}{parsed.path}:{self.model or 'default'}"

    def complete(self, prompt: str, *, chat: bool, max_tokens: int, temperature: float, top_p: float,
                 seed: int, top_k: int | None = None) -> dict:
        """One completion: ``{"completion", "n_tokens", "finish_reason"}``."""
        body: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "seed": seed,
                                "n": 1}
        if top_k is not None:  # not in OpenAI's API; vLLM, llama.cpp and TGI read it (their own defaults differ)
            body["top_k"] = top_k
        if self.model:
            body["model"] = self.model
        if chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            url = self.api_url + "/chat/completions"
        else:
            body["prompt"] = prompt
            url = self.api_url + "/completions"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = self._post(url, body, headers)
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] if chat else choice["text"]
            n_tokens = int(data["usage"]["completion_tokens"])
            finish = choice["finish_reason"]
        except (KeyError, IndexError, TypeError) as exc:
            raise RuntimeError(f"{url} answered without choices/usage: {json.dumps(data)[:300]}") from exc
        return {"completion": text or "", "n_tokens": n_tokens, "finish_reason": finish}

    def _post(self, url: str, body: dict, headers: dict) -> dict:
        """The server's JSON answer; a refused connection, a timeout, 429 (rate limit) and a 5xx are tried again
        ``max_retries`` times with a doubling pause, any other 4xx is a ``RuntimeError`` at once."""
        delay, attempt = 0.5, 0
        while True:
            try:
                response = requests.post(url, json=body, headers=headers, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code != 429 and response.status_code < 500:
                    if response.status_code >= 400:
                        raise RuntimeError(f"{url} rejected the request: HTTP {response.status_code}: "
                                           f"{response.text[:300]}")
                    return response.json()
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
            attempt += 1
            if attempt > self.max_retries:
                raise RuntimeError(f"{url} failed after {attempt} attempts: {problem}")
            time.sleep(delay)
            delay *= 2


def run_http(endpoint: OpenAIEndpoint, todo: list[dict], emit: Callable, *, max_new_tokens, temperature, top_p, top_k,
             seed, chat) -> None:
    """Complete every row of ``todo`` with ``endpoint.parallel`` concurrent requests; ``emit([row])`` as each finishes.

    Each request's ``seed`` is the row's own (:func:`row_seed`), so a row's completion does not depend on the others.
    """
    def one(row: dict) -> dict:
        out = endpoint.complete(
            row["prompt"], chat=chat, max_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
            seed=row_seed(seed, row["prompt_id"], row["sample"]),
        )
        return {**row, **out}

    with ThreadPoolExecutor(max_workers=endpoint.parallel) as pool:
        futures = [pool.submit(one, r) for r in todo]
        try:
            for fut in as_completed(futures):
                emit([fut.result()])  # appended from this thread only: no interleaved writes
        except BaseException:
            for f in futures:
                f.cancel()
            raise
