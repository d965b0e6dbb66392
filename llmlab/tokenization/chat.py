"""Chat templates: how a conversation becomes the one string an instruction-tuned model reads.

The models were fine-tuned on conversations written in exactly one format; the special tokens
mark who speaks. Two families are written out here in plain Python (the originals are Jinja
templates that ship with the model; tests check ours against them).

ChatML (SmolLM2)::

    <|im_start|>system
    You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
    <|im_start|>user
    Hi!<|im_end|>
    <|im_start|>assistant

Gemma (the assistant is called "model"; a system message is glued to the first user turn)::

    <bos><start_of_turn>user
    Hi!<end_of_turn>
    <start_of_turn>model
"""
from __future__ import annotations

import re


def chatml(messages: list, add_generation_prompt: bool = True, system_prompt: str | None = None, **_) -> str:
    """ChatML, as SmolLM2 uses it: a default system turn is added when the conversation has none.

    >>> chatml([{"role": "user", "content": "Hi"}], system_prompt="Be brief.")
    '<|im_start|>system\\nBe brief.<|im_end|>\\n<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
    """
    text = ""
    if system_prompt is not None and messages and messages[0]["role"] != "system":
        text += f"<|im_start|>system\n{system_prompt}<|im_end|>\n"
    for message in messages:
        text += f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n"
    if add_generation_prompt:
        text += "<|im_start|>assistant\n"
    return text


def gemma(messages: list, add_generation_prompt: bool = True, bos_token: str = "<bos>", **_) -> str:
    """Gemma's turns. Roles must alternate user/assistant after an optional system message.

    >>> gemma([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "}])
    '<bos><start_of_turn>user\\nBe brief.\\n\\nHi<end_of_turn>\\n<start_of_turn>model\\n'
    """
    prefix = ""
    if messages and messages[0]["role"] == "system":
        prefix, messages = messages[0]["content"] + "\n\n", messages[1:]
    text = bos_token
    for index, message in enumerate(messages):
        if (message["role"] == "user") != (index % 2 == 0):
            raise ValueError("Gemma's chat format needs roles that alternate user/assistant/user/..., "
                             f"but message {index} has role {message['role']!r}.")
        role = "model" if message["role"] == "assistant" else message["role"]
        first = prefix if index == 0 else ""
        text += f"<start_of_turn>{role}\n{first}{message['content'].strip()}<end_of_turn>\n"
    if add_generation_prompt:
        text += "<start_of_turn>model\n"
    return text


TEMPLATES = {"chatml": chatml, "gemma": gemma}


def render(name: str, messages: list, add_generation_prompt: bool = True, **kwargs) -> str:
    """Render ``messages`` with the template called ``name`` (see ``TEMPLATES``)."""
    if name not in TEMPLATES:
        raise ValueError(f"Unknown chat template {name!r}; known: {sorted(TEMPLATES)}.")
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, dict) and "role" in m and "content" in m
                                                          for m in messages):
        raise TypeError('messages must be a list of dicts like {"role": "user", "content": "Hello"}.')
    return TEMPLATES[name](list(messages), add_generation_prompt, **kwargs)


def detect(template_text: str | None, tokens: dict) -> tuple:
    """(template name, default system prompt) for a model, from its Jinja template or vocabulary."""
    if "<start_of_turn>" in tokens:
        return "gemma", None
    if "<|im_start|>" in tokens:
        found = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template_text or "")
        return "chatml", found.group(1) if found else None
    return None, None
