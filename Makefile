# binlake developer entry points. See README.md.
#
#   make setup   idempotent: .venv from requirements.lock, JVM jars via Maven into .jars/,
#                system packages (mariadb, docker-compose) via apt when missing.
#   make demo    end-to-end run of the nightly DAG on the bundled sample binlogs.
#   make lint    ruff + mypy (config in pyproject.toml); fails on any finding.
#   make test-fast  the `unit` tests only, no setup: the two-minute loop.
#   make test    lint, the extension's cargo tests (when it is built), then pytest over tests/ on 3 xdist
#                workers, incl. the scale-out test (exit 5 "no tests collected" fails).
#   make lock    re-resolve requirements.in into requirements.lock (needs network).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
JARS_DIR := .jars
VPY := $(VENV)/bin/python
PYTEST_TIMEOUT ?= 900
PYTEST_ARGS ?=
# `make test` runs the suite on 3 xdist workers on this 2-core machine, whole modules at a time
# (module-scoped fixtures are built once), the longest modules first (tests/conftest.py,
# LONGEST_FIRST): with 2 the cores idled about 7% of the run (workers waiting on Airflow's services,
# a subprocess, a server), and a third fills that (docs/testing.md). PYTEST_WORKERS=0: serial.
# `make test-fast` is pure CPU: one worker per core.
PYTEST_WORKERS ?= 3
PYTEST_FAST_WORKERS ?= 2
xdist = $(if $(filter-out 0,$(1)),-n $(1) --dist loadfile --no-loadscope-reorder)
PYTEST_DIST := $(call xdist,$(PYTEST_WORKERS))
# binlake's own packages, compiled with the venv (a stale .pyc is ignored, never wrong)
BYTECODE_DIRS := binlake binlog_parser spark_jobs orchestration binlake_cli
APT_PACKAGES := mariadb-server mariadb-client docker-compose chromium

.PHONY: help setup setup-builds setup-venv setup-python setup-jars setup-logstore setup-system setup-native demo lint lint-only test-native test test-fast test-cluster cluster-demo lock clean

help:
	@echo "make setup | make demo | make lint | make test | make test-fast | make test-cluster | make cluster-demo | make lock | make clean"

# Two at a time where the steps do not wait on each other (two cores): the Python packages beside the
# jars, the LogStore and the Rust build (which needs only the venv's interpreter), then the class-data
# sharing archive (beside lint and the cargo tests, in `make test`). Each step keeps its own stamp.
setup: setup-system setup-builds
	@$(MAKE) --no-print-directory setup-cds

setup-builds: setup-venv
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup-python setup-jars setup-logstore setup-native

# The venv's interpreter alone (its packages come in setup-python): setup-native builds against it.
setup-venv:
	@[ -x "$(VPY)" ] || $(PYTHON) -m venv $(VENV)

# Stamp keyed on the lock + pyproject hash: a second run is a no-op.
# Bytecode is compiled at install (uv does not by default): with none, and PYTHONDONTWRITEBYTECODE
# set (as here), every Spark Python worker compiled pandas, pyspark and pydantic from source as it
# imported them: 2.8 CPU-s of imports per worker against 1.3 (docs/operations.md).
# The editable install (hatchling) is a .pth with the repo root, so packages added later
# (binlake/, binlog_parser/, spark_jobs/) import without reinstalling.
# pyspark is an sdist: here uv 0.13.9 builds it again on every install, into new cache revisions
# (1.9 GB per install), and keeps the old ones, so fresh clones' setups grew ~/.cache/uv until
# the disk was full (62 GB; a CI run failed on it). `uv cache prune` drops what nothing references,
# before the install (room for it) and after (this install's leftovers).
UV_CACHE_PRUNE = $(VENV)/bin/uv cache prune -q || echo "[setup] WARNING: uv cache prune failed (disk use only)" >&2
setup-python:
	@want="$$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"; \
	stamp="$(VENV)/.binlake-python-$$want"; \
	if [ -f "$$stamp" ] && [ -x "$(VPY)" ]; then echo "[setup] python env up to date ($(VENV))"; exit 0; fi; \
	echo "[setup] installing requirements.lock into $(VENV) ($(PYTHON); first run: a few minutes)"; \
	[ -x "$(VPY)" ] || $(PYTHON) -m venv $(VENV); \
	$(VPY) -m pip install -q --upgrade pip setuptools wheel "$$(grep '^uv==' requirements.lock)"; \
	$(UV_CACHE_PRUNE); \
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(VPY) -r requirements.lock; \
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(VPY) --no-deps -e .; \
	$(VPY) -m compileall -q -j 0 $(BYTECODE_DIRS) >/dev/null; \
	$(UV_CACHE_PRUNE); \
	rm -f $(VENV)/.binlake-python-*; touch "$$stamp"; \
	echo "[setup] python env ready"

# Stamp keyed on the pom hash; jars are copied by Maven (no Ivy at Spark start).
setup-jars:
	@want="$$(sha256sum conf/pom.xml | cut -c1-16)"; \
	stamp="$(JARS_DIR)/.binlake-jars-$$want"; \
	if [ -f "$$stamp" ]; then echo "[setup] jars up to date ($(JARS_DIR))"; exit 0; fi; \
	command -v mvn >/dev/null || { echo "[setup] mvn not found: install maven (apt-get install maven)" >&2; exit 1; }; \
	echo "[setup] fetching Delta + hadoop-aws + AWS SDK jars with Maven into $(JARS_DIR)"; \
	rm -rf $(JARS_DIR).tmp; \
	mvn -q -B -Dstyle.color=never -f conf/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS_DIR).tmp; \
	rm -rf $(JARS_DIR); mv $(JARS_DIR).tmp $(JARS_DIR); touch "$$stamp"; \
	echo "[setup] jars ready: $$(ls $(JARS_DIR)/*.jar | wc -l) jars"

# binlake's Delta LogStore for S3 (jvm/logstore: a commit is a put-if-absent, docs/architecture.md),
# compiled with Maven against the provided jars into $(JARS_DIR)/binlake-logstore-*.jar. Its stamp
# lives in $(JARS_DIR), so a refetch of the jars (a new conf/pom.xml) rebuilds it too; keyed on the
# module's pom and sources.
setup-logstore: setup-jars
	@want="$$( { cat jvm/logstore/pom.xml; find jvm/logstore/src -type f | sort | xargs cat; } | sha256sum | cut -c1-16)"; \
	stamp="$(JARS_DIR)/.binlake-logstore-$$want"; \
	if [ -f "$$stamp" ] && ls $(JARS_DIR)/binlake-logstore-*.jar >/dev/null 2>&1; then echo "[setup] LogStore jar up to date"; exit 0; fi; \
	command -v mvn >/dev/null || { echo "[setup] mvn not found: install maven (apt-get install maven)" >&2; exit 1; }; \
	echo "[setup] building binlake's Delta LogStore (jvm/logstore) with Maven"; \
	rm -rf jvm/logstore/target; \
	mvn -q -B -Dstyle.color=never -f jvm/logstore/pom.xml package; \
	rm -f $(JARS_DIR)/binlake-logstore-*.jar $(JARS_DIR)/.binlake-logstore-*; \
	cp jvm/logstore/target/binlake-logstore-*.jar $(JARS_DIR)/; rm -rf jvm/logstore/target; touch "$$stamp"; \
	echo "[setup] LogStore ready: $$(ls $(JARS_DIR)/binlake-logstore-*.jar)"

# The local Spark driver's class-data sharing archive (docs/operations.md, "Class-data sharing"):
# one JVM dumps the classes a session start and a small Delta read load into
# $(JARS_DIR)/cds/spark-<key>.jsa, keyed on the jars, Spark's jars and the JDK, so changed jars build
# a new one (the old is removed) and an unchanged setup is a no-op. Without it Spark starts as before.
setup-cds: setup-python setup-logstore
	@$(VPY) -c "from spark_jobs.session import build_class_share_archive as b; print('[setup] class-data sharing archive:', b('$(JARS_DIR)'))" 2>$(JARS_DIR)/.cds-build.log \
	  || { echo "[setup] WARNING: no class-data sharing archive (Spark starts slower; $(JARS_DIR)/.cds-build.log)" >&2; }

# mariadbd (a test starts a real MariaDB), docker-compose (config validation), Maven and a JRE.
setup-system:
	@missing=""; \
	command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing="$$missing mariadb-server"; \
	command -v mariadb >/dev/null || missing="$$missing mariadb-client"; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v java >/dev/null || missing="$$missing default-jre-headless"; \
	if [ -z "$$missing" ]; then echo "[setup] system packages present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "[setup] WARNING: missing system packages:$$missing (not root or no apt-get; install them yourself)" >&2; exit 0; fi; \
	echo "[setup] apt-get install$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq >/dev/null; \
	apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	echo "[setup] system packages installed"

# Optional compiled decoder: framing loop + rows (native/: Rust + PyO3, see docs/architecture.md), built in place
# as binlog_parser/_native_ext<EXT_SUFFIX> so the editable install (and any worktree) imports
# its own build. Stamp keyed on the crate's sources + Cargo.lock + the interpreter's EXT_SUFFIX.
# Never fails: without cargo (or when the build fails) the pure-Python decoder is used.
setup-native:
	@if ! command -v cargo >/dev/null; then \
		echo "[setup] cargo not found: the pure-Python decoder is used (install Rust for the compiled one)"; exit 0; fi; \
	[ -x "$(VPY)" ] || { echo "[setup] no $(VENV) yet: run make setup" >&2; exit 0; }; \
	suffix="$$($(VPY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"; \
	want="$$( { cat native/Cargo.toml native/Cargo.lock native/src/*.rs; echo "$$suffix"; } | sha256sum | cut -c1-16)"; \
	so="binlog_parser/_native_ext$$suffix"; stamp="native/target/.binlake-native-$$want"; \
	if [ -f "$$stamp" ] && [ -f "$$so" ]; then echo "[setup] compiled decoder up to date ($$so)"; exit 0; fi; \
	echo "[setup] building the compiled decoder (framing + rows) with cargo (first run: about a minute)"; \
	if PYO3_PYTHON="$(CURDIR)/$(VPY)" cargo build --release --locked --quiet --manifest-path native/Cargo.toml; then \
		lib=native/target/release/lib_native_ext.so; [ -f "$$lib" ] || lib=native/target/release/lib_native_ext.dylib; \
		cp "$$lib" "$$so.tmp" && mv "$$so.tmp" "$$so"; \
		rm -f native/target/.binlake-native-*; touch "$$stamp"; \
		echo "[setup] compiled decoder ready ($$so)"; \
	else \
		echo "[setup] WARNING: building native/ failed: the pure-Python decoder is used" >&2; fi

demo: setup
	$(VPY) -m binlake_testing.demo

# ruff and mypy as configured in pyproject.toml: any finding fails (and so fails `make test`).
lint: setup
	@$(MAKE) --no-print-directory lint-only

lint-only:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The extension's own cargo tests, when setup built it (its stamp); release profile: the
# dependencies setup-native compiled are reused, only the crate's test build is new.
test-native:
	@if ls native/target/.binlake-native-* >/dev/null 2>&1; then \
		echo "[test] cargo test (the extension's own unit tests)"; \
		PYO3_PYTHON="$(CURDIR)/$(VPY)" cargo test --release --locked --quiet --manifest-path native/Cargo.toml; fi

# Everything, the scale-out test included (marker `cluster`: Airflow's scheduler, dag-processor
# and api-server driving a loopback Spark standalone cluster, tests/test_scale_out.py).
# setup's steps, then the CDS archive, lint and the cargo tests two at a time, then pytest; any failure stops it.
test: setup-system setup-builds
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup-cds lint-only test-native
	@rc=0; $(VENV)/bin/pytest -q --durations=25 --timeout=$(PYTEST_TIMEOUT) $(PYTEST_DIST) $(PYTEST_ARGS) tests || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "[test] pytest collected no tests: failing" >&2; exit 5; fi; \
	exit $$rc

# The fast loop: the tests marked `unit` (no JVM, no server, no subprocess; tests/conftest.py marks
# every test by cost), no setup or lint first. A `unit` test that starts Spark fails here.
test-fast:
	BINLAKE_UNIT_ONLY=1 $(VENV)/bin/pytest -q -m unit --timeout=$(PYTEST_TIMEOUT) $(call xdist,$(PYTEST_FAST_WORKERS)) $(PYTEST_ARGS) tests

# Only the scale-out test (a Spark standalone cluster + Airflow's services on loopback).
test-cluster: setup
	$(VENV)/bin/pytest -q --timeout=$(PYTEST_TIMEOUT) -m cluster $(PYTEST_ARGS) tests

# A loopback Spark standalone cluster (master + 1, then 2 workers of 1 core) ingesting a generated
# archive: wall time, executor CPU-seconds and the 1-vs-2-worker ratio (bench/pipeline.py).
CLUSTER_DEMO_MIB ?= 256
cluster-demo: setup
	$(VPY) bench/pipeline.py --cluster-workers 1,2 --size-mib $(CLUSTER_DEMO_MIB) --files 4 \
		--driver-memory 1g --workdir $(CURDIR)/.state/cluster-demo

lock:
	rm -rf .lock-venv; $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q --upgrade pip
	.lock-venv/bin/pip install -q -r requirements.in
	{ head -4 requirements.lock; .lock-venv/bin/pip freeze --exclude-editable; } > requirements.lock.new
	mv requirements.lock.new requirements.lock; rm -rf .lock-venv

clean:
	rm -rf $(VENV) $(JARS_DIR) .state .pytest_cache native/target jvm/logstore/target binlog_parser/_native_ext*.so
