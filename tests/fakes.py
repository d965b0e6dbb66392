"""Small stand-ins shared by the tests."""


class CharTokenizer:
    """a..z and space, one id each (other ids decode as <id>): enough to drive a tiny random model."""

    alphabet = " abcdefghijklmnopqrstuvwxyz"

    def encode(self, text, add_special_tokens=True):
        return [self.alphabet.index(c) for c in text.lower() if c in self.alphabet]

    def decode(self, ids):
        return "".join(self.alphabet[i] if i < len(self.alphabet) else f"<{i}>" for i in ids)
