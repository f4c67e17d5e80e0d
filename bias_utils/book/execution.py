"""Executing the planned runs with papermill, one or several at a time, and writing their manifests.

A run's notebook is executed with the renderer cell prepended (charts draw
offline), its kernel's progress bars are forwarded to the build log, and its
manifest (``<notebook>.run.json``) records the status, run key, parameters,
seeds, tables written, package versions, commit and wall time.

Lanes. With ``jobs`` > 1 (:func:`default_jobs`) up to that many kernels run side by side, each with ``cores //
jobs`` torch threads (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` in its environment): a run starts once every run it
reads from (``Run.after``) has succeeded, the one with the longest chain of runs still waiting on it first (each
run's previous wall time, else its chapter's estimate); a run that starts with nothing beside it and that every
other waiting run waits on gets every core. A run whose dependency failed or was skipped is skipped, with a manifest
that says which; it runs again next time. A chapter with a prefill (``book.prefill``: chapter 11's long form) waits
for it, and the prefill waits for nothing, so a lane that would idle writes it. With ``jobs=1`` the runs execute in
the planned order, in this process's thread and environment. Sampled text is the same either way
(``models.generation`` samples on one torch thread); a forward pass on another thread count may round differently in
float32's last bits, so the erasure's and the next word's tables of two builds agree to that rounding, every other
table to the bit (the cold default builds of 469737e and be611ff with two lanes, chapter 12 on two threads and on
one: 815 of 1.64 million cells differ, by at most 1.7e-7 where the value is below 1e-3 and 4e-5 of the value
elsewhere).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from ..core import cache
from .prefill import PREFILLS
from .runs import (
    RENDER_CELL,
    Environment,
    Run,
    declared_parameters,
    effective_parameters,
    format_seconds,
    git_state,
    relative_to_root,
)

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

    def __init__(self, log=print, interval: float = 10.0, clock=time.monotonic, prefix: str = "      "):
        self.log, self.interval, self.clock, self.prefix = log, interval, clock, prefix
        self.last_time = clock()
        self.running_shown = False

    def write(self, text: str) -> int:
        bars = [piece.strip() for piece in re.split(r"[\r\n]+", text) if _TQDM_LINE.search(piece)]
        if bars:
            latest, now = re.sub(r"\s+", " ", bars[-1]), self.clock()
            finished = bool(re.search(r"(^|\s|:)100%\|", latest))
            if finished and self.running_shown:
                self.log(self.prefix + latest)
                self.last_time, self.running_shown = now, False
            elif not finished and now - self.last_time >= self.interval:
                self.log(self.prefix + latest)
                self.last_time, self.running_shown = now, True
        return len(text)

    def flush(self) -> None:
        pass


def _ipc_kernel_manager(folder: Path, cwd: Path, env: dict | None = None):
    """A kernel manager class that talks to the kernel over IPC sockets in ``folder``, not TCP, and starts it in
    ``cwd`` with ``env`` (``None``: this process's environment).

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

        async def _async_pre_start_kernel(self, **kw):
            # the kernel's folder is set here, not by papermill's cwd: that changes this whole process's
            # folder, which runs side by side would share
            kw.setdefault("cwd", str(cwd))
            if env is not None:
                kw["env"] = env
            return await super()._async_pre_start_kernel(**kw)

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


def _execute_run(run: Run, env: Environment, progress=print, kernel_env: dict | None = None,
                 prefix: str = "      ") -> dict:
    """Execute ``run`` with papermill and write its manifest; returns the manifest. ``kernel_env``: the kernel's
    environment (``None``: this process's); ``prefix`` begins its progress lines.

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
                progress_bar=sys.stderr.isatty() and kernel_env is None, log_output=False,
                stderr_file=_ProgressForwarder(progress, prefix=prefix),
                kernel_manager_class=_ipc_kernel_manager(Path(sockets), run.notebook.parent.resolve(), kernel_env),
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
        "settings": env.settings,
        "python": sys.version.split()[0],
        "code_sha256": env.code(run.notebook),
        "data_sha256": env.data,
        "git": git_state(),
        "started": started.isoformat(timespec="seconds"),
        "wall_time_s": round(time.perf_counter() - t0, 2),
    }
    cache.atomic_write_json(run.manifest_path, manifest)
    return manifest


def _execute_prefill(run: Run, env: Environment, progress=print, kernel_env: dict | None = None,
                     prefix: str = "      ") -> dict:
    """Write ``run``'s cache ahead of the chapter it serves (``book.prefill``) in a process of its own, forwarding
    its progress bars; returns a manifest-like record (not written: the chapter's manifest is the one that counts)."""
    t0 = time.perf_counter()
    parameters = effective_parameters(run.notebook, run.parameters)
    forward, err = _ProgressForwarder(progress, prefix=prefix), b""
    with subprocess.Popen([sys.executable, "-m", "bias_utils.book.prefill", run.notebook.stem],
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env=kernel_env, cwd=run.notebook.parent) as proc:
        proc.stdin.write(json.dumps(parameters).encode())
        proc.stdin.close()
        while chunk := os.read(proc.stderr.fileno(), 1 << 16):
            forward.write(chunk.decode(errors="replace"))
            err = (err + chunk)[-4000:]
    failed = proc.returncode != 0
    last = err.decode(errors="replace").strip().splitlines()[-1:] if failed else []
    return {"label": run.label, "status": "failed" if failed else "ok", "error": last[0] if last else None,
            "wall_time_s": round(time.perf_counter() - t0, 2)}


def _with_prefills(todo: list[Run]) -> list[Run]:
    """``todo`` with a prefill run (``book.prefill``) before each chapter that has one, the chapter waiting for it."""
    out = []
    for run in todo:
        found = PREFILLS.get(run.notebook.stem)
        if found is not None:
            ahead = dataclasses.replace(run, label=f"{run.label} (written ahead)", depends_on=(), after=(),
                                        estimate_s=found.estimate_s, ahead_of=run.label)
            out.append(ahead)
            run = dataclasses.replace(run, after=run.after + (ahead.label,))
        out.append(run)
    return out


def _skipped(run: Run, env: Environment, failed: str) -> dict:
    """Record ``run`` as skipped because ``failed`` (a run it reads from) did not succeed; an output left by an
    earlier run goes, so the book does not show a chapter its inputs no longer give."""
    run.output.unlink(missing_ok=True)
    manifest = {"label": run.label, "status": "skipped", "error": f"skipped: {failed} did not succeed",
                "run_key": run.key(env), "notebook": str(relative_to_root(run.notebook)), "model": run.model,
                "depends_on": list(run.depends_on), "git": git_state(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "wall_time_s": 0.0}
    cache.atomic_write_json(run.manifest_path, manifest)
    return manifest


def _chains(todo: list[Run], estimates: dict[str, float]) -> dict[str, float]:
    """Each run's longest chain: its own estimate plus the longest chain of the runs in ``todo`` that wait on it."""
    waiting = {r.label: [d for d in todo if r.label in d.after] for r in todo}
    chain: dict[str, float] = {}

    def length(run: Run) -> float:
        if run.label not in chain:
            chain[run.label] = estimates[run.label] + max((length(d) for d in waiting[run.label]), default=0.0)
        return chain[run.label]

    for run in todo:
        length(run)
    return chain


def _waits_on(todo: list[Run]) -> dict[str, set[str]]:
    """Per run to execute, the labels of every run it waits for, directly or through others (``Run.after``)."""
    after = {r.label: set(r.after) for r in todo}
    found: dict[str, set[str]] = {}

    def ancestors(label: str) -> set[str]:
        if label not in found:
            found[label] = set()
            for d in after.get(label, ()):
                found[label] |= {d} | ancestors(d)
        return found[label]

    return {r.label: ancestors(r.label) for r in todo}


def _cores() -> int:
    """The CPUs this process may use (macOS has no affinity call: all of them there)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_jobs() -> int:
    """Two runs side by side where there are two cores or more, else one: on two cores the default book of 469737e
    was built in 20 min 51 s with two lanes, in 24 min 17 s with one (where chapter 06 sampled on two threads). The
    sampled text does not depend on it: ``models.generation`` samples on one torch thread in any lane (other numbers
    to float32 rounding: the module's docstring)."""
    return min(2, _cores())


def execute_runs(runs: list[Run], env: Environment | None = None, force: bool = False, log=print,
                 jobs: int | None = None) -> list[dict]:
    """Execute every run that is not current, ``jobs`` at a time (see the module's docstring), showing progress
    and an ETA; returns the manifests written, skipped runs' included, in the order the runs ended.

    The ETA uses each run's previous wall time when a manifest exists (even an
    out-of-date one) and the mean of this session's runs otherwise (with lanes: the chapters' estimates, and the
    sum divided by the lanes).
    """
    env = env or Environment.current()
    jobs = default_jobs() if jobs is None else jobs
    todo = [r for r in runs if force or not r.is_current(env)]
    threads = max(1, _cores() // jobs)
    lanes = f", {jobs} side by side ({threads} torch thread{'s' if threads > 1 else ''} each)" if jobs > 1 else ""
    log(f"book: {len(runs)} runs, {len(runs) - len(todo)} up to date, {len(todo)} to execute{lanes}")
    # a current run that failed keeps its dependants from running; a run to execute has no state (None) until it ends
    status = {r.label: None if r in todo else (r.previous_manifest() or {}).get("status") for r in runs}
    previous = {r.label: (r.previous_manifest() or {}).get("wall_time_s") for r in todo}
    if jobs > 1:
        todo = _with_prefills(todo)
        status.update({r.label: None for r in todo if r.ahead_of})
        # a prefill has no manifest: its estimate stands, as a chapter's does until one records its time
        estimates = {r.label: r.estimate_s if previous.get(r.label) is None else previous[r.label] for r in todo}
        chain = _chains(todo, estimates)
        pending = sorted(todo, key=lambda r: -chain[r.label])  # stable: ties keep the planned order
        kernel_env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    else:
        estimates, pending, kernel_env = dict(previous), list(todo), None
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            log(line)

    chapters = [r for r in todo if not r.ahead_of]
    done_times: list[float] = []
    t_start = time.perf_counter()
    manifests: list[dict] = []
    started = 0

    def start_line(run: Run) -> str:
        if run.ahead_of:
            return f"      {run.label}: started at {datetime.now().strftime('%H:%M:%S')}"
        nonlocal started
        started += 1
        mean = sum(done_times) / len(done_times) if done_times else None
        remaining = [estimates[r.label] if estimates[r.label] is not None else mean for r in [run, *pending]]
        eta = "unknown" if any(e is None for e in remaining) else format_seconds(sum(remaining) / jobs)
        clock = f"started at {datetime.now().strftime('%H:%M:%S')}, " if jobs > 1 else ""
        elapsed = format_seconds(time.perf_counter() - t_start)
        return f"[{started}/{len(chapters)}] {run.label}: {clock}elapsed {elapsed}, ETA {eta}"

    def finish(run: Run, manifest: dict) -> None:
        if run.ahead_of:  # the chapter then writes what is missing itself, and shows any error
            status[run.label] = "ok"
            say(f"      {run.label} {manifest['status']} in {format_seconds(manifest['wall_time_s'])}"
                + (f" (the chapter writes what is missing: {manifest['error']})" if manifest["error"] else ""))
            return
        status[run.label] = manifest["status"]
        manifests.append(manifest)
        if manifest["status"] == "skipped":
            say(f"    {run.label} skipped ({manifest['error']})")
            return
        done_times.append(manifest["wall_time_s"])
        note = "" if manifest["status"] == "ok" else f" FAILED ({manifest['error']})"
        clock = f" (ended {datetime.now().strftime('%H:%M:%S')})" if jobs > 1 else ""
        say(f"    {run.label} {manifest['status']} in {format_seconds(manifest['wall_time_s'])}{clock}{note}")

    def blocked(run: Run) -> str | None:
        return next((d for d in run.after if status.get(d) in ("failed", "skipped")), None)

    def ready(run: Run) -> bool:
        return all(status.get(d, "ok") == "ok" for d in run.after)

    def skip_blocked() -> None:
        for run in list(pending):
            failed = blocked(run)
            if failed is not None:
                pending.remove(run)
                finish(run, _skipped(run, env, failed))

    if jobs == 1:
        while pending:
            skip_blocked()
            run = next((r for r in pending if ready(r)), None)
            if run is None:
                break
            pending.remove(run)
            say(start_line(run))
            finish(run, _execute_run(run, env, progress=say))
        return manifests

    running: dict = {}
    waits_on = _waits_on(todo)
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="book-lane") as pool:
        while pending or running:
            skip_blocked()
            for run in [r for r in pending if ready(r)][:jobs - len(running)]:
                pending.remove(run)
                # a run that every other waiting run waits on, started with nothing beside it, has the machine to
                # itself until it ends: it gets every core (the build's tail, 08 -> 11 -> 12 -> 09, runs so)
                alone = not running and all(run.label in waits_on[r.label] for r in pending)
                threads_now = _cores() if alone else threads
                say(start_line(run) + (f" ({threads_now} torch threads: nothing can run beside it)"
                                       if alone and threads_now != threads else ""))
                lane_env = {**kernel_env, "OMP_NUM_THREADS": str(threads_now), "MKL_NUM_THREADS": str(threads_now)}
                execute = _execute_prefill if run.ahead_of else _execute_run
                running[pool.submit(execute, run, env, say, lane_env, f"      {run.label}: ")] = run
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                finish(running.pop(future), future.result())
    return manifests
