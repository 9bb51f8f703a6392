# kiln's developer entry points. `make demo` and `make test` work on a fresh machine: they build
# .venv first. torch is installed on its own, pinned, so pip takes the CPU wheel and never pulls
# a multi-GB CUDA build.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUILD := build

.PHONY: install demo test test-fast fuzz lint clean models docs

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,zoo,kernels]'
	touch $@

demo: install
	@mkdir -p $(BUILD)
	$(BIN)/kiln compile examples/mlp.py --target llvm-cpu -o $(BUILD)/mlp.vmfb --verify
	$(BIN)/kiln run $(BUILD)/mlp.vmfb --random
	$(BIN)/python examples/demo.py $(BUILD)/mlp.vmfb

test: install
	$(BIN)/python -m pytest -q tests targets

# The whole model-family suite (kiln families): rewrites conformance/families.json and FAMILIES.md.
# In a virtualenv of its own: timm needs torchvision, and PyPI's torchvision (a CUDA build) breaks
# `import transformers` beside torch's CPU wheel in any process that has not imported it the way
# kiln.conformance.families does; .venv stays without it.
MODELS_VENV := .venv-models

models: $(MODELS_VENV)/.installed
	HF_HUB_OFFLINE=1 $(MODELS_VENV)/bin/kiln families -j 2

$(MODELS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(MODELS_VENV)
	$(MODELS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MODELS_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(MODELS_VENV)/bin/python -m pip install --quiet -e '.[test,families]'
	touch $@

# The long part of the reliability suite (tests/reliability): 10x the fuzzed cases, every compile
# stage killed, the load figures at full size. KILN_FUZZ_SEED=N varies the corpus.
fuzz: install
	$(BIN)/python -m pytest -q -s -m fuzz tests/reliability

# The documentation site (mkdocs.yml, docs/) into build/site/; tests/test_docs.py builds it too and
# runs every command it shows.
docs: install
	$(BIN)/mkdocs build --strict

lint: install
	$(BIN)/ruff check kiln compiler passes targets runtime measure tune conformance cli examples tests benchmarks

clean:
	rm -rf $(BUILD) .pytest_cache *.stages
