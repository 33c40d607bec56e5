# clawkb — two-command quick start: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test bench lint venv clean system-deps

$(STAMP): pyproject.toml setup.py src/clawkb/index/_bm25native.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench,pdf,mcp,formats,fuzz,dense,rerank]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/python examples/run_demo.py

# Debian packages for PDF OCR tests (Tesseract + Chinese/English data, a CJK font to
# draw scanned test pages); installed only when missing, only as root.
OCR_DEBS := tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim fonts-wqy-microhei fonts-dejavu-core
# libseccomp2: the parser sandbox's seccomp filter (pyseccomp loads it; usually present).
SANDBOX_DEBS := libseccomp2

system-deps:
	@missing=$$(for p in $(OCR_DEBS) $(SANDBOX_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; } \
	    || echo "note: could not install $$missing; OCR tests will be skipped" >&2; \
	elif [ -n "$$missing" ]; then \
	  echo "note: missing Debian packages ($$missing); OCR tests will be skipped" >&2; \
	fi

test: system-deps $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python bench/run_all.py
	$(BIN)/python bench/cli_latency.py
	$(BIN)/python bench/hardware_context.py
	$(BIN)/python bench/soak.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
