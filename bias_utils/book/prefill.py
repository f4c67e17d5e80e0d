"""Caches written ahead of a chapter, in a lane that would otherwise wait.

With two lanes the default build's tail runs on one lane (12, then 08 and 11, then 09) while the other, done with
06 and the encoder's chapters, waits: 3 min 27 s in be611ff's cold build. Chapter 11's long form (150 s of sampling
on one torch thread, benchmarks/README) needs only the model and the BLS occupations, none of the chapters 11 reads:
written ahead into the generation cache, in that lane, it is read by the chapter instead of written on the tail.

They are the texts the chapter would write itself. The prefill makes the chapter's own call
(``audit.long_form.long_form_table`` on the same nouns, instructions, samples, length and seed): the same prompts in
the same batches, sampled on one torch thread in any lane (``models.generation``). A chapter that starts while its
texts are still being written waits on the cache's lock, then reads them. A prefill that fails costs nothing but its
time: the chapter writes what is missing and shows any error itself.

One registration per chapter (:data:`PREFILLS`): a function of the run's parameters (the notebook's defaults with
the run's own, :func:`bias_utils.book.runs.effective_parameters`) and its wall time on the default build (the
scheduler's estimate). The build runs a prefill only with lanes (``jobs`` > 1): in one lane it would only move work.
Run as ``python -m bias_utils.book.prefill <notebook stem>`` with the parameters as JSON on stdin.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Callable, Mapping

__all__: list[str] = []


@dataclass(frozen=True)
class Prefill:
    """What a chapter's prefill writes (``write(parameters)``) and its seconds on the default build."""

    write: Callable[[Mapping], object]
    estimate_s: float


def long_form_texts(parameters: Mapping):
    """Chapter 11's long-form texts (its ``long_form`` section) as the chapter asks for them: every BLS occupation
    (``profiles.populations.occupation_shares``, the nouns of ``gender_direction.occupation_validity``'s values, in
    their order), the run's instructions, samples, length and seed. Returns the texts table, or None where the run
    leaves the long form out."""
    # every value read by name: one missing (a default that is not a literal) fails the prefill, never guessed
    if not parameters["long_form"]:
        return None
    # deferred: planning a build imports this module, and it must not load torch
    from ..audit.long_form import long_form_table
    from ..core.stats import MIN_N_BOOT
    from ..models.loading import load_model
    from ..profiles.populations import occupation_shares  # deferred: with the three above

    model = load_model(parameters["model"], dtype=parameters["dtype"])
    return long_form_table(model, list(occupation_shares()["occupation"]),
                           instructions=parameters["long_form_instructions"],
                           n_samples=parameters["long_form_n_samples"],
                           max_new_tokens=parameters["long_form_max_new_tokens"], seed=parameters["seed"],
                           n_boot=MIN_N_BOOT).texts


#: Per notebook stem, its prefill; 150 s: chapter 11's long form, cold, on one thread (benchmarks/README).
PREFILLS = {"11_intrinsic_extrinsic": Prefill(long_form_texts, estimate_s=150)}


def main(argv: list[str] | None = None) -> None:
    stem, = sys.argv[1:] if argv is None else argv
    PREFILLS[stem].write(json.loads(sys.stdin.read()))


if __name__ == "__main__":
    main()
