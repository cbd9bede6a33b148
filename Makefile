# alibi-viz: two commands do everything on a fresh machine.
#   make run   create .venv, install, start the app on http://localhost:8501
#   make test  install (with dev tools, chromium, nginx and redis-server), lint, run the whole test suite
#   make test-quick  all but the browser and deployment tests (the cold-server storm is one): a development loop
#   make serve-class / make stop-class   the app for a class: replicas behind nginx (deploy/)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
CLASS_REPLICAS ?= 2
CLASS_PORT     ?= 8080
# Test workers (pytest-xdist): one per core and one more, at most 4 (each browser worker runs
# a Streamlit server and a chromium of its own, about 2 GB together). The extra worker has
# work for a core whose worker waits (a page settling, a server starting, a replica failing
# over): on 2 idle cores the parallel part took 425 s with 3 workers against 459 s and 463 s
# with 2 (2026-12-05, in place; busy 97% of the time against 90%). Two per core were tried
# before: a fresh clone's parallel part took 12 min 6 s, against 11 min 0 s with one per core
# (2026-12-04), and the cold-server storm took 114 s of its 150 s bound. `make test-quick`,
# whose tests wait for nothing, keeps one worker per core (QUICK_WORKERS): 129 s with 2
# against 138 s with 3, in place, one after the other.
CORES := $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 4 ] && n=4; echo $$n)
TEST_WORKERS ?= $(shell n=$$(( $(CORES) + 1 )); [ "$$n" -gt 4 ] && n=4; echo $$n)
QUICK_WORKERS ?= $(CORES)
# The modules that hold `solo` tests: the solo run collects only them (collecting all of
# tests/ to deselect all but two took 10 s).
SOLO_MODULES = $(shell grep -l 'pytest.mark.solo' tests/test_*.py)
PYTEST = $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup --no-loadscope-reorder \
	--durations=25

.PHONY: run test test-quick install install-dev lock chromium nginx redis lint bench clean corpus models serve-class stop-class messages

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# pyproject.toml declares the dependencies; pip-compile writes them, pinned, into the two lock
# files (`make lock`), which make installs, so a fresh clone today and in a month gets the same
# versions: requirements.lock for the app (`make run`), requirements-dev.lock for everything
# `make test` runs. The project itself is then installed editable without dependencies (the
# lock holds them), so `alibi_viz` and `alibi_viz_app` import from anywhere. Stamp files re-run
# pip only when a lock or pyproject.toml changes.
$(VENV)/.installed: requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-dev: requirements-dev.lock $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-dev.lock
	touch $@

# The lock files, from pyproject.toml's lists (after a change there): pip-tools' pip-compile.
LOCK = $(BIN)/pip-compile --quiet --strip-extras --allow-unsafe --no-emit-find-links \
	--no-emit-index-url pyproject.toml
lock: install-dev
	$(LOCK) --extra app --extra redis -o requirements.lock
	$(LOCK) --extra app --extra redis --extra dev -o requirements-dev.lock

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# Debian's chromium drives the browser tests (never `playwright install`: it downloads a browser).
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium missing and not root: browser tests will be skipped (apt-get install chromium)"; fi

# Debian's nginx fronts the class deployment (deploy/); its tests are skipped without it.
nginx:
	@if [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's nginx for the class deployment and its tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	else echo "nginx missing and not root: the deployment tests will be skipped (apt-get install nginx)"; fi

# Debian's redis-server: the class store's Redis tests start one of their own (tests/test_class_store.py);
# they are skipped without it.
redis:
	@if [ -x /usr/bin/redis-server ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's redis-server for the class store's Redis tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	else echo "redis-server missing and not root: the Redis tests will be skipped (apt-get install redis-server)"; fi

run: install
	$(BIN)/python -m alibi_viz_app.serve --server.address localhost --server.port $(PORT) \
		--browser.gatherUsageStats false

# ruff, then the library's layers (pyproject.toml): a lower layer importing a higher one fails.
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

# --durations=25: the slowest tests, printed on every run. tests/conftest.py groups the tests
# for the workers (a module's expensive fixture built once) and starts the longest first.
# Tests marked `solo` measure a time users wait for (a class's follow lag) and run after the
# others, with the machine to themselves.
test: WORKERS = $(TEST_WORKERS)
test: install-dev chromium nginx redis lint
	$(PYTEST) -m "not solo"
	$(BIN)/python -m pytest -m solo --durations=5 $(SOLO_MODULES)

test-quick: WORKERS = $(QUICK_WORKERS)
test-quick: install-dev lint
	$(PYTEST) -m "not browser and not deploy"

# A class on one machine: CLASS_REPLICAS Streamlit replicas behind nginx on port CLASS_PORT,
# for every address of this machine (deploy/README.md). Runs until `make stop-class`.
serve-class: install nginx
	deploy/run.sh start --replicas $(CLASS_REPLICAS) --port $(CLASS_PORT)

stop-class:
	deploy/run.sh stop

# Translations (alibi_viz/i18n.py, README "Languages"): extract every string marked _() or N_()
# into the template, then carry it into each language's catalog (new strings come in empty).
messages: install
	$(BIN)/pybabel extract -F babel.cfg -c TRANSLATORS: --add-location=file --sort-by-file \
		--project=alibi-viz --version=0.1.0 -w 100 -o alibi_viz/locale/messages.pot alibi_viz_app alibi_viz
	$(BIN)/pybabel update -i alibi_viz/locale/messages.pot -d alibi_viz/locale \
		--no-fuzzy-matching --ignore-obsolete -w 100

# The quick benchmarks; bench/README.md lists the long ones (model page vs bertviz, load test).
bench: install-dev chromium
	$(BIN)/python bench/bench_bias.py --browser
	$(BIN)/python bench/bench_compare.py
	$(BIN)/python bench/bench_heads.py
	$(BIN)/python bench/bench_live_eval.py
	$(BIN)/python bench/bench_engineering.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts

# The four-kind training corpus (experiments/corpus.py): pinned Debian 12 packages fetched with
# `apt-get download` (nothing installed), unpacked and extracted under corpus/ (git-ignored),
# checked against assets/corpus/manifest.json. Needs apt-get and dpkg-deb; as root it first runs
# `apt-get update` when apt has no package lists, as `chromium` does. About 300 MB on disk.
CORPUS_PROBE := gimp-help-ru
corpus: install
	@command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { \
		echo "make corpus needs apt-get and dpkg-deb (Debian 12 bookworm, or a container of it)"; \
		exit 1; }
	@if apt-cache show $(CORPUS_PROBE) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "apt has no package lists: running apt-get update for the corpus packages"; \
		apt-get update -qq; \
	else echo "apt knows no $(CORPUS_PROBE): run 'apt-get update' as root (Debian 12 bookworm" \
		"archive in /etc/apt/sources.list), then make corpus again"; exit 1; fi
	$(BIN)/python -m experiments.corpus build

# Retrain the shipped model family on the four-kind corpus (make corpus) and measure it: five
# models of the train-short-test-long comparison, the ALiBi one with training snapshots, and
# the learnable-slope variant beside them. About 18 min a model on an idle 2-core machine (run
# nothing else meanwhile), then about 30 min of evaluation, head ablation and slope sweeps; the
# model cards record the exact commands and what else ran.
FAMILY := alibi sinusoidal rope learned nope
SNAPSHOT_STEPS := 0,30,100,300,600,1000,2000,3000
models: install-dev corpus
	for a in $(FAMILY); do rm -rf assets/models/$$a && \
		$(BIN)/python -m experiments.train --arch $$a --out assets/models/$$a \
			$$( [ $$a = alibi ] && echo --snapshots $(SNAPSHOT_STEPS) ) || exit 1; done
	$(BIN)/python -m experiments.evaluate --models $(FAMILY)
	$(BIN)/python -m experiments.reach
	$(BIN)/python -m experiments.snapshots
	$(BIN)/python -m experiments.ablation
	$(BIN)/python -m experiments.rescale
	rm -rf assets/variants/learnable-slopes && $(BIN)/python -m experiments.train --arch alibi \
		--learn-slopes --out assets/variants/learnable-slopes
	$(BIN)/python -m experiments.learnable_slopes
	$(BIN)/python -m experiments.train --card assets/variants/learnable-slopes
