# mminfer: `make run` and `make test` install what is missing, build, then do their job.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all bootstrap build python run test test-asan bench clean

all: build

bootstrap:
	@./scripts/bootstrap

# Configures whenever the generated Makefile is missing: a configure that failed leaves a
# CMakeCache.txt behind but no Makefile, so a rerun configures again.
$(BUILD)/Makefile:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMMINFER_WERROR=ON >/dev/null

build: bootstrap $(BUILD)/Makefile
	@cmake --build $(BUILD) -j $(JOBS)

# The Python module is part of the build: it lands in $(BUILD)/python/mminfer.
python: build
	@echo "mminfer for Python: PYTHONPATH=$(BUILD)/python /usr/bin/python3 -c 'import mminfer'"

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
