# a2astore — the targets people expect. `make test` is the README's test command.
GO ?= go
PKGS ?= ./...
FUZZTIME ?= 10s

.PHONY: test testrace lint fmt-check vet fuzz-smoke bench bench-compare tidy-check demo loadgen dashboards dashboards-check

demo:
	$(GO) run ./cmd/a2astore-demo

# The README's test command: every package, race detector on.
test:
	$(GO) test -race -count=1 $(PKGS)

testrace: test

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: fmt-check vet
	$(GO) tool staticcheck $(PKGS)

tidy-check:
	@cp go.mod /tmp/go.mod.bak; cp go.sum /tmp/go.sum.bak; $(GO) mod tidy; \
	if ! cmp -s go.mod /tmp/go.mod.bak || ! cmp -s go.sum /tmp/go.sum.bak; then \
	  cp /tmp/go.mod.bak go.mod; cp /tmp/go.sum.bak go.sum; echo "go mod tidy changes go.mod/go.sum"; exit 1; fi

# Every fuzz target for FUZZTIME each (go test -fuzz takes one target at a time).
fuzz-smoke:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
	  done; done

bench:
	$(GO) test ./bench -run '^$$' -bench . -count 6 -timeout 60m

# The main command: a short load run on the embedded in-memory store.
loadgen:
	$(GO) run ./loadgen

# Regenerate dashboards/a2astore.json from the panel table.
dashboards:
	$(GO) run ./dashboards/gen

# Server + loadgen + a real Prometheus on loopback; every panel query must
# return data. About two minutes and needs root (apt-get, PostgreSQL):
# not part of .ci/run.
dashboards-check:
	bash dashboards/check.sh
