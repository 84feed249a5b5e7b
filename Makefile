# twinpipe: `make test` and `make demo` set everything up on a fresh Debian machine.
BUILD      ?= build
JOBS       ?= $(shell nproc)
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CMAKE_ARGS ?=

FUZZ_SECONDS ?= 30

.PHONY: all deps build test check demo bench bench-torch test-torch test-asan test-tsan fuzz clean

all: build

deps:
	@bash scripts/install_deps.sh

build: deps
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)
	@echo "twinpipe: built $(BUILD)/twinpipe"

# The whole suite (what CI runs): the tests, then again under ASan+UBSan,
# the executor's under TSan, and every fuzz harness for FUZZ_SECONDS.
test: check
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory fuzz

# The tests alone, in the normal build (a minute).
check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)/twinpipe

# Every benchmark, each figure next to its target; recorded with the commit
# in traces/recorded/$(BENCH_MACHINE)/bench.json.
BENCH_MACHINE ?= cpu-2core
bench: build
	python3 scripts/bench_table.py $(BUILD) --machine $(BENCH_MACHINE)

# The CPU executor against PyTorch eager on one core (bench/torch_cpu_compare.py).
# Debian's python3-torch goes into /usr/bin/python3, which need not be the
# first python3 on PATH: the script looks there too.
bench-torch: build
	@/usr/bin/python3 -c "import torch" 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -q python3-torch; else sudo apt-get install -y -q python3-torch; fi; }
	python3 bench/torch_cpu_compare.py $(BUILD)/twinpipe --json $(BUILD)/torch_cpu_compare.json

# twinpipe's schedules through real torch.distributed.pipelining and back
# (scripts/test_torch.sh): PyPI's torch (2.15.0 and 2.5.1 by default, in
# $(BUILD)/torch-VERSION), K gloo processes per case. Not in `make test`: the
# download is several GB. TORCH_VERSIONS picks the releases.
TORCH_VERSIONS ?= 2.15.0 2.5.1
test-torch: build
	bash scripts/test_torch.sh $(BUILD) $(TORCH_VERSIONS)

test-asan: deps
	@[ -f build-asan/CMakeCache.txt ] || cmake -S . -B build-asan $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DTWINPIPE_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# The executor's tests (threads, transport, faults) and the simulator's
# threaded predictions of a run table under TSan.
test-tsan: deps
	@[ -f build-tsan/CMakeCache.txt ] || cmake -S . -B build-tsan $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DTWINPIPE_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS) --target execute_runtime_test execute_layers_test mutation_test simulate_test
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) \
	  -R '^(Execute|Layers|BatchNorm|Tensor|Mutations)\.|^Runs\.PredictionsDoNotDependOnTheThreads$$'


# libFuzzer harnesses (clang): each runs FUZZ_SECONDS from fuzz/corpus/.
fuzz: deps
	@[ -f build-fuzz/CMakeCache.txt ] || CC=clang CXX=clang++ cmake -S . -B build-fuzz $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINPIPE_SANITIZE=fuzzer
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
