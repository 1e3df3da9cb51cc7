# logproof: `make run` sets everything up and runs the demo; `make test` sets up and runs the tests.
# Set-up is idempotent: Debian packages are installed only when missing, the virtual environment
# is rebuilt only when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := zookeeper kcat iproute2 util-linux

.PHONY: setup system-packages compiled run test test-all lint bench clean

# the last step: the simulator compiled with mypyc beside the sources (what logproof fuzz runs its
# seeds on): about 2 minutes, again only when a source changed; where it cannot be built, one
# line, and campaigns run from source
setup: system-packages $(STAMP)
	@$(BIN)/python -c 'import sys; from spark._compiled import main; sys.exit(main(["--optional"]))'

system-packages:
	@missing=""; \
	test -f /usr/share/java/zookeeper.jar || missing="$$missing zookeeper"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	test -f /usr/include/librdkafka/rdkafka.h || missing="$$missing librdkafka-dev"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v setpriv >/dev/null 2>&1 || missing="$$missing util-linux"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(STAMP): pyproject.toml setup.py impl/storage/record_walk.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# the same tree, where failing to build it is an error (setup goes on without it)
compiled: system-packages $(STAMP)
	$(BIN)/python -c 'import sys; from spark._compiled import main; sys.exit(main())'

run: setup
	$(BIN)/logproof demo

test: setup
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --durations=25

test-all: setup
	$(BIN)/python -m pytest -n auto --maxprocesses 4 -m "slow or not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench.move --size-mib 256
	$(BIN)/python -m bench.throttle
	$(BIN)/python -m bench.produce_consume
	$(BIN)/python -m bench.produce_consume --client native --records 1000000
	$(BIN)/python -m bench.requests
	$(BIN)/python -m bench.failover --partitions 10000
	$(BIN)/python -m bench.scale --dir /dev/shm
	$(BIN)/python -m bench.check
	$(BIN)/python -m bench.simulate
	$(BIN)/python -m bench.fuzz_scaling
	$(BIN)/python -m bench.sim_coverage
	$(BIN)/python -m bench.abuse
	$(BIN)/python -m bench.compaction
	$(BIN)/python -m bench.groups

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
