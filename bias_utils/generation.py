"""Batched, seeded, cached and resumable sampling of completions.

One entry point, :func:`generate`, with two backends behind it:

* **transformers** (default): any decoder :func:`bias_utils.models.load_model`
  loads. Our own decoding loop: left padding, KV cache, prompts bucketed by
  token length, rows dropped from the batch as they finish, and an exact
  temperature + top-k + nucleus (top-p) sampler that sorts only the top
  candidates (:func:`nucleus`, :func:`sample_tokens`) instead of the whole
  vocabulary.
* **OpenAI-compatible HTTP** (:class:`OpenAIEndpoint`): ``/v1/completions`` or
  ``/v1/chat/completions`` of vLLM, llama.cpp server, Ollama, TGI, ... with
  concurrent requests and retries.

Result table (one row per prompt and sample, in input order):

================  ==============================================================
``prompt_id``     the caller's id for the prompt (default: its position)
``sample``        sample index, ``0 .. n_samples-1``
``prompt``        the prompt text as given (before any chat template)
``completion``    generated text only; the prompt is removed by tokens, never by
                  string search; special tokens (end of turn) are not included
``n_tokens``      number of generated tokens, not counting the stop token
                  (HTTP: the server's ``usage.completion_tokens``)
``finish_reason`` ``"stop"`` (the model ended the text) or ``"length"``
                  (``max_new_tokens`` reached); an empty completion is a row
                  with ``completion == ""``, ``n_tokens == 0``, ``"stop"``
================  ==============================================================

An empty (or whitespace-only) prompt is an error naming the offending ids: a
decoder without a BOS token has nothing to condition on, and a silent skip
would leave a hole in the audit.

Sampling settings
-----------------
The defaults are the BOLD audit's: its code called transformers
``generate(do_sample=True, temperature=0.7, top_p=0.9)``, and transformers
then also applies its default ``top_k=50`` (``GenerationConfig``; checked in
transformers 4.35, which the audit pinned, and 5.23, installed here), with the
warpers in the order temperature, top-k, top-p. :func:`nucleus` applies the
same three steps in the same order; ``top_k=None`` turns top-k off.

Reproducibility
---------------
Every row draws its random numbers from its own stream, seeded from
``(seed, prompt_id, sample)`` (:func:`row_seed`), so a row's randomness never
depends on which other rows share its batch. Batches are formed
deterministically from the whole prompt list (sorted by token length, then input
position; fixed chunks of ``batch_size``), so a resumed run regenerates a
missing batch exactly as the uninterrupted run would: with the same prompts,
settings, batch size, torch version and thread count, completions are
byte-identical (tested, including after SIGKILL + resume).

Across *batch sizes* this is not guaranteed: the random draws are the same,
but CPU matrix kernels may accumulate in a different order for a different
batch shape and padding, so logits can differ in the last bits and a draw that
falls next to a boundary between two tokens may pick the other one; the text
then diverges from that token on. Measured on the project machine (SmolLM2,
fp32, torch 2.13 CPU): 24 BOLD prompts x 32 tokens gave identical text at batch
sizes 1, 4 and 24, but a different CPU or BLAS may not. The test suite asserts
only what is promised: at least 80 % of completions agree between batch sizes
1 and 6.

Speed notes (2 shared CPU cores, ``benchmarks/bench_generation.py``)
------------------------------------------------------------------
The sampling step matters as much as the model: on a ``[64, 49152]`` logits
batch the stock warpers + ``multinomial`` took ~650 ms, :func:`sample_tokens`
~28 ms. Threads are left to the caller: on a machine busy with other jobs,
``torch.set_num_threads(1)`` (or ``OMP_NUM_THREADS=1``) made a forward pass
8-20x faster than torch's default of 2 spinning OpenMP threads.
With top-k 50 the sampler needs one ``topk`` pass over the vocabulary per
step and no full-vocabulary copy: 0.9 ms on SmolLM2's ``[16, 49152]`` logits
(transformers' temperature + top-k + top-p warpers + ``multinomial``: 27 ms),
1.1 ms on Qwen2.5's ``[8, 151936]`` (5.2 ms without top-k). At one thread the
whole loop ran at the speed of its forward passes alone (the benchmark's
floor: 1.02x on SmolLM2, 16 prompts; 0.99-1.00x on Qwen2.5-0.5B, 8 prompts).
For 150k-260k vocabularies those forward passes are mostly the float32 output
projection (Gemma-3-270m, 64 rows: 343 of 453 ms per step); :class:`ScreenedHead`
ranks the vocabulary in bfloat16 and rescores only the candidates, exactly.
Measured on 64 BOLD prompts x 100 tokens: Gemma-3 162 -> 289 tok/s, Qwen2.5
95 -> 122 tok/s, every completion identical; on SmolLM2's 49k vocabulary it
was 0.86x, so ``screen="auto"`` leaves it off there.

Cache
-----
With ``cache=True`` completions go to
``paths.cache_dir()/generations/<key>/rows.jsonl``, appended (and fsynced) as
soon as each batch (HTTP: each request) finishes. ``<key>`` hashes the model
id, backend, all generation parameters and the seed (``top_k`` only when it is
set: a cache written before top-k existed holds ``top_k=None`` results and is
reused only for ``top_k=None``); each row carries a
``row_key`` hashing (prompt id, prompt text, sample). A rerun reads the file,
keeps what is there, and generates only the missing rows; a batch that is
partly present is regenerated whole (so its rows equal an uninterrupted run)
and only its missing rows are appended. Changing any parameter changes the key.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import weakref
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import requests
import torch
from tqdm.auto import tqdm

from . import paths
from .cache import append_jsonl, atomic_write_json, read_jsonl, stable_hash
from .errors import check_generation, check_sampling
from .models import load_model

__all__ = [
    "COLUMNS", "SCREEN_MIN_VOCAB", "OpenAIEndpoint", "ScreenedHead", "auto_batch_size", "generate", "nucleus",
    "row_seed", "sample_tokens",
]

COLUMNS = ["prompt_id", "sample", "prompt", "completion", "n_tokens", "finish_reason"]

#: Bumped whenever a change alters the completions produced for the same key.
_ALGORITHM_VERSION = 2
#: First number of nucleus candidates; doubled x4 until they hold ``top_p`` of the mass.
_FIRST_K = 64
#: Vocabulary size from which ``generate(screen="auto")`` screens the output projection. Measured on 64 BOLD
#: prompts x 100 tokens, 2 threads: Gemma-3 (262k) 1.78x and Qwen2.5 (152k) 1.28x faster, SmolLM2 (49k) 0.86x.
SCREEN_MIN_VOCAB = 100_000
#: Largest default batch (beyond this, 2 CPU cores gain nothing and memory grows).
_MAX_AUTO_BATCH = 64


# --------------------------------------------------------------------------- sampler


def nucleus(logits: torch.Tensor, temperature: float, top_p: float, k: int = _FIRST_K,
            top_k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus of ``softmax(logits / temperature)`` for each row, without sorting the vocabulary.

    With ``top_k``, the ``top_k`` most likely tokens are kept first (ties with
    the ``top_k``-th value included, as ``TopKLogitsWarper`` keeps them), the
    softmax is renormalised over them, and the nucleus is taken from that
    distribution: transformers' order (temperature, top-k, top-p). The
    returned probabilities are then those of the top-k distribution.

    Returns ``(ids, probs)``, both ``[batch, K]``: candidate token ids in
    descending probability and their probabilities under the *full* softmax
    (float64), set to 0 for candidates outside the nucleus. The nucleus is the
    smallest prefix of the descending order whose mass reaches ``top_p``: a
    token is kept iff the mass strictly before it is ``< top_p`` (the top token
    is always kept), the same set as transformers' ``TopPLogitsWarper``. The
    normaliser is a log-sum-exp over the whole vocabulary, so nothing is
    approximated; only the sort is restricted to the top ``K`` candidates, and
    ``K`` grows (x4, up to the vocabulary) until the candidates hold ``top_p``.
    """
    top_k = check_sampling(temperature, top_p, top_k)
    logits = logits.float()
    if top_k is not None:
        return _top_k_nucleus(logits, temperature, top_p, top_k)
    scaled = logits / temperature
    shift = scaled.amax(dim=-1, keepdim=True)
    # One float32 pass over the vocabulary, accumulated in float64; the
    # candidates' own terms are then swapped for float64 ones, so the mass that
    # decides the nucleus boundary carries no float32 rounding.
    total = torch.exp(scaled - shift).sum(dim=-1, keepdim=True, dtype=torch.float64)
    vocab = scaled.shape[-1]
    k = min(k, vocab)
    while True:
        vals, ids = torch.topk(scaled, k, dim=-1, sorted=True)
        exact = logits.gather(1, ids).double() / temperature
        top = exact[:, :1]
        weights = torch.exp(exact - top)
        rest = total - torch.exp(vals - shift).sum(dim=-1, keepdim=True, dtype=torch.float64)
        norm = weights.sum(dim=-1, keepdim=True) + rest.clamp(min=0) * torch.exp(shift.double() - top)
        probs = weights / norm
        cum = torch.cumsum(probs, dim=-1)
        # With top_p == 1 every token is in the nucleus: only the full vocabulary will do.
        if k == vocab or (top_p < 1 and bool((cum[:, -1] >= top_p).all())):
            keep = (cum - probs) < top_p
            keep[:, 0] = True
            return ids, probs * keep
        k = min(4 * k, vocab)


def _top_k_nucleus(logits, temperature, top_p, top_k) -> tuple[torch.Tensor, torch.Tensor]:
    vocab = logits.shape[-1]
    k = min(top_k, vocab)
    # TopKLogitsWarper keeps every float32 scaled score >= the k-th one, ties
    # included. Dividing by T > 0 is monotonic, so the raw top candidates give
    # the same order; a few spare candidates show whether a tie can reach past
    # them, and only then is the whole vocabulary scaled and compared.
    spare = min(k + 8, vocab)
    raw, ids = torch.topk(logits, spare, dim=-1, sorted=True)
    scaled = raw / temperature
    threshold = scaled[:, k - 1:k]
    if spare < vocab and bool((scaled[:, -1:] >= threshold).any()):
        full = logits / temperature
        scaled, ids = torch.topk(full, int((full >= threshold).sum(dim=-1).max()), dim=-1, sorted=True)
    in_k = scaled >= threshold
    exact = logits.gather(1, ids).double() / temperature
    weights = torch.exp(exact - exact[:, :1]) * in_k
    probs = weights / weights.sum(dim=-1, keepdim=True)
    keep = (torch.cumsum(probs, dim=-1) - probs) < top_p
    keep[:, 0] = True
    return ids, probs * (keep & in_k)


def sample_tokens(
    logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float, top_k: int | None = None,
    vocab_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """One token per row from the temperature + top-k + nucleus distribution, by inverse CDF of ``uniforms`` in [0, 1).

    ``temperature == 0`` means greedy decoding (``uniforms`` unused).
    Using the caller's uniforms (one per row) keeps every row's draws
    independent of its batch neighbours. ``vocab_ids`` (same shape as
    ``logits``) names the vocabulary id of each column when ``logits`` holds
    only candidate columns that are known to contain every top-k token (see
    :class:`ScreenedHead`); the draw is then the same as over the whole row.
    """
    if temperature == 0:
        ids = logits.argmax(dim=-1, keepdim=True)
    else:
        cand, probs = nucleus(logits, temperature, top_p, top_k=top_k)
        cum = torch.cumsum(probs, dim=-1)
        target = uniforms.to(torch.float64).unsqueeze(-1) * cum[:, -1:]
        pick = torch.searchsorted(cum, target, right=True)
        last_kept = (probs > 0).sum(dim=-1, keepdim=True) - 1  # guards u * total rounding up to total
        ids = cand.gather(1, torch.minimum(pick, last_kept))
    return (ids if vocab_ids is None else vocab_ids.gather(1, ids)).squeeze(1)


class ScreenedHead:
    """Exact top-k sampling from a decoder's output projection at a fraction of its cost.

    Why: with 150k-260k vocabulary entries the float32 output projection is
    most of a decoding step on a CPU (Gemma-3-270m, 64 rows: 343 of 453 ms),
    yet with top-k sampling only the ``top_k`` largest logits enter the
    distribution. A bfloat16 copy of the projection ranks the whole vocabulary
    (4x faster here); the best ``widths[0]`` candidates of each row are scored
    again in float32 with the original weights, and a worst-case bound on the
    bfloat16 error proves, row by row, that no other token can reach the
    ``top_k``-th float32 logit. A row without the proof tries the next, wider
    candidate set, and after the last one is scored over the whole vocabulary
    in float32. The sampled distribution is therefore the float32 one; only the
    last bits of the candidates' logits can differ (another matrix shape), as
    they do between batch sizes. :attr:`rows_by_stage` counts where rows ended.

    The bound for a token outside the candidates, with ``a`` its bfloat16
    score and ``h`` the hidden state: ``|h.w - a| <= |h - bf16(h)| max|w|
    + |bf16(h)| max|w - bf16(w)| + 2^-7 |a_K| + 2 H 2^-24 |h| max|w|``
    (rounding of the inputs, of the bfloat16 output, and float32 summation
    in both products), where ``a_K`` is the smallest candidate score. On real
    BOLD hidden states it is about 4x the largest error observed.
    """

    def __init__(self, weight: torch.Tensor, widths: Sequence[int] = (128, 1024)):
        # Candidate set sizes tried in turn. On 64 BOLD prompts x 100 tokens, 128 proved all 6,404 of Gemma-3's
        # rows, 6,401 of 6,404 of Qwen2.5's and 79% of SmolLM2's; 1024 proved the rest.
        self.widths = tuple(widths)
        self.weight = weight
        self.low = weight.to(torch.bfloat16)
        # In slices: a float64 copy of Gemma-3's projection alone would be 1.3 GB. w - bf16(w) is exact in float32;
        # 1e-4 covers the float32 rounding of the norms.
        norms, rounding = [], []
        for start in range(0, weight.shape[0], 16384):
            w = weight[start:start + 16384]
            norms.append(w.norm(dim=1).max())
            rounding.append((w - self.low[start:start + 16384].float()).norm(dim=1).max())
        self.max_norm = float(max(norms)) * (1 + 1e-4)
        self.max_rounding = float(max(rounding)) * (1 + 1e-4)
        self.rows_by_stage = {str(w): 0 for w in self.widths} | {"full": 0}

    @classmethod
    def for_model(cls, net: Any) -> "ScreenedHead | None":
        """The screened head of ``net``, or ``None`` when its logits are not a bias-free linear map of the last
        hidden state (a soft cap, a scale or a bias), checked on a short input."""
        if net in _SCREENS:
            return _SCREENS[net]
        head = net.get_output_embeddings()
        screen = None
        if isinstance(head, torch.nn.Linear) and head.bias is None:
            probe = torch.arange(1, 9, device=head.weight.device).unsqueeze(0) % head.weight.shape[0]
            with torch.inference_mode():
                full = net(input_ids=probe).logits
                ours = torch.nn.functional.linear(net.base_model(input_ids=probe).last_hidden_state, head.weight)
            if torch.allclose(full, ours, rtol=1e-5, atol=1e-5):
                screen = cls(head.weight.detach())
        _SCREENS[net] = screen
        return screen

    def slack(self, hidden: torch.Tensor) -> torch.Tensor:
        """Per row, the bound's terms that do not depend on the score: input rounding and float32 summation."""
        low_h = hidden.to(torch.bfloat16).double()
        h64 = hidden.double()
        return ((h64 - low_h).norm(dim=1) * self.max_norm + low_h.norm(dim=1) * self.max_rounding
                + 2 * hidden.shape[1] * 2.0 ** -24 * h64.norm(dim=1) * self.max_norm)

    def _rescore(self, hidden: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        vocab, pos = torch.unique(ids, return_inverse=True)
        return (hidden @ self.weight.index_select(0, vocab).T).gather(1, pos)

    def sample(self, hidden: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float,
               top_k: int) -> torch.Tensor:
        """One token per row, the same draw as :func:`sample_tokens` on the full float32 logits."""
        n_vocab = self.weight.shape[0]
        approx = hidden.to(torch.bfloat16) @ self.low.T
        slack = self.slack(hidden)
        tokens = torch.empty(hidden.shape[0], dtype=torch.long)
        todo = torch.arange(hidden.shape[0])
        for stage in self.widths:
            width = min(max(stage, top_k + 16), n_vocab)
            # Most rows are proven by the first width; a wider top-k runs only for the rows left.
            scores, cand = torch.topk(approx[todo], width, dim=-1, sorted=True)
            logits = self._rescore(hidden[todo], cand)
            if width == n_vocab:
                proven = torch.ones(len(todo), dtype=torch.bool)
            else:
                kth = torch.topk(logits, top_k, dim=-1).values[:, -1].double()
                last = scores[:, -1].double()
                # Strictly below the k-th logit, with room for its own rounding, so no tie can hide outside.
                proven = last + 2.0 ** -7 * last.abs() + slack[todo] < kth - 2.0 ** -20 * (kth.abs() + 1)
            done = todo[proven]
            tokens[done] = sample_tokens(logits[proven], uniforms[done], temperature, top_p, top_k,
                                         vocab_ids=cand[proven])
            self.rows_by_stage[str(stage)] += len(done)
            todo = todo[~proven]
            if len(todo) == 0:
                return tokens
        self.rows_by_stage["full"] += len(todo)
        full = torch.nn.functional.linear(hidden[todo], self.weight)
        tokens[todo] = sample_tokens(full, uniforms[todo], temperature, top_p, top_k)
        return tokens


#: One screened head per loaded network (``None``: the network's logits are not screenable).
_SCREENS: "weakref.WeakKeyDictionary[Any, ScreenedHead | None]" = weakref.WeakKeyDictionary()


def row_seed(seed: int, prompt_id: Any, sample: int) -> int:
    """The seed of one row's random stream (31 bits, accepted by every server's ``seed``)."""
    return int(stable_hash(["generation-row", seed, prompt_id, sample]), 16) % (2**31)


# --------------------------------------------------------------------------- backends


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
        delay, attempt = 0.5, 0
        while True:
            try:
                response = requests.post(url, json=body, headers=headers, timeout=self.timeout)
                if response.status_code == 429 or response.status_code >= 500:
                    raise _Retryable(f"HTTP {response.status_code}: {response.text[:200]}")
                if response.status_code >= 400:
                    raise RuntimeError(f"{url} rejected the request: HTTP {response.status_code}: "
                                       f"{response.text[:300]}")
                return response.json()
            except (requests.ConnectionError, requests.Timeout, _Retryable) as exc:
                attempt += 1
                if attempt > self.max_retries:
                    raise RuntimeError(f"{url} failed after {attempt} attempts: {exc}") from exc
                time.sleep(delay)
                delay *= 2


class _Retryable(Exception):
    pass


def _resolve_model(model: Any) -> Any:
    if isinstance(model, (str, os.PathLike)):
        model = load_model(str(model))
    if isinstance(model, OpenAIEndpoint):
        return model
    if getattr(model, "kind", "decoder") != "decoder" or not hasattr(model.model, "generate"):
        raise ValueError(f"{getattr(model, 'name', model)!r} is not a decoder (kind={getattr(model, 'kind', '?')}); "
                         f"cannot generate text")
    return model


# --------------------------------------------------------------------------- public API


def generate(
    model: Any,
    prompts: Sequence[str],
    *,
    n_samples: int = 1,
    max_new_tokens: int = 100,
    temperature: float = 0.7,
    top_p: float = 0.9,
    top_k: int | None = 50,
    seed: int = 0,
    chat: bool = False,
    prompt_ids: Sequence[Any] | None = None,
    batch_size: int | None = None,
    cache: bool | str | os.PathLike = True,
    progress: bool = True,
    screen: bool | str = "auto",
) -> pd.DataFrame:
    """Sample ``n_samples`` completions for every prompt; see the module docstring for columns and guarantees.

    ``model``: a ``LoadedModel``, a name for ``load_model``, or an
    :class:`OpenAIEndpoint`. ``chat=True`` wraps each prompt as a user turn
    with the model's chat template (an error if it has none).
    ``top_k``: transformers' default, which the BOLD audit's ``generate`` call
    applied; ``None`` turns it off.
    ``prompt_ids``: unique JSON-serialisable ids (default ``0..n-1``).
    ``batch_size``: rows per forward pass (transformers backend); default
    chosen from the model size (see :func:`auto_batch_size`). ``cache``:
    ``True`` (under ``paths.cache_dir()``), ``False``, or a folder to use
    instead of ``paths.cache_dir()/generations``. ``screen``: with top-k
    sampling, rank the vocabulary with a bfloat16 copy of the output projection
    and score only the candidates in float32, with a proof per row that the
    top-k set is complete (:class:`ScreenedHead`; the distribution is the
    float32 one). ``"auto"`` screens vocabularies of at least
    ``SCREEN_MIN_VOCAB`` entries, where it pays; ``True`` always, ``False``
    never.
    """
    checked = check_generation(prompts, n_samples=n_samples, max_new_tokens=max_new_tokens, temperature=temperature,
                               top_p=top_p, top_k=top_k, seed=seed)
    prompts, n_samples, max_new_tokens, top_k, seed = (checked[k] for k in ("prompts", "n_samples", "max_new_tokens",
                                                                            "top_k", "seed"))
    ids = list(range(len(prompts))) if prompt_ids is None else list(prompt_ids)
    if len(ids) != len(prompts):
        raise ValueError(f"{len(ids)} prompt_ids for {len(prompts)} prompts")
    if len(set(map(_id_key, ids))) != len(ids):
        raise ValueError("prompt_ids must be unique")
    empty = [pid for pid, p in zip(ids, prompts) if not p.strip()]
    if empty:
        raise ValueError(f"empty prompt(s) for prompt_id {empty[:10]}{' ...' if len(empty) > 10 else ''}: nothing to "
                         f"condition on")

    model = _resolve_model(model)
    is_http = isinstance(model, OpenAIEndpoint)
    use_chat = chat or (is_http and model.mode == "chat")
    if use_chat and not is_http and not _has_chat_template(model):
        raise ValueError(f"chat=True but {model.name!r} has no chat template; use chat=False for a base model")
    if screen not in (True, False, "auto"):
        raise ValueError(f"screen must be True, False or 'auto', got {screen!r}")
    screened = None
    if not is_http and temperature > 0 and top_k is not None and (
            screen is True or (screen == "auto" and model.model.config.get_text_config().vocab_size
                               >= SCREEN_MIN_VOCAB)):
        screened = ScreenedHead.for_model(model.model)

    rows = [
        {"prompt_id": pid, "sample": s, "prompt": p, "row_key": stable_hash([_id_key(pid), p, s])}
        for pid, p in zip(ids, prompts)
        for s in range(n_samples)
    ]
    params = {
        "model_id": model.model_id,
        "backend": "openai" if is_http else "transformers",
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "seed": seed,
        "chat": use_chat,
        "algorithm": _ALGORITHM_VERSION,
    }
    if top_k is not None:  # absent = the key of caches written before top-k existed (their rows are top_k=None)
        params["top_k"] = top_k
    if screened is not None:  # candidates' logits come from another matrix shape: last bits may differ
        params["logits"] = "bf16-screened"
    store = _Store(params, cache) if cache is not False else None
    done = store.load() if store else {}

    todo = [r for r in rows if r["row_key"] not in done]
    bar = tqdm(total=len(rows), initial=len(rows) - len(todo), unit="completion", disable=not progress,
               desc="generate", smoothing=0.1)
    started, n_new_tokens = time.monotonic(), 0

    def emit(results: list[dict]) -> None:
        nonlocal n_new_tokens
        fresh = [r for r in results if r["row_key"] not in done]
        if store:
            store.append(fresh)
        for r in fresh:
            done[r["row_key"]] = r
            n_new_tokens += r["n_tokens"]
        bar.update(len(fresh))
        bar.set_postfix(tok_s=f"{n_new_tokens / max(time.monotonic() - started, 1e-9):.1f}")

    settings = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                    chat=use_chat)
    try:
        if is_http:
            _run_http(model, todo, emit, **settings)
        else:
            _run_transformers(model, rows, done, emit, batch_size=batch_size, screened=screened, **settings)
    finally:
        bar.close()
    return pd.DataFrame([{c: done[r["row_key"]][c] for c in COLUMNS} for r in rows], columns=COLUMNS)


def _id_key(pid: Any) -> str:
    return json.dumps(pid, sort_keys=True, default=str)


def _has_chat_template(model: Any) -> bool:
    flag = getattr(model, "has_chat_template", None)
    return bool(flag) if flag is not None else bool(getattr(model.tokenizer, "chat_template", None))


class _Store:
    """Append-only JSONL of finished rows under a folder keyed by the generation parameters."""

    def __init__(self, params: dict, cache: bool | str | os.PathLike):
        root = paths.cache_dir() / "generations" if cache is True else Path(cache)
        self.dir = root / stable_hash(params)
        self.rows = self.dir / "rows.jsonl"
        meta = self.dir / "meta.json"
        if not meta.exists():  # for people browsing the cache; the key is the folder name
            atomic_write_json(meta, params)

    def load(self) -> dict[str, dict]:
        done: dict[str, dict] = {}
        for r in read_jsonl(self.rows):
            if isinstance(r, dict) and "row_key" in r and all(c in r for c in COLUMNS):
                done.setdefault(r["row_key"], r)  # a duplicate (two concurrent runs) keeps the first
        return done

    def append(self, rows: list[dict]) -> None:
        if rows:
            append_jsonl(self.rows, rows)


# --------------------------------------------------------------------------- HTTP backend


def _run_http(endpoint: OpenAIEndpoint, todo: list[dict], emit: Callable, *, max_new_tokens, temperature, top_p, top_k,
              seed, chat) -> None:
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


# --------------------------------------------------------------------------- transformers backend


def auto_batch_size(model: Any, max_len: int) -> int:
    """Rows per forward pass: as many as fit ~2 GiB of KV cache and logits, capped at 64.

    64 is where the probes in ``MODELS.md`` measured stock batched generation on
    this 2-core machine; larger batches mostly add memory.
    """
    cfg = model.model.config
    cfg = getattr(cfg, "text_config", None) or cfg
    n_heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    kv_dim = (getattr(cfg, "num_key_value_heads", None) or n_heads) * head_dim
    bytes_per_row = 2 * cfg.num_hidden_layers * kv_dim * 4 * max_len + 3 * cfg.vocab_size * 8
    return int(max(1, min(_MAX_AUTO_BATCH, (2 << 30) // bytes_per_row)))


def _encode(model: Any, prompt: str, chat: bool) -> list[int]:
    tok = model.tokenizer
    if chat:
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                       tokenize=False)
        return tok(text, add_special_tokens=False)["input_ids"]
    return tok(prompt)["input_ids"]


def _stop_ids(model: Any) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model.model, "generation_config", None), model.tokenizer):
        eos = getattr(source, "eos_token_id", None)
        if eos is not None:
            ids.update([eos] if isinstance(eos, int) else eos)
    if not ids:
        raise ValueError(f"{model.name!r} defines no end-of-sequence token")
    return ids


def _run_transformers(model, rows, done, emit, *, batch_size, max_new_tokens, temperature, top_p, top_k, seed,
                      chat, screened=None) -> None:
    encoded = {}
    for r in rows:
        key = _id_key(r["prompt_id"])
        if key not in encoded:
            encoded[key] = _encode(model, r["prompt"], chat)
    order = sorted(range(len(rows)), key=lambda i: (len(encoded[_id_key(rows[i]["prompt_id"])]), i))
    if batch_size is None:
        batch_size = auto_batch_size(model, max(len(v) for v in encoded.values()) + max_new_tokens)
    stop = _stop_ids(model)
    for start in range(0, len(order), batch_size):
        batch = [rows[i] for i in order[start:start + batch_size]]
        if all(r["row_key"] in done for r in batch):
            continue
        prompt_ids = [encoded[_id_key(r["prompt_id"])] for r in batch]
        uniforms = torch.stack([
            torch.rand(max_new_tokens, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(row_seed(seed, r["prompt_id"], r["sample"])))
            for r in batch
        ])
        new_ids, finished = _decode_batch(model, prompt_ids, uniforms, stop, temperature, top_p, top_k, screened)
        emit([
            {**r, **_completion(model.tokenizer, p, ids, fin)}
            for r, p, ids, fin in zip(batch, prompt_ids, new_ids, finished)
        ])


def _completion(tokenizer, prompt_ids: list[int], new_ids: list[int], stopped: bool) -> dict:
    # Decoding prompt + completion and removing the decoded prompt keeps the
    # word boundary (SentencePiece drops a leading space when a piece is decoded alone).
    full = tokenizer.decode(prompt_ids + new_ids, skip_special_tokens=True)
    head = tokenizer.decode(prompt_ids, skip_special_tokens=True)
    text = full[len(head):] if full.startswith(head) else tokenizer.decode(new_ids, skip_special_tokens=True)
    return {"completion": text, "n_tokens": len(new_ids), "finish_reason": "stop" if stopped else "length"}


@torch.inference_mode()
def _decode_batch(model, prompt_ids, uniforms, stop, temperature, top_p, top_k,
                  screened=None) -> tuple[list[list[int]], list[bool]]:
    """Sample up to ``uniforms.shape[1]`` tokens for each prompt; finished rows leave the batch."""
    from transformers import DynamicCache  # deferred: importing transformers takes seconds

    net = model.model
    device = getattr(model, "device", None) or net.device
    pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else next(iter(stop))
    width = max(len(p) for p in prompt_ids)
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids], device=device)
    positions = (mask.cumsum(-1) - 1).clamp_(min=0)
    stop_t = torch.tensor(sorted(stop), device=device)

    n = len(prompt_ids)
    out: list[list[int]] = [[] for _ in range(n)]
    stopped = [False] * n
    alive = torch.arange(n)  # original row index of each batch row
    past = DynamicCache()
    step_ids, step_pos = input_ids, positions
    for step in range(uniforms.shape[1]):
        inputs = dict(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, past_key_values=past,
                      use_cache=True)
        if screened is None:
            logits = net(**inputs, logits_to_keep=1).logits[:, -1, :]
            tokens = sample_tokens(logits, uniforms[alive, step], temperature, top_p, top_k)
        else:
            hidden = model.backbone()(**inputs).last_hidden_state[:, -1, :]
            tokens = screened.sample(hidden, uniforms[alive, step], temperature, top_p, top_k)
        is_stop = torch.isin(tokens, stop_t)
        for row, tok, s in zip(alive.tolist(), tokens.tolist(), is_stop.tolist()):
            if s:
                stopped[row] = True
            else:
                out[row].append(tok)
        keep = (~is_stop).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < alive.numel():
            past.batch_select_indices(keep)
            alive, tokens, mask, step_pos = alive[keep], tokens[keep], mask[keep], step_pos[keep]
        step_ids = tokens.unsqueeze(1)
        step_pos = step_pos[:, -1:] + 1
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
    return out, stopped
