"""Views of what happens inside a model: static HTML+JS for the book (views), live ipywidgets for
notebooks (widgets), and matplotlib figures for the text (plots)."""
from llmlab.visualization.html import View, save_page
from llmlab.visualization.plots import plot_attention, plot_lens, plot_similarity
from llmlab.visualization.views import (
    AttentionView, BPEMergeView, LensView, SamplingView, SimilarityView, TokensView,
)
from llmlab.visualization.widgets import attention_explorer, lens_explorer, sampling_explorer, tokenizer_explorer

__all__ = ["View", "save_page", "AttentionView", "BPEMergeView", "LensView", "SamplingView", "SimilarityView",
           "TokensView", "plot_attention", "plot_lens", "plot_similarity", "attention_explorer", "lens_explorer",
           "sampling_explorer", "tokenizer_explorer"]
