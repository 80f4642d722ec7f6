# Two commands matter: `make demo` (the local end-to-end run) and `make test` (every check).
# Both set up what they need on a fresh machine: a pinned virtual environment and the pinned CDK CLI.

SHELL := /bin/bash
# The four environments of `setup` install side by side. Each of them installs quietly.
MAKEFLAGS += --jobs=4
VENV := .venv
PYTHON := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
SDK3_VENV := .venv-sdk3
# uv installs the pinned packages (pip still takes torch: only pip finds the machine's local CPU wheel). It resolves,
# fetches, unpacks and compiles to bytecode in parallel: the same packages in 60 s instead of pip's 169 s for
# requirements-dev.txt, 7 s instead of 48 s for checkov, on a 2-core machine. It trusts the system's certificates, as
# pip does here; it reads none of pip's index settings, so where it cannot install, pip installs the same pins.
UV := uv==0.13.9
UV_INSTALL := pip install --quiet --compile-bytecode --native-tls
PIP_INSTALL := -m pip install --quiet --disable-pip-version-check
# $(call install_pins,VENV,REQUIREMENTS,CONSTRAINTS): uv installs the pins into VENV; where it cannot, pip does.
install_pins = $(1)/bin/uv $(UV_INSTALL) --python $(1)/bin/python -r $(2) -c $(3) \
	|| (echo "uv could not install (above): pip installs the same pins" && \
	    $(1)/bin/python $(PIP_INSTALL) -r $(2) -c $(3))
ARGS ?=

# jsii prints a Node end-of-life banner on every start unless this lists the running Node's major version (`1` does not
# silence it); local_mode.aws.synthesized_app.quiet_node_environment sets the same for local mode's syntheses.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(shell $(or $(JSII_NODE),node) -p "process.versions.node.split('.')[0]" 2>/dev/null)
export CDK_DISABLE_VERSION_CHECK := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup test demo synth docs clean

setup: $(VENV)/.installed node_modules/.installed $(CHECKOV_VENV)/.installed $(SDK3_VENV)/.installed

# torch first and alone: the exact pin resolves to the local CPU wheel before anything can ask for a CUDA build, and
# uv then leaves that torch in place.
$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt
	python3 -m venv $(VENV)
	$(PYTHON) $(PIP_INSTALL) torch==2.13.0 $(UV)
	$(call install_pins,$(VENV),requirements-dev.txt,constraints.txt)
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# checkov pins an older boto3 than the app: it lives in its own environment.
$(CHECKOV_VENV)/.installed: requirements-checkov.txt constraints-checkov.txt
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python $(PIP_INSTALL) $(UV)
	$(call install_pins,$(CHECKOV_VENV),requirements-checkov.txt,constraints-checkov.txt)
	touch $@

# SageMaker Python SDK v3 (ModelTrainer) shares the `sagemaker` namespace with v2, which .venv holds: it lives in its
# own environment. Tests run ModelTrainer there; synthesis reads its container drivers from there
# (stacks/model_trainer_drivers.py).
$(SDK3_VENV)/.installed: requirements-sdk3.txt constraints-sdk3.txt
	python3 -m venv $(SDK3_VENV)
	$(SDK3_VENV)/bin/python $(PIP_INSTALL) $(UV)
	$(call install_pins,$(SDK3_VENV),requirements-sdk3.txt,constraints-sdk3.txt)
	touch $@

# Lint first: it fails in seconds, before the long test run, and reports in ruff's own format.
# Three pytest-xdist workers on CI's two cores: the suite keeps both cores busy starting processes and training, and
# a third worker fills the time the others spend waiting on their jobs (the whole suite on a 2-core machine, container
# environments cached: 998 s on two workers with the app's syntheses cached, 966 s on three with them cold).
# loadfile keeps each file's tests on one worker, so its module-scoped fixtures are built once; files go out in the
# order tests/conftest.py collects them (files with slow tests first), not re-sorted by their number of tests.
# The 25 slowest tests are listed at the end, so a run shows where its time went.
test: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=25

demo: setup
	$(PYTHON) -m local_mode $(ARGS)

synth: setup
	npx cdk synth --quiet $(ARGS)
	@echo "Templates: $(CURDIR)/cdk.out/*.template.json"

# The reference tables in docs/ are generated from the code; tests/unit/test_generated_docs.py fails while one is stale.
docs: setup
	$(PYTHON) -m tools.generate_docs

clean:
	rm -rf cdk.out local-runs .pytest_cache
