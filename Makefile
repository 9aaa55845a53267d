# schedulerd: make (or make help) lists the targets.
GO       ?= go
# The version: VERSION (the last release) and how far past it HEAD is, in
# the form of git describe (tools/dist/describe.sh): v0.1.0 at the commit
# that set VERSION, v0.1.0-3-gabc123456789 three commits later.
VERSION  ?= $(shell tools/dist/describe.sh)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
DATE     ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(DATE)
BIN      ?= bin/schedulerd
# GEN holds the man pages and completions that make install generates.
GEN      := $(BIN)-install
CONFIG   ?= schedulerd.toml
GOFMT    ?= $(shell $(GO) env GOROOT)/bin/gofmt
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s
SIM_TIME ?= 10m
DURATION ?= 3m
KINDS    ?=
SEED     ?=
PREFIX   ?= /usr/local
MANDIR   ?= $(PREFIX)/share/man
DIST_ARCHS ?= amd64,arm64

.DEFAULT_GOAL := help
.PHONY: help build run test unit short lint fuzz sim sim-ci bench nemesis nemesis-ci dist install clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/schedulerd, stamped with the version
	@test -n '$(VERSION)' || { echo 'make: no version (tools/dist/describe.sh failed: see VERSION)' >&2; exit 1; }
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/schedulerd

run: build ## run the daemon on the example config (embedded store under ./var)
	@echo 'make run: in another shell, from this directory: ./$(BIN) $(if $(filter schedulerd.toml,$(CONFIG)),,--config $(CONFIG) )jobs (or runs, trigger reindex --wait, help)'
	./$(BIN) run --config $(CONFIG)

test: lint unit sim-ci nemesis-ci ## what CI runs: gofmt, vet, staticcheck, every test with -race, then 2 minutes of make sim and nemesis-ci

# The tests that skip for want of a program or server (internal/testtool)
# append why to SKIPS; unit and short list them at the end. On CI they fail
# instead.
SKIPS := $(CURDIR)/bin/test-skips
SKIPPED = if [ -s '$(SKIPS)' ]; then \
		echo; echo 'Tests skipped for want of a tool (docs/development.md\#what-the-tests-need; on CI they fail):'; \
		sort '$(SKIPS)' | uniq -c | sort -rn; \
	else echo 'No test skipped for want of a tool.'; fi

unit: ## go test -race ./... (and the packaging tool's tests: see tools/dist); lists the tests skipped for a missing tool
	@mkdir -p bin && rm -f '$(SKIPS)'; export SCHEDULERD_TEST_SKIPS='$(SKIPS)'; status=0; \
	echo '$(GO) test -race -count=1 -timeout 30m ./...'; \
	$(GO) test -race -count=1 -timeout 30m ./... || status=1; \
	echo '$(GO) -C tools/dist test -race -count=1 -timeout 10m ./...'; \
	$(GO) -C tools/dist test -race -count=1 -timeout 10m ./... || status=1; \
	$(SKIPPED); exit $$status

# go test runs the packages in the order given, as many at once as there are
# CPUs: the two longest go first, or ./... would start store/postgres last.
short: ## the inner loop: go test -short ./..., without the long process tests
	@mkdir -p bin && rm -f '$(SKIPS)'; export SCHEDULERD_TEST_SKIPS='$(SKIPS)'; status=0; \
	echo '$(GO) test -short ./store/postgres ./cmd/schedulerd ./...'; \
	$(GO) test -short ./store/postgres ./cmd/schedulerd ./... || status=1; \
	$(SKIPPED); exit $$status

lint: ## gofmt, go vet and staticcheck; the River CLI that bench/river pins builds
	@out=$$($(GOFMT) -l .); if [ -n "$$out" ]; then echo "gofmt -l: these files are not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) -C tools/dist vet ./...
	$(GO) -C tools/dist run $(STATICCHECK) ./...
	$(GO) -C bench/river build -o /dev/null github.com/riverqueue/river/cmd/river

fuzz: ## run every fuzz target for FUZZTIME each
	$(GO) test -run='^$$' -fuzz='^FuzzSchedule$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./jobs/schedule/
	$(GO) test -run='^$$' -fuzz='^FuzzParseConfig$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./config/
	$(GO) test -run='^$$' -fuzz='^FuzzControlRequest$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./control/
	$(GO) test -run='^$$' -fuzz='^FuzzReplyString$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./control/
	$(GO) test -run='^$$' -fuzz='^FuzzAPIRequest$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./control/
	$(GO) test -run='^$$' -fuzz='^FuzzEscape$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./internal/termtext/
	$(GO) test -run='^$$' -fuzz='^FuzzImportCrontab$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./crontab/

sim: ## the engine against the reference model on seeded timelines, SIM_TIME long (SEED=N replays one)
	$(GO) test -c -o bin/scheduler.test ./scheduler/
	cd scheduler && ../bin/scheduler.test -test.run '^TestSim$$' -test.timeout 0 -sim.time=$(SIM_TIME) $(if $(SEED),-sim.seed=$(SEED)) $(if $(JUMPS),-sim.jumps=$(JUMPS))

# CI's share of the simulator: the regression seeds, then random seeds
# (from the clock, printed) for the rest of two minutes.
sim-ci:
	$(MAKE) sim SIM_TIME=2m

bench: ## measure throughput, cost per run, lag, idle, recovery, scale, burst (about 50 minutes); writes BENCHMARKS.md
	$(GO) run ./bench -command 'make bench' -out BENCHMARKS.md

# The driver is built rather than run with go run, which would add a line
# after its summary when it fails.
nemesis: build ## 3 nodes on PostgreSQL under random faults for DURATION, then checked (SEED=N replays one)
	$(GO) build -o bin/nemesis ./nemesis
	./bin/nemesis -bin $(BIN) -duration '$(DURATION)' $(if $(SEED),-seed '$(SEED)') $(if $(KINDS),-kinds '$(KINDS)')

nemesis-ci: build ## make test's nemesis: the seeds that once failed, then a new one, sharing DURATION
	$(GO) build -o bin/nemesis ./nemesis
	./bin/nemesis -bin $(BIN) -duration '$(DURATION)' -seeds nemesis/testdata/seeds.txt $(if $(SEED),-seed '$(SEED)')

dist: ## static binaries, .deb and .rpm for linux/DIST_ARCHS, and SHA256SUMS, in dist/
	@test -n '$(VERSION)' || { echo 'make: no version (tools/dist/describe.sh failed: see VERSION)' >&2; exit 1; }
	tools/dist/describe.sh check
	$(GO) -C tools/dist run . -root '$(CURDIR)' -out '$(CURDIR)/dist' -arch '$(DIST_ARCHS)' \
		-version '$(VERSION)' -commit '$(COMMIT)' -date '$(DATE)' -ldflags '$(LDFLAGS)'

install: build ## install binary, unit, root.conf, man pages, completions and config (if absent); add the user schedulerd
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/schedulerd
	install -D -m 0644 systemd/schedulerd.service $(DESTDIR)/etc/systemd/system/schedulerd.service
	install -D -m 0644 systemd/root.conf $(DESTDIR)$(PREFIX)/share/schedulerd/root.conf
	@# What the unit's Documentation= names, and completion, as the packages
	@# install them (tools/dist), under PREFIX.
	mkdir -p $(GEN)
	$(abspath $(BIN)) man 8 > $(GEN)/schedulerd.8 && gzip -9nf $(GEN)/schedulerd.8
	$(abspath $(BIN)) man 5 > $(GEN)/schedulerd.toml.5 && gzip -9nf $(GEN)/schedulerd.toml.5
	$(abspath $(BIN)) completion bash > $(GEN)/completion.bash
	$(abspath $(BIN)) completion zsh > $(GEN)/completion.zsh
	$(abspath $(BIN)) completion fish > $(GEN)/completion.fish
	install -D -m 0644 $(GEN)/schedulerd.8.gz $(DESTDIR)$(MANDIR)/man8/schedulerd.8.gz
	install -D -m 0644 $(GEN)/schedulerd.toml.5.gz $(DESTDIR)$(MANDIR)/man5/schedulerd.toml.5.gz
	install -D -m 0644 $(GEN)/completion.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/schedulerd
	install -D -m 0644 $(GEN)/completion.zsh $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_schedulerd
	install -D -m 0644 $(GEN)/completion.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/schedulerd.fish
	test -e $(DESTDIR)/etc/schedulerd/schedulerd.toml || install -D -m 0640 systemd/schedulerd.toml $(DESTDIR)/etc/schedulerd/schedulerd.toml
	@# The unit runs the daemon as schedulerd, which must read the config.
	@# Into a DESTDIR (a package being built) no user is added.
	@if [ -z "$(DESTDIR)" ]; then \
		id -u schedulerd >/dev/null 2>&1 || useradd --system --user-group --home-dir /var/lib/schedulerd \
			--no-create-home --shell /usr/sbin/nologin --comment "schedulerd daemon" schedulerd; \
		chgrp schedulerd /etc/schedulerd/schedulerd.toml; \
	fi

clean: ## remove build output and the example state
	rm -rf bin var dist
