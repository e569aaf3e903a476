# relay — developer entry points. `make demo` and `make test` are the two
# commands the README starts with; both install what is missing
# (scripts/install.sh) and bring up the local stack themselves.

GO            ?= go
GOLANGCI_VER  := v2.15.0
BIN           := $(CURDIR)/.cache/bin
GOLANGCI      := $(BIN)/golangci-lint
# Builds promtool from source into .cache/bin once, and prints its path.
PROMTOOL_PATH := scripts/tools/promtool.sh path

.PHONY: signed demo test test-cluster test-k8s test-matrix test-upgrade unit integration bench up down cluster lint rules build release image fuzz deps

## demo: bring up Kafka + registry, run relay on a demo stream, show the outcome
demo: deps
	scripts/demo.sh

## test: everything — vet, lint, the alerting rules, unit tests, integration tests against the real broker,
## then the three-broker cluster's tests (started only then, so that it does not share the cores with the rest)
test: deps up lint rules image signed
	RELAY_PROMTOOL="$$($(PROMTOOL_PATH))" RELAY_TEST_REQUIRE_BROKER=1 RELAY_TEST_IMAGE=$(CURDIR)/dist/oci \
	  RELAY_AXE_JS="$$(scripts/tools/axe.sh path)" RELAY_TEST_REQUIRE_BROWSER=1 \
	  $(GO) test -count=1 -timeout 45m ./...
	$(MAKE) --no-print-directory test-cluster

## signed: the release make image built, signed with a fresh key into an in-process registry (deploy/sign)
## and verified by cosign's own code (cosign built from its module: scripts/tools/cosign.sh)
signed:
	cosign="$$(scripts/tools/cosign.sh path)" && cd deploy && RELAY_COSIGN="$$cosign" RELAY_TEST_REQUIRE_COSIGN=1 \
	  RELAY_TEST_DIST=$(CURDIR)/dist $(GO) test -count=1 -run '^TestCosignVerifiesTheRelease$$' ./sign/

## test-k8s: the chart on a real single-node Kubernetes built here from Go modules (scripts/k8s):
## relay's image as StatefulSet pods through install, helm test and faults; its own target (not in make test)
test-k8s:
	scripts/k8s/test.sh

## test-cluster: the integration tests named TestCluster*, against the three-broker cluster (RF 3)
test-cluster: cluster
	RELAY_TEST_CLUSTER=1 RELAY_TEST_BOOTSTRAP="$$(scripts/stack/cluster.sh bootstrap)" RELAY_TEST_REPLICATION_FACTOR=3 \
	  RELAY_TEST_REQUIRE_BROKER=1 $(GO) test -count=1 -timeout 20m -run '^TestCluster' ./integration/

## unit: fast tests that need no broker
unit:
	$(GO) test -count=1 ./cmd/... ./internal/...
	cd deploy && $(GO) test -count=1 ./...

## rules: promtool checks the alerting rules in deploy/prometheus and runs
## their unit tests; then deploy/'s Go tests check the dashboard and the
## rules against the metrics relay exports (RELAY_PROMTOOL: and that
## promtool parses every dashboard query), the Helm chart, with a
## server-side dry run on a kube-apiserver built from source (RELAY_KUBE_APISERVER),
## and the image's SBOM against the CycloneDX JSON schema (RELAY_CYCLONEDX_SCHEMA, from npm)
rules:
	promtool="$$($(PROMTOOL_PATH))" && kube_apiserver="$$(scripts/tools/kube-apiserver.sh path)" && \
	  cyclonedx_schema="$$(scripts/tools/cyclonedx-schema.sh path)" && \
	  "$$promtool" check rules deploy/prometheus/relay-alerts.yml && \
	  "$$promtool" test rules deploy/prometheus/relay-alerts.test.yml && \
	  cd deploy && RELAY_PROMTOOL="$$promtool" RELAY_KUBE_APISERVER="$$kube_apiserver" \
	    RELAY_CYCLONEDX_SCHEMA="$$cyclonedx_schema" RELAY_TEST_REQUIRE_CYCLONEDX_SCHEMA=1 $(GO) test -count=1 ./...

## integration: only the integration tests (broker required)
integration: up
	RELAY_TEST_REQUIRE_BROKER=1 $(GO) test -count=1 -timeout 30m -v ./integration/...

## test-matrix: the core integration tests against the oldest and the newest Kafka relay supports
## (3.9.1 and 4.4.0, each a single broker from Maven); not part of make test (time)
test-matrix: deps
	scripts/test-matrix.sh

## test-upgrade: the previous release (scripts/previous-release, built from this
## repository's history) and this tree's relay in one group, against the local broker
test-upgrade: deps up
	scripts/test-upgrade.sh

## bench: same-run throughput/latency ratio of relay against a librdkafka passthrough,
## and relay beside a Kafka Streams exactly_once_v2 passthrough (built by Maven)
bench:
	scripts/bench.sh

## deps: install what the stack and the build need and the machine lacks
## (Java 17, Maven, curl, gcc, make), or say the one command that would
deps:
	scripts/install.sh

## up / down: the local single-node Kafka (KRaft) and Apicurio Registry;
## down also stops the cluster below, and PURGE=1 deletes both brokers' data
up: deps
	scripts/stack/up.sh

down:
	scripts/stack/down.sh $(if $(PURGE),--purge,)

## cluster: a three-node KRaft cluster beside the single broker (bootstrap
## 127.0.0.1:9192,9193,9194; RF 3, min.insync.replicas 2) for replication
## and failover tests; scripts/stack/cluster.sh stops, kills and restarts its nodes
cluster: deps
	scripts/stack/cluster.sh install
	scripts/stack/cluster.sh start
	scripts/stack/cluster.sh wait

## build: bin/relay for this machine, its version, commit and date as a release's are (scripts/version.sh)
VERSION ?= $(shell bash -c '. scripts/version.sh && echo $$VERSION')
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u -d @$$(git log -1 --format=%ct 2>/dev/null || echo 0) +%Y-%m-%dT%H:%M:%SZ)
build:
	$(GO) build -ldflags "-X relay/internal/buildinfo.Version=$(VERSION) -X relay/internal/buildinfo.Commit=$(COMMIT) -X relay/internal/buildinfo.Date=$(DATE)" -o bin/relay ./cmd/relay

## release: the whole release in dist/ (make release VERSION=x.y.z, or the tag vx.y.z on the commit):
## static, stripped, reproducible relay for linux/amd64 and linux/arm64 (each run, arm64 under qemu-user),
## the chart, the image with its SBOM, the release notes and SHA256SUMS, checked to name one version
## (deploy/releasecheck). scripts/cut-release.sh x.y.z prepares the CHANGELOG and the chart first
release:
	scripts/image.sh

## image: the release's binaries as a container image, built without a container engine:
## dist/oci (an OCI image layout, both architectures, SBOM attached) and a docker-load tarball per architecture
image:
	scripts/image.sh

## lint: go vet plus golangci-lint (installed into .cache/bin on first use)
lint: $(GOLANGCI)
	$(GO) vet ./...
	$(GOLANGCI) run ./...
	cd deploy && $(GO) vet ./... && $(GOLANGCI) run ./...

$(GOLANGCI):
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VER)
