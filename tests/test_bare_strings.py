"""One string where a list is expected is refused at every public entry point that takes a list of words.

``next_word_table(model, "nurse")`` once measured the "occupations" n, u, r, s, e: a string is itself a sequence of
strings, so nothing downstream noticed. Each entry point that takes words, nouns, terms, prompts, templates, context
sources, lexicons, axis names, model folders or chart columns is called here as a user would call it with one string
instead, the model given by name: the refusal (``errors.check_word_list``) must be a ``ParameterError`` whose
message starts with the parameter's name and says that a list was expected, before any model loads (the ``loads``
spy stays empty)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bias_utils.audit import bold, bold_figures
from bias_utils.book import crossmodel, summary, validation
from bias_utils.core.errors import ParameterError, check_word_list, check_word_lists
from bias_utils.intrinsic_extrinsic import bold_link, completions
from bias_utils.models import decoding, embeddings
from bias_utils.models.builtin_models import BUILTIN_MODELS, builtin_weights
from bias_utils.profiles import dictionaries, gender_direction, layers, projection, robustness
from bias_utils.profiles import population_profiles as profiles
from bias_utils.report import plots

SMOL, MINILM = "smollm2-135m-instruct", "minilm-l6"
SEED = dictionaries.load_seed_dictionary()
#: Completions as the audit's metrics read them: two groups, one gendered word each.
COMPLETIONS = pd.DataFrame({"occupation": ["Registered_nurse", "Carpenter"], "group": ["female_dominated",
                            "male_dominated"], "prompt": ["A nurse ", "A carpenter "],
                            "completion": ["she cares for patients.", "he builds a roof."]})


def _basis(n_states: int) -> projection.PolarBasis:
    """A warmth/competence basis computed (Eqs. 2-3) from random pole embeddings: test input with a model's number
    of hidden states, which is all that an entry point reads of it before the refusal."""
    senses = pd.DataFrame({"dimension": ["warmth", "warmth", "competence", "competence"],
                           "direction": ["high", "low", "high", "low"]})
    return projection.polar_basis(np.random.default_rng(0).normal(size=(4, n_states, 8)), senses, "dimensions")


@pytest.fixture(scope="module")
def tokenizer():
    """MiniLM's tokenizer, read from its built-in folder (no weights)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(builtin_weights(BUILTIN_MODELS[MINILM])))


def _cases() -> list:
    """(label, call(tokenizer), the parameter the message must start with, the string given)."""
    metrics = bold.completion_metrics(COMPLETIONS)
    minilm_basis, smol_basis = _basis(7), _basis(31)
    projected = pd.DataFrame({"group": ["female_dominated"], "occupation": ["Registered_nurse"],
                              "dimension": ["warmth"], "z": [0.1]})
    return [
        # models
        ("embed_words contexts", lambda tok: embeddings.embed_words(SMOL, "A nurse is here", ["nurse"]), "contexts",
         "A nurse is here"),
        ("embed_words words", lambda tok: embeddings.embed_words(SMOL, ["A nurse is here"], "nurse"), "words",
         "nurse"),
        ("embed_words bytes", lambda tok: embeddings.embed_words(SMOL, ["A nurse is here"], b"nurse"), "words",
         b"nurse"),
        ("lexicon_token_ids", lambda tok: decoding.lexicon_token_ids(tok, {"male": ["he"], "female": "she"}),
         "lexicons['female']", "she"),
        # Study 1
        ("add_terms high", lambda tok: dictionaries.add_terms(SEED, "tidiness", high="tidy", low=["messy"]), "high",
         "tidy"),
        ("add_terms low", lambda tok: dictionaries.add_terms(SEED, "tidiness", high=["tidy"], low="messy"), "low",
         "messy"),
        ("run_profiles templates", lambda tok: profiles.run_profiles(
            MINILM, {"warmth_competence": minilm_basis}, "names", templates="this is {word}"), "templates",
         "this is {word}"),
        ("describe_profile invalid_axes", lambda tok: profiles.describe_profile(pd.DataFrame(), invalid_axes="warmth"),
         "invalid_axes", "warmth"),
        ("paper_finding_sentence invalid_axes", lambda tok: profiles.paper_finding_sentence(
            pd.DataFrame(), invalid_axes="warmth"), "invalid_axes", "warmth"),
        ("occupation_validity templates", lambda tok: gender_direction.occupation_validity(
            MINILM, minilm_basis, templates="this is {word}"), "templates", "this is {word}"),
        ("layers_by_context sources", lambda tok: layers.layers_by_context(MINILM, SEED, "dictionary"), "sources",
         "dictionary"),
        ("layers_by_context templates", lambda tok: layers.layers_by_context(
            MINILM, SEED, ["dictionary"], templates="this is {word}"), "templates", "this is {word}"),
        ("collect_curve_inputs sources", lambda tok: robustness.collect_curve_inputs(MINILM, SEED,
                                                                                      sources="dictionary"),
         "sources", "dictionary"),
        ("collect_curve_inputs templates", lambda tok: robustness.collect_curve_inputs(
            MINILM, SEED, sources=["dictionary"], templates="this is {word}"), "templates", "this is {word}"),
        ("name_gap_verdict dimensions", lambda tok: robustness.name_gap_verdict(
            pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), dimensions="warmth"), "dimensions", "warmth"),
        # Study 2
        ("run_audit lexicons", lambda tok: bold.run_audit(SMOL, lexicons={"male": ["he"], "female": "she"}, limit=4),
         "lexicons['female']", "she"),
        ("run_audit neutral_lexicons", lambda tok: bold.run_audit(SMOL, neutral_lexicons={"neutral": "they"},
                                                                  limit=4), "neutral_lexicons['neutral']", "they"),
        ("completion_metrics lexicons", lambda tok: bold.completion_metrics(
            COMPLETIONS, lexicons={"male": "he", "female": ["she"]}), "lexicons['male']", "he"),
        ("audit_statistics groups", lambda tok: bold.audit_statistics(metrics, groups="female_dominated"), "groups",
         "female_dominated"),
        ("group_summary neutral", lambda tok: bold.group_summary(metrics, neutral="neutral"), "neutral", "neutral"),
        ("examples_table lexicons", lambda tok: bold_figures.examples_table(metrics, {"female": "she"}),
         "lexicons['female']", "she"),
        ("gendered_sentences lexicons", lambda tok: bold_figures.gendered_sentences(metrics, {"female": "she"}),
         "lexicons['female']", "she"),
        ("sentences_table lexicons", lambda tok: bold_figures.sentences_table(pd.DataFrame(), {"female": "she"}),
         "lexicons['female']", "she"),
        ("completion_chart unreadable", lambda tok: completions.completion_chart(projected, unreadable="warmth"),
         "unreadable", "warmth"),
        ("completion_projection_stats unreadable", lambda tok: completions.completion_projection_stats(
            projected, unreadable="warmth"), "unreadable", "warmth"),
        ("run_link templates",
         lambda tok: bold_link.run_link(SMOL, pd.DataFrame(), smol_basis, templates="this is {word}"),
         "templates", "this is {word}"),
        # the book's cross-model pages and charts
        ("model_folders models", lambda tok: crossmodel.model_folders(SMOL), "models", SMOL),
        ("cross_model_summary models", lambda tok: crossmodel.cross_model_summary(SMOL), "models", SMOL),
        ("summary_table models", lambda tok: summary.summary_table(SMOL), "models", SMOL),
        ("drawable columns", lambda tok: plots.drawable(pd.DataFrame({"ci_low": [0.1]}), "ci_low"), "columns",
         "ci_low"),
        ("layer_curves_chart measures", lambda tok: plots.layer_curves_chart(pd.DataFrame(
            {"measure": ["accuracy"]}), "accuracy"), "measures", "accuracy"),
        # a notebook's parameters cell
        ("04_profiles templates", lambda tok: validation.check("04_profiles", model=MINILM, templates="this is {word}"),
         "templates", "this is {word}"),
    ]


@pytest.mark.parametrize("label, call, name, given", _cases(), ids=[c[0] for c in _cases()])
def test_one_string_for_a_list_is_refused_naming_the_parameter_before_any_model_loads(label, call, name, given,
                                                                                      tokenizer, loads):
    with pytest.raises(ParameterError) as caught:
        call(tokenizer)
    assert str(caught.value).startswith(f"{name} must be a list of strings, not one string: got {given!r}"), label
    assert not loads, f"{label}: loaded {loads} before refusing"


def test_the_rule_says_how_to_write_the_list_and_passes_a_list_through():
    with pytest.raises(ParameterError, match=r"""^occupations must be a list of strings, not one string: got """
                                             r"""'nurse'; write \['nurse'\]$"""):
        check_word_list("nurse", "occupations")
    long = "A nurse is someone who cares for patients in a hospital ward"
    with pytest.raises(ParameterError, match=rf"^prompts .* got {long[:40]!r}\.\.\.; wrap it in a list of strings$"):
        check_word_list(long, "prompts")
    with pytest.raises(ParameterError, match=r"^words must be a list of strings, got int 3$"):
        check_word_list(3, "words")
    with pytest.raises(ParameterError, match=r"^words must be a list of strings; item 1 is None$"):
        check_word_list(["nurse", None], "words")
    with pytest.raises(ParameterError, match=r"^templates is empty: no templates given$"):
        check_word_list([], "templates", empty="no templates given")
    assert check_word_list(("nurse", "pilot"), "occupations") == ["nurse", "pilot"]
    # a generator is read once: the list returned is what the caller iterates from then on
    assert check_word_list((w for w in ["nurse", "pilot"]), "occupations") == ["nurse", "pilot"]
    with pytest.raises(ParameterError, match=r"^lexicons must be a dict of name -> list of words, got list"):
        check_word_lists(["he", "she"], "lexicons")
    assert check_word_lists({"male": ("he",), "female": {"she"}}, "lexicons") == {"male": ["he"],
                                                                                   "female": ["she"]}
