# One entry point for developers and CI.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: help demo install test dev lint stubs bench clean interpreters

help:
	@echo "make demo   install psrec into $(VENV), record the demo workload and print its report"
	@echo "make test   install psrec (built wheel) into $(VENV), provision the test interpreters"
	@echo "            (tests/interpreters/provision) and run the test suite"
	@echo "make dev    editable install for development"
	@echo "make lint   ruff over every Python file, mypy over every part (run after make install"
	@echo "            or make dev: mypy reads the dependencies' types)"
	@echo "make stubs  the native recorder's stub (recorder/_recorder.pyi), from the installed build"
	@echo "make bench  the benchmark against py-spy and Austin (not part of make test)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# A real wheel, built and installed: what users get.
install: $(BIN)/python
	$(BIN)/pip install -q '.[test]'

demo: install
	$(BIN)/psrec record --force -o demo.psr -- $(BIN)/python tests/targets/demo_app.py
	$(BIN)/psrec report demo.psr --limit 15
	$(BIN)/psrec report demo.psr --html --force

# CPython 3.14, 3.15 (Debian sid, in a sid root) and a free-threaded 3.14, cached outside the
# clone; quick once made. Without root it only notes why the tests will skip them.
interpreters:
	bash tests/interpreters/provision

# The tests whose bounds hold against the CPU time the test itself takes (marked timing) run
# alone, after the others, which run three at a time; both parts run, and either failing fails.
test: install interpreters
	$(BIN)/python -m pytest -n 3 -m "not timing" --durations=10 tests; parallel=$$?; \
	$(BIN)/python -m pytest -m timing --durations=10 tests; alone=$$?; \
	test $$parallel -eq 0 && test $$alone -eq 0

dev: $(BIN)/python
	$(BIN)/pip install -q scikit-build-core nanobind ruff mypy
	$(BIN)/pip install -q --no-build-isolation -e '.[test]'

$(BIN)/ruff $(BIN)/mypy: $(BIN)/python
	$(BIN)/pip install -q ruff mypy

# mypy checks the recorder against its native module's stub; tests/unit/test_native_stubs.py
# fails when the stub is not what stubgen makes of the build. It reads the tree as the one
# package it installs as (psrec, psrec.format, psrec.analyzer, psrec.recorder), through links
# in a folder of their own: an editable install maps the parts through an import hook mypy
# cannot follow, and the wheel CI installs would be read in place of the tree.
lint: $(BIN)/ruff $(BIN)/mypy
	$(BIN)/ruff check .
	rm -rf build/lint && mkdir -p build/lint/psrec
	for f in package/psrec/*; do ln -s "$(CURDIR)/$$f" build/lint/psrec/; done
	for p in format analyzer recorder; do ln -s "$(CURDIR)/$$p" build/lint/psrec/$$p; done
	cd build/lint && MYPYPATH="$(CURDIR)/build/lint" "$(abspath $(BIN))/mypy" \
		--config-file "$(CURDIR)/pyproject.toml" -p psrec

stubs:
	$(BIN)/python -m nanobind.stubgen -q -m psrec.recorder._recorder -o recorder/_recorder.pyi

bench: install
	$(BIN)/python -m tests.perf

clean:
	rm -rf build dist $(VENV) .pytest_cache
