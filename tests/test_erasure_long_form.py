"""intrinsic_extrinsic.erasure_long_form: the long form under chapter 12's erasure. The conditions it writes, the paired
statistics on planted long forms (a planted effect found beyond its control, a planted null not), the reading of a
planted table, and on SmolLM2 that the hooks are on while it writes (an identity eraser writes the unhooked texts, a
random subspace other ones) and that the unhooked texts are read from chapter 11's cache."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from bias_utils.audit import long_form as lf
from bias_utils.core import tables
from bias_utils.core.errors import ParameterError
from bias_utils.intrinsic_extrinsic import erasers
from bias_utils.intrinsic_extrinsic import erasure_long_form as elf
from bias_utils.profiles.populations import load_populations, occupation_shares

MODEL = "smollm2-135m-instruct"


def _values(seed: int = 0) -> pd.DataFrame:
    """The 60 BLS occupations with their group, share of women and a next-word log-ratio that follows it."""
    shares = occupation_shares()
    group = {noun: g for g, nouns in load_populations("occupations").items() for noun in nouns}
    rng = np.random.default_rng(seed)
    bls = shares["bls_pct_female"].to_numpy(float)
    return pd.DataFrame({"occupation": shares["occupation"], "group": shares["occupation"].map(group),
                         "bls_pct_female": bls, "log_ratio": (bls - 50) / 20 + rng.normal(0, 0.5, len(bls))})


def _form(female_share: np.ndarray, gendered: np.ndarray, values: pd.DataFrame) -> SimpleNamespace:
    """A planted long form: per occupation its female share (NaN: no gendered word) and share of texts with one."""
    occupations = pd.DataFrame({"occupation": values["occupation"], "female_share": female_share,
                                "any_gendered_share": gendered})
    return SimpleNamespace(occupations=occupations,
                           texts=pd.DataFrame({lf.LONG_FORM_DEFINITION: ["planted"] * len(values)}))


def _planted(effect: str, seed: int, values: pd.DataFrame, layers=("15",)) -> dict:
    """Long forms whose female share follows the BLS share without erasure and under the random control, 80% of their
    texts with a gendered word; under LEACE, ``effect`` ``"null"``: drawn as the control is; ``"both"``: the share
    follows it not at all and 60% of the texts have a gendered word; ``"gendered"``: the share follows it, 30% of
    the texts have a gendered word."""
    rng = np.random.default_rng(seed)
    bls = values["bls_pct_female"].to_numpy(float) / 100
    n = len(bls)

    def follows():
        return np.clip(bls + rng.normal(0, 0.15, n), 0, 1)

    forms = {("none", "none"): _form(follows(), np.full(n, 0.8), values)}
    for layer in layers:
        leace = rng.uniform(0, 1, n) if effect == "both" else follows()
        gendered = {"null": 0.8, "both": 0.6, "gendered": 0.3}[effect]
        forms[("leace", layer)] = _form(leace, np.full(n, gendered), values)
        forms[("random", layer)] = _form(follows(), np.full(n, 0.8), values)
    return forms


def _rows(table: pd.DataFrame, erasure: str, layer: str) -> pd.DataFrame:
    return table[(table["erasure"] == erasure) & (table["layer"] == layer)].set_index("measure")


# --------------------------------------------------------------------------- the conditions


def test_the_plan_writes_each_state_the_chapter_reads_once_and_none_it_does_not_give():
    assert elf.plan("15", "30") == [("none", "none", "none"), ("leace", "15", "largest"), ("random", "15", "largest"),
                                    ("leace", "30", "named"), ("random", "30", "named")]
    assert elf.plan("15", "15") == [("none", "none", "none"), ("leace", "15", "both"), ("random", "15", "both")]
    assert elf.plan("15", None) == [("none", "none", "none"), ("leace", "15", "largest"), ("random", "15", "largest")]
    assert elf.plan(None, None) == [("none", "none", "none")]


def test_the_settings_are_chapter_11s_rules_and_none_is_the_biography(loads):
    assert elf.check_long_form_erasure() == (lf.INSTRUCTIONS[0],)
    assert elf.check_long_form_erasure(["About a {occupation}."], 2, 10) == ("About a {occupation}.",)
    for kwargs, name in (({"instructions": ["no slot"]}, "long_form_instructions"),
                         ({"n_samples": 0}, "long_form_n_samples"),
                         ({"max_new_tokens": 0}, "long_form_max_new_tokens")):
        with pytest.raises(ParameterError, match=rf"^{name}\b"):
            elf.check_long_form_erasure(**kwargs, prefix="long_form_")
    assert not loads


# --------------------------------------------------------------------------- the statistics


def test_the_changes_are_paired_on_the_occupations_with_a_share_in_every_condition():
    """An occupation without a gendered word in one condition of a state leaves that state's comparisons, not the
    other's; a change is its value minus the unhooked value on the same occupations; LEACE's difference from its
    control is the two changes' difference; the unhooked rows have no change interval."""
    values = _values()
    forms = _planted("both", 0, values, layers=("15", "30"))
    forms[("leace", "15")].occupations.loc[[0, 1], "female_share"] = np.nan
    forms[("none", "none")].occupations.loc[[2], "female_share"] = np.nan
    table = elf.long_form_erasure_table(forms, {"15": "largest", "30": "named"}, values, "m", n_boot=200, seed=0)
    assert list(table.columns) == list(tables.table(tables.NAMES.ERASURE_LONG_FORM).columns)
    assert len(table) == 5 * len(elf.LONG_FORM_MEASURES)
    none, at15, ctrl15, at30 = (_rows(table, e, lay) for e, lay in
                                (("none", "none"), ("leace", "15"), ("random", "15"), ("leace", "30")))
    assert none.loc["rho_bls", "n"] == 59 and at15.loc["rho_bls", "n"] == 57 and at30.loc["rho_bls", "n"] == 59
    assert at15.loc["any_gendered_share", "n"] == 60
    assert none["change"].eq(0).all() and none["ci_low"].isna().all()
    keep = [i for i in range(60) if i not in (0, 1, 2)]
    bls = values["bls_pct_female"].to_numpy(float)[keep]
    rho = lambda form: pd.Series(form.occupations["female_share"].to_numpy()[keep]).corr(  # noqa: E731
        pd.Series(bls), method="spearman")
    assert at15.loc["rho_bls", "value"] == pytest.approx(rho(forms[("leace", "15")]))
    assert at15.loc["rho_bls", "baseline"] == pytest.approx(rho(forms[("none", "none")]))
    rho15 = at15.loc["rho_bls"]
    assert rho15["change"] == pytest.approx(rho15["value"] - rho15["baseline"])
    assert at15.loc["rho_bls", "beyond_control"] == pytest.approx(at15.loc["rho_bls", "change"]
                                                                  - ctrl15.loc["rho_bls", "change"])
    assert ctrl15["beyond_control"].isna().all()
    female = (values["group"] == "female-majority").to_numpy()[keep]
    share = forms[("leace", "15")].occupations["female_share"].to_numpy()[keep]
    assert at15.loc["majority_gap", "value"] == pytest.approx(share[female].mean() - share[~female].mean())
    assert at15.loc["any_gendered_share", "change"] == pytest.approx(0.6 - 0.8)


def test_a_planted_effect_is_found_beyond_its_control_and_a_planted_null_is_not():
    """Simulated: 60 occupations whose long form follows the BLS share; under a planted LEACE that removes it the
    difference from the random control is below 0 in nearly every run, and under a LEACE drawn as its control is, the
    95% interval of the difference includes 0 about as often as it should."""
    values = _values()
    found = {"both": [], "null": []}
    for effect in found:
        for seed in range(60):
            table = elf.long_form_erasure_table(_planted(effect, seed, values), {"15": "largest"}, values, "m",
                                                n_boot=200, seed=seed)
            row = _rows(table, "leace", "15").loc["rho_bls"]
            found[effect].append(elf._shown(row))
    assert np.mean(np.array(found["both"]) == -1) >= 0.95
    # 95% intervals: a false "shown" in 5% of runs; 9 or more of 60 has probability about 0.01 (binomial)
    assert np.mean(np.array(found["null"]) != 0) <= 8 / 60


# --------------------------------------------------------------------------- the reading


def test_the_reading_says_plainly_whether_the_erasure_moved_the_long_form_beyond_its_control():
    """Planted tables: an effect at states 15 and 30 read as moving the long form beyond its control, in both measures,
    with no "not shown"; fewer gendered words alone read as moving it, the ρ as not shown; a null read as not shown,
    with the largest difference and where; a ρ of equal shares said not computed; a state chapter 12 did not give
    said; no state at all said."""
    values, model = _values(), "smollm2-135m-instruct--abcdef123456--fp32"
    moved = elf.long_form_erasure_table(_planted("both", 1, values, ("15", "30")), {"15": "largest", "30": "named"},
                                        values, model, n_boot=500, seed=0)
    text = elf.describe_long_form_erasure(moved, model, "", depth=30)
    assert "**Erasing the gender concept moves what smollm2-135m-instruct writes at length beyond its random " \
           "control.** How the female share of its gendered words follows the BLS share (ρ) moves the most at " \
           "hidden state" in text
    assert "LEACE at hidden state 15 of 30, 50% of the way up (where the next word moves most): the share of texts " \
           "with a gendered word goes from 80% to 60%, a change of −20 points (95% CI −20 to −20), where a random " \
           "subspace of the same rank changes it by 0 points (95% CI 0 to 0); LEACE beyond its control −20 points " \
           "(95% CI −20 to −20): it falls beyond its random control." in text
    assert "LEACE at hidden state 30 of 30, 100% of the way up (the state chapter 12's rule names)" in text
    assert text.count("LEACE beyond its control") == 4 and text.count("it falls beyond its random control") == 4
    assert "under 5 conditions" in text and "not shown" not in text
    assert "no named erasure" not in text and "no largest effect" not in text
    row = _rows(moved, "leace", "15").loc["rho_bls"]
    assert f"ρ with the BLS share, over the 60 occupations with a gendered word in all three conditions, goes from " \
           f"{elf.number_text(row['baseline'])} to {elf.number_text(row['value'])}" in text

    fewer = elf.long_form_erasure_table(_planted("gendered", 2, values), {"15": "both"}, values, "m", n_boot=500,
                                        seed=0)
    text = elf.describe_long_form_erasure(fewer, "m", "", depth=30)
    assert "**Erasing the gender concept moves what m writes at length beyond its random control.** How the female " \
           "share of its gendered words follows the BLS share (ρ) is not shown to move beyond the control at any " \
           "state read; the largest difference, at hidden state 15 of 30, 50% of the way up, is" in text
    assert "The share of its texts with a gendered word moves the most at hidden state 15 of 30, 50% of the way up: " \
           "LEACE's change minus the random subspace's is −50 points (95% CI −50 to −50)." in text

    null = elf.long_form_erasure_table(_planted("null", 3, values), {"15": "both"}, values, "m", n_boot=500, seed=0)
    text = elf.describe_long_form_erasure(null, "m", "", depth=30)
    row = _rows(null, "leace", "15").loc["rho_bls"]
    assert row["beyond_control_ci_low"] < 0 < row["beyond_control_ci_high"]
    assert "**No erasure is shown to move what m writes at length beyond its random control** (not shown is not " \
           "absent). How the female share of its gendered words follows the BLS share (ρ) is not shown" in text
    assert "(where the next word moves most, and the state chapter 12's rule names)" in text
    assert "it is not shown to move beyond its random control (not shown is not absent)" in text

    equal = _planted("null", 4, values)
    equal[("none", "none")].occupations["female_share"] = 1.0
    equal = elf.long_form_erasure_table(equal, {"15": "largest"}, values, "m", n_boot=200, seed=0)
    text = elf.describe_long_form_erasure(equal, "m")
    assert "ρ with the BLS share cannot be compared over the 60 occupations with a gendered word in all three " \
           "conditions" in text
    assert "How the female share of its gendered words follows the BLS share (ρ) cannot be compared with the control " \
           "at any state read." in text
    assert "No state meets chapter 12's rule, so there is no named erasure to write under." in text
    assert elf.describe_long_form_erasure(pd.DataFrame(columns=elf._COLUMNS), "m").startswith(
        "Chapter 12 gives no state to write m's long form under")


def test_texts_that_read_as_broken_to_the_unhooked_model_are_flagged_beside_the_erasure():
    """Planted nats per token: LEACE's texts at state 15 read 2 nats per token more surprising than the unhooked and
    the random subspace's texts: the table carries the change over every occupation and the reading flags it; where
    LEACE's texts read as its control's, no flag; a table without the measure says nothing of it."""
    values = _values()
    forms = _planted("gendered", 5, values)
    rng = np.random.default_rng(5)
    plain = {c: pd.Series(3.0 + rng.normal(0, 0.3, 60), index=values["occupation"]) for c in forms}
    broken = {**plain, ("leace", "15"): plain[("leace", "15")] + 2.0}
    table = elf.long_form_erasure_table(forms, {"15": "both"}, values, "m", n_boot=500, seed=0, nats=broken)
    row = _rows(table, "leace", "15").loc["text_nats"]
    assert row["n"] == 60 and row["value"] == pytest.approx(broken[("leace", "15")].mean())
    assert row["beyond_control"] == pytest.approx(row["value"] - _rows(table, "random", "15").loc["text_nats", "value"])
    assert row["beyond_control_ci_low"] > 1.5
    text = elf.describe_long_form_erasure(table, "m", "", depth=30)
    assert (f"To the unhooked model, LEACE's texts read at {elf.number_text(row['value'])} nats per token, against "
            f"{elf.number_text(row['baseline'])} without erasure") in text
    assert "**LEACE's texts are shown to read as more broken than its control's**" in text
    same = elf.long_form_erasure_table(forms, {"15": "both"}, values, "m", n_boot=500, seed=0, nats=plain)
    assert "more broken" not in elf.describe_long_form_erasure(same, "m", "", depth=30)
    bare = elf.long_form_erasure_table(forms, {"15": "both"}, values, "m", n_boot=500, seed=0)
    assert _rows(bare, "leace", "15").loc["text_nats", ["value", "ci_low"]].isna().all()
    assert "nats per token" not in elf.describe_long_form_erasure(bare, "m", "", depth=30)


# --------------------------------------------------------------------------- with SmolLM2


@pytest.fixture(scope="module")
def smollm():
    from bias_utils.models.loading import load_model

    return load_model(MODEL)


@pytest.mark.slow
def test_the_hooks_are_on_while_it_writes_and_the_unhooked_texts_are_chapter_11s(smollm, isolated_cache):
    """SmolLM2, three occupations, one sample, twelve tokens: chapter 11's run (two instructions, two samples) fills the
    generation cache, and the unhooked condition reads its texts from it without writing a row; under an identity
    eraser at every state the texts are the unhooked ones; under a random subspace of 64 dimensions at state 15 they
    are other texts; the erased model's id is restored after; each eraser is cached under its own tag."""
    nouns = ["nurse", "carpenter", "engineer"]
    settings = {"instructions": lf.INSTRUCTIONS[:1], "n_samples": 1, "max_new_tokens": 12, "seed": 0, "n_boot": 100}
    chapter_11 = lf.long_form_table(smollm, nouns, instructions=lf.INSTRUCTIONS[:2], n_samples=2, max_new_tokens=12,
                                    progress=False)
    rows = list((isolated_cache / "generations").glob("*/rows.jsonl"))
    assert len(rows) == 1
    written = rows[0].read_text()
    identity = {h: erasers._identity_eraser(smollm.hidden_size) for h in range(1, smollm.n_layers + 1)}
    random = {15: erasers._random_eraser(smollm.hidden_size, 64, np.random.default_rng(0))}
    original = smollm.model_id
    forms = elf.texts_under(smollm, {("none", "none"): {}, ("identity", "all"): identity, ("random", "15"): random},
                            nouns, progress=False, **settings)
    assert rows[0].read_text() == written  # the unhooked texts: read, not written
    assert smollm.model_id == original
    texts = chapter_11.texts
    first = texts[(texts["instruction"] == lf.INSTRUCTIONS[0]) & (texts["sample"] == 0)]
    unhooked = forms[("none", "none")].texts
    assert unhooked["completion"].tolist() == first["completion"].tolist()
    assert forms[("identity", "all")].texts["completion"].tolist() == unhooked["completion"].tolist()
    erased = forms[("random", "15")].texts["completion"].tolist()
    assert sum(a != b for a, b in zip(erased, unhooked["completion"])) >= 2, erased
    tags = {elf.eraser_tag("identity", "all", identity), elf.eraser_tag("random", "15", random),
            elf.eraser_tag("random", "15", {15: erasers._random_eraser(smollm.hidden_size, 64,
                                                                        np.random.default_rng(1))})}
    assert len(tags) == 3
    folders = {p.parent.name for p in (isolated_cache / "generations").glob("*/rows.jsonl")}
    assert len(folders) == 3  # the unhooked model's, the identity's, the random subspace's
    # each text's nats per token, against one unbatched forward pass of transformers on it alone; words shuffled read
    # as more surprising on the whole
    nats = elf.text_nats(smollm, unhooked)
    assert list(nats.index) == nouns
    ids = smollm.tokenizer(unhooked["completion"].iloc[0], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = smollm.model(input_ids=ids).logits[0, :-1].double()
    direct = torch.nn.functional.cross_entropy(logits, ids[0, 1:]).item()
    assert nats.iloc[0] == pytest.approx(direct, rel=1e-4)
    shuffled = unhooked.assign(completion=[" ".join(np.random.default_rng(0).permutation(c.split()))
                                           for c in unhooked["completion"]])
    assert elf.text_nats(smollm, shuffled).mean() > nats.mean() + 0.5
