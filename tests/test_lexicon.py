"""bias_utils.core.lexicon: the audit's lexicons and tokenisation, counts, conventions."""

import numpy as np
import pandas as pd
import pytest

from bias_utils.core import lexicon


def test_audit_lexicons_are_the_published_13_plus_13():
    # Paper section 4.5, verbatim.
    assert lexicon.MALE_WORDS == tuple("he him his himself man men male boy father son brother guy gentleman".split())
    assert lexicon.FEMALE_WORDS == tuple("she her hers herself woman women female girl mother daughter sister gal "
                                         "lady".split())
    neutral = set(lexicon._NEUTRAL_WORDS)
    assert not neutral & (set(lexicon.MALE_WORDS) | set(lexicon.FEMALE_WORDS))
    assert {"they", "them", "their", "themselves", "theirs", "person", "people", "individual"} <= neutral


def test_tokenisation_is_lowercase_word_boundary():
    assert lexicon.tokenize("A blacksmith's forge: he/she HEATS metal_work, 3D!") == [
        "a", "blacksmith", "s", "forge", "he", "she", "heats", "metal_work", "3d"]
    assert lexicon.tokenize("") == []
    with pytest.raises(TypeError, match="expected a string"):
        lexicon.tokenize(None)


def test_counts_per_lexicon_and_neutral_beside():
    text = "He told her that his sister and their people, the Men, were here; Theirs too."
    got = lexicon._count_words(text, {**lexicon.GENDER_LEXICONS, **lexicon.NEUTRAL_LEXICONS})
    assert got == {"male": ["he", "his", "men"], "female": ["her", "sister"], "neutral": ["their", "people", "theirs"]}
    t = lexicon.count_table([text, ""], lexicon.GENDER_LEXICONS)
    assert t.loc[0, ["n_words", "male_words", "female_words"]].tolist() == [15, 3, 2]
    assert t.loc[1, ["n_words", "male_words", "female_words", "male_words_list"]].tolist() == [0, 0, 0, ""]


def test_lexicon_validation_names_the_problem():
    with pytest.raises(ValueError, match="'male'.*is empty"):
        lexicon.validate_lexicons({"male": []})
    with pytest.raises(ValueError, match="'non-binary' is not a single"):
        lexicon.validate_lexicons({"nb": ["non-binary"]})
    with pytest.raises(ValueError, match="'he' is in both"):
        lexicon.validate_lexicons({"a": ["he"], "b": ["He"]})
    with pytest.raises(ValueError, match="string"):
        lexicon.validate_lexicons({"a": "he"})
    # user lexicons with any names and more than two groups work
    got = lexicon._count_words("Ze and they met him", {"m": ["him"], "nb": ["ze"], "pl": ["they"]})
    assert {k: len(v) for k, v in got.items()} == {"m": 1, "nb": 1, "pl": 1}


def test_male_proportion_conventions():
    m, f = pd.Series([2, 0, 0, 1]), pd.Series([2, 3, 0, 0])
    np.testing.assert_allclose(lexicon.male_proportion(m, f), [0.5, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(lexicon.male_proportion(m, f, zero_as=None), [0.5, 0.0, np.nan, 1.0])
