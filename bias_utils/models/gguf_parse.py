"""Reading a GGUF file's metadata once per conversion.

transformers reads a GGUF afresh for each object built from it: the tokenizer, the config and the weights each
construct a ``gguf.GGUFReader``, which parses every metadata field (the whole vocabulary: 5.4 s a parse for SmolLM2's
49,152 tokens under cProfile), and the weights' name mapping builds gguf-py's ``TensorNameMap`` once per submodule
(397 times for SmolLM2, 6.4 s) though it depends only on the architecture and the layer count. Inside
:func:`parsed_once` both are built once and handed out again: the reader maps the file read-only and transformers
only reads it, the name map is only looked up. The conversions wrote the same files to the byte, SmolLM2's in 11.1 s
instead of 26.4 s, Qwen2.5-Coder's in 36.6 s instead of 56.5 s (``benchmarks/bench_conversion.py``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading

__all__: list[str] = []

_LOCK = threading.Lock()


@contextlib.contextmanager
def parsed_once():
    """Within the block, ``gguf.GGUFReader(path)`` returns one reader per file and mode and
    ``gguf.get_tensor_name_map(arch, n_blocks)`` one map per argument pair. One block at a time in a process: the two
    names are module attributes of gguf-py, restored when the block ends (``test_models.py`` counts the parses and
    maps of a real conversion, so a transformers that stops reaching them this way fails there)."""
    import gguf  # deferred: gguf-py (numpy and its tables) is only needed to convert a model

    with _LOCK:
        readers: dict[tuple[str, str], object] = {}
        reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map

        def reader(path, mode="r"):
            key = (os.path.realpath(path), mode)
            if key not in readers:
                readers[key] = reader_class(path, mode)
            return readers[key]

        gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map
