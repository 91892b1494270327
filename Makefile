# a2astore — the targets people expect. `make test` is the README's test command.
GO ?= go
PKGS ?= ./...
FUZZTIME ?= 10s

.PHONY: test testrace lint fmt-check vet fuzz-smoke bench bench-compare bench-plot results results-page results-check results-scale results-scale-smoke capacity-check capacity-calibrate tidy-check demo loadgen dashboards dashboards-check tck flagref capacity

demo:
	$(GO) run ./cmd/a2astore-demo

# The README's test command: every package, race detector on. It includes
# the manual's checks: links, anchors, Go snippets and import rules
# (internal/doccheck) and the flag reference (cmd/flagref).
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

# Every fuzz target for FUZZTIME each: one fuzzing test binary per package
# (go test -c -fuzz), run once per target (a test binary fuzzes one target
# at a time), with the corpus cache where go test -fuzz keeps it.
# Go's fuzzing engine can stop with "context deadline exceeded" without an
# input, its workers stalled (seen under load, and twice in a row at
# b30fdbd's CI: FuzzTokenCursor at 0 execs/s); a failing input is written to
# testdata/fuzz and fails every later try, so a try that passes means the
# engine, not the code, failed. Three tries at most.
fuzz-smoke:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf '$$tmp EXIT; \
	for pkg in $$($(GO) list $(PKGS)); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  targets=$$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); \
	  [ -n "$$targets" ] || continue; \
	  $(GO) test -c -fuzz=. -o $$tmp/fuzz.test $$pkg; \
	  for f in $$targets; do \
	    echo "fuzz $$pkg $$f"; \
	    for try in 1 2 3; do \
	      if (cd $$dir && $$tmp/fuzz.test -test.run '^$$' -test.fuzz "^$$f$$" -test.fuzztime $(FUZZTIME) \
	          -test.fuzzcachedir "$$($(GO) env GOCACHE)/fuzz/$$pkg"); then break; fi; \
	      if [ $$try = 3 ]; then exit 1; fi; \
	      echo "retrying $$f (a crasher found is kept in testdata and fails again)"; \
	    done; \
	  done; done

# Benchmarks (bench/, results/README.md). `make bench` writes
# results/raw/<commit>.txt: the default subset (n = 1e3..1e5, every backend;
# pg on a throwaway cluster) in about 10 minutes on 2 cores. BENCH_FULL=1
# adds n = 1e6. BENCH_SIZES=1000,10000 overrides the sizes; BENCH is the
# -bench pattern (taken literally: `$` needs no escaping).
BENCH_COUNT ?= 6
BENCH_TIME ?= 100ms
BENCH ?= .
bench: SHELL := /bin/bash
bench: .SHELLFLAGS := -o pipefail -c
bench:
	@mkdir -p results/raw
	@rev=$$(git rev-parse --short=12 HEAD)$$(git diff --quiet HEAD -- . ':!results' || echo -dirty); \
	out=results/raw/$$rev.txt; echo "writing $$out"; \
	{ echo "# make bench: $$(date -u +%FT%TZ) nproc=$$(nproc) load=$$(cut -d' ' -f1-3 /proc/loadavg) full=$${BENCH_FULL:-0}"; \
	  $(GO) test ./bench -run '^$$' -bench '$(value BENCH)' -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) -timeout 180m; } | tee $$out.tmp && mv $$out.tmp $$out

# `make bench-compare BASE=<ref>`: builds the benchmark binary of BASE (in a
# temporary git worktree) and of the working tree, runs the tracked
# benchmarks BENCH_COMPARE_COUNT times from each, alternating, and gates
# with cmd/benchgate (benchfmt + benchmath; limits justified in
# results/README.md). Results stay in results/compare/.
BENCH_TRACKED ?= Store/^backend=(mem|pebble)$/^op=(page|page-context|page-after|total|replace|append-new)$/^n=10000$
BENCH_COMPARE_COUNT ?= 6
BENCH_COMPARE_TIME ?= 200ms
BENCHGATE_FLAGS ?=
bench-compare:
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<git ref>"; exit 2; }
	@set -e; tmp=$$(mktemp -d); trap 'git worktree remove --force '$$tmp/base' >/dev/null 2>&1 || true; rm -rf '$$tmp EXIT; \
	git worktree add --detach -q $$tmp/base $(BASE); \
	(cd $$tmp/base && $(GO) test -c -o $$tmp/base.test ./bench); \
	$(GO) test -c -o $$tmp/head.test ./bench; \
	mkdir -p results/compare; : > results/compare/base.txt; : > results/compare/head.txt; \
	for i in $$(seq $(BENCH_COMPARE_COUNT)); do \
	  for side in base head; do \
	    echo "run $$i/$(BENCH_COMPARE_COUNT): $$side"; \
	    (cd bench && $$tmp/$$side.test -test.run '^$$' -test.bench '$(value BENCH_TRACKED)' -test.benchmem \
	      -test.count 1 -test.benchtime $(BENCH_COMPARE_TIME)) >> results/compare/$$side.txt; \
	  done; \
	done; \
	$(GO) run ./cmd/benchgate $(BENCHGATE_FLAGS) results/compare/base.txt results/compare/head.txt

# Charts (SVG) and summary.md from one raw results file (default: the
# newest in results/raw), into results/plot/ (the page's own charts come
# from make results).
BENCH_RAW ?= $$(ls -t results/raw/*.txt | head -1)
bench-plot:
	$(GO) run ./cmd/benchplot -o results/plot $(BENCH_RAW)

# The published page (results/README.md, #23). `make results` runs the whole
# lab once at HEAD into results/runs/<commit>/ and regenerates every table and
# chart of the page from it (full: estimated 25-35 min on 2 quiet cores,
# budget 45; RESULTS_QUICK=1: 500 s measured under load, recorded as a
# quick run).
# `make results-page` regenerates the page from the recorded runs only.
# `make results-check` (.ci/run): the generator end to end on the tiny
# fixture run in results/testdata, the committed page and charts are what the
# generator makes of results/runs, and every chart is legible: each text
# inside its picture, none over another text or a bar (cmd/benchplot's
# checkSVG, text extents estimated from the font size).
results:
	bash results/run.sh

# `make results-scale` (#55): the cost curve 1e3 → 1e7 on every backend
# (bench's BenchmarkScale through results/scale.sh; budget 60 min on 2
# quiet cores) into results/runs-scale/<commit>/ and
# results/raw/scale-<commit>.txt, then the page. SCALE_SIZES,
# SCALE_BACKENDS, SCALE_TIME override (see the script). Not in `make
# results` nor CI; `make results-scale-smoke` (.ci/run) runs the same
# script at 1e4, one iteration each, recording nothing.
results-scale:
	bash results/scale.sh

results-scale-smoke:
	SCALE_SMOKE=1 bash results/scale.sh

# `make capacity-check` (#55): the capacity model against two running
# deployments, each predicted before it runs (results/capacity-check.sh;
# about 8 minutes on a quiet machine) into
# results/raw/capacity-check-<commit>/. Not in CI.
capacity-check:
	bash results/capacity-check.sh

# `make capacity-calibrate` (#55): the CPU a call the capacity model
# predicts with — each method alone, paced, against a served store of 1e4
# tasks on each backend (results/capacity-check.sh with
# CHECK_CALIBRATE=1; about 8 minutes on a quiet machine) into
# results/raw/capacity-check-<commit>-calibrate/; cmd/capacity's pacedRun
# names the run it uses. Not in CI.
capacity-calibrate:
	CHECK_CALIBRATE=1 CHECK_SUFFIX=calibrate CHECK_DEPLOYMENTS="mem 10000 50 0;mem 10000 0 200;pebble 10000 50 0;pebble 10000 0 200;pg 10000 20 0;pg 10000 0 100" bash results/capacity-check.sh

results-page:
	$(GO) run ./cmd/benchplot -runs results/runs -o results

results-check:
	$(GO) test -count=1 ./cmd/benchplot

# The main command: a short load run on the embedded in-memory store.
loadgen:
	$(GO) run ./loadgen

# Regenerate docs/flags.md from the commands' -h (after changing a flag;
# go test ./cmd/flagref fails until then).
flagref:
	$(GO) run ./cmd/flagref

# Regenerate docs/capacity.md's tables from the recorded runs it names
# (go test ./cmd/capacity fails until then).
capacity:
	$(GO) run ./cmd/capacity

# Regenerate dashboards/a2astore.json from the panel table.
dashboards:
	$(GO) run ./dashboards/gen

# Server + loadgen + a real Prometheus on loopback; every panel query must
# return data. About a minute and a half; needs root (apt-get, PostgreSQL).
# Part of .ci/run.
dashboards-check:
	bash dashboards/check.sh

# The official A2A TCK (../shared/tck, A2A 1.0) against a2astore-server
# -agent tck on mem, pebble and pg (TCK_BACKENDS adds "cluster", a -cluster
# pair; interop/tck/check.sh);
# fails on any MUST-level failure but the TCK's own known defects
# (interop/tck/known-defects.txt). Not part of make test. Part of .ci/run.
tck:
	bash interop/tck/check.sh
