"""Benchmark: chapter 12's erasure (``intrinsic_extrinsic.erasure.erasure_tradeoff``) at its defaults against its floor.

Work = what chapter 12 computes for one model in a book, after chapters 04 and 11: the conditions (the unhooked
model, LEACE at every ``layer_step``-th hidden state and at all of them, a random subspace and shuffled-label LEACE at
the states the curve picks and at all of them), each measured on the same inputs, with the erasure's own cache empty
and the caches the book's earlier chapters filled (the space's, the profiles' embeddings, the next word's) as a book
leaves them: the cache folder is a fresh one whose subfolders, all but ``erasure``, link to the project's.

Floor = the forward passes those conditions need and nothing else, in this process: per erased condition, the held-
out names' and the occupation nouns' template contexts through the backbone with every hidden state (cut after the
word, as the embeddings cut them), the next-word sentences of the occupations and the facts' nouns
(``logits_to_keep=1``) and the neutral sentences with their full logits; for an erasure at one hidden state ``s``
every one of those passes runs only the blocks above ``s`` (from the unhooked state there, computed before the clock),
and one unhooked run of them all is counted once for all such conditions (the states below have to be computed once);
the selective eraser's passes twice (two fits, each measured on every input); for the unhooked condition the passes
its caches do not serve (the facts' sentences and the neutral ones). Unpadded
batches of one length, of the chapter's size, tokenised before the clock starts; run twice after ours and the faster
kept, so that a burst of load from other jobs on the shared CPU does not flatter the ratio. ``ours / floor`` is the
cost of the hooks, the recording, the fit, the probes, the bootstrap and the tables. The conditions are the ones ours
computed: the LEACE curve, then the controls and the selective eraser at the states it picked.

Run: ``HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_erasure.py [--layer-step 3]
[--threads 1] [--show]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from transformers.masking_utils import create_causal_mask

from bias_utils.audit.next_word_prompts import TEMPLATES
from bias_utils.core import paths
from bias_utils.intrinsic_extrinsic import erasers, erasure, erasure_measures
from bias_utils.models.embeddings import default_batch_size
from bias_utils.models.loading import load_model
from bias_utils.profiles import dictionaries, space
from bias_utils.profiles.populations import load_populations, occupation_shares


def _batches(m, texts: list[str], size: int) -> list[torch.Tensor]:
    by_length: dict[int, list[list[int]]] = {}
    for text in texts:
        ids = m.tokenizer(text)["input_ids"]
        by_length.setdefault(len(ids), []).append(ids)
    return [torch.tensor(rows[b:b + size]) for rows in by_length.values() for b in range(0, len(rows), size)]


def _above(m, hidden: torch.Tensor, state: int, keep: int | None) -> torch.Tensor:
    """From hidden state ``state`` ``[B, T, H]`` upward: the decoder blocks above it, the final norm (none at the last
    state, the norm's own output), then the head on the last ``keep`` positions (0: all; None: no head, the last
    hidden state)."""
    backbone = m.backbone()
    if state < m.n_layers:
        positions = torch.arange(hidden.shape[1])[None]
        rotary = backbone.rotary_emb(hidden, position_ids=positions)
        mask = create_causal_mask(config=backbone.config, inputs_embeds=hidden, attention_mask=None,
                                  past_key_values=None, position_ids=positions)
        for layer in backbone.layers[state:]:
            hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=positions)
        hidden = backbone.norm(hidden)
    if keep is None:
        return hidden
    return m.model.lm_head(hidden[:, -keep:] if keep else hidden)


def floor_seconds(m, conditions: list[tuple[str, str]], seed: int, limit: int | None = None) -> float:
    """Seconds of the forward passes ``conditions`` need (module docstring) on the inputs ``erasure_tradeoff`` measures
    at ``limit`` (None: all; a number, the first that many held-out names per group, occupations, fact pairs and
    neutral sentences)."""
    size = default_batch_size(m)
    _, held = erasure_measures.split_names(load_populations("names"))
    names = [w for ws in held.values() for w in ws[:limit]]
    occupations = occupation_shares()["occupation"].head(limit).tolist()
    facts = [w for pair in erasure_measures.FACT_PAIRS[:limit] for w in pair]
    # the embeddings cut a decoder's context after the word: the templates' text up to and including it
    contexts = [c[:c.index(w) + len(w)] for words, kind in ((names, "name"), (occupations, "noun"))
                for c, w in zip(*erasure_measures.template_contexts(words, kind))]
    states = _batches(m, contexts, size)
    written = _batches(m, [t.replace("{occupation}", n) for n in occupations + facts for t in TEMPLATES], size)
    fact_sentences = _batches(m, [t.replace("{occupation}", n) for n in facts for t in TEMPLATES], size)
    n_sentences = min(erasure_measures.N_SENTENCES, limit or erasure_measures.N_SENTENCES)
    neutral = _batches(m, erasure_measures.neutral_sentences(n_sentences, seed), size)
    single = sorted({int(layer) for kind, layer in conditions if kind != "none" and layer != erasers.ALL})
    # per state: the unhooked states of the template passes, the next-word passes and the neutral ones
    start: dict[int, tuple[list, list, list]] = {s: ([], [], []) for s in single}
    with torch.inference_mode():  # the unhooked states the single-state conditions start from, before the clock
        for k, batches in enumerate((states, written, neutral)):
            for ids in batches if single else []:
                states_of = m.model.base_model(input_ids=ids, output_hidden_states=True).hidden_states
                for s in single:
                    start[s][k].append(states_of[s])
    t0 = time.perf_counter()
    with torch.inference_mode():
        for ids in states if single else []:  # the one unhooked run they share
            m.model.base_model(input_ids=ids, output_hidden_states=True)
        for ids in (written + neutral) if single else []:
            m.model(input_ids=ids, logits_to_keep=1)
        # the selective eraser is two fits, each measured on every input: its passes run twice
        for kind, layer in [c for c in conditions for _ in range(2 if c[0] == erasers.SELECTIVE else 1)]:
            if kind != "none" and layer != erasers.ALL:
                for k, keep in enumerate((None, 1, 0)):
                    for hidden in start[int(layer)][k]:
                        _above(m, hidden, int(layer), keep)
                continue
            for ids in states if kind != "none" else []:
                m.model.base_model(input_ids=ids, output_hidden_states=True)
            for ids in written if kind != "none" else fact_sentences:
                m.model(input_ids=ids, logits_to_keep=1)
            for ids in neutral:
                m.model(input_ids=ids).logits.float()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--layer-step", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--show", action="store_true", help="print the curve and the chapter's first screen too")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    m = load_model(args.model)
    basis = space.build_space(m, dictionaries.load_dictionary(None), "generated", 5, 0).bases["warmth_competence"]
    print(f"{m.model_id}: layer_step {args.layer_step}; torch threads {torch.get_num_threads()} on {os.cpu_count()} "
          f"CPUs, load average {os.getloadavg()[0]:.1f}")
    real = paths.cache_dir()
    with tempfile.TemporaryDirectory() as tmp:
        for sub in real.iterdir():
            if sub.is_dir() and sub.name != "erasure":
                (Path(tmp) / sub.name).symlink_to(sub)
        os.environ["BIAS_CACHE_DIR"] = tmp
        t0 = time.perf_counter()
        result = erasure.erasure_tradeoff(m, basis, layer_step=args.layer_step, progress=False)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        erasure.erasure_tradeoff(m, basis, layer_step=args.layer_step, progress=False)
        rerun = time.perf_counter() - t0
    computed = list(dict.fromkeys(zip(result.tradeoff["erasure"], result.tradeoff["layer"])))
    floor = min(floor_seconds(m, computed, 0) for _ in range(2))
    print(f"  {sum(kind != 'none' for kind, _ in computed)} erased conditions + the unhooked one: the curve at "
          f"{result.states}, the controls at {sorted({lay for kind, lay in computed if kind == 'random'})}\n"
          f"  ours (erasure_tradeoff, cold; the book's earlier caches warm): {ours:6.1f} s\n"
          f"  floor (the forward passes alone, unpadded, batch {default_batch_size(m)}): {floor:6.1f} s  -> "
          f"ours / floor = {ours / floor:.2f}x\n"
          f"  rerun (everything cached): {rerun:6.1f} s\n"
          f"  load average after: {os.getloadavg()[0]:.1f}")
    if args.show:
        print(result.curve().to_string(), "\n", result.describe(), sep="\n")


if __name__ == "__main__":
    main()
