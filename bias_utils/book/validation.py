"""Checks of every notebook's parameters, run before any model is loaded.

``check(notebook, **parameters)`` runs the check registered for that notebook (its file stem,
``"01_dictionaries"`` ... ``"11_intrinsic_extrinsic"``), which takes the notebook's parameters as keyword
arguments and raises a
``ParameterError`` (a ``ValueError``, defined in ``errors``) whose message names
the parameter, the file and line where there is one, and what was expected. A
typo therefore costs seconds, not the minutes of loading a model and embedding.
This is the top of the package: only notebooks and scripts import it.

One rule per parameter, in one place: these checks call the very checks the
library's entry points run on entry (``bold.check_audit`` for ``run_audit``,
``space.check_space`` for ``build_space``, ``profiles.check_profiles`` for
``run_profiles``, ``bold_link.check_link`` for ``run_link``, ...), which reuse the
package's readers and the value rules of ``errors`` (counts, seeds, layers,
sampling); what a notebook adds is its own floors (``stats.MIN_N_BOOT``,
``MIN_N_PERMUTATIONS``) and the files it reads (``dictionary_path``, ``corpus``).
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
from pathlib import Path
from typing import Callable, Sequence

from ..audit import bold, next_word_prompts
from ..audit import long_form as long_form_measure
from ..audit.bold import check_audit_lexicons
from ..core import paths, results, stats
from ..core.errors import (
    ParameterError,
    check_count,
    check_layer,
    check_positive_int,
    check_seed,
    is_number,
)
from ..core.paths import resolve_input
from ..intrinsic_extrinsic import bold_link, erasure, erasure_long_form
from ..models.builtin_models import BUILTIN_MODELS
from ..models.loading import DTYPES, check_model
from ..profiles import contexts, dictionaries, projection, space
from ..profiles.population_profiles import (
    check_population_list,
    check_profile_run,
    check_template_list,
)
from ..profiles.space import check_space

#: Below this a permutation p cannot go under 1/101, and its floor decides more verdicts than the data.
_MIN_N_PERMUTATIONS = 100

__all__ = ["check"]


def _reraise(name: str, exc: Exception) -> ParameterError:
    return ParameterError(f"{name}: {exc}")


# --------------------------------------------------------------------------- single parameters


def _check_boot_count(n_boot, name: str = "n_boot", minimum: int = stats.MIN_N_BOOT, default: int | None = None) -> int:
    """An integer >= ``minimum`` (``stats.check_n_boot``'s rule with the notebooks' floor) and at most
    ``errors.MAX_RESAMPLES``; ``default`` (the notebook's) sizes the run-time estimate of a too-large one."""
    return stats.check_n_boot(n_boot, minimum=minimum, name=name, default=default)


def _check_permutation_count(n_permutations, name: str = "n_permutations", default: int | None = None) -> int:
    """An integer in [``MIN_N_PERMUTATIONS``, ``errors.MAX_RESAMPLES``] (a permutation test's relabellings)."""
    return check_count(n_permutations, name, minimum=_MIN_N_PERMUTATIONS, default=default,
                       why=" (a permutation p cannot go below 1/(K+1))")


def _check_limit(limit) -> int | None:
    """``None`` (everything) or a positive integer."""
    return check_positive_int(limit, "limit", allow_none=True)


def _check_context_source(source, name: str = "context_source") -> str:
    if source not in contexts.source_names():
        raise ParameterError(f"{name} must be one of {', '.join(contexts.source_names())}, got {source!r}")
    return source


def _check_sources(sources) -> list[str]:
    """``None`` (every registered context source) or a non-empty list of them (``contexts.check_source_names``)."""
    return list(contexts.check_source_names(sources))


def _check_file(path, name: str) -> Path:
    """An existing file, relative paths tried against the working folder, then the repository root
    (``paths.resolve_input``); the error names the parameter, says where it looked, and calls a folder a folder."""
    if not isinstance(path, (str, Path)):
        raise ParameterError(f"{name} must be a file path (str), got {type(path).__name__} {path!r}")
    return resolve_input(path, name)


def _check_populations(populations) -> list[str]:
    """Built-in population names or population files (JSON/CSV), each loaded and validated
    (``profiles.check_populations``: group sizes, references, something left to test)."""
    check_population_list(populations)
    return [str(p) for p in ([populations] if isinstance(populations, (str, Path)) else populations)]


def _check_dictionary_path(dictionary_path) -> Path | None:
    """``None`` (the seed dictionary) or a user dictionary CSV, read and validated (errors name line and column;
    every pole needs ``dictionaries.MIN_POLE_SIZE`` terms)."""
    if dictionary_path is None:
        return None
    path = _check_file(dictionary_path, "dictionary_path")
    try:
        dictionaries.check_poles(dictionaries.read_dictionary(path))
    except ValueError as exc:
        raise _reraise("dictionary_path", exc) from None
    return path


def _dictionary(dictionary_path):
    """The dictionary the notebook will use (the seed one for ``None``), its file errors named ``dictionary_path``."""
    _check_dictionary_path(dictionary_path)
    try:
        return dictionaries.load_dictionary(dictionary_path)
    except ValueError as exc:
        raise _reraise("dictionary_path", exc) from None


def _check_lexicons(lexicons, name: str = "lexicons") -> None:
    """``None`` (the defaults) or a ``{name: [words]}`` dict (``bold.check_audit_lexicons``)."""
    check_audit_lexicons(**{name: lexicons})


def _check_dtype(dtype) -> None:
    """``None`` (float32, the default on every device) or a lower precision ``models.load_model`` accepts."""
    if dtype is not None and (not isinstance(dtype, str) or dtype.lower() not in DTYPES):
        raise ParameterError(f"dtype must be None (float32, the default on every device) or one of "
                             f"{', '.join(map(repr, DTYPES))}, got {dtype!r}")


def _check_writer(model, chapter: str) -> None:
    """A model that writes text, for a chapter that reads its BOLD completions (chapter 06 writes them for a decoder
    only): an encoder is refused here, not sent to run 06 when its completions are missing."""
    check_model(model, need="generate",
                what=f"chapter {chapter} (it reads the BOLD completions chapter 06 writes, and only a decoder writes "
                     "them)")


def _check_output_dir(output_dir, model=None) -> None:
    """``None`` (the results folder of the model) or a folder path, writable (``results.check_writable``: the
    results folder itself for ``None``). A folder that holds the results of another built-in model than ``model``
    is refused here, before the model loads (``results.output_folder`` refuses any other model id after it)."""
    if output_dir is not None and not isinstance(output_dir, (str, Path)):
        raise ParameterError(f"output_dir must be None or a folder path, got {output_dir!r}")
    if output_dir is not None and Path(output_dir).is_file():
        raise ParameterError(f"output_dir: {output_dir} is a file, expected a folder")
    folder = results.check_writable(paths.results_dir() if output_dir is None else output_dir)
    if output_dir is not None and isinstance(model, str) and model in BUILTIN_MODELS:
        results.check_folder_model(folder, model)


# --------------------------------------------------------------------------- per notebook


def _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts=5, generator=None):
    """The parameters of a notebook that builds a space (``space.check_space``); returns the model's facts."""
    _check_output_dir(output_dir, model)
    _check_limit(limit)
    return check_space(model, _dictionary(dictionary_path), context_source, n_contexts, seed, generator=generator,
                       names=("context_source", "generator"))


def _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources,
                              generator=None):
    """For the notebooks that compare context ``sources``: the generator is needed only when they include
    ``"generated"`` (``sources=None``: every registered source, so it does)."""
    _check_output_dir(output_dir, model)
    _check_limit(limit)
    return space.check_source_spaces(model, _dictionary(dictionary_path), sources, n_contexts, seed,
                                     generator=generator)


def _injected_parameters() -> list[str]:
    """The names papermill assigned in the cell it injected (its source starts with ``# Parameters``), read from
    the kernel's input history; none outside a kernel or without papermill."""
    try:
        from IPython import get_ipython  # deferred: only a kernel has a history to read
    except ImportError:
        return []
    shell = get_ipython()
    history = shell.user_ns.get("In", []) if shell is not None else []
    source = next((s for s in reversed(history) if isinstance(s, str) and s.startswith("# Parameters")), None)
    if source is None:
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]


def _notebook(stem: str):
    """Registers a notebook's check under the notebook's file stem; the registered check first refuses a parameter
    the notebook does not have (``papermill -p modle ...``: papermill only warns and the run goes on with the
    default), naming the notebook's parameters."""
    def register(check):
        known = list(inspect.signature(check).parameters)

        @functools.wraps(check)
        def checked(**parameters):
            unknown = [n for n in _injected_parameters() if n not in known]
            if unknown:
                close = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.6)
                raise ParameterError(f"{unknown[0]}: not a parameter of this notebook"
                                     + (f" (did you mean {close[0]!r}?)" if close else "")
                                     + f"; its parameters are {', '.join(known)}")
            return check(**parameters)
        _CHECKS[stem] = checked
        return checked
    return register


#: notebook file stem -> its check (one registration per notebook, by ``_notebook``)
_CHECKS: dict[str, Callable[..., None]] = {}


def check(notebook: str, **parameters) -> None:
    """Checks notebook ``notebook``'s parameters (its file stem, ``"03_projection_accuracy"``), given as keywords
    exactly as its parameters cell names them; raises ``ParameterError`` naming the parameter."""
    if notebook not in _CHECKS:
        raise ParameterError(f"notebook: {notebook!r} is not a notebook of the book; they are {', '.join(_CHECKS)}")
    _CHECKS[notebook](**parameters)


# Each check takes exactly its notebook's parameters (keywords, the notebook's defaults), so a notebook calls
# ``check`` with its parameters cell unchanged and a typo fails before a model is loaded.

@_notebook("01_dictionaries")
def _check_dictionaries(*, model="smollm2-135m-instruct", dtype=None, dictionary_path=None, output_dir=None) -> None:
    """Notebook 01's parameters."""
    _check_dtype(dtype)
    _space_parameters(model, dictionary_path, 0, output_dir, None, "dictionary")  # 01 builds no contexts


@_notebook("02_contexts")
def _check_contexts(*, model="smollm2-135m-instruct", dtype=None,
                    context_source="generated", dictionary_path=None, n_contexts=5,
                    seed=0, output_dir=None, limit=None, sources=None,
                    generator=None, corpus=None) -> None:
    """Notebook 02's parameters."""
    _check_dtype(dtype)
    if generator is not None:
        check_model(generator, "generator", need="generate", what="generating contexts")
    _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources, generator)
    _check_context_source(context_source)
    if corpus is not None:
        path = _check_file(corpus, "corpus")
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ParameterError(f"corpus: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


@_notebook("03_projection_accuracy")
def _check_projection_accuracy(*, model="smollm2-135m-instruct", dtype=None, context_source="generated", layer="mean",
                               dictionary_path=None, n_contexts=5, seed=0, output_dir=None, limit=None, n_boot=2000,
                               term_contexts="generated", n_permutations=200) -> None:
    """Notebook 03's parameters."""
    _check_dtype(dtype)
    facts = _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts)
    check_layer(layer, layers=facts.n_states)
    _check_boot_count(n_boot, default=2000)
    _check_permutation_count(n_permutations, default=200)
    if term_contexts not in ("generated", "dictionary"):
        raise ParameterError(f"term_contexts must be 'generated' or 'dictionary', got {term_contexts!r}")


@_notebook("04_profiles")
def _check_profiles(*, model="smollm2-135m-instruct", dtype=None, context_source="generated", layer="mean",
                    dictionary_path=None, populations=("names", "terms", "nonbinary", "occupations"), templates=None,
                    n_contexts=5, seed=0, output_dir=None, limit=None, term_limit=None, n_permutations=200,
                    n_boot=1000) -> None:
    """Notebook 04's parameters (``profiles.check_profiles``: ``layer`` cannot be ``"all"``, a profile is one value
    per word; ``n_boot``: the occupation-bootstrap replicates of the gender direction's check against the BLS share
    of women)."""
    _check_dtype(dtype)
    _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts)
    check_positive_int(term_limit, "term_limit", allow_none=True)
    _check_permutation_count(n_permutations, default=200)
    _check_boot_count(n_boot, default=1000)
    check_profile_run(model, populations, templates, layer, limit)


@_notebook("05_layers")
def _check_layers(*, model="smollm2-135m-instruct", dtype=None,
                  dictionary_path=None, populations="names", templates=None,
                  n_contexts=5, seed=0, output_dir=None, limit=None,
                  sources=None, n_boot=200) -> None:
    """Notebook 05's parameters."""
    _check_dtype(dtype)
    _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources)
    check_profile_run(model, populations, templates, "mean", limit)
    _check_boot_count(n_boot, default=200)


@_notebook("06_bold_audit")
def _check_bold_audit(*, model="smollm2-135m-instruct", dtype=None,
                      selection="audit", n_samples=1, seed=0, max_new_tokens=100,
                      temperature=0.7, top_p=0.9, top_k=50, lexicons=None, neutral_lexicons=None, limit=None,
                      n_boot=1000, output_dir=None) -> None:
    """Notebook 06's parameters: ``bold.check_audit`` (the model's kind and context length read from its config,
    the sampling rule, a selection of two groups or more, the lexicons), then the notebook's ``n_boot`` floor."""
    _check_dtype(dtype)
    bold.check_audit(model, selection=selection, n_samples=n_samples, seed=seed, max_new_tokens=max_new_tokens,
                     temperature=temperature, top_p=top_p, top_k=top_k, lexicons=lexicons,
                     neutral_lexicons=neutral_lexicons, limit=limit, n_boot=n_boot)
    _check_boot_count(n_boot, default=1000)
    _check_output_dir(output_dir, model)


@_notebook("07_bold_replication")
def _check_bold_replication(*, n_boot=1000, seed=0, output_dir=None) -> None:
    """Notebook 07's parameters."""
    _check_boot_count(n_boot, default=1000)
    check_seed(seed)
    _check_output_dir(output_dir)


@_notebook("08_completion_profiles")
def _check_completion_profiles(*, model="smollm2-135m-instruct", dtype=None,
                               context_source="generated", dictionary_path=None,
                               n_contexts=5, seed=0, layer="mean", limit=None, output_dir=None, n_boot=1000,
                               n_group_permutations=2000, term_limit=None, n_permutations=200) -> None:
    """Notebook 08's parameters: a decoder (the chapter reads the completions chapter 06 wrote, and 06 refuses an
    encoder), then the space's."""
    _check_dtype(dtype)
    _check_writer(model, "08")
    facts = _space_parameters(model, dictionary_path, seed, output_dir, limit, context_source, n_contexts)
    check_layer(layer, layers=facts.n_states, allow_all=False)
    _check_boot_count(n_boot, default=1000)
    _check_permutation_count(n_group_permutations, "n_group_permutations", default=2000)
    _check_permutation_count(n_permutations, default=200)
    check_positive_int(term_limit, "term_limit", allow_none=True)


@_notebook("11_intrinsic_extrinsic")
def _check_intrinsic_extrinsic(*, model="smollm2-135m-instruct", dtype=None,
                               context_source="generated", dictionary_path=None,
                               n_contexts=5, seed=0, layer="mean", correction=0.5, output_dir=None,
                               n_boot=1000, n_permutations=999, next_word_templates=None,
                               next_word_lexicons=None, sampled_check=False, long_form=True,
                               long_form_instructions=None, long_form_n_samples=long_form_measure.N_SAMPLES,
                               long_form_max_new_tokens=long_form_measure.MAX_NEW_TOKENS) -> None:
    """Notebook 11's parameters: the notebook's floors for ``n_boot`` and ``n_permutations`` (their messages give the
    run-time estimate against the notebook's defaults), ``next_word_templates``
    (``next_word_prompts.check_next_word_templates``), ``next_word_lexicons``
    (``next_word_prompts.check_next_word_lexicons``: chapter 06's rule for ``lexicons``, ``female`` and ``male``
    required), ``sampled_check`` and ``long_form`` (True or False), the long form's instructions, samples and length
    (``long_form.check_long_form``), then ``bold_link.check_link``; a decoder (the chapter reads the completions
    chapter 06 wrote, and 06 refuses an encoder)."""
    for flag, value in (("sampled_check", sampled_check), ("long_form", long_form)):
        if not isinstance(value, bool):
            raise ParameterError(f"{flag} must be True or False, got {value!r}")
    long_form_measure.check_long_form(long_form_instructions, long_form_n_samples, long_form_max_new_tokens,
                                      prefix="long_form_")
    _check_dtype(dtype)
    _check_writer(model, "11")
    facts = _space_parameters(model, dictionary_path, seed, output_dir, None, context_source, n_contexts)
    _check_boot_count(n_boot, default=1000)
    _check_permutation_count(n_permutations, default=999)
    next_word_prompts.check_next_word_templates(next_word_templates, "next_word_templates")
    next_word_prompts.check_next_word_lexicons(next_word_lexicons, "next_word_lexicons")
    bold_link.check_link(model, layer=layer, correction=correction, n_boot=n_boot, seed=seed,
                    n_permutations=n_permutations, layers=facts.n_states)


@_notebook("12_erasure")
def _check_erasure_run(*, model="smollm2-135m-instruct", dtype=None, context_source="generated", dictionary_path=None,
                       n_contexts=5, seed=0, layer_step=3, n_boot=1000, limit=None, output_dir=None,
                       long_form_erasure=False, long_form_instructions=None,
                       long_form_n_samples=erasure_long_form.ERASED_SAMPLES,
                       long_form_max_new_tokens=long_form_measure.MAX_NEW_TOKENS) -> None:
    """Notebook 12's parameters: ``long_form_erasure`` (True or False) and the long form's instructions, samples and
    length (``erasure_long_form.check_long_form_erasure``: chapter 11's rule), the notebook's floor for ``n_boot``,
    the space it projects the names on (``space.check_space``) with the warmth and competence axes the erasure reads,
    then ``erasure.check_erasure`` (a decoder it can hook, ``layer_step``, ``limit``)."""
    if not isinstance(long_form_erasure, bool):
        raise ParameterError(f"long_form_erasure must be True or False, got {long_form_erasure!r}")
    erasure_long_form.check_long_form_erasure(long_form_instructions, long_form_n_samples, long_form_max_new_tokens,
                                              prefix="long_form_")
    _check_dtype(dtype)
    _space_parameters(model, dictionary_path, seed, output_dir, None, context_source, n_contexts)
    try:
        projection.space_groups(_dictionary(dictionary_path), "warmth_competence")
    except ParameterError as exc:
        raise ParameterError(f"dictionary_path: {dictionary_path or 'the seed dictionary'} cannot give the warmth "
                             f"and competence axes chapter 12 reads the names on ({exc}); give a dictionary with "
                             "sociability, morality, ability and agency") from None
    _check_boot_count(n_boot, default=1000)
    erasure.check_erasure(model, layer_step=layer_step, n_boot=n_boot, seed=seed, limit=limit)


@_notebook("09_cross_model")
def _check_cross_model(*, results_dir=None, models=(), output_dir=None) -> None:
    """Notebook 09's parameters: a results folder that exists, model ids as a list of strings."""
    if results_dir is not None:
        if not isinstance(results_dir, (str, Path)):
            raise ParameterError(f"results_dir must be None or a folder path, got {results_dir!r}")
        if not Path(results_dir).is_dir():
            raise ParameterError(f"results_dir: {results_dir} is not a folder")
    if isinstance(models, (str, Path)) or not isinstance(models, Sequence) \
            or not all(isinstance(m, str) and m for m in models):
        raise ParameterError(f"models must be a list of model ids (result folder names), got {models!r}")
    _check_output_dir(output_dir)


@_notebook("10_robustness")
def _check_robustness(*, model="smollm2-135m-instruct", dtype=None, populations=("names", "terms"), sources=None,
                      templates=None, dictionary_path=None, n_contexts=5, n_permutations=200, n_perm_test=2000, seed=0,
                      alpha=0.05, output_dir=None, limit=None, term_limit=None) -> None:
    """Notebook 10's parameters (``sources=None``: every registered context source)."""
    _check_dtype(dtype)
    _sources_space_parameters(model, dictionary_path, seed, output_dir, limit, n_contexts, sources)
    _check_populations(populations)
    check_template_list(templates)
    _check_permutation_count(n_permutations, default=200)
    _check_permutation_count(n_perm_test, "n_perm_test", default=2000)
    check_positive_int(term_limit, "term_limit", allow_none=True)
    if not is_number(alpha) or not 0 < alpha < 1:
        raise ParameterError(f"alpha must be a number in (0, 1), got {alpha!r}")
