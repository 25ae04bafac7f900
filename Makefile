# The two commands: `make run` and `make test`. Both create .venv when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install clean

$(STAMP): pyproject.toml setup.py multigrain/components/heads/_viterbi.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: it takes the local CPU wheel (an open range pulls a CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/multigrain quickstart

# -rs: one line per skipped test saying why (the browser test without Chromium); --durations: the
# slowest tests, to keep the suite inside CI's budget. TEST_WORKERS pytest-xdist processes (CI has
# 2 cores), each taking whole files (--dist loadfile: a file's module fixtures are made once);
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -rs --durations=15 tests

clean:
	rm -rf $(VENV) runs mlruns.db mlruns test-artifacts build multigrain/components/heads/_viterbi*.so
