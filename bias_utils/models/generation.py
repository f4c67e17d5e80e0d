"""Batched, seeded, cached and resumable sampling of completions.

One entry point, :func:`generate`, with two backends behind it:

* **transformers** (default): any decoder :func:`bias_utils.models.loading.load_model`
  loads. Our own decoding loop (``decoding``): left padding, KV cache, prompts bucketed by
  token length, rows dropped from the batch as they finish, and an exact
  temperature + top-k + nucleus (top-p) sampler that sorts only the top
  candidates (``sampling.nucleus``, ``sampling.sample_tokens``) instead of the
  whole vocabulary.
* **OpenAI-compatible HTTP** (``endpoints.OpenAIEndpoint``): ``/v1/completions`` or
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
``expected_male``  expected number of the audit's male (female) words at the
``expected_female`` steps this completion visited (below); float, NaN from the
                  HTTP backend, with ``statistics=False``, and for rows of a
                  cache written before these columns existed
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
warpers in the order temperature, top-k, top-p. ``sampling.nucleus`` applies the
same three steps in the same order; ``top_k=None`` turns top-k off.

Reproducibility
---------------
Every row draws its random numbers from its own stream, seeded from
``(seed, prompt_id, sample)`` (``sampling.row_seed``), so a row's randomness never
depends on which other rows share its batch. Batches are formed
deterministically from the whole prompt list (sorted by token length, then input
position; fixed chunks of ``batch_size``), so a resumed run regenerates a
missing batch exactly as the uninterrupted run would: with the same prompts,
settings, batch size, torch version and thread count, completions are
byte-identical (tested, including after SIGKILL + resume).

Threads. On a CPU the decoding loop runs on :data:`GENERATION_THREADS` torch
thread(s), 1 by default, whatever the process's own count: matrix kernels split
their sums by thread count, and the BOLD audit's 1,525 completions sampled on one
thread and on two differed in a few tokens (a cold build of 469737e on two
cores). One thread makes the text the same on a machine of any core count and
in any build schedule (``make book JOBS=2`` runs chapter 06 beside another
chapter, on one thread each). ``BIAS_GENERATION_THREADS=N`` samples on N
threads instead (faster on a machine with free cores; other text in a few
tokens); the count is part of the cache key.

Across *batch sizes* this is not guaranteed: the random draws are the same,
but CPU matrix kernels may accumulate in a different order for a different
batch shape and padding, so logits can differ in the last bits and a draw that
falls next to a boundary between two tokens may pick the other one; the text
then diverges from that token on. Measured on the project machine (SmolLM2,
fp32, torch 2.13 CPU): 24 BOLD prompts x 32 tokens gave identical text at batch
sizes 1, 4 and 24, but a different CPU or BLAS may not. The test suite asserts
only what is promised: at least 80 % of completions agree between batch sizes
1 and 6. On a GPU the default batch size follows the free memory
(``decoding.auto_batch_size``), so a run that must repeat another's batches
exactly passes ``batch_size``.

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
With ``statistics`` (the default, transformers backend) the key also says
that rows carry the expected counts and hidden states: a cache written before
them is not reused for such a call (its rows would have neither, and filling
them in by regenerating some rows in other batches could change their text).
Each row records the hash of the lexicon token ids its counts used
(``lexicon_key``); a row counted with other ids loads with NaN, and a row
without states is re-embedded by chapter 08.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core import paths
from ..core.cache import RecordStore, atomic_write_json, read_jsonl, read_npz, stable_hash, write_npz
from ..core.errors import check_generation, check_max_new_tokens, positive_int_from_env
from .decoding import EXPECTED_COLUMNS, STATE_PARTS, lexicon_token_ids, run_transformers
from .endpoints import OpenAIEndpoint, run_http
from .loading import check_model, resolve_model
from .sampling import ScreenedHead

__all__: list[str] = []

_COLUMNS = ["prompt_id", "sample", "prompt", "completion", "n_tokens", "finish_reason"]

#: Bumped whenever a change alters the completions produced for the same key.
_ALGORITHM_VERSION = 2
#: Version of the per-row statistics (expected counts, mean hidden states) in the cache key.
_STATISTICS_VERSION = 2
#: Vocabulary size from which ``generate(screen="auto")`` screens the output projection. Measured on 64 BOLD
#: prompts x 100 tokens, 2 threads: Gemma-3 (262k) 1.78x and Qwen2.5 (152k) 1.28x faster, SmolLM2 (49k) 0.86x.
_SCREEN_MIN_VOCAB = 100_000
#: Torch threads of the CPU decoding loop (see "Threads" above); ``$BIAS_GENERATION_THREADS`` overrides it.
GENERATION_THREADS = 1
_THREADS_ENV = "BIAS_GENERATION_THREADS"


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
    statistics: bool = True,
) -> pd.DataFrame:
    """Sample ``n_samples`` completions for every prompt; see the module docstring for columns and guarantees.

    ``model``: a ``LoadedModel``, an ``endpoints.OpenAIEndpoint``, or a name
    for ``models.resolve_model`` (``load_model``'s names, ``"openai:<base_url>"``).
    ``chat=True`` wraps each prompt as a user turn with the model's chat
    template (an error if it has none).
    ``top_k``: transformers' default, which the BOLD audit's ``generate`` call
    applied; ``None`` turns it off.
    ``prompt_ids``: unique JSON-serialisable ids (default ``0..n-1``).
    ``batch_size``: rows per forward pass (transformers backend); default
    chosen from the model size and, on a GPU, its free memory (see ``decoding.auto_batch_size``). ``cache``:
    ``True`` (under ``paths.cache_dir()``), ``False``, or a folder to use
    instead of ``paths.cache_dir()/generations``. ``screen``: with top-k
    sampling, rank the vocabulary with a bfloat16 copy of the output projection
    and score only the candidates in float32, with a proof per row that the
    top-k set is complete (:class:`ScreenedHead`; the distribution is the
    float32 one). ``"auto"`` screens vocabularies of at least
    ``SCREEN_MIN_VOCAB`` entries on a CPU, where it pays; ``True`` always, ``False``
    never. ``statistics``: accumulate the expected counts
    (:data:`EXPECTED_COLUMNS`) and, without ``chat``, the mean hidden states
    (:func:`completion_states`) in the decoding loop; ``False`` leaves the
    columns NaN. The completions are the same either way.
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

    facts = check_model(model, need="generate", what="generate")  # the kind and context length from the config
    check_max_new_tokens(max_new_tokens, facts.context_length, repr(facts.name))
    model = resolve_model(model, need="generate")
    is_http = isinstance(model, OpenAIEndpoint)
    use_chat = chat or (is_http and model.mode == "chat")
    if use_chat and not is_http and not _has_chat_template(model):
        raise ValueError(f"chat=True but {model.name!r} has no chat template; use chat=False for a base model")
    if screen not in (True, False, "auto"):
        raise ValueError(f"screen must be True, False or 'auto', got {screen!r}")
    threads = generation_threads() if not is_http and model.device.type == "cpu" else None
    screened = None
    # "auto" screens where it was measured to pay: on a CPU. On a GPU its proof would wait for the device at
    # every stage of every step.
    if not is_http and temperature > 0 and top_k is not None and (
            screen is True or (screen == "auto" and model.device.type == "cpu"
                               and model.model.config.get_text_config().vocab_size >= _SCREEN_MIN_VOCAB)):
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
    if statistics and not is_http:  # rows that carry expected counts and states: not those of older caches
        params["statistics"] = _STATISTICS_VERSION
    if threads is not None:
        params["cpu_threads"] = threads
    store = _Store(params, cache) if cache is not False else None
    held = ExitStack()
    if store:
        # Locked per request, not per folder: the folder's key leaves the prompts out, and a run on other
        # prompts (the extra terms' long job) need not wait. A second run on these rows waits, then reads them.
        request = stable_hash(sorted(r["row_key"] for r in rows))
        held.enter_context(store.lock(f"locks/{request}.lock"))
    done = store.load() if store else {}

    todo = [r for r in rows if r["row_key"] not in done]
    speeds = _Speeds(cache)
    if progress and todo:
        print(speeds.estimate(model.model_id, len(rows), len(todo), max_new_tokens))
    bar = tqdm(total=len(rows), initial=len(rows) - len(todo), unit="completion", disable=not progress,
               desc="generate", smoothing=0.1)
    started, n_new_tokens = time.monotonic(), 0

    def emit(results: list[dict]) -> None:
        nonlocal n_new_tokens
        fresh = [r for r in results if r["row_key"] not in done]
        states = {part: np.stack([r.pop(f"_{part}_state") for r in fresh]) for part in STATE_PARTS
                  if fresh and f"_{part}_state" in fresh[0]}
        if store:
            store.append(fresh, states)
        for r in fresh:
            done[r["row_key"]] = r
            n_new_tokens += r["n_tokens"]
        bar.update(len(fresh))
        bar.set_postfix(tok_s=f"{n_new_tokens / max(time.monotonic() - started, 1e-9):.1f}")

    settings = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                    chat=use_chat)
    lexicon = lexicon_token_ids(model.tokenizer) if statistics and not is_http else None
    try:
        if is_http:
            run_http(model, todo, emit, **settings)
        else:
            with _torch_threads(threads):
                run_transformers(model, rows, done, emit, batch_size=batch_size, screened=screened,
                                 lexicon=lexicon, **settings)
    finally:
        bar.close()
        held.close()
    if n_new_tokens:
        speeds.record(model.model_id, n_new_tokens / max(time.monotonic() - started, 1e-9))
    lexicon_key = stable_hash(lexicon[0]) if lexicon is not None else None
    out = pd.DataFrame([{c: done[r["row_key"]][c] for c in _COLUMNS} for r in rows], columns=_COLUMNS)
    for c in EXPECTED_COLUMNS:
        # A row from a cache written before these columns, or with another lexicon, has none.
        out[c] = [float(done[r["row_key"]].get(c, np.nan)) if done[r["row_key"]].get("lexicon_key") == lexicon_key
                  else np.nan for r in rows]
    return out




def completion_states(model_id: str, prompts: Sequence[str], completions: Sequence[str],
                      cache: bool | str | os.PathLike = True) -> dict[str, np.ndarray] | None:
    """The mean hidden states that :func:`generate` stored for these (prompt, completion) texts of ``model_id``.

    Looks in every generation cache of the model made without a chat template
    (the states are of the completion read after the raw prompt). Returns
    ``{part: float32 [n, hidden states, hidden]}`` for :data:`STATE_PARTS`, NaN
    rows where nothing is stored (or the part has no token to pool), or
    ``None`` when nothing is. Content-keyed: the same texts from another run
    have the same states.
    """
    root = paths.cache_dir() / "generations" if cache is True else Path(cache)
    wanted: dict[str, list[int]] = {}
    for i, (p, c) in enumerate(zip(prompts, completions)):
        wanted.setdefault(stable_hash([p, c]), []).append(i)
    found: dict[Path, dict[str, str]] = {}  # shard -> {row_key: text key}
    seen: set[str] = set()
    for meta in sorted(root.glob("*/meta.json")):
        try:
            params = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if params.get("model_id") != model_id or params.get("backend") != "transformers" or params.get("chat"):
            continue
        for r in read_jsonl(meta.parent / "rows.jsonl"):
            if not isinstance(r, dict) or "states" not in r:
                continue
            key = stable_hash([r.get("prompt"), r.get("completion")])
            if key in wanted and key not in seen:
                seen.add(key)
                found.setdefault(meta.parent / "states" / r["states"], {})[r["row_key"]] = key
    out: dict[str, np.ndarray] = {}
    for shard, keys in found.items():
        data = read_npz(shard, required=("row_keys", *STATE_PARTS))
        if data is None:
            continue
        for j, row_key in enumerate(data["row_keys"].tolist()):
            if row_key in keys:
                for part in STATE_PARTS:
                    if part not in out:
                        out[part] = np.full((len(prompts), *data[part].shape[1:]), np.nan, dtype=np.float32)
                    out[part][wanted[keys[row_key]]] = data[part][j]
    return out or None


def generation_threads() -> int:
    """The torch threads the CPU decoding loop runs on: ``$BIAS_GENERATION_THREADS`` when set, else
    :data:`GENERATION_THREADS`."""
    return positive_int_from_env(_THREADS_ENV, GENERATION_THREADS, "the torch threads that sample on a CPU")


@contextmanager
def _torch_threads(n: int | None):
    """Torch's intra-op thread count set to ``n`` inside, restored after; ``None`` leaves it."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _id_key(pid: Any) -> str:
    return json.dumps(pid, sort_keys=True, default=str)


def _has_chat_template(model: Any) -> bool:
    flag = getattr(model, "has_chat_template", None)
    return bool(flag) if flag is not None else bool(getattr(model.tokenizer, "chat_template", None))


class _Speeds:
    """Tokens per second each model wrote on this machine in its last run (``speed.json`` beside the generation
    cache), for the estimate a run prints before it starts."""

    def __init__(self, cache: bool | str | os.PathLike):
        root = paths.cache_dir() / "generations" if cache in (True, False) else Path(cache)
        self.path = root / "speed.json"
        self.writes = cache is not False  # a run told not to cache reads the last speed but leaves the cache alone

    def read(self) -> dict:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def estimate(self, model_id: str, n_rows: int, n_todo: int, max_new_tokens: int) -> str:
        tokens = n_todo * max_new_tokens
        head = (f"generate: {n_todo:,} of {n_rows:,} completions to write ({n_rows - n_todo:,} cached), at most "
                f"{tokens:,} new tokens with {model_id}")
        speed = self.read().get(model_id)
        if not speed:
            return head + "; no speed measured for this model on this machine yet (the bar shows it as it runs)"
        seconds = tokens / speed
        took = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
        return head + f"; at the {speed:,.1f} tokens/s it wrote here last time, at most about {took}"

    def record(self, model_id: str, tokens_per_second: float) -> None:
        if not self.writes:
            return
        try:
            atomic_write_json(self.path, {**self.read(), model_id: round(tokens_per_second, 2)})
        except OSError:  # a read-only cache: the next estimate has no measurement, nothing else is lost
            pass


class _Store(RecordStore):
    """The generation's rows under a folder keyed by its parameters; a batch's hidden states go to an npz shard that
    its rows name."""

    def __init__(self, params: dict, cache: bool | str | os.PathLike):
        super().__init__(paths.cache_dir() / "generations" if cache is True else Path(cache), params, "row_key",
                         required=_COLUMNS)

    def append(self, rows: list[dict], states: dict[str, np.ndarray] | None = None) -> None:
        if rows and states:
            # The states are on disk before the rows that name them: a crash between the two leaves only a shard
            # that no row reads, and the batch is generated again.
            keys = [r["row_key"] for r in rows]
            shard = f"{stable_hash(keys, 24)}.npz"
            write_npz(self.dir / "states" / shard, row_keys=np.array(keys), **states)
            for r in rows:
                r["states"] = shard
        super().append(rows)
