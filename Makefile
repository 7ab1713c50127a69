# mminfer: `make run` and `make test` install what is missing, build, then do their job.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all bootstrap build run test test-asan bench clean

all: build

bootstrap:
	@./scripts/bootstrap

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMMINFER_WERROR=ON >/dev/null

build: bootstrap $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@./scripts/run-demo

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite again under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: bootstrap
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ctest --test-dir build-asan --output-on-failure -j $(JOBS)

bench: build
	@./bench/run

clean:
	rm -rf $(BUILD) build-asan
