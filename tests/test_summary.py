"""The front page's findings: read from results tables, worded and drawn without hand-typed numbers."""

from __future__ import annotations

import pandas as pd
import pytest
import vl_convert as vlc

from bias_utils import bold, replication, summary
from bias_utils.axis_validity import AXIS_VALIDITY_TABLE
from bias_utils.crossmodel import BOLD_STATS_TABLE, PROFILE_STATS_TABLE, ROBUSTNESS_SUMMARY_TABLE
from bias_utils.results import write_table


def _profile_rows(warmth_g, competence_g, competence_p):
    """profile_stats rows for names and terms; the CIs are g ± 0.8 (a hand-made table)."""
    rows = []
    for population in ("names", "terms"):
        for dim, g, p in (("warmth", warmth_g, 0.01), ("competence", competence_g, competence_p)):
            rows.append({"population": population, "dimension": dim, "group_a": "female", "group_b": "male",
                         "mean_a": g / 2, "mean_b": -g / 2, "g": g, "g_ci_low": g - 0.8, "g_ci_high": g + 0.8,
                         "p_holm": p})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A decoder with the audit's real statistics on the published completions, and an encoder."""
    root = tmp_path_factory.mktemp("results")
    write_table(_profile_rows(1.0, -0.5, 0.3), root / "dec--1--fp32" / PROFILE_STATS_TABLE)
    published = bold.completion_metrics(replication.load_published_completions())
    audit, _ = bold.audit_statistics(published, n_boot=50, seed=0)
    write_table(audit, root / "dec--1--fp32" / BOLD_STATS_TABLE)
    write_table(_profile_rows(-0.9, 1.2, 0.001), root / "enc--2--fp32" / PROFILE_STATS_TABLE)
    # the encoder's competence axis is not shown to beat its null at the headline layer (it is at layer 3)
    validity = pd.DataFrame({"dimension": ["warmth", "competence", "competence"], "layer": ["mean", "mean", "3"],
                             "verdict": ["supported", "not shown", "supported"], "auc": [0.86, 0.58, 0.8],
                             "null_low": [0.31, 0.35, 0.3], "null_high": [0.71, 0.74, 0.7], "p": [0.005, 0.21, 0.01],
                             "n_permutations": 199, "n_high": 40, "n_low": 12, "detectable_auc": [0.7, 0.71, 0.7]})
    write_table(validity, root / "enc--2--fp32" / AXIS_VALIDITY_TABLE)
    # the decoder ran the robustness chapter: 12 of 96 warmth specifications agree and are significant
    robust = pd.DataFrame({"population": ["names"], "dimension": ["warmth"], "expected_sign": [1], "n_specs": [96],
                           "share_agree_significant": [12 / 96], "share_positive_significant": [12 / 96],
                           "share_negative_significant": [0.0], "median_g": [0.4], "n_agree_significant_p": [0.0199],
                           "n_permutations": [200], "axis_auc": [0.7], "axis_p": [0.01], "axis_verdict": ["supported"],
                           "axis_reading": ["supported (AUC 0.70, null 95% band 0.31–0.69, p = 0.01, n 40/12)"]})
    write_table(robust, root / "dec--1--fp32" / ROBUSTNESS_SUMMARY_TABLE)
    return root


def test_summary_table_reads_every_model(results):
    table = summary.summary_table(["dec--1--fp32", "enc--2--fp32", "gone--3--fp32"], results,
                                  can_generate={"enc--2--fp32": False})
    assert list(table.columns) == summary.SUMMARY_COLUMNS
    assert table["model_id"].tolist() == ["dec", "enc", "gone"]
    dec, enc, gone = table.itertuples(index=False)
    assert (dec.names_warmth_g, dec.names_warmth_ci_low, dec.names_warmth_ci_high) == pytest.approx((1.0, 0.2, 1.8))
    # the audit's published odds ratio, 24.65 [10.07, 60.37]
    assert (round(dec.odds_ratio, 2), round(dec.or_ci_low, 2), round(dec.or_ci_high, 2)) == (24.65, 10.07, 60.37)
    assert dec.sentence == (
        "female names higher on warmth (g = 1.00, 95% CI 0.20 to 1.80, Holm p = 0.010; 12% of 96 analysis "
        "specifications agree with the paper and are significant (joint test p = 0.0199)); "
        "no clear name gap on competence (g = −0.50, 95% CI −1.30 to 0.30, Holm p = 0.300); "
        "its completions use male rather than female words more for male-dominated occupations "
        "(odds ratio 24.65, 95% CI 10.07 to 60.37).")
    assert enc.sentence == (
        "male names higher on warmth (g = −0.90, 95% CI −1.70 to −0.10, Holm p = 0.010; opposite to the paper); "
        "no reading on competence: its axis is not shown to beat its null (AUC 0.58, null 95% band 0.35–0.74, "
        "p = 0.21; n 40 high / 12 low; detectable AUC 0.71) (g = 1.20, 95% CI 0.40 to 2.00, Holm p = 0.001); "
        "an encoder: it writes no text to audit.")
    assert gone.sentence == "no name profile in its results; it has no BOLD audit results."
    assert pd.isna(enc.odds_ratio)


def test_summary_chart_draws_gaps_and_odds(results):
    gaps, odds = summary.read_summary(["dec--1--fp32", "enc--2--fp32"], results)
    assert len(gaps) == 2 * 2 * 2  # models × populations × (warmth, competence)
    valid = gaps.set_index(["model_id", "population", "dimension"])["axis_valid"]
    assert not valid[("enc--2--fp32", "terms", "competence")]  # False, not NA (``not NA`` raises)
    assert bool(valid[("enc--2--fp32", "names", "warmth")]) and pd.isna(valid[("dec--1--fp32", "names", "warmth")])
    spec = summary.summary_chart(gaps, odds).to_dict()
    titles = [panel["title"] for panel in spec["hconcat"]]
    assert titles == ["names: female − male", "terms: female − male", "BOLD audit: odds ratio"]
    svg = vlc.vegalite_to_svg(spec)
    assert all(label in svg for label in ("dec", "enc", "odds ratio (log)", "Wald (audit)"))
    with pytest.raises(ValueError, match="no profile gaps"):
        summary.summary_chart(gaps.iloc[0:0], odds)


def test_summary_page_written_once(results, tmp_path):
    page = tmp_path / "_generated" / "summary.md"
    summary.write_summary_page(page, ["dec--1--fp32", "enc--2--fp32"], results, note="*QUICK build.*")
    text = page.read_text()
    assert text.startswith("## What this build found")
    assert 'id="bias-summary-chart"' in text and "*QUICK build.*" in text
    assert "| dec | female names higher on warmth" in text and "| enc | male names higher" in text
    stamp = page.stat().st_mtime_ns
    summary.write_summary_page(page, ["dec--1--fp32", "enc--2--fp32"], results, note="*QUICK build.*")
    assert page.stat().st_mtime_ns == stamp
    assert "No model was built" in summary.summary_markdown([], results)
