"""The GPU rehearsal's CPU-side logic (scripts/gpu_rehearsal.py, `make gpu`), tested without a GPU:
the comparison with the CPU build on small executed notebooks, the tables and the record, the refusal
to run (exit 2) where torch sees no CUDA, and the whole pipeline on two tiny notebooks with --cpu."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_rehearsal as rehearsal  # noqa: E402
from llmlab import assert_same_bits  # noqa: E402

NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}      # torch sees no GPU, on any machine


# ------------------------------------------------------------------ comparing two printed values

@pytest.mark.parametrize("cpu, gpu, kind, why", [
    ("' Paris.\\n\\nThe answer is:'", "' Paris.\\n\\nThe answer is:'", "same", ""),
    ("' Paris.'", "' Lyon.'", "differs", "text"),                   # a greedy continuation changed
    ("top-1 id 9", "top-1 id 10", "differs", "integer 9 != 10"),   # an argmax token changed
    ("0.7725387215614319", "0.7725391", "close", ""),               # float32 rounding between devices
    ("p = 0.12", "p = 0.13", "close", ""),                           # printed to 2 digits: one unit apart
    ("p = 0.12", "p = 0.15", "differs", "0.12 vs 0.15 (relative difference 2.0e-01)"),
    ("0.7725387215614319", "0.7735387215614319", "differs", "0.7725387215614319 vs 0.7735387215614319 "
                                                            "(relative difference 1.3e-03)"),
    ("5", "5.0", "close", ""),                                       # an integer printed as a float: compared as numbers
    ("nan", "nan", "same", ""),
    ("loss 1.5", "loss nan", "differs", "text"),
])
def test_compare_texts(cpu, gpu, kind, why):
    verdict = rehearsal.compare_texts(cpu, gpu)
    assert (verdict.kind, verdict.why) == (kind, why)


def test_the_tolerance_is_the_one_given_and_the_largest_difference_is_reported():
    verdict = rehearsal.compare_texts("x 1.000000001 y 2.00000000001", "x 1.000400001 y 2.00000000003", rtol=1e-3)
    # 4e-4 is the relative difference written to one digit (exactly 0.0004 / 1.000000001 = 3.9999996e-4), so
    # rel=1e-3 is the room that one-digit value needs, not float rounding
    assert verdict.kind == "close" and verdict.largest == pytest.approx(4e-4, rel=1e-3)
    assert rehearsal.compare_texts("1.000000001", "1.000400001", rtol=1e-4).kind == "differs"
    # bit for bit: last_digit is the power of ten 10.0 ** (exponent - decimals)
    assert_same_bits(rehearsal.last_digit("0.12"), 10.0 ** -2)
    assert_same_bits(rehearsal.last_digit("3.5e-03"), 10.0 ** -4)
    assert rehearsal.last_digit("0.7725387215614319") == 0.0 and rehearsal.last_digit("42") == 1.0


# ------------------------------------------------------------------ comparing two executed notebooks

def glue_output(name, text):
    """A glue() output as MyST-NB's glue writes it into an executed notebook."""
    prefix = "application/papermill.record/"
    return new_output("display_data", data={prefix + "text/plain": text},
                      metadata={"scrapbook": {"name": name, "mime_prefix": prefix}})


def executed(cells):
    """A notebook from [(source, [printed lines], {glue name: text})]."""
    nb = new_notebook()
    for source, lines, glued in cells:
        outputs = [new_output("stream", name="stdout", text="".join(line + "\n" for line in lines))] if lines else []
        outputs += [glue_output(name, text) for name, text in glued.items()]
        nb.cells.append(new_code_cell(source, outputs=outputs))
    return nb


def cpu_build(tmp_path, cells):
    """The CPU build's copy, as MyST-NB leaves it: glue outputs moved out into <stem>.glue.json."""
    folder = tmp_path / "cpu" / "chapters"
    folder.mkdir(parents=True)
    nb = executed([(source, lines, {}) for source, lines, _ in cells])
    nbformat.write(nb, folder / "ch.ipynb")
    glue = {name: {"output_type": "display_data", "data": {"text/plain": text}}
            for _, _, glued in cells for name, text in glued.items()}
    (folder / "ch.glue.json").write_text(json.dumps(glue))
    return folder / "ch.ipynb"


CPU_CELLS = [
    ("out = generate(model, ids, 8)\nprint(repr(text))", ["' Paris.\\n\\nThe answer is:'"], {"ch_greedy": "9"}),
    ("p = probs[paris]\nprint(f'p = {p:.4f}')", ["p = 0.7725"], {"ch_p": "0.7725387215614319", "ch_n": "30"}),
    ("print(f'step took {ms:.1f} ms on {device}')", ["step took 12.5 ms on cpu"], {"step_ms_cpu": "12.5"}),
    ("print(sampled)", ["the sea was calm"], {}),
]


def compare(tmp_path, gpu_cells, **kwargs):
    reference = cpu_build(tmp_path, CPU_CELLS)
    return rehearsal.compare_notebooks(reference, json.loads(nbformat.writes(executed(gpu_cells))), **kwargs)


def test_a_gpu_run_equal_to_the_cpu_build_but_for_its_timings(tmp_path):
    gpu = [CPU_CELLS[0], CPU_CELLS[1], ("print(f'step took {ms:.1f} ms on {device}')", ["step took 0.9 ms on cuda"],
                                         {"step_ms_cpu": "0.9"}), CPU_CELLS[3]]
    c = compare(tmp_path, gpu)
    assert c.glue == {"same": 3, "close": 0, "differs": 0, "machine": 1, "missing": 0}
    assert c.lines == {"same": 3, "close": 0, "differs": 0, "machine": 1}
    assert c.differences == [] and c.largest == 0.0 and c.cells_changed == 0


def test_numbers_within_the_tolerance_are_close_and_the_largest_difference_is_named(tmp_path):
    gpu = [CPU_CELLS[0], ("p = probs[paris]\nprint(f'p = {p:.4f}')", ["p = 0.7726"],
                          {"ch_p": "0.7725391", "ch_n": "30"}), CPU_CELLS[2], CPU_CELLS[3]]
    c = compare(tmp_path, gpu)
    assert c.glue["close"] == 1 and c.lines["close"] == 1 and not c.differences
    # the largest difference the tolerance forgave: about one unit of the printed 4th decimal relative to the
    # value (1e-4 / 0.7726); rel=1e-2 is the room that approximate expectation needs, not float rounding
    assert c.largest == pytest.approx(1e-4 / 0.7726, rel=1e-2) and c.largest_at == "code cell 1"


def test_a_changed_greedy_continuation_and_glued_integer_are_found(tmp_path):
    gpu = [("out = generate(model, ids, 8)\nprint(repr(text))", ["' Lyon.\\n\\nThe answer is:'"], {"ch_greedy": "8"}),
           CPU_CELLS[1], CPU_CELLS[2], ("print(sampled)", ["the sea was rough"], {})]
    c = compare(tmp_path, gpu)
    assert c.glue["differs"] == 1 and c.lines["differs"] == 2
    assert ["glue ch_greedy", "9", "8", "integer 9 != 8"] in c.differences
    assert ["code cell 0", "' Paris.\\n\\nThe answer is:'", "' Lyon.\\n\\nThe answer is:'", "text"] in c.differences
    assert ["code cell 3", "the sea was calm", "the sea was rough", "text"] in c.differences


def test_a_number_beyond_the_tolerance_and_a_missing_glue(tmp_path):
    gpu = [CPU_CELLS[0], ("p = probs[paris]\nprint(f'p = {p:.4f}')", ["p = 0.7725"], {"ch_p": "0.80", "ch_new": "1"}),
           CPU_CELLS[2], CPU_CELLS[3]]
    c = compare(tmp_path, gpu, rtol=1e-3)
    assert c.compared and c.glue["differs"] == 1 and c.glue["missing"] == 2   # ch_n on the CPU only, ch_new on the GPU
    why = next(d[3] for d in c.differences if d[0] == "glue ch_p")
    assert why.startswith("0.7725387215614319 vs 0.80")


def test_a_notebook_edited_since_the_cpu_build_is_not_compared(tmp_path):
    gpu = [*CPU_CELLS[:3], ("print(sampled.upper())", ["THE SEA WAS CALM"], {})]
    c = compare(tmp_path, gpu)
    assert not c.compared and c.cells_changed == 1 and c.differences == []
    assert c.reference == "the CPU build ran an older version (1 code cells differ; run make book to compare)"
    (tmp_path / "again").mkdir()
    assert compare(tmp_path / "again", CPU_CELLS[:3]).cells_changed == 1      # a cell removed


def test_cpu_glued_values_come_from_the_glue_file_or_the_outputs(tmp_path):
    reference = cpu_build(tmp_path, CPU_CELLS)
    assert rehearsal.cpu_glued_values(reference)["ch_p"] == "0.7725387215614319"
    reference.with_suffix(".glue.json").unlink()
    nbformat.write(executed(CPU_CELLS), reference)                    # glue still in the outputs
    assert rehearsal.cpu_glued_values(reference) == {"ch_greedy": "9", "ch_p": "0.7725387215614319", "ch_n": "30",
                                                      "step_ms_cpu": "12.5"}
    assert rehearsal.reference_for(ROOT / "chapters" / "00_setup.ipynb", tmp_path) == tmp_path / "chapters" / "00_setup.ipynb"


# ------------------------------------------------------------------ the tables and the record

RESULTS = [
    {"notebook": "chapters/00_setup.ipynb", "ok": True, "error": "", "seconds": 12.34, "cuda_used": True,
     "allocated": 3 * 2**29, "reserved": 2**31, "comparison": None},
    {"notebook": "practise/02_tokens_and_bpe.ipynb", "ok": False, "seconds": 3.0, "cuda_used": False,
     "allocated": 0, "reserved": 0, "error": "cell 7: RuntimeError: Expected all tensors on the same device | cuda:0",
     "comparison": None},
]


def test_run_table_has_a_row_per_notebook_with_time_memory_and_verdict():
    lines = rehearsal.run_table(RESULTS).splitlines()
    assert lines[0].startswith("| notebook | seconds | peak CUDA memory")
    assert lines[2] == "| chapters/00_setup.ipynb | 12.3 | 1.50 / 2.00 | passed |"
    assert lines[3] == ("| practise/02_tokens_and_bpe.ipynb | 3.0 | CUDA not used | **failed**: cell 7: RuntimeError: "
                        "Expected all tensors on the same device \\| cuda:0 |")


def test_comparison_table_counts_states_the_tolerance_and_lists_differences(tmp_path):
    gpu = [("out = generate(model, ids, 8)\nprint(repr(text))", ["' Lyon.\\n\\nThe answer is:'"], {"ch_greedy": "9"}),
           *CPU_CELLS[1:]]
    results = [dict(RESULTS[0], comparison=rehearsal.asdict(compare(tmp_path, gpu))),
               dict(RESULTS[1], comparison=rehearsal.asdict(rehearsal.Comparison(reference="none", compared=False))),
               dict(RESULTS[0], notebook="chapters/01.ipynb",
                    comparison=rehearsal.asdict(rehearsal.Comparison(compared=False, cells_changed=2)))]
    text = rehearsal.comparison_table(results, 1e-3, 1e-6)
    assert text.startswith("Tolerance: relative 0.001, absolute 1e-06")
    assert "| chapters/00_setup.ipynb | 3 | 0 | 0 | 1 | 3 | 0 | 1 | 0 | 0 |" in text
    assert "- chapters/00_setup.ipynb, code cell 0: CPU `' Paris.\\n\\nThe answer is:'`, GPU `' Lyon." in text
    assert "Not compared (no executed copy in the CPU build): 1 notebooks, practise/02_tokens_and_bpe.ipynb." in text
    assert "Not compared (edited since the CPU build ran them; make book, then compare again): 1 notebooks, " \
           "chapters/01.ipynb." in text


def test_the_record_names_card_versions_date_and_holds_the_tables(tmp_path):
    path = tmp_path / "record.md"
    rehearsal.write_record(path, "2026-11-28 04:00 UTC", "NVIDIA H100 80GB HBM3 (79 GiB), torch 2.13.0, CUDA 12.8", 8,
                           rehearsal.run_table(RESULTS), "Tolerance: ...", "14 passed in 80.1s", "  llmlab ... 1.9x\n")
    text = path.read_text()
    assert text.startswith("Recorded on 2026-11-28 04:00 UTC on NVIDIA H100 80GB HBM3 (79 GiB), torch 2.13.0, CUDA 12.8, "
                           "8 notebooks at a time")
    assert rehearsal.run_table(RESULTS) in text and "14 passed in 80.1s" in text and "```text\nllmlab ... 1.9x\n```" in text


def test_the_appendix_shows_the_committed_record_or_says_none_was_made():
    appendix = (ROOT / "chapters" / "appendix_build_report.md").read_text()
    assert "```{include} ../benchmarks/gpu_rehearsal.md" in appendix
    record = rehearsal.RECORD.read_text()
    assert record == rehearsal.RECORD_NONE or record.startswith("Recorded on ") and "| notebook | seconds |" in record


# ------------------------------------------------------------------ running it

def run_script(*args, env=NO_GPU):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_rehearsal.py"), *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_without_cuda_it_says_so_and_exits_2_having_run_nothing(tmp_path):
    result = run_script("--out", tmp_path / "out", "--record", tmp_path / "record.md")
    assert result.returncode == rehearsal.NO_CUDA_EXIT == 2
    assert result.stderr.startswith("No CUDA GPU: torch ") and "has run nothing" in result.stderr
    assert "scripts/gpu_rehearsal.py --cpu" in result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "record.md").exists()


def test_the_decode_benchmark_cuda_mode_refuses_without_cuda():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "decode_benchmark.py"), "--cuda"], cwd=ROOT,
                            env=NO_GPU, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "--cuda needs a CUDA GPU" in result.stderr


def test_make_gpu_runs_the_script():
    result = subprocess.run(["make", "-n", "gpu"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0 and "scripts/gpu_rehearsal.py" in result.stdout


def test_dry_run_lists_the_plan_and_runs_nothing(tmp_path):
    result = run_script("--dry-run", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    notebooks = sorted((ROOT / "chapters").glob("*.ipynb")) + sorted((ROOT / "practise").glob("*.ipynb"))
    assert f"{len(notebooks)} notebooks" in result.stdout
    assert all(f"  {p.relative_to(ROOT)}  -> " in result.stdout for p in notebooks)
    assert not (tmp_path / "out").exists()


def test_a_path_that_is_not_a_notebook_is_refused(tmp_path):
    result = run_script("--cpu", tmp_path / "missing.ipynb", "--out", tmp_path / "out")
    assert result.returncode == 1 and "Not a notebook file:" in result.stderr and "missing.ipynb" in result.stderr


def test_default_jobs_follow_the_card_memory_and_the_cores():
    assert rehearsal.default_jobs(80 * 2**30, 16) == 8          # an H100: the cores limit it
    assert rehearsal.default_jobs(16 * 2**30, 16) == 2          # a T4: the memory does
    assert rehearsal.default_jobs(8 * 2**30, 2) == 1


def test_the_pipeline_on_the_cpu_with_two_tiny_notebooks(tmp_path):
    """--cpu: both notebooks run at once in their own kernels; the passing one is compared with its CPU
    build (one glued value and one printed line differ on purpose), the failing one reports its error;
    nothing is recorded, and the exit status is 1 because a notebook failed."""
    folder = tmp_path / "chapters"
    folder.mkdir()
    good = new_notebook(cells=[new_code_cell("import torch\nfrom myst_nb import glue\nx = torch.arange(4)\n"
                                             "print('sum', int(x.sum()))\nprint('mean', float(x.float().mean()))\n"
                                             "glue('tiny_sum', int(x.sum()), display=False)\n"
                                             "glue('tiny_mean', float(x.float().mean()), display=False)")])
    bad = new_notebook(cells=[new_code_cell("print('before')"), new_code_cell("1 / 0")])
    nbformat.write(good, folder / "tiny.ipynb")
    nbformat.write(bad, folder / "broken.ipynb")
    build = tmp_path / "cpu" / "chapters"
    build.mkdir(parents=True)
    nbformat.write(executed([(good.cells[0].source, ["sum 6", "mean 1.5001"], {})]), build / "tiny.ipynb")
    (build / "tiny.glue.json").write_text(json.dumps({"tiny_sum": {"data": {"text/plain": "7"}},
                                                      "tiny_mean": {"data": {"text/plain": "1.5"}}}))
    out, record = tmp_path / "out", tmp_path / "record.md"
    result = run_script("--cpu", "--jobs", 2, folder / "tiny.ipynb", folder / "broken.ipynb", "--out", out,
                        "--cpu-build", tmp_path / "cpu", "--record", record)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    tiny, broken = report["notebooks"]
    assert (tiny["ok"], tiny["error"], tiny["cuda_used"], tiny["allocated"]) == (True, "", False, 0)
    assert (broken["ok"], broken["error"]) == (False, "cell 1: ZeroDivisionError: division by zero")
    assert tiny["comparison"]["glue"] == {"same": 1, "close": 0, "differs": 1, "machine": 0, "missing": 0}
    assert tiny["comparison"]["lines"] == {"same": 1, "close": 1, "differs": 0, "machine": 0}
    assert ["glue tiny_sum", "7", "6", "integer 7 != 6"] in tiny["comparison"]["differences"]
    assert not broken["comparison"]["compared"]
    written = nbformat.read(out / "chapters" / "broken.ipynb", as_version=4)
    assert len(written.cells) == 2 and written.cells[0].outputs[0]["text"] == "before\n"   # the probe is not kept
    assert "1 of 2 notebooks passed" in result.stdout and "**failed**: cell 1: ZeroDivisionError" in result.stdout
    report_md = (out / "report.md").read_text()
    assert "broken.ipynb | " in report_md and "| **failed**: cell 1: ZeroDivisionError" in report_md
    assert "glue tiny_sum: CPU `7`, GPU `6` (integer 7 != 6)" in report_md
    assert not record.exists()


def test_the_test_and_benchmark_summaries(monkeypatch):
    pytest_out = ("....F\n=== short test summary info ===\nFAILED tests/test_gpu.py::test_x - AssertionError\n"
                  "1 failed, 4 passed in 9.10s\n")
    monkeypatch.setattr(rehearsal.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, pytest_out, ""))
    assert rehearsal.run_tests() == (False, "1 failed, 4 passed in 9.10s")
    monkeypatch.setattr(rehearsal.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "== cuda ==\n",
                                                                                                 "OutOfMemoryError"))
    ok, text = rehearsal.run_benchmark()
    assert not ok and text.startswith("== cuda ==\n") and "(exit 1)" in text and "OutOfMemoryError" in text


def test_a_complete_run_on_cuda_writes_the_record(tmp_path, monkeypatch, capsys):
    """What `make gpu` does on a GPU machine, with the machine's answers stood in for (the card, the tests,
    the benchmark) and one tiny notebook as the whole book: every part runs and the record is written."""
    folder = tmp_path / "chapters"
    folder.mkdir()
    nbformat.write(new_notebook(cells=[new_code_cell("print('ok')")]), folder / "tiny.ipynb")
    monkeypatch.setattr(rehearsal, "notebooks_to_run", lambda names: [folder / "tiny.ipynb"])
    monkeypatch.setattr(rehearsal, "cuda_problem", lambda: None)
    monkeypatch.setattr(rehearsal, "card_memory", lambda: 80 * 2**30)
    monkeypatch.setattr(rehearsal, "card_line", lambda: "NVIDIA H100 (79 GiB), torch 2.13.0, CUDA 12.8")
    monkeypatch.setattr(rehearsal, "run_tests", lambda: (True, "19 passed in 95.00s"))
    monkeypatch.setattr(rehearsal, "run_benchmark", lambda: (True, "  batch 1: llmlab ... 1.50x transformers\n"))
    record = tmp_path / "record.md"
    status = rehearsal.main(["--jobs", "1", "--out", str(tmp_path / "out"), "--cpu-build", str(tmp_path / "none"),
                             "--record", str(record)])
    assert status == 0, capsys.readouterr().out
    text = record.read_text()
    assert text.startswith("Recorded on ") and "on NVIDIA H100 (79 GiB), torch 2.13.0, CUDA 12.8, 1 notebooks" in text
    assert "| tiny.ipynb |" in text.replace(str(folder) + "/", "") and "| passed |" in text
    assert "19 passed in 95.00s" in text and "batch 1: llmlab ... 1.50x transformers" in text
