"""Executing a planned run with papermill and writing its manifest.

A run's notebook is executed with the renderer cell prepended (charts draw
offline), its kernel's progress bars are forwarded to the build log, and its
manifest (``<notebook>.run.json``) records the status, run key, parameters,
seeds, tables written, package versions, commit and wall time.
"""

from __future__ import annotations

import logging
import re
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from ..core import cache
from .runs import RENDER_CELL, Environment, Run, declared_parameters, format_seconds, git_state, relative_to_root

__all__: list[str] = []


def _prepared_notebook(run: Run) -> Path:
    """The input notebook with the renderer cell prepended, beside the output."""
    nb = nbformat.read(run.notebook, as_version=4)
    cell = nbformat.v4.new_code_cell(RENDER_CELL, metadata={"tags": ["remove-cell", "bias-book-renderer"]})
    nb.cells.insert(0, cell)
    prepared = run.output.parent / f".{run.output.stem}.input.ipynb"
    cache.atomic_write_text(prepared, nbformat.writes(nb))
    return prepared


def _table_stamps(folder: Path | None) -> dict[str, tuple[int, int]]:
    """``{csv name: (mtime_ns, size)}`` in ``folder``: the tables a run wrote are those that change."""
    if folder is None or not Path(folder).is_dir():
        return {}
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(Path(folder).glob("*.csv"))}


#: A tqdm progress line: "label:  42%|####      | 21/50 [00:10<00:14,  2.01it/s]".
_TQDM_LINE = re.compile(r"\d+%\|.*\|\s*\d+/\d+\s*\[[^\]]*\]")


class _ProgressForwarder:
    """A file-like sink for a kernel's stderr that passes on its progress bars, throttled.

    Notebooks show progress with tqdm on stderr (left out of the book); during
    ``make book`` the latest bar line (with its ETA) is logged at most every
    ``interval`` seconds, and a bar that was shown running is shown again when
    it completes. Bars that finish within ``interval`` stay silent; everything
    else on stderr stays in the executed notebook only.
    """

    def __init__(self, log=print, interval: float = 10.0, clock=time.monotonic):
        self.log, self.interval, self.clock = log, interval, clock
        self.last_time = clock()
        self.running_shown = False

    def write(self, text: str) -> int:
        bars = [piece.strip() for piece in re.split(r"[\r\n]+", text) if _TQDM_LINE.search(piece)]
        if bars:
            latest, now = re.sub(r"\s+", " ", bars[-1]), self.clock()
            finished = bool(re.search(r"(^|\s|:)100%\|", latest))
            if finished and self.running_shown:
                self.log("      " + latest)
                self.last_time, self.running_shown = now, False
            elif not finished and now - self.last_time >= self.interval:
                self.log("      " + latest)
                self.last_time, self.running_shown = now, True
        return len(text)

    def flush(self) -> None:
        pass


def _ipc_kernel_manager(folder: Path):
    """A kernel manager class that talks to the kernel over IPC sockets in ``folder``, not TCP.

    The default TCP transport without keys makes every ipykernel (7+) start with
    a warning that its traffic is unencrypted; IPC sockets in a private
    temporary folder are reachable by this user only. An idle kernel is shut
    down without the interrupt jupyter_client sends first (see below); a busy one
    still gets SIGTERM, then SIGKILL.
    """
    # deferred: the Jupyter client stack, needed only when a run executes
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self):
            return "ipc"

        @default("ip")
        def _default_ip(self):
            return str(Path(folder) / "kernel")

        async def _async_interrupt_kernel(self):
            # jupyter_client interrupts before every shutdown; papermill shuts down an idle
            # kernel, which then logs "KeyboardInterrupt caught in kernel" as an ERROR
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IPCKernelManager


class _PapermillParameterNoise(logging.Filter):
    """Drops papermill's parameter-inference warnings: its line parser gives up on a default
    followed by a comment and then calls every declared parameter unknown. The builder reads
    the parameters cell with :mod:`ast` (:func:`declared_parameters`) and passes only those."""

    NOISE = ("Unable to parse line", "Passed unknown parameter")
    LOGGERS = ("papermill", "papermill.translators")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.NOISE)


_PARAMETER_NOISE = _PapermillParameterNoise()
for _name in _PapermillParameterNoise.LOGGERS:
    logging.getLogger(_name).addFilter(_PARAMETER_NOISE)


def _execute_run(run: Run, env: Environment, progress=print) -> dict:
    """Execute ``run`` with papermill and write its manifest; returns the manifest.

    A failing notebook is not an exception here: the executed notebook keeps
    the traceback (and appears in the book as such), the manifest records
    status ``failed`` with the error; it runs again once its inputs change.
    """
    # deferred: papermill pulls in the Jupyter client stack, needed only when a run executes
    import papermill
    from papermill.exceptions import PapermillExecutionError

    run.output.parent.mkdir(parents=True, exist_ok=True)
    prepared = _prepared_notebook(run)
    declared = declared_parameters(run.notebook)
    effective = dict(declared)
    effective.update(run.parameters)
    started = datetime.now(timezone.utc)
    before = _table_stamps(run.results)
    t0 = time.perf_counter()
    status, error = "ok", None
    try:
        with tempfile.TemporaryDirectory(prefix="bias-kernel-") as sockets:
            papermill.execute_notebook(
                str(prepared), str(run.output), parameters=run.parameters, kernel_name="python3",
                cwd=str(run.notebook.parent), progress_bar=sys.stderr.isatty(), log_output=False,
                stderr_file=_ProgressForwarder(progress), kernel_manager_class=_ipc_kernel_manager(Path(sockets)),
            )
    except PapermillExecutionError as exc:
        status, error = "failed", f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}"
    finally:
        prepared.unlink(missing_ok=True)
    after = _table_stamps(run.results)
    manifest = {
        "label": run.label,
        "status": status,
        "error": error,
        "run_key": run.key(env),
        "notebook": str(relative_to_root(run.notebook)),
        "notebook_sha256": cache.sha256_file(run.notebook),
        "output_notebook": str(relative_to_root(run.output)),
        "model": run.model,
        "parameters": effective,
        "seeds": {k: v for k, v in effective.items() if "seed" in k},
        "quick": run.quick,
        "tables": sorted(name for name, stamp in after.items() if before.get(name) != stamp),
        "depends_on": list(run.depends_on),
        "packages": env.packages,
        "python": sys.version.split()[0],
        "code_sha256": env.code(run.notebook),
        "data_sha256": env.data,
        "git": git_state(),
        "started": started.isoformat(timespec="seconds"),
        "wall_time_s": round(time.perf_counter() - t0, 2),
    }
    cache.atomic_write_json(run.manifest_path, manifest)
    return manifest


def execute_runs(runs: list[Run], env: Environment | None = None, force: bool = False, log=print) -> list[dict]:
    """Execute every run that is not current, in order, showing progress and an ETA.

    The ETA uses each run's previous wall time when a manifest exists (even an
    out-of-date one) and the mean of this session's runs otherwise.
    """
    env = env or Environment.current()
    todo = [r for r in runs if force or not r.is_current(env)]
    log(f"book: {len(runs)} runs, {len(runs) - len(todo)} up to date, {len(todo)} to execute")
    estimates = [((r.previous_manifest() or {}).get("wall_time_s")) for r in todo]
    done_times: list[float] = []
    t_start = time.perf_counter()
    manifests = []
    for i, run in enumerate(todo):
        mean = sum(done_times) / len(done_times) if done_times else None
        remaining = [e if e is not None else mean for e in estimates[i:]]
        eta = "unknown" if any(e is None for e in remaining) else format_seconds(sum(remaining))
        log(f"[{i + 1}/{len(todo)}] {run.label}: elapsed {format_seconds(time.perf_counter() - t_start)}, ETA {eta}")
        manifest = _execute_run(run, env, progress=log)
        done_times.append(manifest["wall_time_s"])
        note = "" if manifest["status"] == "ok" else f" FAILED ({manifest['error']})"
        log(f"    {run.label} {manifest['status']} in {format_seconds(manifest['wall_time_s'])}{note}")
        manifests.append(manifest)
    return manifests
