"""Shared: language models behind one interface: loading (built-ins, hub ids, folders, GGUF, endpoints), sampling and
decoding, embeddings.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # one place a name becomes a model: devices, dtypes, backends, facts read before loading
    "loading": ("load_model", "unload_model",),
    # per-layer contextual word embeddings
    "embeddings": ("embed_words",),
    # the transformers decoding loop with its in-loop statistics
    "decoding": ("lexicon_token_ids",),
    # OpenAI-compatible servers as a generation backend
    "endpoints": ("OpenAIEndpoint",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
