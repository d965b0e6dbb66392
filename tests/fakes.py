"""Small stand-ins shared by the tests."""
import torch

from llmlab import Transformer
from llmlab.config import ModelConfig


def tiny(preset="tiny-llama", device="cpu", seed=0):
    """A tiny random model of `preset`, its matrices scaled by 5: the random init is so small that every
    attention row and lens row would look alike; larger weights make layers, heads and prompts differ."""
    torch.manual_seed(seed)
    model = Transformer(ModelConfig.preset(preset)).eval().to(device)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(5.0) if p.dim() > 1 else None
    return model


class CharTokenizer:
    """a..z and space, one id each (other ids decode as <id>): enough to drive a tiny random model."""

    alphabet = " abcdefghijklmnopqrstuvwxyz"

    def encode(self, text, add_special_tokens=True):
        return [self.alphabet.index(c) for c in text.lower() if c in self.alphabet]

    def decode(self, ids):
        return "".join(self.alphabet[i] if i < len(self.alphabet) else f"<{i}>" for i in ids)
