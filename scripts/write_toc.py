"""Write _toc.yml: the book's Parts in reading order (only chapters that exist are listed).

A chapter's lab (chapters/NN_name_lab.ipynb), where there is one, is listed as a section of its lesson."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = [
    ("Getting started", ["00_setup"]),
    ("Part I. The big picture", ["01_a_model_is_a_function"]),
    ("Part II. From text to vectors", ["02_tokens_and_bpe", "03_embeddings", "04_position"]),
    ("Part III. Inside a block", ["05_self_attention", "06_feed_forward", "07_residuals_and_norms",
                                  "08_the_whole_stack"]),
    ("Part IV. From vectors back to text", ["09_lm_head_and_sampling"]),
    ("Part V. Inference", ["10_kv_cache", "10b_how_weights_are_stored", "11_attention_at_scale"]),
    ("Part VI. Training and other architectures", ["12_training", "13_encoders_decoders"]),
    ("Part VII. Looking inside a trained model", ["14_contextual_representations", "15_logit_lens",
                                                  "16_steering_and_patchscopes"]),
    ("Appendices", ["appendix_glossary", "appendix_notation", "appendix_evidence", "appendix_instructor",
                    "appendix_further_reading", "appendix_live_model", "appendix_build_report"]),
]
lines = ["# Table of contents: the book's Parts and chapters, in reading order.",
         "format: jb-book", "root: intro", "parts:"]
for caption, stems in PARTS:
    present = [s for s in stems if any((ROOT / "chapters" / f"{s}{ext}").exists() for ext in (".ipynb", ".md"))]
    if present:
        lines += [f"  - caption: {caption}", "    chapters:"]
        for s in present:
            lines.append(f"      - file: chapters/{s}")
            if (ROOT / "chapters" / f"{s}_lab.ipynb").exists():
                lines += ["        sections:", f"          - file: chapters/{s}_lab"]
(ROOT / "_toc.yml").write_text("\n".join(lines) + "\n")
print((ROOT / "_toc.yml").read_text())
