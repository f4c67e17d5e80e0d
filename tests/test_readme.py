"""README.md is a short user's guide; the measurements live in benchmarks/README.md, which it links."""

from __future__ import annotations

import re

from bias_utils.core import paths

README = (paths.ROOT / "README.md").read_text(encoding="utf-8")
BENCHMARKS = paths.ROOT / "benchmarks" / "README.md"


def test_readme_gives_the_two_commands_in_its_first_20_lines():
    """A newcomer sees `make book` and `make test` on the first screen, in a code block."""
    head = "\n".join(README.splitlines()[:20])
    block = re.search(r"```bash\n(.*?)```", head, re.S)
    assert block, "no bash code block in the README's first 20 lines"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert "make book" in commands and "make test" in commands, commands


def test_readme_is_at_most_150_lines():
    assert len(README.splitlines()) <= 150, f"README.md has {len(README.splitlines())} lines; measurements go to " \
                                            "benchmarks/README.md"


def test_readme_links_the_measurements():
    assert "(benchmarks/README.md)" in README


def test_benchmarks_readme_holds_the_time_tables():
    """The suite's per-file times, the book's per-run times and the chapters against their floor moved whole."""
    text = BENCHMARKS.read_text(encoding="utf-8")
    for header in ("| file | seconds | share | tests |",
                   "| run (manifest `wall_time_s`) | SmolLM2-135M-Instruct | all-MiniLM-L6-v2 |",
                   "| chapter | cold | warm | embedding floor | ratio | pairs computed / distinct |",
                   "| stage (SmolLM2, defaults) | CPU float32 (16 cores) | CUDA float32 | CUDA bfloat16 |"):
        assert header in text, header
    for heading in ("## The test suite's time", "## The book's time", "## Chapters against their floor",
                    "## Generation and next-word benchmarks"):
        assert heading in text, heading


def test_benchmarks_readme_names_each_benchmark_script():
    text = BENCHMARKS.read_text(encoding="utf-8")
    for script in sorted((paths.ROOT / "benchmarks").glob("bench_*.py")):
        assert f"`{script.name}`" in text, f"benchmarks/README.md does not say what {script.name} measures"


def test_readme_keeps_no_measurement_table():
    """A table of seconds in README.md is a measurement that belongs in benchmarks/README.md."""
    for line in README.splitlines():
        assert not (line.startswith("|") and re.search(r"\|\s*\d+(\.\d+)? ?(s|min)\s*\|", line)), line
