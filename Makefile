# hermetic — build, test, benchmark, fuzz and demo targets.
GO      ?= go
BIN     ?= bin/hermetic
FUZZTIME ?= 30s

.PHONY: all build test test-go test-python vet bench bench-python fuzz load demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/hermetic

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt: the files above need formatting" && exit 1)

# The fuzz targets' seed corpora run as ordinary tests here.
test: vet test-go test-python

test-go:
	$(GO) test -race -count=1 ./...

test-python:
	cd launcher/pyshim && PYTHONDONTWRITEBYTECODE=1 timeout 600 python3 -m unittest discover -s tests -t .

# What the Python guard shim adds to start-up, an import-heavy and a
# file-heavy run, as ratios against bare Python in the same run.
bench-python:
	python3 launcher/pyshim/bench.py
	python3 launcher/pyshim/bench.py --fs-root

# Policy decisions, then the proxies against a direct connection in the same
# run, then hermetic's start-up against `true`.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./policy/
	$(GO) run ./internal/cmd/proxybench
	$(GO) run ./internal/cmd/startbench
	$(MAKE) bench-python

# Each fuzz target runs for FUZZTIME (go test allows one target per run).
FUZZ_TARGETS = policy:FuzzNormalize policy:FuzzParseRule policy:FuzzDecide \
	proxy:FuzzRequest socks:FuzzHandshake dnsfilter:FuzzAnswer \
	launcher:FuzzLoadConfig launcher:FuzzEnvFlags launcher:FuzzSplitWords launcher:FuzzRedact
fuzz:
	@for pt in $(FUZZ_TARGETS); do \
		p=$${pt%%:*}; t=$${pt#*:}; echo "== $$p $$t"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./$$p/ || exit 1; \
	done

# Thousands of concurrent tunnels through each proxy to a loopback echo
# server, held, then closed; bounded in count and time (LOADFLAGS=-hold 10s).
load:
	$(GO) run ./internal/cmd/loadtest $(LOADFLAGS)

# A loopback server, one allowed and one blocked curl with the trace; needs
# only curl and python3.
demo: build
	HERMETIC=$(BIN) sh scripts/demo.sh

clean:
	rm -rf bin
