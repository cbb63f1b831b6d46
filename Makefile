# The two commands of the Quickstart. Each sets up .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# What a clean clone would otherwise fetch or build again on every run is kept once per
# machine in this folder (tests/labs/cache.py reads the same variable; docs/testing.md):
# GitHub's schemas (github-schemas), mypy's cache (lint; mypy checks each file's hash against
# it), the real engine's venv (tests/real_engine/lab.py, built by its first test). Each thing
# is named by what determines its content (a pinned version; the Python a venv is built from).
DENV_TEST_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/denv-tests
export DENV_TEST_CACHE

.PHONY: demo screenshots test test-stress lint workflows schemas clean system-deps github-schemas

# Once, and again when pyproject.toml changes: a few minutes, so each step says what it does
# and pip shows each package as it comes (a bar on a terminal).
$(STAMP): pyproject.toml
	@echo "make: [1/3] a virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "make: [2/3] the newest pip"
	$(BIN)/python -m pip install --upgrade --progress-bar on pip
	@echo "make: [3/3] denv and its development tools (a few minutes the first time)"
	$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	touch $(STAMP)
	@echo "make: $(VENV) is ready"

demo: $(STAMP)
	BIN=$(BIN) bash scripts/demo.sh

# the UI's pictures in README.md and docs/ui.md, from the demo's stages (docs/ui.md)
screenshots: $(STAMP)
	BIN=$(BIN) bash scripts/screenshots.sh

lint: $(STAMP)
	$(BIN)/ruff check reconciler tests scripts benchmarks
	$(BIN)/ruff format --check reconciler tests scripts benchmarks
	$(BIN)/mypy --cache-dir $(DENV_TEST_CACHE)/mypy  # a clean clone checks only what changed
	$(BIN)/lint-imports
	$(BIN)/pytest -q -p no:cacheprovider tests/test_pure_modules.py  # docstrings that say pure
	$(BIN)/python scripts/clock_asserts.py tests  # no elapsed-time assert beside other tests

# GitHub Actions workflows: valid against GitHub's schema, and no finding from zizmor as the
# pedantic and the auditor persona (unpinned actions, template injection, pull_request_target
# checkouts, leaked credentials, self-hosted runners); the findings accepted are suppressed in
# place and explained in docs/github.md (tests/security/test_workflows.py checks both agree).
workflows: $(STAMP)
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/zizmor --offline --persona pedantic .github/workflows
	$(BIN)/zizmor --offline --persona auditor .github/workflows

# What the tests start for real: OpenSSH servers (in network namespaces, with iproute2),
# Prometheus for the alarms' Prometheus mode, PostgreSQL for optimizer workers sharing a
# study, Slurm (controller, compute node, clients, munge) for Slurm fleets (their services
# are not started: tests run their own), and Chromium with fonts that Playwright drives headless
# in the UI's browser tests.
system-deps:
	@command -v sshd >/dev/null 2>&1 || test -x /usr/sbin/sshd || \
		{ apt-get update -q && apt-get install -y -q openssh-server; }
	@command -v ip >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q iproute2; }
	@command -v prometheus >/dev/null 2>&1 || { apt-get update -q && \
		apt-get install -y -q --no-install-recommends prometheus; }
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { apt-get update -q && \
		apt-get install -y -q --no-install-recommends postgresql; }
	@test -x /usr/sbin/slurmctld && test -x /usr/sbin/slurmd && test -x /usr/bin/sbatch && \
		test -x /usr/sbin/munged || \
		{ apt-get update -q && apt-get install -y -q --no-install-recommends \
		slurmctld slurmd slurm-client munge; }
	@test -x /usr/bin/chromium || { apt-get update -q && \
		apt-get install -y -q --no-install-recommends chromium fonts-liberation; }

# GitHub's own published descriptions, pinned, that the fake GitHub checks every request and
# answer against (tests/forge/github_openapi.py, github_graphql.py): the REST API's OpenAPI
# description, the webhook payloads' JSON Schemas and the GraphQL schema. Fetched once per
# machine by npm (tens of MB), then kept.
OCTOKIT := $(DENV_TEST_CACHE)/octokit
OCTOKIT_OPENAPI := 23.0.2
OCTOKIT_WEBHOOKS := 7.6.1
OCTOKIT_GRAPHQL := 15.26.1

github-schemas: $(OCTOKIT)/openapi-$(OCTOKIT_OPENAPI).stamp $(OCTOKIT)/webhooks-$(OCTOKIT_WEBHOOKS).stamp \
	$(OCTOKIT)/graphql-$(OCTOKIT_GRAPHQL).stamp

$(OCTOKIT)/openapi-%.stamp:
	@mkdir -p $(OCTOKIT)/pack-openapi
	cd $(OCTOKIT)/pack-openapi && npm pack --silent @octokit/openapi@$*
	tar -xzf $(OCTOKIT)/pack-openapi/octokit-openapi-$*.tgz -O package/generated/api.github.com.json \
		> $(OCTOKIT)/api.github.com.json.part
	mv $(OCTOKIT)/api.github.com.json.part $(OCTOKIT)/api.github.com.json
	rm -rf $(OCTOKIT)/pack-openapi $(OCTOKIT)/openapi-*.stamp && touch $@

$(OCTOKIT)/webhooks-%.stamp:
	@mkdir -p $(OCTOKIT)/pack-webhooks
	cd $(OCTOKIT)/pack-webhooks && npm pack --silent @octokit/webhooks-schemas@$*
	tar -xzf $(OCTOKIT)/pack-webhooks/octokit-webhooks-schemas-$*.tgz -O package/schema.json \
		> $(OCTOKIT)/webhooks.json.part
	mv $(OCTOKIT)/webhooks.json.part $(OCTOKIT)/webhooks.json
	rm -rf $(OCTOKIT)/pack-webhooks $(OCTOKIT)/webhooks-*.stamp && touch $@

$(OCTOKIT)/graphql-%.stamp:
	@mkdir -p $(OCTOKIT)/pack-graphql
	cd $(OCTOKIT)/pack-graphql && npm pack --silent @octokit/graphql-schema@$*
	tar -xzf $(OCTOKIT)/pack-graphql/octokit-graphql-schema-$*.tgz -O package/schema.graphql \
		> $(OCTOKIT)/schema.graphql.part
	mv $(OCTOKIT)/schema.graphql.part $(OCTOKIT)/schema.graphql
	rm -rf $(OCTOKIT)/pack-graphql $(OCTOKIT)/graphql-*.stamp && touch $@

# Three phases (docs/testing.md). Three workers on the 2 cores CI has (most tests wait on
# engines, routers, sshd and the scheduler more than they compute: a third worker fills those
# waits), a test file each at a time (a module's lab fixture is built once), in the order
# tests/conftest.py collects them (longest first; xdist would reorder by test count); the walk
# of docs/optimize.md on a busy machine runs here, with a hog of its own (tests/labs/busy.py).
# Then a real vLLM (its CPU build, its venv kept once per machine) under denv, one engine a
# core, with the machine to itself; then the tests that compare wall-clock timings with a
# model, alone.
PYTEST_PARALLEL = $(BIN)/pytest -q -n 3 --dist loadfile --no-loadscope-reorder \
	-m "not serial and not real_engine"
test: lint workflows system-deps github-schemas
	$(PYTEST_PARALLEL) --durations=25
	$(BIN)/pytest -q -m real_engine --durations=10
	$(BIN)/pytest -q -m serial

# The same tests with every core kept busy by a CPU hog (stress-ng when installed, else shell
# busy loops; stopped whatever happens), as on a loaded CI machine: tests wait on conditions and
# compare with the model's tolerances, never with the clock (the busy walk of docs/optimize.md
# starts no hog of its own here). The serial tests measure timings and need the machine alone,
# and the real engine's pin a core each: they are left out here.
test-stress: lint system-deps github-schemas
	scripts/cpu_hog.sh $(PYTEST_PARALLEL) --durations=25

# Regenerate the JSON Schemas the repository's YAML files point their editors to.
schemas: $(STAMP)
	$(BIN)/denv schema --out schemas

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
