"""Shared: what both studies stand on: paths, errors and value rules, caches, verified data, results folders, the
results-table registry, the statistics engine, the mixed model, printed precision, the gendered lexicons.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from .exports import lazy_exports

_EXPORTS = {
    # the errors a user can meet and the value rules every layer shares
    "errors": ("DataError", "ModelError", "ParameterError",),
    # verified external files (manifest, cache, mirror, download)
    "data": ("resolve",),
    # where results land: a folder per model, tables as parquet + CSV
    "results": ("CROSS_MODEL_FOLDER", "REPLICATION_FOLDER", "display_name", "output_folder", "write_table",),
    # every results table declared once: name, producer, notebooks, columns
    "tables": ("NAMES",),
    # the gendered and neutral word lexicons and their counts
    "lexicon": ("GENDER_LEXICONS", "NEUTRAL_LEXICONS",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
