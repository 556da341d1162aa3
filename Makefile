# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv, installs torch first (TORCH_SPEC; the CPU wheel here), then the package.
VENV ?= .venv
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup demo test test-full benchmark clean

setup: $(VENV)/.installed

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -e ".[dev]"
	# fairseq pulls in torchaudio, whose newest wheel may not load with the torch installed above
	# (fairseq needs it only for speech tasks): keep it only when it imports.
	$(BIN)/python -c "import torchaudio" 2>/dev/null || $(BIN)/python -m pip uninstall -y torchaudio
	touch $@

demo: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/context_mt/demo.sh

# Two workers (the suite's processes use one thread each); --dist loadfile keeps each test file on
# one worker, so a module's trained fixtures are trained once; --no-loadscope-reorder hands out the
# modules in the order conftest.py gives them (the long ones first).
test: setup
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests

test-full: setup
	$(BIN)/python -m pytest -q -m "full_matrix or long" tests

benchmark: setup
	$(BIN)/python -m benchmarks.context_speed

clean:
	rm -rf work
