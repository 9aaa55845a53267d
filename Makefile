# schedulerd: make (or make help) lists the targets.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
DATE     ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(DATE)
BIN      := bin/schedulerd
CONFIG   ?= schedulerd.toml
GOFMT    ?= $(shell $(GO) env GOROOT)/bin/gofmt
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s
DURATION ?= 3m
SEED     ?=
PREFIX   ?= /usr/local
DIST_ARCHS ?= amd64,arm64

.DEFAULT_GOAL := help
.PHONY: help build run test unit short lint fuzz bench nemesis dist install clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/schedulerd, stamped with the version
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/schedulerd

run: build ## run the daemon on the example config (embedded store under ./var)
	./$(BIN) run --config $(CONFIG)

test: lint unit ## what CI runs: gofmt, vet, staticcheck, and every test with -race

unit: ## go test -race ./... (and the packaging tool's tests: see tools/dist)
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) -C tools/dist test -race -count=1 -timeout 10m ./...

# go test runs the packages in the order given, as many at once as there are
# CPUs: the two longest go first, or ./... would start store/postgres last.
short: ## the inner loop: go test -short ./..., without the long process tests
	$(GO) test -short ./store/postgres ./cmd/schedulerd ./...

lint: ## gofmt, go vet and staticcheck; the River CLI that bench/river pins builds
	@out=$$($(GOFMT) -l .); if [ -n "$$out" ]; then echo "gofmt -l: these files are not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) -C tools/dist vet ./...
	$(GO) -C tools/dist run $(STATICCHECK) ./...
	$(GO) -C bench/river build -o /dev/null github.com/riverqueue/river/cmd/river

fuzz: ## run every fuzz target for FUZZTIME each
	$(GO) test -run='^$$' -fuzz='^FuzzSchedule$$' -fuzztime=$(FUZZTIME) ./jobs/schedule/
	$(GO) test -run='^$$' -fuzz='^FuzzParseConfig$$' -fuzztime=$(FUZZTIME) ./config/
	$(GO) test -run='^$$' -fuzz='^FuzzControlRequest$$' -fuzztime=$(FUZZTIME) ./control/
	$(GO) test -run='^$$' -fuzz='^FuzzReplyString$$' -fuzztime=$(FUZZTIME) ./control/
	$(GO) test -run='^$$' -fuzz='^FuzzAPIRequest$$' -fuzztime=$(FUZZTIME) ./control/
	$(GO) test -run='^$$' -fuzz='^FuzzEscape$$' -fuzztime=$(FUZZTIME) ./internal/termtext/
	$(GO) test -run='^$$' -fuzz='^FuzzImportCrontab$$' -fuzztime=$(FUZZTIME) ./cmd/schedulerd/

bench: ## measure throughput, lag, idle cost, recovery, scale (about 35 minutes); writes BENCHMARKS.md
	$(GO) run ./bench -command 'make bench' -out BENCHMARKS.md

# The driver is built rather than run with go run, which would add a line
# after its summary when it fails.
nemesis: build ## 3 nodes on PostgreSQL under random faults for DURATION, then checked (SEED=N replays one)
	$(GO) build -o bin/nemesis ./nemesis
	./bin/nemesis -bin $(BIN) -duration '$(DURATION)' $(if $(SEED),-seed '$(SEED)')

dist: ## static binaries, .deb and .rpm for linux/DIST_ARCHS, and SHA256SUMS, in dist/
	$(GO) -C tools/dist run . -root '$(CURDIR)' -out '$(CURDIR)/dist' -arch '$(DIST_ARCHS)' \
		-version '$(VERSION)' -commit '$(COMMIT)' -date '$(DATE)' -ldflags '$(LDFLAGS)'

install: build ## install binary, unit, root.conf and config (if absent); add the user schedulerd
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/schedulerd
	install -D -m 0644 systemd/schedulerd.service $(DESTDIR)/etc/systemd/system/schedulerd.service
	install -D -m 0644 systemd/root.conf $(DESTDIR)$(PREFIX)/share/schedulerd/root.conf
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
