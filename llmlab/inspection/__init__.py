"""Looking inside a model: capture intermediates, read them (lens, similarity, neurons) and change
them (ablation, patching, steering, Patchscopes). Everything runs on llmlab's hook points.

Every function takes (model, tokenizer, prompt, ...); the tokenizer may be None when the prompt is
token ids. A prompt may also be a list of texts: it runs as one batch padded on the left, so position
-1 is every text's last real token (or pass padded ids with attention_mask=). Functions that measure
one prompt at a time (lens, tracing, attribution, Patchscopes) then return one result per text, equal
to the result of that text alone. Layers count like Python indices (-1 is the last block); ids and
vectors may come from any device.

Memory is estimated before it is spent (llmlab.inspection.budget): a readout over the vocabulary or over
pairs of positions reads a long prompt in chunks that fit a working budget (`with memory_budget(n_bytes):`
changes it), and refuses up front, with its size and the way out, a result larger than its max_bytes.

Import these names from here (`from llmlab.inspection import capture, hook_name`), not from the modules.
"""
from llmlab.checks import resolve_layer, token_id
from llmlab.hooks import hook_name
from llmlab.inspection.budget import memory_budget
from llmlab.inspection.causal import (
    SITES, AttributionResult, TraceResult, causal_trace, direct_logit_attribution, induction_chance,
    induction_scores, logit_diff,
)
from llmlab.inspection.capture import (
    ActivationCache, capture, estimate_memory, hook_names, hooks, select_names, token_strings,
)
from llmlab.inspection.embeddings import analogy, nearest_to_vector, nearest_tokens
from llmlab.inspection.intervene import ablate, patch, top_heads
from llmlab.inspection.lens import LensResult, logit_lens
from llmlab.inspection.neurons import neuron_activations, top_activating_tokens
from llmlab.inspection.probes import ProbeResult, control_labels, probe_accuracy, probe_with_control, train_probe
from llmlab.inspection.patchscope import IDENTITY_TEMPLATE, PatchscopeResult, patchscope
from llmlab.inspection.similarity import (
    cka_matrix, cosine, cosine_matrix, layer_cka, layer_similarity, linear_cka, position_similarity,
    prompt_similarity,
)
from llmlab.inspection.steering import generate_steered, mean_resid, steer, steering_vector

__all__ = [
    "hook_name", "resolve_layer", "token_id", "ActivationCache", "capture", "estimate_memory", "hook_names", "hooks",
    "select_names", "token_strings", "analogy", "nearest_to_vector", "nearest_tokens", "ablate", "patch", "top_heads",
    "LensResult", "logit_lens", "neuron_activations", "top_activating_tokens", "IDENTITY_TEMPLATE",
    "PatchscopeResult", "patchscope", "cka_matrix", "cosine", "cosine_matrix", "layer_cka", "layer_similarity",
    "linear_cka", "position_similarity", "prompt_similarity", "generate_steered", "mean_resid", "steer", "steering_vector",
    "SITES", "AttributionResult", "TraceResult", "causal_trace", "direct_logit_attribution", "induction_chance",
    "induction_scores", "logit_diff",
    "ProbeResult", "control_labels", "probe_accuracy", "probe_with_control", "train_probe", "memory_budget",
]
