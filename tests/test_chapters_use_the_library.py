"""The chapters use llmlab's helpers instead of re-writing them, so a reader sees one way to do each thing:
token ids with llmlab.as_ids / tokenizer.encode_batch, hook names with hook_name, intermediates read with
capture and written with hooks, public names imported from their package."""
import json
import re
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).resolve().parent.parent / "chapters").glob("*.ipynb"))

RULES = {
    r"torch\.tensor\(\[\s*\w+\.encode\(": "a hand-written ids tensor: use llmlab.as_ids(model, tok, text)",
    r"""f["']blocks\.\{""": "a hand-written hook name: use hook_name(layer, point)",
    r"\.register_forward_hook\(": "a raw torch hook: read with capture(...), write with hooks(...)",
    r"from llmlab\.inspection\.\w+ import": "a submodule path: import from llmlab.inspection",
    r"from llmlab\.generation import .*pad_left": "pad_left lives in llmlab.tokenization (or use tok.encode_batch)",
    r"cache\.(keys|values|seq_len)\s*=": "a KV cache field written by hand: use cache.crop(n) / cache.expand(n)",
}


def code_lines(path: Path):
    for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            for line in "".join(cell["source"]).splitlines():
                yield number, line


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_uses_the_library_helpers(path):
    found = [f"cell {number}: {what}: {line.strip()[:100]}"
             for number, line in code_lines(path) for pattern, what in RULES.items() if re.search(pattern, line)]
    assert not found, f"{path.name}:\n" + "\n".join(found)
