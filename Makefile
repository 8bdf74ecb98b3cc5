# throttlekit-server: `make run` starts the server, `make test` runs every test.
GO       ?= go
FUZZTIME ?= 15s
ARGS     ?=

# Packages with goroutines of their own, run under the race detector.
RACE_PKGS ?= ./server/... ./shard/... ./wheel/... ./telemetry/... ./cmd/...

.PHONY: run build test deps fmt-check vet race unit fuzz cli bench bench-quick

run:
	$(GO) run ./cmd/throttlekit-server $(ARGS)

build:
	$(GO) build -o bin/throttlekit-server ./cmd/throttlekit-server

test: deps fmt-check vet race unit fuzz cli

deps:
	scripts/install-deps.sh

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

race:
	$(GO) test -race -count=1 $(RACE_PKGS)

unit:
	$(GO) test -count=1 ./...

fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

cli:
	tests/redis-cli.sh

bench:
	$(GO) run ./bench/cmd/tkbench

bench-quick:
	$(GO) run ./bench/cmd/tkbench -quick
