"""Shared: how results read: labels and tables as HTML, offline charts.

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # tables and figures as the book shows them (labels, rounding, offline Vega)
    "rendering": ("group_label",),
    # the Altair charts and the colour of each group
    "plots": ("accuracy_heatmap", "axis_validity_chart", "drawable", "layer_curves_chart", "profile_chart", "save",
        "specification_curve_chart", "warmth_competence_charts",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
