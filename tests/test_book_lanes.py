"""The book's runs side by side: the chapters each waits for (read from the notebooks), and the scheduler on tiny
real notebooks (overlap, waiting, skipping after a failure, the planned order with one lane)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from bias_utils.book import build, execution, runs

_MODELS = [{"name": "smollm2-135m-instruct", "model_id": "dec@1", "slug": "dec", "can_generate": True},
           {"name": "minilm-l6", "model_id": "enc@1", "slug": "enc", "can_generate": False}]


def _after(quick: bool) -> dict[str, tuple[str, ...]]:
    planned = runs.plan_runs(_MODELS, quick=quick, book_dir=Path("/nonexistent/book"),
                             results_dir=Path("/nonexistent/results"), log=lambda *_: None)
    return {r.label: r.after for r in planned}


def test_each_chapter_waits_for_the_chapters_it_reads_and_a_models_embedding_chapters_keep_their_order():
    """Planted from reading the notebooks: 08 and 11 read 06's BOLD metrics; 12 reads 11's long-form texts where it
    writes the long form under erasure (QUICK); 09 reads every other run. 03, 04, 05, 10, 08, 11 and 12 fill one
    embedding cache per model, so each waits for the one before it (a cold cache is then filled as a sequential
    build fills it): those that read no other chapter first (12 too, by default), then 08 and 11 (and 12, where it
    reads 11); 06 waits for nothing, nor does another model's first embedding chapter."""
    default, quick = _after(False), _after(True)
    for after in (default, quick):
        for stem in ("01_dictionaries", "02_contexts", "03_projection_accuracy", "06_bold_audit"):
            assert after[f"dec/{stem}"] == () and after.get(f"enc/{stem}", ()) == ()
        for model in ("dec", "enc"):
            assert after[f"{model}/04_profiles"] == (f"{model}/03_projection_accuracy",)
            assert after[f"{model}/05_layers"] == (f"{model}/04_profiles",)
            assert after[f"{model}/10_robustness"] == (f"{model}/05_layers",)
        assert after["dec/11_intrinsic_extrinsic"] == ("dec/06_bold_audit", "dec/08_completion_profiles")
        assert after["published-audit/07_bold_replication"] == ()
        assert set(after["cross-model/09_cross_model"]) == set(after) - {"cross-model/09_cross_model"}
        assert not any(label.startswith("enc/") and label.endswith(("06_bold_audit", "08_completion_profiles"))
                       for label in after)
    assert default["dec/12_erasure"] == ("dec/10_robustness",)
    assert default["dec/08_completion_profiles"] == ("dec/06_bold_audit", "dec/12_erasure")
    assert quick["dec/08_completion_profiles"] == ("dec/06_bold_audit", "dec/10_robustness")
    assert quick["dec/12_erasure"] == ("dec/11_intrinsic_extrinsic",)


def test_run_keys_follow_only_what_a_run_reads():
    """08's key changes with 06's (it reads 06's tables); 04's does not change with 03's (it reads none of them);
    09's changes with every run's."""
    env = runs.Environment(modules={}, data_lists="d", packages={}, data={})

    def keys(changed: str | None) -> dict[str, str]:
        planned = runs.plan_runs(_MODELS[:1], book_dir=Path("/nonexistent/book"),
                                 results_dir=Path("/nonexistent/r"), log=lambda *_: None)
        for run in planned:
            if run.notebook.stem == changed:
                run.parameters = {**run.parameters, "seed": 7}
        runs.resolve_dependency_keys(planned, env)
        return {r.notebook.stem: r.key(env) for r in planned}

    base, new_06, new_03 = keys(None), keys("06_bold_audit"), keys("03_projection_accuracy")
    assert new_06["06_bold_audit"] != base["06_bold_audit"]
    assert new_06["08_completion_profiles"] != base["08_completion_profiles"]
    assert new_06["11_intrinsic_extrinsic"] != base["11_intrinsic_extrinsic"]
    assert new_06["04_profiles"] == base["04_profiles"] and new_06["12_erasure"] == base["12_erasure"]
    changed = {stem for stem in base if new_03[stem] != base[stem]}
    assert changed == {"03_projection_accuracy", "09_cross_model"}


def test_the_longest_chains_start_first():
    """06 (the sampled generation) waits on nothing and has 08, 11 and then 09 behind it; 03's chain runs through the
    embedding chapters (12 among them) to the same tail. On the default build's estimates those two start the build,
    one per lane, before every other run that waits for nothing."""
    planned = runs.plan_runs(_MODELS, book_dir=Path("/nonexistent/book"), results_dir=Path("/nonexistent/r"),
                             log=lambda *_: None)
    chain = execution._chains(planned, {r.label: r.estimate_s for r in planned})
    first_two = sorted([r for r in planned if not r.after], key=lambda r: -chain[r.label])[:2]
    assert {r.label for r in first_two} == {"dec/06_bold_audit", "dec/03_projection_accuracy"}
    assert chain["dec/06_bold_audit"] == 816 + 27 + 45 + 5
    assert chain["dec/03_projection_accuracy"] == 187 + 37 + 91 + 147 + 654 + 27 + 45 + 5


def test_with_lanes_chapter_11s_long_form_is_written_ahead_and_waits_on_nothing():
    """In a two-lane build chapter 11 waits for its prefill (``book.prefill``), which waits for nothing, so a lane
    that would idle while 12 runs writes 11's texts; the chapter's key does not change."""
    env = runs.Environment(modules={}, data_lists="d", packages={}, data={})
    planned = runs.plan_runs(_MODELS, book_dir=Path("/nonexistent/book"), results_dir=Path("/nonexistent/r"),
                             log=lambda *_: None)
    runs.resolve_dependency_keys(planned, env)
    with_ahead = execution._with_prefills(planned)
    ahead = [r for r in with_ahead if r.ahead_of]
    assert [(r.label, r.ahead_of, r.after) for r in ahead] == [
        ("dec/11_intrinsic_extrinsic (written ahead)", "dec/11_intrinsic_extrinsic", ())]
    chapter = next(r for r in with_ahead if r.label == "dec/11_intrinsic_extrinsic")
    planned_11 = next(r for r in planned if r.label == "dec/11_intrinsic_extrinsic")
    assert chapter.after == planned_11.after + (ahead[0].label,) and chapter.key(env) == planned_11.key(env)
    assert planned_11.after == ("dec/06_bold_audit", "dec/08_completion_profiles")  # the plan itself is untouched
    assert runs.effective_parameters(chapter.notebook, chapter.parameters)["long_form"] is True
    # on the default estimates the prefill's chain (150 s, then 11 and 09) is ready from the start, behind 03's and
    # 06's: the lane that ends 06 first takes it (or the encoder's chain first) while the other runs 12
    chain = execution._chains(with_ahead, {r.label: r.estimate_s for r in with_ahead})
    assert chain[ahead[0].label] == 150 + 45 + 5 < chain["dec/06_bold_audit"]


# --------------------------------------------------------------------------- the scheduler on tiny notebooks

_BODY = """import json, os, time
start = time.time()
time.sleep(sleep)
if fail:
    raise RuntimeError("planted failure")
open(os.path.join(out, name + ".json"), "w").write(json.dumps(
    {"start": start, "end": time.time(), "threads": os.environ.get("OMP_NUM_THREADS"), "cwd": os.getcwd()}))
"""


def _tiny_runs(tmp_path: Path, spec: dict[str, dict]) -> list[runs.Run]:
    """A run per entry ``name: {"sleep": s, "fail": bool, "after": (...)}`` of a two-cell notebook that sleeps, then
    fails or writes its start and end times, its thread count and its folder into ``<tmp>/out/<name>.json``."""
    (tmp_path / "out").mkdir()
    planned = []
    for name, s in spec.items():
        nb = nbformat.v4.new_notebook()
        params = nbformat.v4.new_code_cell("sleep = 0\nfail = False\nout = ''\nname = ''",
                                           metadata={"tags": ["parameters"]})
        nb.cells = [params, nbformat.v4.new_code_cell(_BODY)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        folder = tmp_path / "notebooks" / name
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{name}.ipynb")
        after = tuple(f"m/{a}" for a in s.get("after", ()))
        planned.append(runs.Run(
            label=f"m/{name}", notebook=folder / f"{name}.ipynb", output=tmp_path / "book" / f"{name}.ipynb",
            parameters={"sleep": s.get("sleep", 0), "fail": s.get("fail", False), "out": str(tmp_path / "out"),
                        "name": name}, depends_on=after, after=after))
    return planned


def _times(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "out" / f"{name}.json").read_text())


@pytest.mark.slow  # kernels started one after another: about 20 s
def test_two_lanes_overlap_and_a_dependant_waits(tmp_path):
    """a and b side by side; c after a, while b still runs; d after b and c, with nothing left beside it: it alone
    gets every core."""
    planned = _tiny_runs(tmp_path, {"a": {"sleep": 2}, "b": {"sleep": 10}, "c": {"after": ("a",)},
                                    "d": {"after": ("b", "c")}})
    lines = []
    manifests = execution.execute_runs(planned, runs.Environment.current(), log=lines.append, jobs=2)
    assert sorted(m["status"] for m in manifests) == ["ok"] * 4
    a, b, c, d = (_times(tmp_path, n) for n in "abcd")
    assert a["start"] < b["end"] and b["start"] < a["end"]  # side by side
    assert c["start"] >= a["end"] and c["end"] < b["end"] and d["start"] >= b["end"]
    cores = len(os.sched_getaffinity(0))
    assert {a["threads"], b["threads"], c["threads"]} == {str(max(1, cores // 2))}
    assert d["threads"] == str(cores)
    assert a["cwd"] == str((tmp_path / "notebooks" / "a").resolve())  # each kernel in its notebook's folder
    assert os.getcwd() != a["cwd"]
    # every start and end line names its run and the clock
    starts = [ln for ln in lines if ": started at " in ln]
    ends = [ln for ln in lines if " ok in " in ln and "(ended " in ln]
    assert sorted(ln.split("] ")[1].split(":")[0] for ln in starts) == ["m/a", "m/b", "m/c", "m/d"]
    assert sorted(ln.split()[0] for ln in ends) == ["m/a", "m/b", "m/c", "m/d"]
    if cores > 1:
        assert [ln for ln in starts if "nothing can run beside it" in ln] == [
            next(ln for ln in starts if "] m/d:" in ln)]


@pytest.mark.slow
def test_one_lane_runs_in_order_and_a_failure_skips_its_dependants(tmp_path):
    planned = _tiny_runs(tmp_path, {"f": {"fail": True}, "g": {"after": ("f",)}, "h": {}})
    planned[1].output.parent.mkdir(parents=True, exist_ok=True)
    planned[1].output.write_text("{}")  # an earlier run's chapter: it must not stay in the book
    manifests = execution.execute_runs(planned, runs.Environment.current(), log=lambda *_: None, jobs=1)
    assert [(m["label"], m["status"]) for m in manifests] == [("m/f", "failed"), ("m/g", "skipped"), ("m/h", "ok")]
    skipped = json.loads(planned[1].manifest_path.read_text())
    assert skipped["error"] == "skipped: m/f did not succeed" and not planned[1].output.exists()
    assert not (tmp_path / "out" / "g.json").exists()
    # a failed run stays failed while its inputs are unchanged, and its dependant stays skipped
    again = execution.execute_runs(planned, runs.Environment.current(), log=lambda *_: None, jobs=2)
    assert [(m["label"], m["status"]) for m in again] == [("m/g", "skipped")]
    assert _times(tmp_path, "h")["threads"] == os.environ.get("OMP_NUM_THREADS")  # one lane: this environment


@pytest.mark.slow  # a kernel and a prefill process: about 10 s
def test_a_failing_prefill_is_reported_and_its_chapter_still_runs(tmp_path):
    """A notebook named as chapter 11, with a long form whose precision does not exist: its prefill fails in its own
    process, the log says so, and the chapter runs after it all the same (it would show the error itself)."""
    planned = _tiny_runs(tmp_path, {"11_intrinsic_extrinsic": {}})
    planned[0].parameters.update(long_form=True, model="smollm2-135m-instruct", dtype="float8")
    lines: list[str] = []
    manifests = execution.execute_runs(planned, runs.Environment.current(), log=lines.append, jobs=2)
    assert [(m["label"], m["status"]) for m in manifests] == [("m/11_intrinsic_extrinsic", "ok")]
    ended = next(ln for ln in lines if "(written ahead) failed in" in ln)
    assert "the chapter writes what is missing" in ended and "float8" in ended
    assert lines.index(ended) < lines.index(next(ln for ln in lines if "] m/11_intrinsic_extrinsic: started" in ln))


def test_jobs_below_one_is_refused_before_any_model_loads(capsys):
    with pytest.raises(SystemExit):
        build.book_cli(["--models", "smollm2-135m-instruct", "--jobs", "0"])
    assert "--jobs must be 1 or more, not 0" in capsys.readouterr().err
