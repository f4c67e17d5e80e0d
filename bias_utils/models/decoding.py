"""The transformers decoding loop behind :func:`bias_utils.models.generation.generate`.

Left padding, KV cache, prompts bucketed by token length, rows dropped from
the batch as they finish, the exact sampler of ``sampling`` at every step; in
the same loop, per completion, the expected counts of the gendered lexicon and
the mean hidden states that chapter 08 projects (so nothing is computed twice).
``generation`` owns the cache, the rows and the HTTP backend; this module only
decodes a list of rows and hands each finished batch to ``emit``.

Expected counts
---------------
At every step the loop samples from an exact distribution (after temperature,
top-k and top-p: the one ``sampling.sample_tokens`` or ``ScreenedHead.sample``
draws from). ``expected_<lexicon>`` adds, over the steps the completion visited
(each token it wrote and the step that drew its stop token; nothing after), the
probability that distribution gives to the lexicon's words that are one token
(:func:`lexicon_token_ids`: lower-case and capitalised, with and without a
leading space). A variant without a leading space counts only where a word
starts (the last token with text ends in whitespace or punctuation: the completion's
first token after a prompt ending in a space, a token after a newline), never
inside a word ("fore" + "man" is not the word "man"); a per-token table says
which tokens end a word (:class:`_TokenTables`). Given the prefix, a step
writes one such token with exactly that probability, so the expected count
equals the expected number of sampled lexicon tokens at word starts, with far
less variance than the sample. Caveats: a word that is never a single token adds
nothing (the coverage table says which), and a lexicon token that a longer word
continues (" man" + "agement") counts here but not in the audit's words: the
step that writes " man" cannot know what follows. An OpenAI-compatible server does not return
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
name it), read back by :func:`bias_utils.models.generation.completion_states`, which
``completions.completion_embeddings`` uses before re-embedding. The two agree
exactly (to float32 numerics) where the re-embedding reads the same tokens;
where the completion began with whitespace (BOLD prompts end in a space, and
SmolLM2 often continues with a newline) chapter 08's re-embedding replaced that
whitespace with one space, and the stored states are those the model had.
Which tokens are pooled is decided, token by token as they are drawn, by
per-token tables (the lead automaton and the blank tokens of :class:`_TokenTables`).
Cost: the states of every layer are returned by the forward passes the loop
makes anyway; pooling them and classifying each token took 0.2 s of a 16 s
profiled run (SmolLM2, 16 prompts x 50 tokens, one thread, when each token was
classified by decoding the text), plus the one extra
forward step per batch (1/``max_new_tokens`` of the steps). Chapter 08's
re-embedding of 32 completions and prompts took 48 s, reading the stored
states 0.05 s (``benchmarks/bench_generation.py``, same run).

Devices
-------
Every tensor the loop keeps lives on the device the model takes its inputs on
(``LoadedModel.device``): the uniforms (drawn on the CPU from each row's
stream, then moved, so every device samples with the same numbers), the row
indices, the lexicon's token sets, the per-token tables, the expected counts,
the state sums and the drawn ids. Nothing is decoded per step: a drawn token
is classified by the tables, computed once per tokenizer. A step waits for the
device once, for the number of rows that stopped and whether a top-k tie
needs the sampler's exact rescan (``sampling.sample_step``; a model spread
over several GPUs waits once more, to select its KV cache's rows with a CPU
index); the ids go to the host once per batch. On a GPU the batch holds as many rows as half its
free memory takes (:func:`auto_batch_size`): the whole audit where it fits.
The completions are byte-identical to those of the loop that decoded text at
every step (``tests/test_decoding.py``'s golden sample, on the CPU), and the
expected counts and stored states agree with it within float32's rounding bounds
(``tests/float32_bounds.py``). No CUDA measurement of this loop has been possible yet (``make gpu-check``
makes it). The state sums follow the batch's rows as the KV cache does (stopped rows leave them), so a step adds to
them in place instead of gathering and scattering by row index. Measured once
on this shared 2-core CPU (load average 6.8; ``benchmarks/bench_generation.py
--n-prompts 16 --baseline-prompts 2 --threads 1``, SmolLM2, 16 prompts x 100
tokens): that bookkeeping alone (the benchmark's (i): no forward pass, 64 rows)
took 10.2 CPU ms per step; the loop ran at 0.78x of the forward-pass floor's
tokens/s with the statistics and cache writing, 1.05x with ``screen=False``
(the same loop on SmolLM2, where ``screen="auto"`` is off, without writing a
cache), and without the statistics 1.40x faster than with them. That (b) and
(f) differ by 0.75x while computing the same thing is the size of this run's
noise; no earlier loop was timed beside it.

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
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from ..core.cache import stable_hash
from ..core.errors import check_word_lists
from ..core.lexicon import GENDER_LEXICONS
from .embeddings import token_indices
from .sampling import row_seed, sample_step, sample_tokens

__all__ = [
    "lexicon_token_ids",
]

#: Expected counts of the audit's male and female words (module docstring); NaN where not computed.
EXPECTED_COLUMNS = ["expected_male", "expected_female"]
#: The mean hidden states stored per completion (module docstring, *Hidden states*).
STATE_PARTS = ("completion", "prompt")
#: Largest default batch (beyond this, 2 CPU cores gain nothing and memory grows).
_MAX_AUTO_BATCH = 64

def lexicon_token_ids(tokenizer, lexicons: dict[str, Sequence[str]] = GENDER_LEXICONS
                      ) -> tuple[dict[str, list[int]], pd.DataFrame]:
    """The token ids of each lexicon's words that are a single token, and the coverage table.

    Each word is tried as four variants: lower-case and capitalised, each with
    and without a leading space (the audit lower-cases the text, so "He" and "
    he" both count). Returns ``({name: sorted ids}, coverage)`` where coverage
    has one row per word and variant: ``lexicon, word, variant, n_tokens``
    (the variant's length in tokens), ``single_token``, ``token_id`` (<NA>
    unless single) and ``first_token_id`` (the variant's first token, for a
    measure that counts a longer word by its first token:
    ``audit.next_word``). A word none of whose variants is one token adds
    nothing to the expected counts (module docstring).
    """
    lexicons = check_word_lists(lexicons, "lexicons")
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
                             "single_token": single, "token_id": pieces[0] if single else pd.NA,
                             "first_token_id": pieces[0] if pieces else pd.NA})
    coverage = pd.DataFrame(rows, columns=["lexicon", "word", "variant", "n_tokens", "single_token", "token_id",
                                           "first_token_id"])
    coverage[["token_id", "first_token_id"]] = coverage[["token_id", "first_token_id"]].astype("Int64")
    return {name: sorted(v) for name, v in ids.items()}, coverage

def _word_start_sets(coverage: pd.DataFrame, n_vocab: int) -> torch.Tensor:
    """``[2 G, vocabulary]`` token sets for the G lexicons of :data:`EXPECTED_COLUMNS`: rows ``0..G-1`` the
    single-token variants with a leading space (a word start wherever they are drawn), rows ``G..2G-1`` those
    without (a word start only after whitespace or punctuation; see :class:`_TokenTables`)."""
    names = [c.removeprefix("expected_") for c in EXPECTED_COLUMNS]
    sets = torch.zeros(2 * len(names), n_vocab, dtype=torch.bool)
    single = coverage[coverage["single_token"]]
    for g, name in enumerate(names):
        rows = single[single["lexicon"] == name]
        spaced = rows["variant"].str.startswith(" ")
        sets[g, rows.loc[spaced, "token_id"].astype(int).tolist()] = True
        sets[len(names) + g, rows.loc[~spaced, "token_id"].astype(int).tolist()] = True
    return sets


#: What a completion token's states count for: ``_LEAD`` lies wholly in the whitespace and punctuation before the
#: completion's first word, ``_BLANK`` is whitespace (it counts only if a word follows), ``_WORD`` the rest.
_LEAD, _BLANK, _WORD = 0, 1, 2
#: The leading characters ``completions.completion_embeddings`` strips from a completion before locating it.
_LEADING_PUNCTUATION = ",.;:!?)]}'\"-"
#: The states of the lead automaton (:class:`_TokenTables`): whitespace so far; then punctuation; then whitespace
#: again; past the lead (absorbing).
_SPACE, _PUNCT, _SPACE_AFTER, _PAST = 0, 1, 2, 3
#: Word-start codes of a token's own text: it ends inside a word, ends a word, or has no text (the state is kept).
_INSIDE, _ENDS, _KEEP = 0, 1, 2


def _lead_step(state: int, text: str) -> int:
    """The lead automaton after ``text``: the completion stays in its lead while it reads whitespace, then
    ``_LEADING_PUNCTUATION``, then whitespace (what ``completion_embeddings`` strips before the first word)."""
    for ch in text:
        if state == _PAST:
            break
        if ch.isspace():
            state = _SPACE if state == _SPACE else _SPACE_AFTER
        elif ch in _LEADING_PUNCTUATION and state in (_SPACE, _PUNCT):
            state = _PUNCT
        else:
            state = _PAST
    return state


class _TokenTables:
    """Per-token tables, computed once per tokenizer, that let the decoding loop classify a drawn token on the
    device instead of decoding text every step.

    ``word_start`` (``[vocabulary]``): the word-start rule of the expected counts, from each token's text decoded
    alone (whitespace or punctuation last: it ends a word; a letter, digit or ``_`` last: it does not; no text: the
    state before it is kept). ``lead`` (``[4, vocabulary]``): the lead automaton's state after each token, and
    ``blank`` (``[vocabulary]``): a token whose text is whitespace or nothing, for the stored states; both from the
    text the token adds after another token (``decode([anchor, t])`` minus ``decode([anchor])``, with special tokens
    skipped, as the completion's text is decoded), so a SentencePiece token keeps its leading space. The previous
    loop classified a token by decoding the whole prompt and completion at every step; the two agree except where a
    character is split across tokens, which that loop counted as text on the first token and as blank on the one
    that completed it (here both are text, as the tokens' offsets in chapter 08's re-embedding are).
    """

    def __init__(self, tokenizer, n_vocab: int):
        n_text = min(len(tokenizer), n_vocab)
        alone = tokenizer.batch_decode([[t] for t in range(n_text)])
        anchor = tokenizer("a", add_special_tokens=False)["input_ids"][:1]
        head = tokenizer.decode(anchor, skip_special_tokens=True)
        joined = tokenizer.batch_decode([anchor + [t] for t in range(n_text)], skip_special_tokens=True)
        added = [j[len(head):] if j.startswith(head) else a for j, a in zip(joined, alone)]
        # Ids past the tokenizer (padding rows of the output projection) have no text.
        alone += [""] * (n_vocab - n_text)
        added += [""] * (n_vocab - n_text)
        self.word_start = torch.tensor([_KEEP if not t else _INSIDE if t[-1].isalnum() or t[-1] == "_" else _ENDS
                                        for t in alone], dtype=torch.uint8)
        self.blank = torch.tensor([not t.strip() for t in added])
        self.lead = torch.tensor([[_lead_step(state, t) for t in added] for state in range(4)], dtype=torch.long)

    def to(self, device: torch.device) -> "_TokenTables":
        moved = object.__new__(_TokenTables)
        moved.word_start, moved.blank, moved.lead = (x.to(device) for x in (self.word_start, self.blank, self.lead))
        return moved

    def starts_word(self, tokens: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        """Per row, whether the text ends a word after ``tokens`` (float64 0/1), ``before`` where they have no text."""
        code = self.word_start[tokens]
        return torch.where(code == _KEEP, before, (code == _ENDS).to(torch.float64))


#: One table set per tokenizer (a vocabulary-sized decode takes about a second; a process decodes it once).
_TABLES: "weakref.WeakKeyDictionary[Any, _TokenTables]" = weakref.WeakKeyDictionary()


def token_tables(tokenizer, n_vocab: int) -> _TokenTables:
    tables = _TABLES.get(tokenizer)
    if tables is None or tables.blank.shape[0] != n_vocab:
        tables = _TABLES[tokenizer] = _TokenTables(tokenizer, n_vocab)
    return tables


def auto_batch_size(model: Any, max_len: int, n_rows: int | None = None) -> int:
    """Rows per forward pass. On a CPU: as many as fit ~2 GiB of KV cache and logits, capped at 64 (where the probes
    in ``MODELS.md`` measured stock batched generation on this 2-core machine; larger batches mostly add memory).
    On a GPU: as many of the ``n_rows`` as half its free memory holds (the KV cache, the float32 hidden states of
    every layer, the logits and the sampler's copies), so the audit's prompts go in one batch where they fit.
    """
    cfg = model.model.config
    cfg = getattr(cfg, "text_config", None) or cfg
    n_heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    kv_dim = (getattr(cfg, "num_key_value_heads", None) or n_heads) * head_dim
    bytes_per_row = 2 * cfg.num_hidden_layers * kv_dim * 4 * max_len + 3 * cfg.vocab_size * 8
    device = torch.device(getattr(model, "device", "cpu"))
    if device.type != "cuda":
        return int(max(1, min(_MAX_AUTO_BATCH, (2 << 30) // bytes_per_row)))
    bytes_per_row += 3 * (cfg.num_hidden_layers + 1) * cfg.hidden_size * 8 * max_len
    fit = int(torch.cuda.mem_get_info(device)[0] // 2 // bytes_per_row)
    return max(1, min(fit, n_rows or fit))


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


def run_transformers(model, rows, done, emit, *, batch_size, max_new_tokens, temperature, top_p, top_k, seed,
                      chat, screened=None, lexicon=None) -> None:
    """Decode ``rows`` in length-sorted batches, handing each finished batch to ``emit``; rows in ``done`` are
    skipped batch-wise. ``lexicon``: :func:`lexicon_token_ids`' result, whose words get expected counts (and,
    without ``chat``, the mean hidden states are kept); ``None`` computes neither."""
    encoded = {}
    for r in rows:
        if r["prompt"] not in encoded:
            encoded[r["prompt"]] = _encode(model, r["prompt"], chat)
    order = sorted(range(len(rows)), key=lambda i: (len(encoded[rows[i]["prompt"]]), i))
    if batch_size is None:
        batch_size = auto_batch_size(model, max(len(v) for v in encoded.values()) + max_new_tokens, len(rows))
    device = _device(model)
    stop = torch.tensor(sorted(_stop_ids(model)), device=device)
    n_vocab = model.model.get_output_embeddings().weight.shape[0]
    groups = lexicon_key = tables = None
    if lexicon is not None:
        ids, coverage = lexicon
        lexicon_key = stable_hash(ids)
        groups = _word_start_sets(coverage, n_vocab).to(device)
        tables = token_tables(model.tokenizer, n_vocab).to(device)
    # Hidden states only where chapter 08 reads them: the completion after the raw prompt.
    keep_states = lexicon is not None and not chat
    for start in range(0, len(order), batch_size):
        batch = [rows[i] for i in order[start:start + batch_size]]
        if all(r["row_key"] in done for r in batch):
            continue
        prompt_ids = [encoded[r["prompt"]] for r in batch]
        # Drawn on the CPU from each row's own stream, so that every device samples with the same numbers.
        uniforms = torch.stack([
            torch.rand(max_new_tokens, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(row_seed(seed, r["prompt_id"], r["sample"])))
            for r in batch
        ]).to(device)
        weights = [_prompt_weights(model.tokenizer, r["prompt"], p) for r, p in zip(batch, prompt_ids)] \
            if keep_states else None
        new_ids, finished, mass, states = _decode_batch(model, prompt_ids, uniforms, stop, temperature, top_p, top_k,
                                                        screened, groups, tables, weights)
        results = []
        for i, (r, p, ids, fin) in enumerate(zip(batch, prompt_ids, new_ids, finished)):
            row = {**r, **_completion(model.tokenizer, p, ids, fin)}
            if mass is not None:
                row.update({c: float(mass[i, g]) for g, c in enumerate(EXPECTED_COLUMNS)}, lexicon_key=lexicon_key)
            if states is not None:
                row.update({f"_{part}_state": states[part][i] for part in STATE_PARTS})
            results.append(row)
        emit(results)


def _device(model: Any) -> torch.device:
    """Where the loop keeps its tensors: the device the model takes its inputs on."""
    return torch.device(getattr(model, "device", None) or model.model.device)


def _completion_text(tokenizer, prompt_ids: list[int], head: str, new_ids: list[int]) -> str:
    # Decoding prompt + completion and removing the decoded prompt keeps the
    # word boundary (SentencePiece drops a leading space when a piece is decoded alone).
    full = tokenizer.decode(prompt_ids + new_ids, skip_special_tokens=True)
    return full[len(head):] if full.startswith(head) else tokenizer.decode(new_ids, skip_special_tokens=True)


def _completion(tokenizer, prompt_ids: list[int], new_ids: list[int], stopped: bool) -> dict:
    head = tokenizer.decode(prompt_ids, skip_special_tokens=True)
    return {"completion": _completion_text(tokenizer, prompt_ids, head, new_ids), "n_tokens": len(new_ids),
            "finish_reason": "stop" if stopped else "length"}


class StateSums:
    """Per row, the sums of the hidden states (every layer) of the completion tokens that chapter 08 pools, on the
    model's device.

    Chapter 08 re-embeds ``prompt + " " + completion`` and pools the tokens overlapping the completion stripped of
    surrounding whitespace and leading punctuation. Trailing whitespace tokens are only known to be trailing when
    the completion ends, so their states wait in ``pending`` and join the sum when a word follows. A token is
    classified when it is drawn (:class:`_TokenTables`: the lead automaton and the blank tokens) and its state
    counted at the next step, which reads it. The running sums follow the batch's rows as the KV cache does
    (:meth:`keep` drops the rows that stopped, after storing their means), so a step adds to them in place.
    """

    def __init__(self, n: int, tables: _TokenTables, weights: list[list[float] | None], device: torch.device):
        self.tables, self.weights, self.device = tables, weights, device
        self.lead = torch.full((n,), _SPACE, dtype=torch.long, device=device)
        self.kind = torch.full((n,), _LEAD, dtype=torch.long, device=device)
        self.sum = self.pending = self.prompt = self.completion = None
        self.count = torch.zeros(n, dtype=torch.float64, device=device)
        self.n_pending = torch.zeros(n, dtype=torch.float64, device=device)

    def read_prompt(self, hidden: tuple, width: int) -> None:
        w = torch.zeros(len(self.weights), width, dtype=torch.float32)
        for row, weights in enumerate(self.weights):
            if weights is not None:
                w[row, width - len(weights):] = torch.tensor(weights)
        w = w.unsqueeze(1).to(self.device)
        # A model spread over GPUs returns each layer's states where that layer ran.
        self.prompt = torch.stack([torch.bmm(w.to(h.device), h.float()).squeeze(1).to(self.device) for h in hidden],
                                  dim=1)
        unweighted = torch.tensor([w is None for w in self.weights], device=self.device)
        self.prompt.masked_fill_(unweighted.view(-1, *[1] * (self.prompt.dim() - 1)), float("nan"))  # no host wait
        self.sum = torch.zeros(self.prompt.shape, dtype=torch.float64, device=self.device)
        self.pending = torch.zeros(self.prompt.shape, dtype=torch.float64, device=self.device)
        self.completion = torch.full(self.prompt.shape, float("nan"), device=self.device)

    def read_tokens(self, hidden: tuple) -> None:
        """The states of the tokens the batch's rows just read as input (their previous draws).

        Masks are multiplied in rather than used as indices: a boolean index would wait for the device. Adding
        ``0 * state`` leaves a sum unchanged, so the sums are those of the tokens that count."""
        states = torch.stack([h[:, -1].to(self.device) for h in hidden], dim=1).double()
        blank = (self.kind == _BLANK).to(torch.float64)
        word = (self.kind == _WORD).to(torch.float64)
        self.pending.addcmul_(states, blank[:, None, None])
        self.n_pending += blank
        self.sum.addcmul_(self.pending + states, word[:, None, None])
        self.count += (self.n_pending + 1) * word
        self.pending *= (1 - word)[:, None, None]
        self.n_pending *= 1 - word

    def drew(self, tokens: torch.Tensor) -> None:
        """Classify the tokens the batch's rows just drew, to be read at the next step."""
        self.lead = self.tables.lead[self.lead, tokens]
        self.kind = torch.where(self.lead != _PAST, _LEAD, torch.where(self.tables.blank[tokens], _BLANK, _WORD))

    def _store(self, rows: torch.Tensor, positions: torch.Tensor | None = None) -> None:
        """The means of the batch rows at ``positions`` (all: ``None``), as rows ``rows`` of the result."""
        sums, count = (self.sum, self.count) if positions is None else (self.sum[positions], self.count[positions])
        mean = (sums / count.clamp(min=1)[:, None, None]).float()
        mean.masked_fill_((count == 0).view(-1, *[1] * (mean.dim() - 1)), float("nan"))  # no host wait
        self.completion[rows] = mean

    def keep(self, keep: torch.Tensor, left: torch.Tensor, rows: torch.Tensor) -> None:
        """The batch keeps the rows at positions ``keep``; those at ``left`` (original rows ``rows[left]``) stopped."""
        self._store(rows[left], left)
        self.sum, self.pending = self.sum[keep], self.pending[keep]
        self.count, self.n_pending, self.lead, self.kind = (x[keep] for x in (self.count, self.n_pending, self.lead,
                                                                             self.kind))

    def means(self, rows: torch.Tensor) -> dict[str, np.ndarray]:
        """Every row's means, the batch's last ``rows`` (original indices) stored now."""
        self._store(rows)
        return {"completion": self.completion.cpu().numpy(), "prompt": self.prompt.cpu().numpy()}


@torch.inference_mode()
def _decode_batch(model, prompt_ids, uniforms, stop, temperature, top_p, top_k, screened=None, groups=None,
                  tables=None, prompt_weights=None) -> tuple[list[list[int]], list[bool], np.ndarray | None,
                                                             dict | None]:
    """Sample up to ``uniforms.shape[1]`` tokens for each prompt; finished rows leave the batch.

    ``stop``: the stop token ids, ``uniforms``, ``groups`` and ``tables`` on the model's device. With ``groups``
    (``[2 G, vocabulary]``, :func:`_word_start_sets`) and ``tables`` (:class:`_TokenTables`) also the expected
    counts (``[rows, G]``: over the steps each row visited, the probability of each set's first half, plus that of
    its second half at steps where the text so far ends a word); with ``prompt_weights`` also the mean hidden
    states (:class:`StateSums`). Every tensor stays on the device; a step waits for it once, for the number of
    rows that stopped (and whether a top-k tie needs the exact rescan, :func:`sampling.sample_step`).
    """
    from transformers import DynamicCache  # deferred: importing transformers takes seconds

    net = model.model
    device = _device(model)
    pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else int(stop[0])
    width = max(len(p) for p in prompt_ids)
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids], device=device)
    positions = (mask.cumsum(-1) - 1).clamp_(min=0)

    n, n_steps = len(prompt_ids), uniforms.shape[1]
    drawn_ids = torch.zeros(n, n_steps, dtype=torch.long, device=device)  # row's draw at each step it visited
    n_new = torch.zeros(n, dtype=torch.long, device=device)
    stopped = torch.zeros(n, dtype=torch.bool, device=device)
    alive = torch.arange(n, device=device)  # original row index of each batch row
    expected = at_start = None
    if groups is not None:
        expected = torch.zeros(n, groups.shape[0] // 2, dtype=torch.float64, device=device)
        last = torch.tensor([p[-1] for p in prompt_ids], device=device)
        at_start = tables.starts_word(last, torch.ones(n, dtype=torch.float64, device=device))
    sums = None if prompt_weights is None else StateSums(n, tables, prompt_weights, device)
    # A model spread over several GPUs keeps each layer's cache on its own GPU; a CPU index selects on any of them.
    spread = len(set(getattr(net, "hf_device_map", {}).values()) - {"cpu", "disk"}) > 1
    past = DynamicCache()
    step_ids, step_pos = input_ids, positions
    # With states, one more forward pass reads the last token of the rows that reached the length limit.
    for step in range(n_steps + (sums is not None)):
        inputs = dict(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, past_key_values=past,
                      use_cache=True, output_hidden_states=sums is not None)
        if screened is None:
            result = net(**inputs, logits_to_keep=1)
            logits = result.logits[:, -1, :].to(device)
        else:
            result = model.backbone()(**inputs)
            hidden = result.last_hidden_state[:, -1, :]
        if sums is not None:
            if step == 0:
                sums.read_prompt(result.hidden_states, width)
            else:
                sums.read_tokens(result.hidden_states)
            if step == n_steps:
                break
        u = uniforms[alive, step]
        if screened is None:
            tokens, mass, unsure = sample_step(logits, u, temperature, top_p, top_k, groups=groups)
        else:
            drawn = screened.sample(hidden, u, temperature, top_p, top_k, groups=groups)
            (tokens, mass), unsure = (drawn if groups is not None else (drawn, None)), None
            tokens = tokens.to(device)
        is_stop = torch.isin(tokens, stop)
        # The step's one wait for the device: how many rows stopped, and whether the draw needs the exact rescan.
        n_stop, rescan = _read(is_stop.sum(), unsure)
        if rescan:  # a tie at the k-th logit may reach past the sampler's candidates (rare): draw again, exactly
            drawn = sample_tokens(logits, u, temperature, top_p, top_k, groups=groups)
            tokens, mass = drawn if groups is not None else (drawn, None)
            is_stop = torch.isin(tokens, stop)
            n_stop = int(is_stop.sum())
        if mass is not None:
            half = mass.shape[1] // 2
            expected[alive] += mass[:, :half].to(device) + at_start[alive, None] * mass[:, half:].to(device)
            at_start[alive] = tables.starts_word(tokens, at_start[alive])
        drawn_ids[alive, step] = tokens
        n_new[alive] += ~is_stop
        stopped[alive] = is_stop
        if sums is not None:
            sums.drew(tokens)
        if n_stop == alive.numel():
            break
        if n_stop:
            # The rows that go on, in order: a stable sort puts them first without asking the device how many.
            order = torch.sort(is_stop.to(torch.uint8), stable=True).indices
            keep = order[:alive.numel() - n_stop]
            if sums is not None:
                sums.keep(keep, order[alive.numel() - n_stop:], alive)
            past.batch_select_indices(keep.cpu() if spread else keep)
            alive, tokens, mask, step_pos = alive[keep], tokens[keep], mask[keep], step_pos[keep]
        step_ids = tokens.unsqueeze(1)
        step_pos = step_pos[:, -1:] + 1
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
    lengths = n_new.tolist()
    out = [ids[:k] for ids, k in zip(drawn_ids.tolist(), lengths)]
    return (out, stopped.tolist(), None if expected is None else expected.cpu().numpy(),
            None if sums is None else sums.means(alive))


def _read(n_stop: torch.Tensor, unsure: torch.Tensor | None) -> tuple[int, bool]:
    """Both numbers in one transfer from the device."""
    if unsure is None:
        return int(n_stop), False
    both = torch.stack([n_stop, unsure.to(n_stop.dtype)]).tolist()
    return both[0], bool(both[1])
