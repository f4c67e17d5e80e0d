"""The exact sampler: temperature, top-k and nucleus (top-p) in transformers' order, without sorting the vocabulary.

:func:`nucleus` and :func:`sample_tokens` draw one token per row by inverse CDF
of the caller's uniforms; :func:`row_seed` gives each row of a generation its
own random stream; :class:`ScreenedHead` samples from a large vocabulary's
output projection ranked in bfloat16 and rescored exactly. ``generation.generate``
runs them in its decode loop (its docstring has the measurements).
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import torch

from ..core.cache import stable_hash
from ..core.errors import check_sampling

__all__: list[str] = []

#: First number of nucleus candidates; doubled x4 until they hold ``top_p`` of the mass.
_FIRST_K = 64


def _nucleus(logits: torch.Tensor, temperature: float, top_p: float, k: int = _FIRST_K,
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
    ids, probs, _ = _nucleus_step(logits, temperature, top_p, k, top_k, check_ties=True)
    return ids, probs


def _nucleus_step(logits, temperature, top_p, k, top_k, check_ties
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """:func:`nucleus`, and whether its top-k candidates may be incomplete (see :func:`sample_step`)."""
    top_k = check_sampling(temperature, top_p, top_k)
    logits = logits.float()
    if top_k is not None:
        return _top_k_nucleus(logits, temperature, top_p, top_k, check_ties)
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
            return ids, probs * keep, None
        k = min(4 * k, vocab)


def _top_k_nucleus(logits, temperature, top_p, top_k, check_ties=True
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
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
    unsure = (scaled[:, -1:] >= threshold).any() if spare < vocab else None
    if unsure is not None and check_ties and bool(unsure):
        full = logits / temperature
        scaled, ids = torch.topk(full, int((full >= threshold).sum(dim=-1).max()), dim=-1, sorted=True)
    in_k = scaled >= threshold
    exact = logits.gather(1, ids).double() / temperature
    weights = torch.exp(exact - exact[:, :1]) * in_k
    probs = weights / weights.sum(dim=-1, keepdim=True)
    keep = (torch.cumsum(probs, dim=-1) - probs) < top_p
    keep[:, 0] = True
    return ids, probs * (keep & in_k), None if check_ties else unsure


def sample_tokens(
    logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float, top_k: int | None = None,
    vocab_ids: torch.Tensor | None = None, groups: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """One token per row from the temperature + top-k + nucleus distribution, by inverse CDF of ``uniforms`` in [0, 1).

    ``temperature == 0`` means greedy decoding (``uniforms`` unused).
    Using the caller's uniforms (one per row) keeps every row's draws
    independent of its batch neighbours. ``vocab_ids`` (same shape as
    ``logits``) names the vocabulary id of each column when ``logits`` holds
    only candidate columns that are known to contain every top-k token (see
    :class:`ScreenedHead`); the draw is then the same as over the whole row.

    ``groups`` (bool ``[n_groups, vocab]``, token sets such as a lexicon's
    single-token words): the result is then ``(ids, mass)`` with ``mass``
    float64 ``[batch, n_groups]``, the probability that the distribution the
    draw comes from gives each set (greedy: 1 or 0). The draw itself is the
    same with or without ``groups``. ``uniforms`` and ``groups`` live on the logits' device.
    """
    ids, mass, _ = _draw(logits, uniforms, temperature, top_p, top_k, vocab_ids, groups, check_ties=True)
    return ids if groups is None else (ids, mass)


def sample_step(logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float,
                top_k: int | None = None, groups: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """:func:`sample_tokens` without waiting for the device: ``(ids, mass or None, unsure)``.

    With top-k, :func:`sample_tokens` asks the device once per call whether a
    tie at the k-th logit reaches past its spare candidates (it then rescans the
    vocabulary). Here that question comes back unasked, as ``unsure``: a 0-d bool
    tensor on the logits' device (``None`` where the draw is certain). Where it
    is True the draw may differ from :func:`sample_tokens`' and must be taken
    from it instead. A decoding loop reads ``unsure`` together with its stop
    tokens, in the one host synchronisation of its step. Without top-k
    (``top_k=None``) the nucleus still asks the device, once per widening of
    its candidates (:func:`nucleus`).
    """
    return _draw(logits, uniforms, temperature, top_p, top_k, None, groups, check_ties=False)


def _draw(logits, uniforms, temperature, top_p, top_k, vocab_ids, groups, check_ties):
    unsure = None
    if temperature == 0:
        ids = logits.argmax(dim=-1, keepdim=True)
        cand, probs = ids, torch.ones(ids.shape, dtype=torch.float64, device=ids.device)
    else:
        cand, probs, unsure = _nucleus_step(logits, temperature, top_p, _FIRST_K, top_k, check_ties)
        cum = torch.cumsum(probs, dim=-1)
        target = uniforms.to(torch.float64).unsqueeze(-1) * cum[:, -1:]
        pick = torch.searchsorted(cum, target, right=True)
        last_kept = (probs > 0).sum(dim=-1, keepdim=True) - 1  # guards u * total rounding up to total
        ids = cand.gather(1, torch.minimum(pick, last_kept))
    drawn = (ids if vocab_ids is None else vocab_ids.gather(1, ids)).squeeze(1)
    if groups is None:
        return drawn, None, unsure
    members = groups[:, cand if vocab_ids is None else vocab_ids.gather(1, cand)]  # [n_groups, batch, K]
    mass = (members * probs).sum(dim=-1) / probs.sum(dim=-1)
    return drawn, mass.T, unsure


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
        # A head that accelerate keeps on disk has no weights to copy (they are on the meta device).
        if isinstance(head, torch.nn.Linear) and head.bias is None and head.weight.device.type != "meta":
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
               top_k: int, groups: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """One token per row, the same draw as :func:`sample_tokens` on the full float32 logits (with ``groups``,
        also the same ``mass``: every top-k token is among a proven row's candidates)."""
        n_vocab = self.weight.shape[0]
        # Everything on the projection's device (a model spread over GPUs may hand the last state over on another).
        device = self.weight.device
        hidden, uniforms = hidden.to(device), uniforms.to(device)
        groups = None if groups is None else groups.to(device)
        approx = hidden.to(torch.bfloat16) @ self.low.T
        slack = self.slack(hidden)
        tokens = torch.empty(hidden.shape[0], dtype=torch.long, device=device)
        mass = None if groups is None else torch.zeros(hidden.shape[0], groups.shape[0], dtype=torch.float64,
                                                       device=device)

        def draw(rows, logits, vocab_ids=None):
            out = sample_tokens(logits, uniforms[rows], temperature, top_p, top_k, vocab_ids=vocab_ids, groups=groups)
            if groups is None:
                tokens[rows] = out
            else:
                tokens[rows], mass[rows] = out

        todo = torch.arange(hidden.shape[0], device=device)
        for stage in self.widths:
            width = min(max(stage, top_k + 16), n_vocab)
            # Most rows are proven by the first width; a wider top-k runs only for the rows left.
            scores, cand = torch.topk(approx[todo], width, dim=-1, sorted=True)
            logits = self._rescore(hidden[todo], cand)
            if width == n_vocab:
                proven = torch.ones(len(todo), dtype=torch.bool, device=device)
            else:
                kth = torch.topk(logits, top_k, dim=-1).values[:, -1].double()
                last = scores[:, -1].double()
                # Strictly below the k-th logit, with room for its own rounding, so no tie can hide outside.
                proven = last + 2.0 ** -7 * last.abs() + slack[todo] < kth - 2.0 ** -20 * (kth.abs() + 1)
            done = todo[proven]
            draw(done, logits[proven], cand[proven])
            self.rows_by_stage[str(stage)] += len(done)
            todo = todo[~proven]
            if len(todo) == 0:
                break
        if len(todo):
            self.rows_by_stage["full"] += len(todo)
            draw(todo, torch.nn.functional.linear(hidden[todo], self.weight))
        return tokens if groups is None else (tokens, mass)


#: One screened head per loaded network (``None``: the network's logits are not screenable).
_SCREENS: "weakref.WeakKeyDictionary[Any, ScreenedHead | None]" = weakref.WeakKeyDictionary()


def row_seed(seed: int, prompt_id: Any, sample: int) -> int:
    """The seed of one row's random stream (31 bits, accepted by every server's ``seed``)."""
    return int(stable_hash(["generation-row", seed, prompt_id, sample]), 16) % (2**31)
