"""Per-layer contextual embeddings of target words (Schuster et al. 2024, Eq. 1 input).

For each (context, word) pair, :func:`embed_words` returns the word's hidden
state at every selected layer (index 0 = embedding output, as
``output_hidden_states`` gives them), averaged over the subword tokens that make
up the word.

Locating the word. The word is searched as a *character span* in the context
(case-insensitive, not inside a longer word, spaces in multi-word terms match
any whitespace), and the tokens whose character offsets overlap that span are
taken. This works the same for byte-level BPE (a leading-space token ``ĠMary``
has offsets that include the space and still overlaps ``Mary``), SentencePiece
(``▁Mary``), WordPiece (``##`` pieces, lower-cased vocabularies: offsets point
into the original text) and hyphenated terms (``open-minded`` is three tokens).
Special tokens have empty offsets ``(0, 0)`` and never count.

Which occurrence counts: the **first** one. The original study's code searches
the context's words from left to right and returns the first match, so a word
that appears twice is embedded at its first appearance here too. A word not in
its context (or cut off by the model's maximum length) is a recorded skip: its
row of ``values`` is NaN and ``skipped`` says why.

Speed and exactness. Contexts are tokenised once; for decoders each is cut
after the word's last token (causal attention: later tokens cannot change the
states at the word, so this is exact and saves their cost). Pairs are sorted by
token length and run in padded batches through the backbone (no LM head) under
``torch.inference_mode``.
Decoders keep their tokenizer's padding side and get explicit position ids from
the attention mask, so left padding does not shift positions; encoders are always
padded on the right, because their absolute position embeddings count from the
first token. Batched results equal one-at-a-time results within 1e-5 in fp32
(tested).

Cache. Results are stored under
``paths.cache_dir()/embeddings/<model_id>/<layer set>/`` as one npz shard per
batch plus an append-only index (``index.jsonl``) naming the pair keys of each
shard. A pair's key is ``stable_hash([context, word])``. A rerun computes nothing
already cached; an interrupted run keeps every finished batch; a shard that is
truncated or corrupt is detected by :func:`bias_utils.core.cache.read_npz`, deleted
and recomputed. Reading and filling a folder happen under its lock
(:func:`bias_utils.core.cache.file_lock`): a second run on the same cache waits for the
first and then reads its vectors instead of computing them again.
"""

from __future__ import annotations

import inspect
import re
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core import paths
from ..core.cache import append_jsonl, file_lock, read_jsonl, read_npz, stable_hash, write_npz
from ..core.errors import ParameterError, check_word_list
from .loading import resolve_model

__all__ = [
    "embed_words",
]

#: Bumped when the locating or pooling rule changes, so old cache entries stop matching.
_CACHE_VERSION = "v1"

_SKIPPED_COLUMNS = ["pair_index", "context", "word", "reason"]


@dataclass
class _WordEmbeddings:
    """Embeddings of target words, aligned with the input pairs.

    ``values``: float32 ``[n_pairs, len(layers), hidden]``; rows of skipped pairs are NaN.
    ``layers``: hidden-state indices (0 = embedding output, ``n_layers`` = last block).
    ``skipped``: DataFrame ``pair_index, context, word, reason``.
    ``n_tokens``: number of subword tokens averaged per pair (0 when skipped).
    ``warnings``: DataFrame ``pair_index, context, word, reason`` of pairs that
    were kept although a minority of the word's tokens is the tokenizer's
    unknown token (see :func:`unknown_reason`).
    """

    values: np.ndarray
    layers: list[int]
    skipped: pd.DataFrame
    model_id: str
    n_tokens: np.ndarray
    warnings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_SKIPPED_COLUMNS))

    @property
    def kept(self) -> np.ndarray:
        """Boolean mask of the pairs that have an embedding."""
        mask = np.ones(len(self.values), dtype=bool)
        mask[self.skipped["pair_index"].to_numpy(dtype=int)] = False
        return mask


def _word_pattern(word: str) -> re.Pattern:
    """Case-insensitive pattern for ``word`` as a whole word (not inside a longer word)."""
    parts = [re.escape(p) for p in word.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(parts) + r"(?!\w)", flags=re.IGNORECASE)


def find_word(context: str, word: str) -> tuple[int, int] | None:
    """Character span ``(start, end)`` of the first occurrence of ``word`` in ``context``, or None."""
    match = _word_pattern(word).search(context)
    return match.span() if match else None


def token_indices(offsets: Sequence[tuple[int, int]], span: tuple[int, int]) -> list[int]:
    """Indices of the tokens whose character offsets overlap ``span``; empty offsets never count."""
    start, end = span
    return [i for i, (s, e) in enumerate(offsets) if e > s and s < end and e > start]


def _max_length(loaded) -> int:
    limits = [getattr(loaded.tokenizer, "model_max_length", None)]
    config = loaded.model.config
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    limits.append(getattr(text_config, "max_position_embeddings", None))
    # Tokenizers without a limit report a huge sentinel (1e30); ignore it.
    limits = [int(x) for x in limits if isinstance(x, (int, float)) and 0 < x < 1e9]
    return min(limits) if limits else 512


def layer_indices(layers, n_layers: int) -> list[int]:
    n_states = n_layers + 1
    if isinstance(layers, str):
        if layers != "all":
            raise ParameterError(f"layers must be 'all' or a list of hidden-state indices, not {layers!r}")
        return list(range(n_states))
    if isinstance(layers, (int, np.integer)):
        layers = [layers]
    out = []
    for layer in layers:
        idx = int(layer) + n_states if int(layer) < 0 else int(layer)
        if not 0 <= idx < n_states:
            raise ParameterError(f"layers: {layer} is out of range: the model has hidden states 0..{n_layers}")
        out.append(idx)
    if len(set(out)) != len(out):
        raise ParameterError(f"layers: repeated layers in {list(layers)}")
    return out


def default_batch_size(loaded) -> int:
    """32 on a CPU (throughput flattens beyond it here), 128 on an accelerator."""
    return 32 if loaded.device.type == "cpu" else 128


def forward_threads(loaded) -> int | None:
    """The torch threads a forward pass of ``loaded`` runs on where that is a CPU, else None. A cache of forward
    passes whose values it keeps to the bit (the erasure's, the next word's) records it: a float32 sum split over
    another number of threads may round differently in its last bits."""
    return torch.get_num_threads() if loaded.device.type == "cpu" else None


def _cache_dir(model_id: str, layers: list[int]) -> Path:
    return paths.cache_dir() / "embeddings" / model_id / f"{_CACHE_VERSION}-layers-{stable_hash(layers, 12)}"


def _pair_key(context: str, word: str) -> str:
    return stable_hash([context, word], length=24)


def _load_cached(folder: Path, wanted: set[str]) -> dict[str, np.ndarray]:
    """Cached vectors for the wanted keys; a corrupt shard is deleted and its keys become misses."""
    shards: dict[str, list[str]] = {}
    for record in read_jsonl(folder / "index.jsonl"):
        if wanted.intersection(record.get("keys", ())):
            shards[record["shard"]] = record["keys"]
    found: dict[str, np.ndarray] = {}
    for shard in shards:
        data = read_npz(folder / shard, required=("keys", "values"))
        if data is None:
            continue
        for key, vec in zip(data["keys"].tolist(), data["values"]):
            if key in wanted:
                found[key] = vec
    return found


def _accepts_position_ids(backbone: torch.nn.Module) -> bool:
    """Whether the backbone's forward accepts explicit position ids."""
    return "position_ids" in inspect.signature(backbone.forward).parameters


def embed_words(
    model,
    contexts: Sequence[str],
    words: Sequence[str],
    layers="all",
    batch_size: int | None = None,
    cache: bool = True,
    progress: bool = True,
) -> _WordEmbeddings:
    """Embedding of ``words[i]`` in ``contexts[i]`` at each selected layer, averaged over its tokens.

    ``model``: a :class:`~bias_utils.models.loading.LoadedModel` or a name for
    :func:`~bias_utils.models.loading.resolve_model` (a backend without hidden states,
    such as a server, is a ``ModelError``). ``layers``: ``"all"`` or hidden-state
    indices (negative counts from the end). See the module docstring for how the
    word is located, which occurrence counts, padding and the cache.
    """
    # a pair that cannot be embedded (an empty or missing context or word) is skipped with its reason, not refused
    contexts = check_word_list(contexts, "contexts", strings=False)
    words = check_word_list(words, "words", strings=False)
    if len(contexts) != len(words):
        raise ParameterError(f"words: {len(contexts)} contexts but {len(words)} words: pass one word per context")
    model = resolve_model(model, need="embed")
    layer_list = layer_indices(layers, model.n_layers)
    n = len(contexts)
    values = np.full((n, len(layer_list), model.hidden_size), np.nan, dtype=np.float32)
    n_tokens = np.zeros(n, dtype=np.int64)
    skipped: list[tuple[int, str, str, str]] = []
    warned: list[tuple[int, str, str, str]] = []

    tok = model.tokenizer
    max_len = _max_length(model)
    # (pair index, cache key, token indices, model inputs as lists)
    todo: list[tuple[int, str, list[int], dict[str, list[int]]]] = []
    spans: dict[int, tuple[int, int]] = {}
    for i, (context, word) in enumerate(zip(contexts, words)):
        reason = _check_pair(context, word)
        if reason is None and (span := find_word(context, word)) is None:
            reason = f"word {word!r} not found in its context"
        if reason is None:
            spans[i] = span
        else:
            skipped.append((i, context, word, reason))
    located = list(spans)
    encodings = tok([contexts[i] for i in located], return_offsets_mapping=True, truncation=True,
                    max_length=max_len) if located else {"input_ids": [], "offset_mapping": []}
    fields = [k for k in encodings if k != "offset_mapping"]
    for j, i in enumerate(located):
        ids, offsets = encodings["input_ids"][j], encodings["offset_mapping"][j]
        idx = token_indices(offsets, spans[i])
        truncated = len(ids) >= max_len and spans[i][1] > max(e for _, e in offsets)
        unknown = _unknown_reason(tok, [ids[k] for k in idx], words[i])
        if not idx or truncated:
            skipped.append((i, contexts[i], words[i],
                            f"word {words[i]!r} is cut off at the model's maximum length of {max_len} tokens"))
        elif unknown and unknown[0]:
            skipped.append((i, contexts[i], words[i], unknown[1]))
        else:
            if unknown:
                warned.append((i, contexts[i], words[i], unknown[1]))
            # Causal attention: a decoder's states at the word never see later tokens, so cut them.
            cut = max(idx) + 1 if model.kind == "decoder" else len(ids)
            todo.append((i, _pair_key(contexts[i], words[i]), idx, {k: encodings[k][j][:cut] for k in fields}))
            n_tokens[i] = len(idx)
    skipped.sort()

    folder = _cache_dir(model.model_id, layer_list)
    # A second run on the same cache waits here for the first, then finds its vectors instead of computing them.
    with file_lock(folder / "lock") if cache and todo else nullcontext():
        cached = _load_cached(folder, {t[1] for t in todo}) if cache and todo else {}
        pending, first, twins = [], {}, []  # a pair asked for twice (one term in two senses) is computed once
        for i, key, idx, inputs in todo:
            if key in cached:
                values[i] = cached[key]
            elif key in first:
                twins.append((i, first[key]))
            else:
                first[key] = i
                pending.append((i, key, idx, inputs))
        if pending:
            compute(model, pending, layer_list, values, batch_size or default_batch_size(model),
                     folder if cache else None, progress, len(todo) - len(pending) - len(twins))
        for i, j in twins:
            values[i] = values[j]
    return _WordEmbeddings(
        values=values,
        layers=layer_list,
        skipped=pd.DataFrame(skipped, columns=_SKIPPED_COLUMNS),
        model_id=model.model_id,
        n_tokens=n_tokens,
        warnings=pd.DataFrame(warned, columns=_SKIPPED_COLUMNS),
    )


def _unknown_reason(tokenizer, ids: Sequence[int], word: str) -> tuple[bool, str] | None:
    """``(skip, reason)`` when some of a word's token ids are the tokenizer's unknown token, else None.

    Every unknown piece has the same vector whatever it stands for, so a word
    whose pieces are half or more unknown would take a value shared with
    unrelated words: it is skipped. With a minority of unknown pieces the word
    is kept and the reason is recorded as a warning. Byte-level BPE tokenizers
    have no unknown token, so nothing is ever flagged for them.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    n_unk = sum(1 for t in ids if t == unk) if unk is not None else 0
    if not n_unk:
        return None
    skip = 2 * n_unk >= len(ids)
    what = "skipped" if skip else "kept"
    return skip, (f"word {word!r}: {n_unk} of its {len(ids)} tokens are the unknown token "
                  f"{tokenizer.unk_token!r} ({what}: unknown pieces carry no information about the word)")


def _check_pair(context, word) -> str | None:
    if not isinstance(context, str) or not context.strip():
        return "empty or missing context"
    if not isinstance(word, str) or not word.strip():
        return "empty or missing word"
    return None


def _pad(batch, side: str, pad_id: int) -> dict[str, torch.Tensor]:
    """Pad the pre-tokenised inputs of a batch to one width, on the given side."""
    width = max(len(inputs["input_ids"]) for *_, inputs in batch)
    out = {}
    for name in batch[0][3]:
        fill = pad_id if name == "input_ids" else 0
        arr = torch.full((len(batch), width), fill, dtype=torch.long)
        for row, (*_, inputs) in enumerate(batch):
            seq = torch.tensor(inputs[name], dtype=torch.long)
            if side == "left":
                arr[row, width - len(seq):] = seq
            else:
                arr[row, :len(seq)] = seq
        out[name] = arr
    return out


def compute(model, pending, layer_list, values, batch_size, folder, progress, n_cached) -> None:
    tok = model.tokenizer
    backbone = model.backbone()
    decoder = model.kind == "decoder"
    use_positions = decoder and _accepts_position_ids(backbone)
    # Encoders: absolute position embeddings count from the first token, so pad on the right.
    padding_side = tok.padding_side if decoder else "right"
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0  # padded positions are masked anyway
    pending = sorted(pending, key=lambda t: len(t[3]["input_ids"]))  # length-sorted: little padding per batch
    bar = tqdm(total=len(pending), desc=f"embedding ({model.name})", unit="ctx", disable=not progress,
               postfix={"cached": n_cached})
    with torch.inference_mode():
        for b0 in range(0, len(pending), batch_size):
            batch = pending[b0:b0 + batch_size]
            enc = _pad(batch, padding_side, pad_id)
            mask = enc["attention_mask"]
            width = mask.shape[1]
            # Pooling weights: 1/k on the word's k tokens, shifted by the left padding of each row.
            weights = torch.zeros(len(batch), width, dtype=torch.float32)
            for row, (_, _, idx, pair_inputs) in enumerate(batch):
                shift = width - len(pair_inputs["input_ids"]) if padding_side == "left" else 0
                weights[row, [shift + j for j in idx]] = 1.0 / len(idx)
            inputs = {k: v.to(model.device) for k, v in enc.items()}
            if use_positions:
                inputs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(model.device)
            hidden = backbone(**inputs, output_hidden_states=True).hidden_states
            # Pool per layer ([B,1,T] @ [B,T,H]) rather than stacking all layers' full states first, each where its
            # layer ran (a model spread over GPUs returns them on several).
            weights = weights.unsqueeze(1).to(model.device)
            pooled = torch.stack([torch.bmm(weights.to(hidden[layer].device), hidden[layer].float()).squeeze(1)
                                  .to(model.device) for layer in layer_list], dim=1).cpu().numpy()
            for row, (i, *_) in enumerate(batch):
                values[i] = pooled[row]
            if folder is not None:
                keys = [key for _, key, *_ in batch]
                shard = f"{stable_hash(keys, 24)}.npz"
                write_npz(folder / shard, keys=np.array(keys), values=pooled)
                append_jsonl(folder / "index.jsonl", [{"shard": shard, "keys": keys}])
            bar.update(len(batch))
    bar.close()
