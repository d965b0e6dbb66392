"""Views of what happens inside a model: static HTML+JS for the book (views), live ipywidgets for
notebooks (widgets), and matplotlib figures for the text (plots). Every token on screen is
written by one rule (display.show_token)."""
from llmlab.visualization.display import show_token, show_token_ids
from llmlab.visualization.html import View, save_page
from llmlab.visualization.plots import plot_attention, plot_lens, plot_similarity
from llmlab.visualization.attention_views import AttentionView, MaskView, mask_view
from llmlab.visualization.sampling_views import SamplingView, WriteView
from llmlab.visualization.table_views import LensView, SimilarityView
from llmlab.visualization.token_views import BPEMergeView, TokensView
from llmlab.visualization.widgets import (
    attention_explorer, lens_explorer, sampling_explorer, similarity_explorer, tokenizer_explorer,
)

__all__ = ["View", "save_page", "AttentionView", "BPEMergeView", "LensView", "MaskView", "SamplingView",
           "SimilarityView", "TokensView", "WriteView", "mask_view", "plot_attention", "plot_lens", "plot_similarity",
           "attention_explorer", "lens_explorer", "sampling_explorer", "similarity_explorer", "tokenizer_explorer", "show_token",
           "show_token_ids"]
