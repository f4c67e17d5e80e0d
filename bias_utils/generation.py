"""Batched, seeded, cached and resumable sampling of completions.

One entry point, :func:`generate`, with two backends behind it:

* **transformers** (default): any decoder :func:`bias_utils.models.load_model`
  loads. Our own decoding loop: left padding, KV cache, prompts bucketed by
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

Expected counts
---------------
At every step the loop samples from an exact distribution (after temperature,
top-k and top-p: the one ``sampling.sample_tokens`` or ``ScreenedHead.sample``
draws from). ``expected_<lexicon>`` adds, over the steps the completion visited
(each token it wrote and the step that drew its stop token; nothing after), the
probability that distribution gives to the lexicon's words that are one token
(:func:`lexicon_token_ids`: lower-case and capitalised, with and without a
leading space). Given the prefix, a step writes one such token with exactly that
probability, so the expected count equals the expected number of sampled
lexicon tokens, with far less variance than the sample. Caveats: a word that is
never a single token adds nothing (the coverage table says which), and a
lexicon token that a longer word continues (" man" + "agement") would count
here but not in the audit's words. An OpenAI-compatible server does not return
the distribution: its rows are NaN.

Hidden states
-------------
Without ``chat`` (the raw prompt, as the audit reads it) the loop also keeps,
per completion, the mean hidden state at every layer (``output_hidden_states``:
0 = embedding output ... last block) over the completion's tokens, the state of
a token taken at the step that reads it as input. The last token of a
completion that reached ``max_new_tokens`` is never read by a sampling step, so
one extra forward pass reads it; a completion that stopped read all its tokens
at the step that drew its stop token. The tokens pooled are the ones chapter 08
pooled when it re-embedded ``prompt + " " + completion``: those overlapping the
completion without its leading whitespace and punctuation and its trailing
whitespace. The prompt's mean state (the tokens of the stripped prompt, when
they begin the prompt's tokens, so their states are the same) comes from the
first forward pass. Stored as float32 in
``states/<shard>.npz`` beside ``rows.jsonl`` (written before the rows that
name it), read back by :func:`completion_states`, which
``completions.completion_embeddings`` uses before re-embedding. The two agree
exactly (to float32 numerics) where the re-embedding reads the same tokens;
where the completion began with whitespace (BOLD prompts end in a space, and
SmolLM2 often continues with a newline) chapter 08's re-embedding replaced that
whitespace with one space, and the stored states are those the model had.
Cost: the states of every layer are returned by the forward passes the loop
makes anyway; pooling them and classifying each token took 0.2 s of a 16 s
profiled run (SmolLM2, 16 prompts x 50 tokens, one thread), plus the one extra
forward step per batch (1/``max_new_tokens`` of the steps). Chapter 08's
re-embedding of 32 completions and prompts took 48 s, reading the stored
states 0.05 s (``benchmarks/bench_generation.py``, same run).

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
batch the stock warpers + ``multinomial`` took ~650 ms, ``sampling.sample_tokens``
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
projection (Gemma-3-270m, 64 rows: 343 of 453 ms per step); ``sampling.ScreenedHead``
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
The expected counts and hidden states do not enter the key: they change no
completion, and a row written before them still holds its text; such a row
loads with NaN expected counts (and chapter 08 re-embeds it). Each row records
the hash of the lexicon token ids its counts used (``lexicon_key``); a row
counted with other ids loads with NaN.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from . import paths
from .cache import append_jsonl, atomic_write_json, file_lock, read_jsonl, read_npz, stable_hash, write_npz
from .embeddings import token_indices
from .endpoints import OpenAIEndpoint, run_http
from .errors import check_generation
from .lexicon import GENDER_LEXICONS
from .models import resolve_model
from .sampling import ScreenedHead, row_seed, sample_tokens

__all__ = ["COLUMNS", "EXPECTED_COLUMNS", "SCREEN_MIN_VOCAB", "STATE_PARTS", "auto_batch_size", "completion_states",
           "generate", "lexicon_token_ids"]

COLUMNS = ["prompt_id", "sample", "prompt", "completion", "n_tokens", "finish_reason"]
#: Expected counts of the audit's male and female words (module docstring); NaN where not computed.
EXPECTED_COLUMNS = ["expected_male", "expected_female"]
#: The mean hidden states stored per completion (module docstring, *Hidden states*).
STATE_PARTS = ("completion", "prompt")

#: Bumped whenever a change alters the completions produced for the same key.
_ALGORITHM_VERSION = 2
#: Vocabulary size from which ``generate(screen="auto")`` screens the output projection. Measured on 64 BOLD
#: prompts x 100 tokens, 2 threads: Gemma-3 (262k) 1.78x and Qwen2.5 (152k) 1.28x faster, SmolLM2 (49k) 0.86x.
SCREEN_MIN_VOCAB = 100_000
#: Largest default batch (beyond this, 2 CPU cores gain nothing and memory grows).
_MAX_AUTO_BATCH = 64


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
    chosen from the model size (see :func:`auto_batch_size`). ``cache``:
    ``True`` (under ``paths.cache_dir()``), ``False``, or a folder to use
    instead of ``paths.cache_dir()/generations``. ``screen``: with top-k
    sampling, rank the vocabulary with a bfloat16 copy of the output projection
    and score only the candidates in float32, with a proof per row that the
    top-k set is complete (:class:`ScreenedHead`; the distribution is the
    float32 one). ``"auto"`` screens vocabularies of at least
    ``SCREEN_MIN_VOCAB`` entries, where it pays; ``True`` always, ``False``
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

    model = resolve_model(model, need="generate")
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
    held = ExitStack()
    if store:
        # Locked per request, not per folder: the folder's key leaves the prompts out, and a run on other
        # prompts (the extra terms' long job) need not wait. A second run on these rows waits, then reads them.
        request = stable_hash(sorted(r["row_key"] for r in rows))
        held.enter_context(file_lock(store.dir / "locks" / f"{request}.lock"))
    done = store.load() if store else {}

    todo = [r for r in rows if r["row_key"] not in done]
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
    try:
        if is_http:
            run_http(model, todo, emit, **settings)
        else:
            _run_transformers(model, rows, done, emit, batch_size=batch_size, screened=screened,
                              statistics=statistics, **settings)
    finally:
        bar.close()
        held.close()
    lexicon_key = stable_hash(lexicon_token_ids(model.tokenizer)[0]) if not is_http else None
    out = pd.DataFrame([{c: done[r["row_key"]][c] for c in COLUMNS} for r in rows], columns=COLUMNS)
    for c in EXPECTED_COLUMNS:
        # A row from a cache written before these columns, or with another lexicon, has none.
        out[c] = [float(done[r["row_key"]].get(c, np.nan)) if done[r["row_key"]].get("lexicon_key") == lexicon_key
                  else np.nan for r in rows]
    return out


def lexicon_token_ids(tokenizer, lexicons: dict[str, Sequence[str]] = GENDER_LEXICONS
                      ) -> tuple[dict[str, list[int]], pd.DataFrame]:
    """The token ids of each lexicon's words that are a single token, and the coverage table.

    Each word is tried as four variants: lower-case and capitalised, each with
    and without a leading space (the audit lower-cases the text, so "He" and "
    he" both count). Returns ``({name: sorted ids}, coverage)`` where coverage
    has one row per word and variant: ``lexicon, word, variant, n_tokens``
    (the variant's length in tokens), ``single_token`` and ``token_id`` (<NA>
    unless single). A word none of whose variants is one token adds nothing to
    the expected counts (module docstring).
    """
    ids: dict[str, set[int]] = {name: set() for name in lexicons}
    rows = []
    for name, words in lexicons.items():
        for word in words:
            lower, upper = word.lower(), word.capitalize()
            for variant in dict.fromkeys([lower, " " + lower, upper, " " + upper]):
                pieces = tokenizer(variant, add_special_tokens=False)["input_ids"]
                single = len(pieces) == 1
                if single:
                    ids[name].add(pieces[0])
                rows.append({"lexicon": name, "word": word, "variant": variant, "n_tokens": len(pieces),
                             "single_token": single, "token_id": pieces[0] if single else pd.NA})
    coverage = pd.DataFrame(rows, columns=["lexicon", "word", "variant", "n_tokens", "single_token", "token_id"])
    coverage["token_id"] = coverage["token_id"].astype("Int64")
    return {name: sorted(v) for name, v in ids.items()}, coverage


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

    def append(self, rows: list[dict], states: dict[str, np.ndarray] | None = None) -> None:
        if not rows:
            return
        if states:
            # The states are on disk before the rows that name them: a crash between the two leaves only a shard
            # that no row reads, and the batch is generated again.
            keys = [r["row_key"] for r in rows]
            shard = f"{stable_hash(keys, 24)}.npz"
            write_npz(self.dir / "states" / shard, row_keys=np.array(keys), **states)
            for r in rows:
                r["states"] = shard
        append_jsonl(self.rows, rows)


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


def _prompt_weights(tokenizer, prompt: str, ids: list[int]) -> list[float] | None:
    """Pooling weights over the prompt's tokens as ``completions.completion_embeddings(part="prompt")`` takes them:
    the tokens of the stripped prompt (``embeddings.token_indices``), when they begin the prompt's own tokens, so
    their states are the same (causal attention); ``None`` where that path reads another token sequence."""
    stripped = prompt.strip()
    enc = tokenizer(stripped, return_offsets_mapping=True)
    idx = token_indices(enc["offset_mapping"], (0, len(stripped)))
    if not idx or ids[:len(enc["input_ids"])] != enc["input_ids"]:
        return None
    return [1.0 / len(idx) if i in idx else 0.0 for i in range(len(ids))]


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
                      chat, screened=None, statistics=True) -> None:
    encoded = {}
    for r in rows:
        key = _id_key(r["prompt_id"])
        if key not in encoded:
            encoded[key] = _encode(model, r["prompt"], chat)
    order = sorted(range(len(rows)), key=lambda i: (len(encoded[_id_key(rows[i]["prompt_id"])]), i))
    if batch_size is None:
        batch_size = auto_batch_size(model, max(len(v) for v in encoded.values()) + max_new_tokens)
    stop = _stop_ids(model)
    groups = lexicon_key = None
    if statistics:
        ids, _ = lexicon_token_ids(model.tokenizer)
        lexicon_key = stable_hash(ids)
        n_vocab = model.model.get_output_embeddings().weight.shape[0]
        groups = torch.zeros(len(EXPECTED_COLUMNS), n_vocab, dtype=torch.bool)
        for g, column in enumerate(EXPECTED_COLUMNS):
            groups[g, ids[column.removeprefix("expected_")]] = True
    # Hidden states only where chapter 08 reads them: the completion after the raw prompt.
    keep_states = statistics and not chat
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
        weights = [_prompt_weights(model.tokenizer, r["prompt"], p) for r, p in zip(batch, prompt_ids)] \
            if keep_states else None
        new_ids, finished, mass, states = _decode_batch(model, prompt_ids, uniforms, stop, temperature, top_p, top_k,
                                                        screened, groups, weights)
        results = []
        for i, (r, p, ids, fin) in enumerate(zip(batch, prompt_ids, new_ids, finished)):
            row = {**r, **_completion(model.tokenizer, p, ids, fin)}
            if mass is not None:
                row.update({c: float(mass[i, g]) for g, c in enumerate(EXPECTED_COLUMNS)}, lexicon_key=lexicon_key)
            if states is not None:
                row.update({f"_{part}_state": states[part][i] for part in STATE_PARTS})
            results.append(row)
        emit(results)


def _completion_text(tokenizer, prompt_ids: list[int], head: str, new_ids: list[int]) -> str:
    # Decoding prompt + completion and removing the decoded prompt keeps the
    # word boundary (SentencePiece drops a leading space when a piece is decoded alone).
    full = tokenizer.decode(prompt_ids + new_ids, skip_special_tokens=True)
    return full[len(head):] if full.startswith(head) else tokenizer.decode(new_ids, skip_special_tokens=True)


def _completion(tokenizer, prompt_ids: list[int], new_ids: list[int], stopped: bool) -> dict:
    head = tokenizer.decode(prompt_ids, skip_special_tokens=True)
    return {"completion": _completion_text(tokenizer, prompt_ids, head, new_ids), "n_tokens": len(new_ids),
            "finish_reason": "stop" if stopped else "length"}


#: What a completion token's states count for: ``_LEAD`` lies wholly in the whitespace and punctuation before the
#: completion's first word, ``_BLANK`` is whitespace (it counts only if a word follows), ``_WORD`` the rest.
_LEAD, _BLANK, _WORD = 0, 1, 2
#: The leading characters ``completions.completion_embeddings`` strips from a completion before locating it.
_LEADING_PUNCTUATION = ",.;:!?)]}'\"-"


def _lead_length(text: str) -> int:
    return len(text) - len(text.lstrip().lstrip(_LEADING_PUNCTUATION).lstrip())


class _StateSums:
    """Per row, the sums of the hidden states (every layer) of the completion tokens that chapter 08 pools.

    Chapter 08 re-embeds ``prompt + " " + completion`` and pools the tokens overlapping the completion stripped of
    surrounding whitespace and leading punctuation. Trailing whitespace tokens are only known to be trailing when
    the completion ends, so their states wait in ``pending`` and join the sum when a word follows.
    """

    def __init__(self, n: int, tokenizer, prompt_ids: list[list[int]], weights: list[list[float] | None]):
        self.tokenizer, self.prompt_ids = tokenizer, prompt_ids
        self.heads = [tokenizer.decode(p, skip_special_tokens=True) for p in prompt_ids]
        self.texts = [""] * n
        self.weights = weights
        self.kind = torch.full((n,), _LEAD, dtype=torch.long)
        self.sum = self.pending = self.prompt = None
        self.count = torch.zeros(n, dtype=torch.float64)
        self.n_pending = torch.zeros(n, dtype=torch.float64)

    def read_prompt(self, hidden: tuple, width: int) -> None:
        w = torch.zeros(len(self.weights), width, dtype=torch.float32)
        for row, weights in enumerate(self.weights):
            if weights is not None:
                w[row, width - len(weights):] = torch.tensor(weights)
        w = w.unsqueeze(1).to(hidden[0].device)
        self.prompt = torch.stack([torch.bmm(w, h.float()).squeeze(1) for h in hidden], dim=1).cpu()
        self.prompt[torch.tensor([w is None for w in self.weights])] = float("nan")
        self.sum = torch.zeros(self.prompt.shape, dtype=torch.float64)
        self.pending = torch.zeros(self.prompt.shape, dtype=torch.float64)

    def read_tokens(self, rows: torch.Tensor, hidden: tuple) -> None:
        """The states of the tokens just read as input by ``rows`` (their previous draws)."""
        states = torch.stack([h[:, -1] for h in hidden], dim=1).double().cpu()
        kind = self.kind[rows]
        blank, word = kind == _BLANK, kind == _WORD
        self.pending[rows[blank]] += states[blank]
        self.n_pending[rows[blank]] += 1
        w = rows[word]
        self.sum[w] += self.pending[w] + states[word]
        self.count[w] += self.n_pending[w] + 1
        self.pending[w] = 0
        self.n_pending[w] = 0

    def drew(self, row: int, new_ids: list[int]) -> None:
        """Classify the token just appended to ``new_ids`` of ``row``, to be read at the next step."""
        text = _completion_text(self.tokenizer, self.prompt_ids[row], self.heads[row], new_ids)
        piece = text[len(self.texts[row]):]
        self.texts[row] = text
        self.kind[row] = _LEAD if _lead_length(text) == len(text) else _BLANK if not piece.strip() else _WORD

    def means(self) -> dict[str, np.ndarray]:
        completion = (self.sum / self.count.clamp(min=1)[:, None, None]).float()
        completion[self.count == 0] = float("nan")
        return {"completion": completion.numpy(), "prompt": self.prompt.numpy()}


@torch.inference_mode()
def _decode_batch(model, prompt_ids, uniforms, stop, temperature, top_p, top_k, screened=None, groups=None,
                  prompt_weights=None) -> tuple[list[list[int]], list[bool], np.ndarray | None, dict | None]:
    """Sample up to ``uniforms.shape[1]`` tokens for each prompt; finished rows leave the batch.

    With ``groups`` also the expected counts (``[rows, groups]``: the summed probability of each token set over
    the steps each row visited); with ``prompt_weights`` also the mean hidden states (:class:`_StateSums`).
    """
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
    expected = None if groups is None else torch.zeros(n, groups.shape[0], dtype=torch.float64)
    groups = None if groups is None else groups.to(device)
    sums = None if prompt_weights is None else _StateSums(n, model.tokenizer, prompt_ids, prompt_weights)
    past = DynamicCache()
    step_ids, step_pos = input_ids, positions
    n_steps = uniforms.shape[1]
    # With states, one more forward pass reads the last token of the rows that reached the length limit.
    for step in range(n_steps + (sums is not None)):
        inputs = dict(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, past_key_values=past,
                      use_cache=True, output_hidden_states=sums is not None)
        if screened is None:
            result = net(**inputs, logits_to_keep=1)
            logits = result.logits[:, -1, :]
        else:
            result = model.backbone()(**inputs)
            hidden = result.last_hidden_state[:, -1, :]
        if sums is not None:
            if step == 0:
                sums.read_prompt(result.hidden_states, width)
            else:
                sums.read_tokens(alive, result.hidden_states)
            if step == n_steps:
                break
        u = uniforms[alive, step]
        drawn = (sample_tokens(logits, u, temperature, top_p, top_k, groups=groups) if screened is None
                 else screened.sample(hidden, u, temperature, top_p, top_k, groups=groups))
        tokens, mass = drawn if groups is not None else (drawn, None)
        if mass is not None:
            expected[alive] += mass.cpu()
        is_stop = torch.isin(tokens, stop_t)
        for row, tok, s in zip(alive.tolist(), tokens.tolist(), is_stop.tolist()):
            if s:
                stopped[row] = True
            else:
                out[row].append(tok)
                if sums is not None:
                    sums.drew(row, out[row])
        keep = (~is_stop).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < alive.numel():
            past.batch_select_indices(keep)
            alive, tokens, mask, step_pos = alive[keep], tokens[keep], mask[keep], step_pos[keep]
        step_ids = tokens.unsqueeze(1)
        step_pos = step_pos[:, -1:] + 1
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
    return out, stopped, None if expected is None else expected.numpy(), None if sums is None else sums.means()
