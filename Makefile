# The two commands of the README: `make demo` and `make test`. Both set up the machine
# (tools/install-deps.sh), configure and build; `demo` then runs `pipebal demo`, `test` the suite.
BUILD ?= build
JOBS ?= 2
# Benchmarks are built by `make bench` only: `make test` stays as short as it can.
BENCH ?= OFF

# Sanitizer builds live beside the normal one; see `make sanitize`, `make tsan`, `make fuzz`.
SANITIZE_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 60

.PHONY: deps configure build demo test bench format clean sanitize tsan fuzz

deps:
	bash tools/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DPIPEBAL_BUILD_BENCH=$(BENCH)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/tools/pipebal demo

# The fuzz targets first (20,000 inputs each from a fixed seed), so that ctest's summary ends it.
test: build
	bash fuzz/run.sh --runs 20000
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 600

# The suite and a CLI smoke run under AddressSanitizer and UndefinedBehaviorSanitizer (without
# jemalloc, which would hide allocations from ASan). LibTorch itself is not instrumented.
sanitize: deps
	cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPEBAL_BUILD_BENCH=OFF \
	  -DPIPEBAL_WITH_JEMALLOC=OFF -DPIPEBAL_SANITIZE=address,undefined
	cmake --build $(SANITIZE_BUILD) -j$(JOBS)
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j$(JOBS) --timeout 1200
	ASAN_OPTIONS=detect_leaks=0 bash tools/cli-smoke.sh $(SANITIZE_BUILD)/tools/pipebal

# The engine's threads, mailboxes and workers under ThreadSanitizer (pipeline tests only).
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPEBAL_BUILD_BENCH=OFF \
	  -DPIPEBAL_WITH_JEMALLOC=OFF -DPIPEBAL_SANITIZE=thread
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target pipeline_tests
	cd $(TSAN_BUILD) && TSAN_OPTIONS=suppressions=$(CURDIR)/tools/tsan.supp ./tests/pipeline_tests

# Each fuzz target for FUZZ_SECONDS of random inputs (fuzz/run.sh).
fuzz: deps
	bash fuzz/run.sh --seconds $(FUZZ_SECONDS)

bench:
	$(MAKE) build BENCH=ON
	bash bench/run-all.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
