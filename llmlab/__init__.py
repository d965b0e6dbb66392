"""llmlab: every stage of a Transformer language model, from scratch, checked against real models."""
from llmlab.devices import available_devices, get_device, get_dtype

__version__ = "0.1.0"
