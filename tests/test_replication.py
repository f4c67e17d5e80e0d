"""bias_utils.audit.replication: the published audit re-analysed with our code."""

import re
from decimal import Decimal

import float32_bounds as bounds
import pytest

from bias_utils.audit import bold, replication
from bias_utils.report import table_html


@pytest.fixture(scope="module")
def published_metrics():
    return bold.completion_metrics(replication.load_published_completions())


def test_metrics_match_published_columns_row_by_row(published_metrics):
    assert replication.compare_published_columns(published_metrics).empty


@pytest.fixture(scope="module")
def rep():
    return replication.replicate_published_audit(n_boot=50)


#: The headline numbers as the paper prints them (section 5).
PAPER = {"chi2_yates": "62.86", "welch_t_male_proportion": "1.87", "cohens_d_average": "0.099", "odds_ratio": "24.65",
         "odds_ratio_ci_low": "10.07", "odds_ratio_ci_high": "60.37", "welch_t_pmi_difference": "2.38",
         "n_gendered_completions": "66"}


def _printed_tolerance(printed: str, value: float) -> float:
    """How far a value may lie from a number printed with few digits: half a unit in the last printed digit, plus
    float64's noise on the value (sums over the 1,525 completions, each term rounded once, in two computations)."""
    return 0.5 * 10.0 ** Decimal(printed).as_tuple().exponent + 2 * 1525 * bounds.U64 * abs(value)


def _misprinted(rep) -> list[str]:
    """The quantities that do not agree with the published ones: a count exactly; a summary value (printed there
    with every digit) to three significant digits, within half a unit of its third (the summary's full digits are
    not ours to match: it adds 1e-10 to each male proportion's denominator and takes another 95% quantile for the
    odds ratio's interval, 6e-11 and 1.6e-5 relative); a paper number to the digits printed there."""
    kind = {k: v[3] for k, v in replication._PUBLISHED.items()}
    bad = [k for k, ours, theirs in rep[["quantity", "ours", "published"]].itertuples(index=False)
           if (ours != theirs if kind[k] == "count"
               else abs(ours - theirs) > _printed_tolerance(f"{theirs:.3g}", ours))]
    r = rep.set_index("quantity")["ours"]
    return bad + [f"paper {k}" for k, printed in PAPER.items()
                  if abs(r[k] - float(printed)) > _printed_tolerance(printed, r[k])]


@pytest.mark.slow
def test_replication_agrees_to_three_significant_digits(rep, monkeypatch):
    assert list(rep.columns[:3]) == ["quantity", "ours", "published"]
    assert _misprinted(rep) == []
    # companion: one more male word in one female-dominated occupation's completion (a changed input) is caught
    completions = replication.load_published_completions()
    row = completions.index[(completions.group == "female_dominated") & (completions.completion.str.len() > 0)][0]
    completions.loc[row, "completion"] += " He"
    monkeypatch.setattr(replication, "load_published_completions", lambda: completions)
    changed = _misprinted(replication.replicate_published_audit(n_boot=2))
    assert {"chi2_yates", "paper chi2_yates", "paper odds_ratio"} <= set(changed), changed


def test_replication_rows_print_each_quantity_by_its_kind(rep):
    """Chapter 07's table: names, not keys; p values, counts and relative differences as the book prints them."""
    shown = replication.replication_rows(rep)
    assert len(shown) == len(rep) and list(shown["source"]) == list(rep["source"])
    assert not shown["quantity"].str.contains("_").any() and shown["quantity"].is_unique
    for (key, ours, rel), row in zip(rep[["quantity", "ours", "rel_diff"]].itertuples(index=False),
                                     shown.itertuples(index=False)):
        if key.startswith(("n_", "table_")) or key.endswith("_df"):  # a count: a whole number, no decimals
            assert row.ours == f"{round(ours):,}", (key, row.ours)
        elif re.search(r"(^|_)p(_|$)", key) and ours < 0.001:
            assert row.ours == "< 0.001", (key, row.ours)
        if rel == 0:
            assert row.rel_diff == "0"
        elif rel < 1e-12:  # float64 rounding, never its digits written out
            assert row.rel_diff == "< 10⁻¹²", (key, rel)
        else:
            mantissa, exponent = re.fullmatch(r"(\d\.\d) × 10⁻([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", row.rel_diff).groups()
            power = int(exponent.translate(str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")))
            assert abs(float(mantissa) * 10 ** -power - rel) <= 0.05 * 10 ** -power, (key, rel)
    # the chapter's table: neither a p written out in zeros nor a count with decimals
    page = table_html.table_html(shown)
    assert "0.0000" not in page and not re.search(r">\d+\.00<", page) and "table male" not in page
    with pytest.raises(ValueError, match="quantities"):
        replication.replication_rows(rep.assign(quantity="new_number"))
