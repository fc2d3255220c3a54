# The two commands of the README: `make demo` and `make test`. Both set up the machine
# (tools/install-deps.sh), configure and build; `demo` then runs `pipebal demo`, `test` the suite.
BUILD ?= build
JOBS ?= 2
# Benchmarks are built by `make bench` only: `make test` stays as short as it can.
BENCH ?= OFF

.PHONY: deps configure build demo test bench format clean

deps:
	bash tools/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DPIPEBAL_BUILD_BENCH=$(BENCH)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/tools/pipebal demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 600

bench:
	$(MAKE) build BENCH=ON
	bash bench/run-all.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
