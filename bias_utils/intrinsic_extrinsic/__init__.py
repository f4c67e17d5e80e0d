"""The question joining the two studies: does the bias inside a model (Study 1, :mod:`bias_utils.profiles`) drive the
bias it writes (Study 2, :mod:`bias_utils.audit`)? The decoder's own completions projected on its stereotype axes
(chapter 08), the link between the inside and the writing against workforce shares (chapter 11), and the erasure of
the gender concept, with its controls and its cost (chapter 12).

The public API by role, one module a role (``_EXPORTS``); each name is imported on first use
(:func:`bias_utils.core.exports.lazy_exports`).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    # the decoder's own completions projected on its stereotype axes (chapter 08)
    "completions": ("category_contrasts", "completion_chart", "completion_embeddings", "completion_projection",
        "completion_projection_stats", "describe_completion_stats", "occupation_means",),
    # the BOLD-based link, chapter 11's robustness row: the inside against word counts in sampled completions
    "bold_link": ("describe_link", "run_link",),
    # does the bias inside predict the bias written (chapter 11): the next-word link and the chart of either link
    "link": ("describe_next_word_link", "link_chart", "next_word_link",),
    # does the inside drive what the model writes: the gender concept erased, both sides measured (chapter 12)
    "erasure": ("erasure_tradeoff",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
