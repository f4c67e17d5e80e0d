"""Book: the Jupyter Book: notebook parameter checks, the cross-model chapter and front page, runs, execution,
presentation and the build.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # every notebook's parameters checked before any model loads
    "validation": ("check",),
    # results stacked across models and read side by side (chapter 09)
    "crossmodel": ("accuracy_by_model", "bold_odds_ratios", "cross_model_summary", "describe_folders",
        "describe_neutral_definitions", "forest_chart", "gender_gaps", "headline_layer", "intrinsic_extrinsic",
        "model_folders", "profile_grid", "read_all_results", "short_model_ids", "unreadable_axes_by_model",),
    # the per-model links between the bias inside and the bias written, pooled by random effects (chapter 09)
    "pooling": ("describe_pooling", "link_forest_chart", "pooled_link",),
    # chapter 12's erasure curves side by side on relative depth (chapter 09)
    "crossmodel_erasure": ("describe_erasure_curves", "erasure_curves", "erasure_curves_chart",),
    # the front page: findings generated from the results tables
    "summary": ("read_summary", "summary_chart", "summary_table",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
