# Thin wrapper over CMake presets. On a fresh Debian 12 machine, as root:
#   make doctor   install deps, build, run `gantry doctor`
#   make test     install deps, build, run every test (unit + integration)
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)
GANTRY := $(BUILD)/bin/gantry

.PHONY: all deps configure build test test-gpu unit integration doctor tour bench bench-gateway bench-drift bench-agent bench-storage fuzz fuzz-build format check-format clean

all: build

deps:
	bash scripts/install-deps.sh

# CMAKE_ARGS: extra configure flags, e.g. -DGANTRY_REQUIRE_ALL_FEATURES=ON (CI).
$(BUILD)/build.ninja:
	cmake --preset $(PRESET) $(CMAKE_ARGS)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build --preset $(PRESET) -j $(JOBS)

test: deps
	$(MAKE) build
	ctest --preset $(PRESET) -j $(JOBS) --timeout 600 -LE gpu

# Tests that need a CUDA device (not part of `make test`; CI has no GPU).
test-gpu: build
	ctest --preset $(PRESET) -L gpu --output-on-failure

unit: build
	ctest --preset $(PRESET) -L unit -j $(JOBS)

integration: build
	ctest --preset $(PRESET) -L integration -j $(JOBS)

doctor: deps
	$(MAKE) build
	$(GANTRY) doctor

# The tour (examples/tour/): every module together on this machine, in minutes; writes
# $(BUILD)/tour/report.html. Run after `make doctor`.
tour: build
	BUILD_DIR=$(BUILD) bash examples/tour/run.sh

bench: build
	bash bench/collectives.sh

bench-gateway: build
	BUILD_DIR=$(BUILD) bash bench/gateway.sh

bench-drift: build
	BUILD_DIR=$(BUILD) bash bench/drift.sh

bench-agent: build
	BUILD_DIR=$(BUILD) bash bench/agent.sh

bench-storage: build
	BUILD_DIR=$(BUILD) bash bench/storage.sh

# libFuzzer targets of every parser, built with clang, each run for FUZZ_SECONDS
# on a temporary copy of its corpus fuzz/corpus/<target>/ (scripts/fuzz.sh; new
# inputs never land in the working tree). `make test` replays every corpus and
# fuzz/regressions/<target>/ through the same entry points (<target>_replay).
FUZZ_SECONDS ?= 30
FUZZERS := fuzz_units fuzz_config fuzz_ckpt_format fuzz_http_parser fuzz_gateway_sniff fuzz_security_jwt \
  fuzz_advise fuzz_health_profile fuzz_drift_readers fuzz_storage_parsers fuzz_scheduled_events \
  fuzz_agent_config fuzz_backup_manifest fuzz_registry_statement fuzz_gateway_anomaly fuzz_assess_arm \
  fuzz_jobs_workflow fuzz_autoscale_hostlist fuzz_imds fuzz_health_scontrol fuzz_gateway_config \
  fuzz_gateway_resp fuzz_gateway_admin fuzz_registry_http
fuzz: deps fuzz-build
	FUZZ_ALL=1 FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh build/fuzz/bin $(FUZZERS)

fuzz-build:
	CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DGANTRY_FUZZ=ON -DGANTRY_WITH_CUDA=OFF
	cmake --build build/fuzz -j $(JOBS) --target $(FUZZERS)

check-format:
	bash scripts/check-format.sh

format:
	git ls-files '*.h' '*.cc' '*.cu' | xargs clang-format -i

clean:
	rm -rf build
