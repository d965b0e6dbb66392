"""The static views: data in, a self-contained HTML+JS block out.

Each class takes plain data (token strings, arrays or tensors) and nothing else, so the same
view can show a real model, a toy example, or numbers a chapter made up. Displaying one in a
notebook renders it; `.save("x.html")` writes a standalone page.

    >>> view = SimilarityView([[1.0, 0.2], [0.2, 1.0]], ["cat", "dog"])
    >>> "llmlab-similarity" in view._repr_html_()
    True

`static_html()` is an HTML/CSS-only rendering of the current selection (colours and `title`
tooltips, no script): it is shown until the script runs, and the live widgets display it.
"""
from llmlab.visualization.attention_views import AttentionView, MaskView, informative_row, mask_view
from llmlab.visualization.sampling_views import SamplingView
from llmlab.visualization.table_views import LensView, SimilarityView
from llmlab.visualization.token_views import BPEMergeView, TokensView, looks_like_text

__all__ = ["AttentionView", "MaskView", "mask_view", "informative_row", "LensView", "SimilarityView",
           "TokensView", "BPEMergeView", "looks_like_text", "SamplingView"]
