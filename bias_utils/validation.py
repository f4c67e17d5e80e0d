"""Checks of every notebook's parameters, run before any model is loaded.

One function per notebook (``check_dictionaries`` for 01 ... ``check_completion_profiles``
for 08) takes that notebook's parameters as keyword arguments and raises a
``ParameterError`` (a ``ValueError``, defined in ``errors``) whose message names
the parameter, the file and line where there is one, and what was expected. A
typo therefore costs seconds, not the minutes of loading a model and embedding.
This is the top of the package: only notebooks and scripts import it.

The checks reuse the package's own readers (``populations.load_populations``,
``profiles.check_templates``, ``dictionaries.read_dictionary``,
``bold_prompts.resolve_selection``, ``lexicon.validate_lexicons``) and the value rules
of ``errors`` (counts, seeds, sampling); their messages are kept and prefixed
with the parameter name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from . import bold_prompts, contexts, dictionaries, lexicon, link, profiles, stats
from . import populations as pops
from .errors import (
    ParameterError,
    check_at_most,
    check_count,
    check_generation,
    check_positive_int,
    check_seed,
    is_int,
    is_number,
)
from .models import DTYPES, ModelBackend, backend_schemes, model_name_problem
from .paths import InputPathError, resolve_input

#: Bootstrap counts below this give percentile CIs from a handful of order statistics.
MIN_N_BOOT = 100

#: Fewest words per population group: a group's mean needs a spread for the two-group tests.
MIN_GROUP_WORDS = 2

#: Below this a permutation p cannot go under 1/101, and its floor decides more verdicts than the data.
MIN_N_PERMUTATIONS = 100

__all__ = [
    "LAYER_NAMES", "MIN_GROUP_WORDS", "MIN_N_BOOT", "MIN_N_PERMUTATIONS", "ParameterError", "check_bold_audit",
    "check_bold_replication",
    "check_completion_profiles", "check_intrinsic_extrinsic",
    "check_context_source", "check_cross_model", "check_contexts", "check_dictionaries",
    "check_dictionary_path", "check_dtype", "check_file", "check_generated_contexts", "check_layer", "check_layers",
    "check_lexicons", "check_limit",
    "check_model", "check_boot_count", "check_output_dir", "check_permutation_count", "check_populations",
    "check_profiles", "check_projection_accuracy", "check_robustness", "check_selection", "check_sources",
    "check_template_list",
]

LAYER_NAMES = ("mean", "last", "all")


def _reraise(name: str, exc: Exception) -> ParameterError:
    return ParameterError(f"{name}: {exc}")


# --------------------------------------------------------------------------- single parameters


def check_boot_count(n_boot, name: str = "n_boot", minimum: int = MIN_N_BOOT, default: int | None = None) -> int:
    """An integer >= ``minimum`` (``stats.check_n_boot``'s rule with the notebooks' floor) and at most
    ``errors.MAX_RESAMPLES``; ``default`` (the notebook's) sizes the run-time estimate of a too-large one."""
    try:
        n_boot = stats.check_n_boot(n_boot, minimum=minimum, name=name)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    return check_at_most(n_boot, name, default=default)


def check_permutation_count(n_permutations, name: str = "n_permutations", default: int | None = None) -> int:
    """An integer in [``MIN_N_PERMUTATIONS``, ``errors.MAX_RESAMPLES``] (a permutation test's relabellings)."""
    return check_count(n_permutations, name, minimum=MIN_N_PERMUTATIONS, default=default,
                       why=" (a permutation p cannot go below 1/(K+1))")


def check_limit(limit) -> int | None:
    """``None`` (everything) or a positive integer."""
    return check_positive_int(limit, "limit", allow_none=True)


def check_layer(layer, *, allow_all: bool = True) -> str | int:
    """``"mean"``, ``"last"``, ``"all"`` (when allowed) or a hidden-state index (int, negative counts from the end)."""
    names = LAYER_NAMES if allow_all else tuple(n for n in LAYER_NAMES if n != "all")
    if isinstance(layer, str) and layer in names:
        return layer
    if is_int(layer):
        return int(layer)
    raise ParameterError(f"layer must be one of {', '.join(map(repr, names))} or an integer hidden-state index, "
                         f"got {layer!r}")


def check_context_source(source, name: str = "context_source") -> str:
    if source not in contexts.source_names():
        raise ParameterError(f"{name} must be one of {', '.join(contexts.source_names())}, got {source!r}")
    return source


def check_sources(sources) -> list[str]:
    """``None`` (every registered context source) or a non-empty list of them."""
    if sources is None:
        return list(contexts.source_names())
    if isinstance(sources, str) or not isinstance(sources, Sequence) or not sources:
        raise ParameterError(f"sources must be None or a non-empty list of context sources, got {sources!r}")
    return [check_context_source(s, "sources") for s in sources]


def check_file(path, name: str) -> Path:
    """An existing file, relative paths tried against the working folder, then the repository root
    (``paths.resolve_input``); the error names the parameter, says where it looked, and calls a folder a folder."""
    if not isinstance(path, (str, Path)):
        raise ParameterError(f"{name} must be a file path (str), got {type(path).__name__} {path!r}")
    try:
        return resolve_input(path, name)
    except InputPathError as exc:
        raise ParameterError(str(exc)) from None


def check_populations(populations) -> list[str]:
    """Built-in population names or population files (JSON/CSV), each loaded and validated."""
    items = [populations] if isinstance(populations, (str, Path)) else populations
    if not isinstance(items, Sequence) or not items:
        raise ParameterError(f"populations must be a built-in name ({', '.join(pops.BUILTIN)}), a file path, "
                             f"or a non-empty list of them, got {populations!r}")
    for item in items:
        if not isinstance(item, (str, Path)):
            raise ParameterError(f"populations: {item!r} is not a name or a file path")
        try:
            groups = pops.load_populations(item)
        except ValueError as exc:
            raise _reraise("populations", exc) from None
        small = {g: words for g, words in groups.items() if len(words) < MIN_GROUP_WORDS}
        if small:
            named = ", ".join(f"{g!r} ({len(w)} word{'s' * (len(w) != 1)})" for g, w in small.items())
            raise ParameterError(f"populations: {item}: group(s) {named} need at least {MIN_GROUP_WORDS} words "
                                 "each (the group tests compare variances)")
    return [str(p) for p in items]


def check_template_list(templates) -> tuple[str, ...] | None:
    """``None`` (the original templates) or a list of strings, each with ``{word}`` exactly once."""
    if templates is None:
        return None
    if not isinstance(templates, str) and not isinstance(templates, Sequence):
        raise ParameterError(f"templates must be None or a list of strings, got {templates!r}")
    if not isinstance(templates, str) and any(not isinstance(t, str) for t in templates):
        raise ParameterError(f"templates must be strings, got {[t for t in templates if not isinstance(t, str)][:3]}")
    try:
        return profiles.check_templates(templates)
    except ValueError as exc:
        raise _reraise("templates", exc) from None


def check_dictionary_path(dictionary_path) -> Path | None:
    """``None`` (the seed dictionary) or a user dictionary CSV, read and validated (errors name line and column;
    every pole needs ``dictionaries.MIN_POLE_TERMS`` terms)."""
    if dictionary_path is None:
        return None
    path = check_file(dictionary_path, "dictionary_path")
    try:
        dictionaries.check_poles(dictionaries.read_dictionary(path))
    except ValueError as exc:
        raise _reraise("dictionary_path", exc) from None
    return path


def check_generated_contexts(dictionary_path, generator=None) -> None:
    """With ``context_source="generated"``: the senses without published contexts need a generator
    (``contexts.require_generator``), installed when it is a built-in; the error names the two ways out."""
    try:
        dictionary = dictionaries.load_dictionary(dictionary_path)
    except ValueError as exc:
        raise _reraise("dictionary_path", exc) from None
    contexts.require_generator(dictionary, contexts.DEFAULT_GENERATOR if generator is None else generator)


def check_selection(selection) -> None:
    """``"audit"``, ``"categories"``, an occupation -> group dict, or a mapping file (CSV/JSON)."""
    if isinstance(selection, (str, Path)) and str(selection) not in ("audit", "categories"):
        check_file(selection, "selection")
    try:
        bold_prompts.resolve_selection(selection)
    except (ValueError, KeyError) as exc:
        raise _reraise("selection", exc) from None


def check_lexicons(lexicons, name: str = "lexicons") -> None:
    """``None`` (the defaults) or a ``{name: [words]}`` dict (``lexicon.validate_lexicons``)."""
    if lexicons is None:
        return
    try:
        lexicon.validate_lexicons(lexicons, what=name)
    except (ValueError, TypeError) as exc:
        raise ParameterError(str(exc) if str(exc).startswith(name) else f"{name}: {exc}") from None


def check_model(model, name: str = "model") -> None:
    """A model name, hub id, path or ``"<scheme>:..."`` of a registered backend (a non-empty string), or an
    already loaded model (``models.ModelBackend``); a name that cannot load (``models.model_name_problem``: an
    unknown or near-miss built-in name, a missing path) fails here, before anything loads."""
    if isinstance(model, (str, Path)):
        if not str(model).strip():
            raise ParameterError(f"{name} is empty: give a built-in short name, a hub id or a path")
        scheme, sep, _ = str(model).partition(":")
        problem = None if sep and scheme in backend_schemes() else model_name_problem(model)
        if problem:
            raise ParameterError(f"{name}: {problem}")
    elif not isinstance(model, ModelBackend):
        raise ParameterError(f"{name} must be a name, hub id or path, got {type(model).__name__}")


def check_dtype(dtype) -> None:
    """``None`` (float32, the default on every device) or a lower precision ``models.load_model`` accepts."""
    if dtype is not None and (not isinstance(dtype, str) or dtype.lower() not in DTYPES):
        raise ParameterError(f"dtype must be None (float32, the default on every device) or one of "
                             f"{', '.join(map(repr, DTYPES))}, got {dtype!r}")


def check_output_dir(output_dir) -> None:
    if output_dir is not None and not isinstance(output_dir, (str, Path)):
        raise ParameterError(f"output_dir must be None or a folder path, got {output_dir!r}")
    if output_dir is not None and Path(output_dir).is_file():
        raise ParameterError(f"output_dir: {output_dir} is a file, expected a folder")


# --------------------------------------------------------------------------- per notebook


def _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts=5,
                      dtype=None) -> None:
    check_model(model)
    check_dtype(dtype)
    check_context_source(context_source)
    check_dictionary_path(dictionary_path)
    if context_source == "generated":
        check_generated_contexts(dictionary_path)
    check_positive_int(n_contexts, "n_contexts")
    check_seed(seed)
    check_output_dir(output_dir)
    check_limit(limit)


def _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources,
                              generator=None, dtype=None) -> None:
    """For the notebooks that compare context ``sources``: the generator is needed only when they include
    ``"generated"`` (``sources=None``: every registered source, so it does)."""
    _space_parameters(model, dictionary_path, seed, output_dir, limit, "dictionary", n_contexts, dtype)
    if "generated" in check_sources(sources):
        check_generated_contexts(dictionary_path, generator)


# Each function takes exactly its notebook's parameters (keywords, the notebook's defaults), so a
# notebook calls it with its parameters cell unchanged and a typo fails before a model is loaded.

def check_dictionaries(*, model="smollm2-135m-instruct", dtype=None, dictionary_path=None, output_dir=None) -> None:
    """Notebook 01's parameters."""
    _space_parameters(model, dictionary_path, 0, output_dir, None, "dictionary", dtype=dtype)  # 01 builds no contexts


def check_contexts(*, model="smollm2-135m-instruct", dtype=None, context_source="generated", dictionary_path=None,
                   n_contexts=5, seed=0, output_dir=None, limit=None, sources=None,
                   generator=None, corpus=None) -> None:
    """Notebook 02's parameters."""
    if generator is not None:
        check_model(generator, "generator")
    _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources, generator, dtype)
    check_context_source(context_source)
    if corpus is not None:
        path = check_file(corpus, "corpus")
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ParameterError(f"corpus: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def check_projection_accuracy(*, model="smollm2-135m-instruct", dtype=None, context_source="generated", layer="mean",
                              dictionary_path=None, n_contexts=5, seed=0, output_dir=None, limit=None, n_boot=2000,
                              term_contexts="generated", n_permutations=200) -> None:
    """Notebook 03's parameters."""
    _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts, dtype)
    check_layer(layer)
    check_boot_count(n_boot, default=2000)
    check_permutation_count(n_permutations, default=200)
    if term_contexts not in ("generated", "dictionary"):
        raise ParameterError(f"term_contexts must be 'generated' or 'dictionary', got {term_contexts!r}")


def check_profiles(*, model="smollm2-135m-instruct", dtype=None, context_source="generated", layer="mean",
                   dictionary_path=None, populations=("names", "terms", "nonbinary", "occupations"), templates=None,
                   n_contexts=5, seed=0, output_dir=None, limit=None, term_limit=None, n_permutations=200,
                   n_boot=1000) -> None:
    """Notebook 04's parameters (``layer`` cannot be ``"all"``: a profile is one value per word; ``n_boot``: the
    occupation-bootstrap replicates of the gender direction's check against the BLS share of women)."""
    _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts, dtype)
    check_positive_int(term_limit, "term_limit", allow_none=True)
    check_permutation_count(n_permutations, default=200)
    check_boot_count(n_boot, default=1000)
    check_layer(layer, allow_all=False)
    check_populations(populations)
    check_template_list(templates)
    try:
        profiles.limit_populations({}, limit)  # its rule: at least two words per group for a t-test
    except ValueError as exc:
        raise _reraise("limit", exc) from None


def check_layers(*, model="smollm2-135m-instruct", dtype=None, dictionary_path=None, populations="names",
                 templates=None, n_contexts=5, seed=0, output_dir=None, limit=None,
                 sources=None, n_boot=200) -> None:
    """Notebook 05's parameters."""
    _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources, dtype=dtype)
    check_populations(populations)
    check_template_list(templates)
    check_boot_count(n_boot, default=200)


def check_bold_audit(*, model="smollm2-135m-instruct", dtype=None, selection="audit", n_samples=1, seed=0,
                     max_new_tokens=100, temperature=0.7, top_p=0.9, top_k=50, lexicons=None, neutral_lexicons=None,
                     limit=None, n_boot=1000, output_dir=None) -> None:
    """Notebook 06's parameters."""
    check_model(model)
    check_dtype(dtype)
    check_generation(n_samples=n_samples, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                     top_k=top_k, seed=seed)
    check_selection(selection)
    check_lexicons(lexicons, "lexicons")
    check_lexicons(neutral_lexicons, "neutral_lexicons")
    check_limit(limit)
    check_boot_count(n_boot, default=1000)
    check_output_dir(output_dir)


def check_bold_replication(*, n_boot=1000, seed=0, output_dir=None) -> None:
    """Notebook 07's parameters."""
    check_boot_count(n_boot, default=1000)
    check_seed(seed)
    check_output_dir(output_dir)


def check_completion_profiles(*, model="smollm2-135m-instruct", dtype=None, context_source="generated",
                              dictionary_path=None, n_contexts=5, seed=0, layer="mean", limit=None, output_dir=None,
                              n_boot=1000, n_group_permutations=2000, term_limit=None, n_permutations=200) -> None:
    """Notebook 08's parameters."""
    _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts, dtype)
    check_layer(layer, allow_all=False)
    check_boot_count(n_boot, default=1000)
    check_permutation_count(n_group_permutations, "n_group_permutations", default=2000)
    check_permutation_count(n_permutations, default=200)
    check_positive_int(term_limit, "term_limit", allow_none=True)


def check_intrinsic_extrinsic(*, model="smollm2-135m-instruct", dtype=None, context_source="generated",
                              dictionary_path=None, n_contexts=5, seed=0, layer="mean", correction=0.5,
                              output_dir=None, n_boot=1000, n_permutations=999) -> None:
    """Notebook 11's parameters."""
    _space_parameters(model, dictionary_path, seed, output_dir, None, context_source, n_contexts, dtype)
    check_layer(layer, allow_all=False)
    check_boot_count(n_boot, default=1000)
    check_permutation_count(n_permutations, default=999)
    link.check_correction(correction)


def check_cross_model(*, results_dir=None, models=(), output_dir=None) -> None:
    """Notebook 09's parameters: a results folder that exists, model ids as a list of strings."""
    if results_dir is not None:
        if not isinstance(results_dir, (str, Path)):
            raise ParameterError(f"results_dir must be None or a folder path, got {results_dir!r}")
        if not Path(results_dir).is_dir():
            raise ParameterError(f"results_dir: {results_dir} is not a folder")
    if isinstance(models, (str, Path)) or not isinstance(models, Sequence) \
            or not all(isinstance(m, str) and m for m in models):
        raise ParameterError(f"models must be a list of model ids (result folder names), got {models!r}")
    check_output_dir(output_dir)


def check_robustness(*, model="smollm2-135m-instruct", dtype=None, populations=("names", "terms"), sources=None,
                     templates=None, dictionary_path=None, n_contexts=5, n_permutations=200, n_perm_test=2000, seed=0,
                     alpha=0.05, output_dir=None, limit=None, term_limit=None) -> None:
    """Notebook 10's parameters (``sources=None``: every registered context source)."""
    _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources, dtype=dtype)
    check_populations(populations)
    check_template_list(templates)
    check_permutation_count(n_permutations, default=200)
    check_permutation_count(n_perm_test, "n_perm_test", default=2000)
    check_positive_int(term_limit, "term_limit", allow_none=True)
    if not is_number(alpha) or not 0 < alpha < 1:
        raise ParameterError(f"alpha must be a number in (0, 1), got {alpha!r}")
