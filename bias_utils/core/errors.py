"""The package's errors and the value rules shared by every layer (the bottom of the package: it imports none of it).

A bad value raises :class:`ParameterError` (a ``ValueError``) whose message
starts with the parameter's name and says what was expected. The library
(``generation.generate``, ``sampling.nucleus``) and the notebooks' checks
(``validation``) call these rules; there is no second copy of one.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping

__all__ = [
    "DataError", "ModelError", "ParameterError",
]

#: Most bootstrap replicates or permutations a run accepts: beyond it a typo (an extra zero or three) would start a
#: job that runs for hours or days, and the Monte Carlo error at 100,000 is already far below the reported digits.
_MAX_RESAMPLES = 100_000
#: The environment variable that raises that ceiling for a run that asks for more on purpose.
_MAX_RESAMPLES_ENV = "BIAS_MAX_RESAMPLES"
#: The largest seed every library the package seeds accepts (numpy's ``default_rng`` and ``RandomState``: 2**32 - 1).
_MAX_SEED = 2**32 - 1
#: The layer choices by name: the mean of the projected values over every hidden state (the original study's
#: headline), the last hidden state, and every hidden state (one value per layer: only where a chapter shows them all).
_LAYER_NAMES = ("mean", "last", "all")


class ParameterError(ValueError):
    """A notebook or API parameter that cannot be used; the message names it and says what was expected."""


class ModelError(RuntimeError):
    """A model could not be found, installed or loaded; the message says what to do."""


class DataError(RuntimeError):
    """A verified external file (a dataset of the manifest, WordNet 3.0) is missing, fails its sha256 or is the wrong
    version: a fault of the environment, not of a parameter; the message names the file and where to get it."""


def _is_int(value) -> bool:
    """An integer that is not a bool (``True`` is an int to Python, never a count or a seed here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive_int(value, name: str, *, allow_none: bool = False) -> int | None:
    """``value`` as a positive int (``None`` passes when ``allow_none``)."""
    if value is None and allow_none:
        return None
    if not _is_int(value) or value < 1:
        expected = "None or a positive integer" if allow_none else "a positive integer"
        raise ParameterError(f"{name} must be {expected}, got {value!r}")
    return int(value)


def check_seed(seed, name: str = "seed") -> int:
    """An integer in [0, :data:`MAX_SEED`] (numpy refuses a larger one in its own words, deep in a run)."""
    if not _is_int(seed) or not 0 <= seed <= _MAX_SEED:
        raise ParameterError(f"{name} must be an integer from 0 to 2**32 - 1 = {_MAX_SEED:,}, got {seed!r}")
    return int(seed)


def check_layer(layer, *, layers=None, allow_all: bool = True, allow_names: bool = True,
                name: str = "layer") -> str | int:
    """``layer`` when it is one of :data:`_LAYER_NAMES` (``"all"`` only where ``allow_all``) or a hidden-state index;
    ``layers``: the model's hidden-state indices (a count ``n`` stands for ``0 .. n - 1``; the embedding output is 0),
    against which an index is checked, negative ones counting from the end; ``allow_names=False``: an index only
    (an item of a list of layers). The one rule for a layer everywhere:
    the notebooks' checks, the library's entry points and the projection itself."""
    names = tuple(n for n in _LAYER_NAMES if allow_all or n != "all") if allow_names else ()
    if isinstance(layer, str) and layer in names:
        return layer
    available = None if layers is None else tuple(range(layers)) if _is_int(layers) else tuple(int(x) for x in layers)
    if _is_int(layer) and (available is None or int(layer) in available or -len(available) <= layer < 0):
        return int(layer)
    index = "an integer hidden-state index" if available is None else (
        f"a hidden-state index in {list(available)}" if len(available) < 3 or
        available != tuple(range(available[0], available[-1] + 1)) else
        f"a hidden-state index from {available[0]} to {available[-1]} (or -{len(available)} to -1 from the end; "
        f"0 is the embedding output)")
    choices = [repr(n) for n in names] + [index]
    why = " ('all' gives one value per layer; here one value per word is needed)" if layer == "all" and names else ""
    raise ParameterError(f"{name} must be {' or '.join([', '.join(choices[:-1]), choices[-1]] if names else choices)}"
                         f"; got {layer!r}{why}")


def positive_int_from_env(name: str, default: int, meaning: str) -> int:
    """The positive integer in ``$name``, else ``default``; anything else in it is a :class:`ParameterError` that
    says what it sets (``meaning``)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ParameterError(f"{name} must be a positive integer ({meaning}), got {raw!r}")
    return int(raw)


def _max_resamples() -> int:
    """The replicate ceiling: :data:`MAX_RESAMPLES`, or the positive integer in ``$BIAS_MAX_RESAMPLES`` (set
    before the kernel or ``make book`` starts) for a run that wants more on purpose."""
    return positive_int_from_env(_MAX_RESAMPLES_ENV, _MAX_RESAMPLES, "the most replicates a run accepts")


def check_at_most(value: int, name: str, *, maximum: int | None = None, default: int | None = None) -> int:
    """``value`` when it is at most ``maximum`` (``None``: :func:`max_resamples`); the error says how much longer
    the run would take than with ``default`` (run time grows linearly with a replicate count) and how to ask for
    it anyway."""
    maximum = _max_resamples() if maximum is None else maximum
    if value > maximum:
        longer = f"; the run would take about {value / default:,.0f} times as long as with the default {default}" \
            if default else ""
        raise ParameterError(f"{name} must be at most {maximum:,}, got {value:,}{longer}. To run it anyway, set "
                             f"the environment variable {_MAX_RESAMPLES_ENV}={value} before starting the kernel or "
                             "make book")
    return value


def check_count(value, name: str, *, minimum: int, why: str = "", maximum: int | None = None,
                default: int | None = None) -> int:
    """A replicate count (permutations, relabellings) in ``[minimum, maximum]``; ``why`` explains the minimum."""
    if not _is_int(value) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}{why}, got {value!r}")
    return check_at_most(int(value), name, maximum=maximum, default=default)


def check_word_list(value, name: str, *, empty: str | None = None, strings: bool = True) -> list:
    """``value`` (words, nouns, prompts, templates: any list the caller iterates) as a list; ``name``: the parameter.

    One string (or ``bytes``) is refused: iterating it would read ``"nurse"`` as the five words n, u, r, s, e and
    return a table for them without a word of warning. ``empty``: why an empty list cannot be used (``None``: an
    empty list passes); ``strings``: every item must be a string (a number or ``None`` would otherwise fail deep in
    a tokenizer or a lookup)."""
    if isinstance(value, (str, bytes)):
        short = len(value) <= 40
        shown = repr(value) if short else f"{value[:40]!r}..."
        fix = f"write [{value!r}]" if short and isinstance(value, str) else "wrap it in a list of strings"
        raise ParameterError(f"{name} must be a list of strings, not one string: got {shown}; {fix}")
    if not isinstance(value, Iterable):
        raise ParameterError(f"{name} must be a list of strings, got {type(value).__name__} {value!r:.60}")
    value = list(value)
    if empty is not None and not value:
        raise ParameterError(f"{name} is empty: {empty}")
    bad = next(((i, v) for i, v in enumerate(value) if not isinstance(v, str)), None) if strings else None
    if bad is not None:
        raise ParameterError(f"{name} must be a list of strings; item {bad[0]} is {bad[1]!r}")
    return value


def check_word_lists(value, name: str) -> dict[str, list[str]]:
    """``value`` (lexicons: a dict of name -> word list) with each list checked by :func:`check_word_list` under
    the name ``name[key]``: ``{"female": "she"}`` would otherwise be the lexicon s, h, e."""
    if not isinstance(value, Mapping):
        raise ParameterError(f"{name} must be a dict of name -> list of words, got {type(value).__name__} "
                             f"{value!r:.60}")
    return {key: check_word_list(words, f"{name}[{key!r}]") for key, words in value.items()}


def _check_prompts(prompts) -> list[str]:
    """A non-empty list of strings (:func:`check_word_list`)."""
    return check_word_list(prompts, "prompts", empty="nothing to generate from")


def check_sampling(temperature, top_p, top_k=None, *, greedy: bool = False) -> int | None:
    """The sampling rule; returns ``top_k`` as an int (or ``None``).

    ``temperature``: a number > 0 (``greedy=True``: >= 0, 0 = greedy decoding).
    ``top_p``: a number in (0, 1]. ``top_k``: ``None`` (off) or an integer >= 1.
    """
    if not is_number(temperature) or not (temperature >= 0 if greedy else temperature > 0):
        expected = "a number >= 0 (0 = greedy)" if greedy else "a number > 0 for sampling"
        raise ParameterError(f"temperature must be {expected}, got {temperature!r}")
    if not is_number(top_p) or not 0 < top_p <= 1:
        raise ParameterError(f"top_p must be a number in (0, 1], got {top_p!r}")
    return check_positive_int(top_k, "top_k", allow_none=True)


def check_max_new_tokens(max_new_tokens, context_length: int | None, model: str = "the model") -> int:
    """``max_new_tokens`` as a positive int that, with a prompt, fits ``model``'s context (``context_length`` tokens,
    read from its config; ``None``: unknown, not checked). Beyond it the positions have no embedding and the run
    goes on for minutes before it fails or writes nothing."""
    max_new_tokens = check_positive_int(max_new_tokens, "max_new_tokens")
    if context_length is not None and max_new_tokens >= context_length:
        raise ParameterError(f"max_new_tokens must be below the context length of {model} ({context_length:,} tokens, "
                             f"prompt included), got {max_new_tokens:,}")
    return max_new_tokens


def check_generation(prompts=None, *, n_samples=1, max_new_tokens=100, temperature=0.7, top_p=0.9, top_k=None,
                     seed=0) -> dict:
    """The settings of ``generation.generate`` (and, when given, its prompt list), normalised.

    ``n_samples``, ``max_new_tokens``: positive ints; the sampling rule of
    :func:`check_sampling` with greedy decoding allowed; greedy decoding
    (``temperature=0``) with ``n_samples > 1`` is refused: its samples are one
    completion repeated, which the statistics would count as independent;
    ``seed``: :func:`check_seed`; ``prompts``: :func:`check_prompts`. Returns
    ``{"prompts", "n_samples", "max_new_tokens", "temperature", "top_p",
    "top_k", "seed"}`` (``prompts`` as a list, or ``None``; integers as Python ints).
    """
    checked = {
        "prompts": None if prompts is None else _check_prompts(prompts),
        "n_samples": check_positive_int(n_samples, "n_samples"),
        "max_new_tokens": check_positive_int(max_new_tokens, "max_new_tokens"),
        "top_k": check_sampling(temperature, top_p, top_k, greedy=True),
        "temperature": temperature, "top_p": top_p,
        "seed": check_seed(seed),
    }
    if temperature == 0 and checked["n_samples"] > 1:
        raise ParameterError(f"n_samples must be 1 with temperature=0 (greedy decoding gives every sample of a prompt "
                             f"the same completion, counted {n_samples} times as if independent), got {n_samples}; "
                             "or sample with a temperature > 0")
    return checked
