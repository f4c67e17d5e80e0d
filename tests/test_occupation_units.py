"""The occupation table's rules on the audit's real selection: duplicate keys, the group conflict, the kinds."""

from __future__ import annotations

import itertools
import json

import pandas as pd
import pytest

from bias_utils.audit import bold, replication
from bias_utils.audit import occupation_units as ou
from bias_utils.audit.bold_prompts import AUDIT_GROUPS, FEMALE_GROUP, MALE_GROUP, load_audit_selection
from bias_utils.core import data
from bias_utils.core.errors import ParameterError
from bias_utils.core.wordnet import wordnet


@pytest.fixture(scope="module")
def selection():
    return load_audit_selection()


@pytest.fixture(scope="module")
def units(selection):
    return ou.unit_table(selection)


@pytest.fixture(scope="module")
def raw_sets():
    """(group, key) -> set of prompt texts, read straight from the audit's two prompt files."""
    sets: dict[tuple[str, str], set[str]] = {}
    for group in AUDIT_GROUPS:
        raw = json.loads(data.resolve(f"audit_{group}_prompts").read_text(encoding="utf-8"))
        for occupations in raw.values():
            for key, prompts in occupations.items():
                sets.setdefault((group, key), set()).update(prompts)
    return sets


def _identical_pairs(raw_sets, same_group: bool) -> set[frozenset]:
    by_set: dict[frozenset, list] = {}
    for gk, prompts in raw_sets.items():
        by_set.setdefault(frozenset(prompts), []).append(gk)
    return {frozenset((a, b)) for keys in by_set.values() for a, b in itertools.combinations(keys, 2)
            if (a[0] == b[0]) == same_group}


def _row(units, key, group=None):
    rows = units[(units["key"] == key) & ((units["group"] == group) if group else True)]
    assert len(rows) == 1, (key, group, len(rows))
    return rows.iloc[0]


def test_one_row_per_group_and_key(units, raw_sets):
    assert list(units.columns) == ou._UNIT_COLUMNS
    assert set(zip(units["group"], units["key"])) == set(raw_sets)
    assert len(units) == len(raw_sets) == 224
    distinct = {gk: len(p) for gk, p in raw_sets.items()}
    assert all(distinct[(g, k)] == n for g, k, n in zip(units["group"], units["key"], units["n_distinct_prompts"]))


def test_every_pair_of_keys_with_identical_prompts_is_merged(units, raw_sets):
    expected = _identical_pairs(raw_sets, same_group=True)
    merged = {frozenset((a, b))
              for _, unit in units.groupby(["group", "unit"])
              for a, b in itertools.combinations(zip(unit["group"], unit["key"]), 2)}
    assert merged == expected
    # the pairs the issue names are among them
    assert frozenset({(FEMALE_GROUP, "Registered_Nurse"), (FEMALE_GROUP, "Registered_nurse")}) in merged
    assert frozenset({(FEMALE_GROUP, "Occupational_Therapist"), (FEMALE_GROUP, "Occupational_therapist")}) in merged
    # each merged key points at the unit's one canonical key, which points nowhere
    for _, unit in units.groupby(["group", "unit"]):
        canonical = unit[unit["duplicate_of"] == ""]
        assert len(canonical) == 1
        assert set(unit.loc[unit["duplicate_of"] != "", "duplicate_of"]) <= set(canonical["key"])
        assert unit["unit"].iloc[0] == canonical["noun"].iloc[0]


def test_the_group_conflict_is_named_and_left_out(units, raw_sets):
    across = _identical_pairs(raw_sets, same_group=False)
    assert across == {frozenset({(MALE_GROUP, "Social_Worker"), (FEMALE_GROUP, "Social_worker")})}
    conflicted = units[units["conflict"] != ""]
    assert set(zip(conflicted["group"], conflicted["key"])) == set(next(iter(across)))
    assert _row(units, "Social_Worker")["conflict"] == f"{FEMALE_GROUP}/Social_worker"
    assert _row(units, "Social_worker")["conflict"] == f"{MALE_GROUP}/Social_Worker"
    assert not conflicted["primary"].any()
    assert '"social worker"' in ou.describe_units(units)


def test_unambiguous_keys_have_their_kind(units):
    glossaries = units[units["key"].str.startswith("Glossary_")]
    assert len(glossaries) == 6 and (glossaries["kind"] == "list").all()
    assert (glossaries["head"] == "glossary").all()
    expected = {"International_Nurses_Day": "event", "Midwife": "person", "Tailor": "person",
                "Blacksmith": "person", "Civil_engineering": "field", "Nanoengineering": "field",
                "Nursing_care_plan": "other", "Nurse_Licensure_Compact": "other", "Nurse_registry": "list",
                "Wound_care": "field", "Nurse_education": "field", "Construction": "field", "Biomechanics": "field",
                "Woodworkers": "person", "Road_foreman_of_engines": "person", "Tool_and_die_maker": "person"}
    assert {k: _row(units, k)["kind"] for k in expected} == expected
    # whatever WordNet says about their modifiers, "... engineering" keys are fields and "... engineer" persons
    plain = ~units["key"].str.startswith("Glossary_")
    engineering = units[plain & units["key"].str.lower().str.endswith("engineering")]
    engineer = units[units["key"].str.lower().str.endswith("engineer")]
    assert len(engineering) > 90 and (engineering["kind"] == "field").all()
    assert len(engineer) >= 8 and (engineer["kind"] == "person").all()


def test_kind_rules_say_how_each_kind_was_decided(units):
    assert _row(units, "Midwife")["kind_rule"].startswith("WordNet: 'midwife' has a noun.person sense")
    assert _row(units, "Nanoengineering")["kind_rule"].startswith("suffix rule: '-engineering' names a field")
    assert _row(units, "Nurse_licensure")["kind_rule"].startswith("override: ")
    assert units["kind_rule"].str.match(r"(WordNet|suffix rule|override): ").all()
    assert set(units["kind"]) <= set(ou._KINDS)


def test_heads():
    assert ou._head_noun("Glossary_of_civil_engineering") == ("glossary of civil engineering", "glossary")
    assert ou._head_noun("Road_foreman_of_engines")[1] == "foreman"
    assert ou._head_noun("Woodworkers") == ("woodworkers", "woodworker")
    assert ou._head_noun("Psychiatric-mental_health_nurse_practitioner")[1] == "practitioner"
    with pytest.raises(ParameterError, match="key"):
        ou._head_noun("__")


def test_overrides_are_only_for_heads_no_rule_settles():
    """An override is allowed where WordNet 3.0 has no such noun and no suffix applies, each with a reason."""
    for head, (kind, reason) in ou._HEAD_OVERRIDES.items():
        assert kind in ou._KINDS and reason
        assert not wordnet().lemmas(head, "n")
        assert not any(head.endswith(suffix) for suffix, _ in ou._SUFFIX_KINDS)
    assert ou._key_kind("xyzzyq") == ("other", "no rule: 'xyzzyq' is not in WordNet and has no known suffix")
    assert ou._key_kind("moldmakers")[0] == "person"  # a plural WordNet lacks, by its singular's suffix


def test_primary_units_are_unique_conflict_free_person_nouns(units):
    primary = units[units["primary"]]
    assert (primary["kind"] == "person").all() and (primary["unit_kind"] == "person").all()
    assert (primary["conflict"] == "").all() and (primary["duplicate_of"] == "").all()
    assert not primary.duplicated(["group", "unit"]).any()
    eligible = units[(units["unit_kind"] == "person") & (units["conflict"] == "")]
    assert set(zip(primary["group"], primary["unit"])) == set(zip(eligible["group"], eligible["unit"]))


def test_a_unit_with_a_field_key_is_a_field(units):
    """Security_engineer's prompts are the article on security engineering, which Security_engineering holds."""
    engineer, engineering = _row(units, "Security_engineer"), _row(units, "Security_engineering")
    assert (engineer["kind"], engineering["kind"]) == ("person", "field")
    assert engineer["unit"] == engineering["unit"] == "security engineering"
    assert engineer["unit_kind"] == "field" and engineer["duplicate_of"] == "Security_engineering"
    assert not engineer["primary"] and not engineering["primary"]


def test_unit_counts_add_up_to_the_table(units, raw_sets):
    counts = ou.unit_counts(units)
    assert list(counts.columns) == ou._COUNT_COLUMNS
    assert len(counts) == 2 * len(ou._KINDS)
    assert counts["keys"].sum() == len(units)
    assert counts["units"].sum() == units[["group", "unit"]].drop_duplicates().shape[0]
    assert counts["primary_units"].sum() == units["primary"].sum()
    per_set = pd.Series([(g, frozenset(p)) for (g, _), p in raw_sets.items()]).value_counts()
    assert counts["duplicate_keys"].sum() == (units["duplicate_of"] != "").sum() == (per_set - 1).sum()
    assert (counts["keys"] == counts["units"] + counts["duplicate_keys"]).all()
    assert counts["conflict_units"].sum() == 2
    by_kind = units.groupby(["group", "kind"]).size()
    for row in counts.itertuples():
        assert row.keys == by_kind.get((row.group, row.kind), 0)
    assert counts.groupby("group")["keys"].sum().to_dict() == {MALE_GROUP: 172, FEMALE_GROUP: 52}


def test_describe_units_is_generated_from_the_counts(units):
    counts = ou.unit_counts(units)
    text = ou.describe_units(units)
    assert f"{len(units)} BOLD keys" in text
    assert f"{counts['units'].sum()} units" in text
    assert f"{counts['primary_units'].sum()} person-noun units" in text
    assert f"{counts['duplicate_keys'].sum()} keys hold exactly the prompts" in text
    for kind in ou._KINDS:
        n = counts.loc[counts["kind"] == kind, "keys"].sum()
        assert (str(n) in text) if n else True


def test_primary_selection_keeps_each_distinct_prompt_of_a_primary_unit_once(selection, units):
    before = selection.copy()
    primary = ou._primary_selection(selection, units)
    pd.testing.assert_frame_equal(selection, before)  # the published selection is left as it is
    assert list(primary.columns[:2]) == ["group", "unit"]
    assert not primary.duplicated(["group", "unit", "prompt"]).any()
    canonical = units[units["primary"]]
    assert set(zip(primary["group"], primary["occupation"])) == set(zip(canonical["group"], canonical["key"]))
    sizes = primary.groupby(["group", "unit"]).size()
    assert all(sizes[(g, u)] == n for g, u, n in zip(canonical["group"], canonical["unit"],
                                                      canonical["n_distinct_prompts"]))
    assert sizes[(FEMALE_GROUP, "midwife")] == 47  # 50 prompts, 47 distinct texts
    assert "Registered_nurse" not in set(primary["occupation"])
    assert "social worker" not in set(primary["unit"])


def test_a_user_mapping_with_one_prompt_set_in_both_groups():
    mapping = {"Registered_Nurse": "women", "Registered_nurse": "men", "Midwife": "women", "Plumber": "men"}
    units = ou.unit_table(mapping)
    assert _row(units, "Registered_Nurse")["conflict"] == "men/Registered_nurse"
    assert _row(units, "Registered_nurse")["conflict"] == "women/Registered_Nurse"
    assert set(units.loc[units["primary"], "unit"]) == {"midwife", "plumber"}
    assert '"registered nurse"' in ou.describe_units(units)
    assert set(ou._primary_selection(mapping, units)["unit"]) == {"midwife", "plumber"}


def test_a_selection_with_one_key_in_both_groups(selection):
    midwife = selection[selection["occupation"] == "Midwife"]
    both = pd.concat([midwife, midwife.assign(group=MALE_GROUP),
                      selection[selection["occupation"] == "Tailor"]], ignore_index=True)
    units = ou.unit_table(both)
    assert len(units) == 3
    assert _row(units, "Midwife", MALE_GROUP)["conflict"] == f"{FEMALE_GROUP}/Midwife"
    assert _row(units, "Midwife", FEMALE_GROUP)["conflict"] == f"{MALE_GROUP}/Midwife"
    assert units.loc[units["primary"], "key"].tolist() == ["Tailor"]


def test_case_variants_with_different_prompts_stay_two_units(selection):
    nurse = selection[selection["occupation"] == "Registered_Nurse"]
    variant = selection[selection["occupation"] == "Registered_nurse"].head(4)
    units = ou.unit_table(pd.concat([nurse, variant], ignore_index=True))
    assert units["unit"].tolist() == ["registered nurse", "registered nurse (Registered_nurse)"]
    assert units["primary"].all()
    overlaps = ou._partial_overlaps(pd.concat([nurse, variant], ignore_index=True))
    assert overlaps[["key", "other_key", "n_shared"]].values.tolist() == [["Registered_Nurse", "Registered_nurse", 4]]


def test_partial_overlaps_on_the_audit(raw_sets):
    expected = {frozenset((a, b)) for a, b in itertools.combinations(raw_sets, 2)
                if raw_sets[a] & raw_sets[b] and raw_sets[a] != raw_sets[b]}
    overlaps = ou._partial_overlaps("audit")
    assert list(overlaps.columns) == ou._OVERLAP_COLUMNS
    found = {frozenset({(r.group, r.key), (r.other_group, r.other_key)}) for r in overlaps.itertuples()}
    assert found == expected
    for r in overlaps.itertuples():
        a, b = raw_sets[(r.group, r.key)], raw_sets[(r.other_group, r.other_key)]
        assert (r.n_shared, r.n_distinct_prompts, r.other_n_distinct_prompts) == (len(a & b), len(a), len(b))


def test_bad_input_names_the_parameter(selection, units):
    with pytest.raises(ParameterError, match="^units"):
        ou._primary_selection(selection, units[units["group"] == MALE_GROUP])
    with pytest.raises(ParameterError, match="^units"):
        ou.unit_counts(units.drop(columns="primary"))
    with pytest.raises(ParameterError, match="^selection"):
        ou.unit_table(selection.iloc[:0])


def test_excluded_completions_are_counted_by_reason_with_their_gendered_words(units):
    """On the published completions: every completion the primary analysis leaves out is in the table once, under the
    first reason that holds; those left out as a resample (a duplicate key, a second category, a repeated prompt)
    are exactly the person-noun, conflict-free completions whose prompt text a kept completion of their group
    already samples (recomputed here from the texts), and their gendered words are counted."""
    metrics = bold.completion_metrics(ou.annotate(replication.load_published_completions(), "audit", units))
    excluded = ou.excluded_completions(metrics, units)
    left_out = metrics[~metrics["in_primary"]]
    assert excluded["n_completions"].sum() == len(left_out)
    assert (excluded["male_words"].sum(), excluded["female_words"].sum()) == (
        left_out["male_words"].sum(), left_out["female_words"].sum())
    assert list(excluded.columns) == ou._EXCLUDED_COLUMNS and set(excluded["reason"]) <= set(ou._EXCLUSIONS)
    info = units.set_index(["group", "key"])
    kind = info.loc[list(zip(left_out["group"], left_out["occupation"])), "unit_kind"].to_numpy()
    conflict = info.loc[list(zip(left_out["group"], left_out["occupation"])), "conflict"].to_numpy() != ""
    kept = set(zip(metrics.loc[metrics["in_primary"], "group"], metrics.loc[metrics["in_primary"], "prompt"]))
    resampled = left_out[(kind == "person") & ~conflict]
    assert all(pair in kept for pair in zip(resampled["group"], resampled["prompt"]))
    again = excluded[excluded["reason"].isin(["duplicate key", "second category", "repeated prompt"])]
    assert again["n_completions"].sum() == len(resampled)
    assert (again["male_words"] + again["female_words"]).sum() == resampled["gendered_words"].sum()
    assert excluded.loc[excluded["reason"] == "not a person noun", "n_completions"].sum() == int(
        (kind != "person").sum() - ((kind != "person") & conflict).sum())
    sentence = ou.describe_excluded(excluded, len(metrics))
    assert sentence.startswith(f"The primary analysis leaves out {len(left_out):,} of the {len(metrics):,} "
                               "completions, each for the first reason that holds: ")
    for reason, rows in excluded.groupby("reason"):
        n, keys = int(rows["n_completions"].sum()), int(rows["n_keys"].sum())
        assert (f"{n} completion{'s' if n != 1 else ''} of {keys} key{'s' if keys != 1 else ''} for "
                f"{ou._EXCLUSION_NAMES[reason]} ") in sentence
