"""llmlab: every stage of a Transformer language model, from scratch, checked against real models."""
import os as _os
import sys as _sys

# torch's CPU threads wait for each other by spinning unless OMP_WAIT_POLICY says otherwise, and on a
# busy machine (Colab's two cores, a laptop running other things) every parallel operation then waits
# for a thread that is not running (decoding went from 13 to 2 tokens/s). The OpenMP runtime reads the
# variable once, when torch is loaded: llmlab sets it only before that, and never over a value the user set.
if "torch" not in _sys.modules:
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from llmlab.checks import as_ids
from llmlab.config import ModelConfig
from llmlab.convert import convert_hf_checkpoint, from_hf
from llmlab.devices import available_devices, get_device, get_dtype, memory_bandwidth, synchronize, timed
from llmlab.generation import beam_search, decode_step, generate, prefill
from llmlab.kvcache import kv_cache_bytes
from llmlab.loading import load
from llmlab.model import Transformer
from llmlab.notebook import show_source
from llmlab.registry import gguf_path
from llmlab.numerics import assert_same_bits, assert_same_up_to_rounding, forward_depth

__version__ = "0.1.0"

__all__ = ["ModelConfig", "Transformer", "load", "gguf_path", "from_hf", "convert_hf_checkpoint", "generate", "prefill",
           "decode_step", "beam_search", "kv_cache_bytes", "as_ids", "get_device", "get_dtype", "available_devices",
           "synchronize", "timed", "memory_bandwidth", "show_source", "assert_same_up_to_rounding", "assert_same_bits",
           "forward_depth"]


def __getattr__(name: str):
    """`llmlab.logit_lens` and friends: say where the name lives instead of a bare AttributeError."""
    import importlib
    import importlib.util

    if name.startswith("_"):
        raise AttributeError(name)
    if importlib.util.find_spec(f"llmlab.{name}") is not None:   # a subpackage not imported yet
        return importlib.import_module(f"llmlab.{name}")
    for package in ("inspection", "tokenization", "stats", "kvcache"):
        if name in importlib.import_module(f"llmlab.{package}").__all__:
            raise AttributeError(f"llmlab has no attribute {name!r} at the top level; it lives in llmlab.{package}: "
                                 f"from llmlab.{package} import {name}")
    raise AttributeError(f"module 'llmlab' has no attribute {name!r}")
