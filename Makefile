# throttlekit-server: `make run` starts the server, `make test` runs every test.
GO       ?= go
FUZZTIME ?= 15s
ARGS     ?=

# Packages with goroutines of their own, run under the race detector.
RACE_PKGS ?= ./server/... ./shard/... ./wheel/... ./telemetry/... ./cmd/... ./persist/... ./internal/pgtest/... ./internal/dynatest/... ./upstream/... ./limits/... ./grpcfront/... ./rls/... ./rlqs/... ./policy/...
# The same inside bench/, a module of its own (root ./... does not reach it).
BENCH_RACE_PKGS ?= ./loadgen/...

# staticcheck, pinned; `go run` fetches it through the module proxy once.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run build test deps fmt-check vet lint race unit fuzz cli bench bench-quick

run:
	$(GO) run ./cmd/throttlekit-server $(ARGS)

build:
	$(GO) build -o bin/throttlekit-server ./cmd/throttlekit-server

test: deps fmt-check vet lint race unit fuzz cli

deps:
	scripts/install-deps.sh

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd clients/go && $(GO) vet ./...

lint:
	$(STATICCHECK) ./...
	cd bench && $(STATICCHECK) ./...
	cd clients/go && $(STATICCHECK) ./...

race:
	$(GO) test -race -count=1 $(RACE_PKGS)
	cd bench && $(GO) test -race -count=1 $(BENCH_RACE_PKGS)
	cd clients/go && $(GO) test -race -count=1 ./...

unit:
	$(GO) test -count=1 ./...
	cd bench && $(GO) test -count=1 ./...
	cd clients/go && $(GO) test -count=1 ./...

fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

cli:
	tests/redis-cli.sh

# bench/ is its own module (its plotting and histogram libraries stay out of
# the server's go.mod); tkbench finds the repository root by itself.
bench:
	cd bench && $(GO) run ./cmd/tkbench

bench-quick:
	cd bench && $(GO) run ./cmd/tkbench -quick
