# Every target sets itself up: a fresh machine needs only python3.11+ and make.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# Local Ray must stay on loopback and never ask for tokens here.
export RAY_AUTH_MODE ?= disabled
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER ?= 0
export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S ?= 2
export RAY_USAGE_STATS_ENABLED ?= 0

.PHONY: venv demo test lint bench clean realserver image mutation

$(STAMP): pyproject.toml constraints.txt setup.py cupti_ext/_native.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(PY) examples/demo.py

# mypy must see the three folders under the names they install as: run on the folders
# themselves, every `pacekeeper.*` import resolves to nothing and goes unchecked.
TYPECHECK := build/typecheck

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	mkdir -p $(TYPECHECK)/pacekeeper
	for p in detector cupti_ext controller; do ln -sfn ../../../$$p $(TYPECHECK)/pacekeeper/$$p; done
	cd $(TYPECHECK) && ../../$(PY) -m mypy --config-file ../../pyproject.toml \
		-p pacekeeper.detector -p pacekeeper.cupti_ext -p pacekeeper.controller
	cd $(TYPECHECK) && MYPYPATH=. ../../$(PY) -m mypy --config-file ../../pyproject.toml \
		../../examples/demo.py ../../examples/demo_ranks.py ../../examples/ray_train_example.py

# The real-server tier's kube-apiserver, kube-controller-manager and etcd: built from
# Debian's packages (about 5 minutes on a fresh machine, needs root for apt), cached after.
realserver:
	bash tests/realserver/build.sh

# The controller image (Dockerfile), built offline: buildah over a Debian root filesystem
# from debootstrap, no registry (about 2 minutes on a fresh machine, needs root for apt,
# cached in ~/.cache/pacekeeper-image by a hash of its inputs). tests/k8s/test_image.py
# runs it. With a Docker engine: docker build -t pacekeeper-controller .
image:
	bash tests/image/build.sh

test: venv lint realserver image
	$(PY) -m pytest

# Mutation testing (docs/testing.md): mutmut over the modules named in pyproject.toml's
# [tool.pacekeeper-mutation], or only MODULES="detector/scoring.py ...", each run against
# its folder's fast unit tests. Writes build/mutation/summary.txt and summary.json; fails
# when a module scores under MUTATION_FAIL_UNDER percent. CPU-heavy: MUTATION_JOBS workers.
MODULES ?=
MUTATION_JOBS ?= $(shell nproc)
MUTATION_FAIL_UNDER ?= 90

mutation: venv
	$(PY) tests/mutation/run_mutation.py --modules "$(MODULES)" --jobs $(MUTATION_JOBS) \
		--fail-under $(MUTATION_FAIL_UNDER)

bench: venv
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info
