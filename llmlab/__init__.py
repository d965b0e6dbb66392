"""llmlab: every stage of a Transformer language model, from scratch, checked against real models."""
from llmlab.config import ModelConfig
from llmlab.convert import convert_hf_checkpoint, from_hf
from llmlab.devices import available_devices, get_device, get_dtype
from llmlab.generation import decode_step, generate, prefill
from llmlab.loading import load
from llmlab.model import Transformer
from llmlab.notebook import show_source

__version__ = "0.1.0"
