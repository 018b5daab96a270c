# hermetic — build, test, benchmark, fuzz and demo targets.
GO      ?= go
BIN     ?= bin/hermetic
FUZZTIME ?= 30s

.PHONY: all build test test-go test-python vet bench fuzz demo clean

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
	@if [ -d launcher/pyshim/tests ]; then \
		cd launcher/pyshim && python3 -m unittest discover -s tests -t . ; \
	else echo "test-python: no Python tests yet"; fi

# Policy decisions, then the proxies against a direct connection in the same run.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./policy/
	$(GO) run ./internal/cmd/proxybench

# Each fuzz target runs for FUZZTIME (go test allows one target per run).
fuzz:
	@for t in FuzzNormalize FuzzParseRule FuzzDecide; do \
		echo "== policy $$t"; $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./policy/ || exit 1; \
	done

demo: build
	@echo "make demo: running a target arrives with the launcher; meanwhile the policy can be asked directly:"
	./$(BIN) check --allow-domain example.com example.com.evil.test:443 169.254.169.254 sub.example.com || true

clean:
	rm -rf bin
