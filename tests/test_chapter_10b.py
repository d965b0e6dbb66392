"""Chapter 10b (how the weights are stored): the exercise checks accept a right answer and name the
wrong ones, the hand-written block decoders agree with the gguf package, and the byte counts hold."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from llmlab import assert_same_up_to_rounding
from llmlab.exercises import check
from llmlab.exercises.checks_quant import dequantize_q4_1_reference, q4_1_block
from llmlab.exercises.core import generator


# ----------------------------------------------------------------------------- dequantize_q4_1

def q4_1_right(block):
    d, m = struct.unpack("<ee", block[:4])
    qs = torch.tensor(list(block[4:20]))
    return torch.cat([qs & 0x0F, qs >> 4]).float() * d + m


def q4_1_interleaved(block):
    d, m = struct.unpack("<ee", block[:4])
    qs = torch.tensor(list(block[4:20]))
    return torch.stack([qs & 0x0F, qs >> 4], dim=1).reshape(32).float() * d + m


def q4_1_no_min(block):
    d, m = struct.unpack("<ee", block[:4])
    qs = torch.tensor(list(block[4:20]))
    return torch.cat([qs & 0x0F, qs >> 4]).float() * d


def q4_1_high_first(block):
    d, m = struct.unpack("<ee", block[:4])
    qs = torch.tensor(list(block[4:20]))
    return torch.cat([qs >> 4, qs & 0x0F]).float() * d + m


def q4_1_swapped(block):
    m, d = struct.unpack("<ee", block[:4])
    qs = torch.tensor(list(block[4:20]))
    return torch.cat([qs & 0x0F, qs >> 4]).float() * d + m


def test_q4_1_right_answer_passes():
    result = check("dequantize_q4_1", q4_1_right, quiet=True)
    assert result.passed, result.message


@pytest.mark.parametrize("wrong, words", [
    (q4_1_interleaved, "interleaved"), (q4_1_no_min, "forgot the minimum"),
    (q4_1_high_first, "high nibbles first"), (q4_1_swapped, "swapped"),
])
def test_q4_1_wrong_answers_are_named(wrong, words):
    result = check("dequantize_q4_1", wrong, quiet=True)
    assert not result.passed
    assert words in result.message, result.message


def test_q4_1_reference_matches_the_gguf_package():
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    g = generator(5)
    raw = b"".join(q4_1_block(g) for _ in range(4))
    ours = torch.cat([dequantize_q4_1_reference(raw[i:i + 20]) for i in range(0, 80, 20)])
    theirs = dequantize(np.frombuffer(raw, dtype=np.uint8), GGMLQuantizationType.Q4_1).reshape(-1)
    # d * q + m in float32 on both sides, written apart: a product and a sum
    assert_same_up_to_rounding(ours.numpy(), theirs, depth=2)


# ----------------------------------------------------------------------------- quantize_int8_rows

def int8_right(w):
    scale = w.abs().amax(dim=1) / 127
    return torch.round(w / scale[:, None]).to(torch.int8), scale


def int8_truncate(w):
    scale = w.abs().amax(dim=1) / 127
    return (w / scale[:, None]).to(torch.int8), scale


def int8_per_tensor(w):
    scale = (w.abs().max() / 127).expand(w.shape[0])
    return torch.round(w / scale[:, None]).to(torch.int8), scale


def int8_single_scale(w):
    scale = w.abs().max() / 127
    return torch.round(w / scale).to(torch.int8), scale


def int8_by_128(w):
    scale = w.abs().amax(dim=1) / 128
    return torch.round(w / scale[:, None]).clamp(-128, 127).to(torch.int8), scale


def test_int8_right_answer_passes():
    result = check("quantize_int8_rows", int8_right, quiet=True)
    assert result.passed, result.message


@pytest.mark.parametrize("wrong, words", [
    (int8_truncate, "rounding vs truncation"), (int8_per_tensor, "per-tensor instead of per-row"),
    (int8_single_scale, "per-tensor instead of per-row"), (int8_by_128, "127"),
])
def test_int8_wrong_answers_are_named(wrong, words):
    result = check("quantize_int8_rows", wrong, quiet=True)
    assert not result.passed
    assert words in result.message, result.message


# ----------------------------------------------------------------------------- the chapter's own code

CHAPTER = "chapters/10b_how_weights_are_stored_lab.ipynb"     # the lab reads the file byte by byte


def chapter_function(name: str) -> dict:
    """Run the chapter's code cell that defines `name` (with the chapter's imports) and return its namespace."""
    import json
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    cells = ["".join(c["source"]) for c in json.loads((root / CHAPTER).read_text())["cells"] if c["cell_type"] == "code"]
    source = next(c for c in cells if f"def {name}(" in c)
    end = source.find("\n\n\n", source.index(f"def {name}("))   # the cell's code after the definition
    source = source if end == -1 else source[:end]
    namespace = {}
    exec("import mmap, struct\nimport numpy as np\nimport torch\n"
         "from gguf import GGMLQuantizationType\n" + source, namespace)
    return namespace


def test_chapter_q4_k_decoder_matches_the_gguf_package():
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    dequantize_q4_k = chapter_function("dequantize_q4_k")["dequantize_q4_k"]
    rng = np.random.default_rng(0)
    for _ in range(5):
        block = (np.array([rng.uniform(0.001, 0.01), rng.uniform(0.001, 0.01)], dtype="<f2").tobytes()
                 + rng.integers(0, 256, 140, dtype=np.uint8).tobytes())
        ours = dequantize_q4_k(block)[0]
        theirs = dequantize(np.frombuffer(block, dtype=np.uint8), GGMLQuantizationType.Q4_K).reshape(-1)
        # d * scale * q - dmin * min in float32 on both sides, written apart: three products and a difference
        assert_same_up_to_rounding(ours, theirs, depth=4)


def test_chapter_header_reader_matches_the_gguf_package(tmp_path):
    from gguf import GGUFReader, GGUFWriter

    path = tmp_path / "tiny.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_string("general.name", "tiny")
    writer.add_token_list(["a", "b", "c"])
    writer.add_tensor("first", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.add_tensor("second", np.ones((2, 64), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    read_gguf_header = chapter_function("read_gguf_header")["read_gguf_header"]
    header, meta, tensors, data = read_gguf_header(path)
    reader = GGUFReader(str(path))
    assert header["n_tensors"] == len(reader.tensors) == 2
    assert meta["llama.block_count"] == 2 and meta["general.name"] == "tiny"
    assert meta["tokenizer.ggml.tokens"] == ["a", "b", "c"]
    for ours, theirs in zip(tensors, reader.tensors):
        assert ours["name"] == theirs.name and ours["dims"] == theirs.shape.tolist()
        assert ours["type"] == theirs.tensor_type.name
        assert header["data_start"] + ours["offset"] == theirs.data_offset


def test_chapter_keeps_its_build_machinery_and_its_bytes_out_of_the_way():
    """glue() only in hidden cells; the byte-level reader and decoders are folded; no unseen sources."""
    import json
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    cells = json.loads((root / CHAPTER).read_text())["cells"]
    for number, cell in enumerate(cells):
        source, tags = "".join(cell["source"]), cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code":   # glue() and the book-wide phrases: tests/test_book.py
            if re.search(r"def (read_gguf_header|dequantize_q4_k)\(|struct\.unpack_from", source):
                assert "hide-cell" in tags, f"cell {number}: byte-level code is not folded"
        else:
            assert "seed" not in source.lower(), f"cell {number}: 'seed'"
