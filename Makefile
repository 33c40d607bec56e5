# clawkb — two-command quick start: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test bench calibrate lint venv clean system-deps install uninstall editors

$(STAMP): pyproject.toml setup.py src/clawkb/index/_bm25native.c src/clawkb/index/_blockmax.c src/clawkb/index/_postings.c src/clawkb/index/_packed.h src/clawkb/index/_dict.h src/clawkb/index/_bounds.h src/clawkb/index/_topk.h src/clawkb/index/_unpack.h src/clawkb/text/_toknative.c src/clawkb/text/_chunknative.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench,pdf,mcp,formats,fuzz,dense,rerank,server,milvus,lsp]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/python examples/run_demo.py

# `make install`: the `clawkb` command in every new shell. Links the venv's script into
# BINDIR — /usr/local/bin as root, else ~/.local/bin (on the PATH of Debian/Ubuntu login
# shells) — so edits to this checkout take effect at once. `make install BINDIR=DIR` elsewhere.
BINDIR ?= $(if $(filter 0,$(shell id -u)),/usr/local/bin,$(HOME)/.local/bin)

install: $(STAMP)
	@mkdir -p "$(BINDIR)"
	@ln -sfn "$(abspath $(BIN))/clawkb" "$(BINDIR)/clawkb"
	@echo "installed: $(BINDIR)/clawkb -> $(abspath $(BIN))/clawkb"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	  *) echo "note: $(BINDIR) is not on your PATH; add it for new shells:" \
	          "echo 'export PATH=\"$(BINDIR):\$$PATH\"' >> ~/.profile" ;; esac

uninstall:
	@if [ "$$(readlink "$(BINDIR)/clawkb")" = "$(abspath $(BIN))/clawkb" ]; then \
	  rm "$(BINDIR)/clawkb" && echo "removed $(BINDIR)/clawkb"; fi

# Debian packages for PDF OCR tests (Tesseract + Chinese/English data, a CJK font to
# draw scanned test pages), the browser test of the web page and the PDF-producer
# fixture (chromium, driven by Playwright; never `playwright install`) and the parser
# sandbox's seccomp library; installed only when missing, only as root.
OCR_DEBS := tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim fonts-wqy-microhei fonts-dejavu-core
SYSTEM_DEBS := $(OCR_DEBS) chromium libseccomp2

system-deps:
	@missing=$$(for p in $(SYSTEM_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; } \
	    || echo "note: could not install $$missing; the tests that need them will be skipped" >&2; \
	elif [ -n "$$missing" ]; then \
	  echo "note: missing Debian packages ($$missing); the tests that need them will be skipped" >&2; \
	fi

# NO_NATIVE_TESTS: the core tests again with the C extensions turned off, as on a machine
# without a compiler (the fallbacks must give the same results).
NO_NATIVE_TESTS := tests/test_lexical_index.py tests/test_chunker.py tests/test_packing.py \
	tests/test_search_path.py tests/test_golden.py tests/test_normalize.py tests/test_fuzz_segments.py

test: system-deps $(STAMP) editors
	$(BIN)/python -m pytest -q -p no:cacheprovider
	CLAWKB_NO_NATIVE=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(NO_NATIVE_TESTS)

# The editor packages (docs/editors.md): npm ci from the registry, build, then node's test
# runner against this checkout's clawkb. Skipped, with a note, only when node or npm is absent.
EDITOR_PACKAGES := editors/vscode editors/obsidian

editors: $(STAMP)
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  echo "note: node/npm not found; skipping the editor packages ($(EDITOR_PACKAGES))" >&2; \
	else \
	  for d in $(EDITOR_PACKAGES); do \
	    echo "== $$d"; \
	    ( cd $$d && npm ci --no-audit --no-fund --loglevel=error && npm run -s build \
	      && TEST_CLAWKB_BIN="$(abspath $(BIN))/clawkb" npm test ) || exit 1; \
	  done; \
	fi

# The older tree `make bench` measures next to this one and the peers (lexical engine, same
# run): the commit the issue-24 speed work started from; `make bench BENCH_OLD_REF=main`.
BENCH_OLD_REF ?= 4a2f33d

# `make bench`: every stage of bench/stages.py (lexical embed relevance service formats
# milvus); `make bench BENCH_STAGES="relevance formats"` runs some, BENCH_QUICK=1 each on a
# small input (its files go to bench/.cache/quick, the recorded results stay). bench/README.md.
BENCH_STAGES ?=
BENCH_QUICK ?=

bench: $(STAMP)
	$(BIN)/python bench/stages.py $(BENCH_STAGES) --old-ref $(BENCH_OLD_REF) $(if $(BENCH_QUICK),--quick)

# `make calibrate`: refit the abstain model `search` and `ask` ship
# (src/clawkb/retrieve/abstain_model.json) with tools/abstain_model.py; CALIBRATE_ARGS adds
# options, e.g. CALIBRATE_ARGS="--kb esp-idf-en=DIR --kb esp-idf-zh=DIR". tools/README.md.
CALIBRATE_ARGS ?=

calibrate: $(STAMP)
	OMP_NUM_THREADS=1 nice -n 10 $(BIN)/python tools/abstain_model.py $(CALIBRATE_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/mypy
	$(BIN)/mypy --strict src/clawkb/retrieve src/clawkb/backends src/clawkb/store src/clawkb/kb.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
