#!/usr/bin/env bash
# Runs the relay benchmark (cmd/relay-bench) against the local stack: the
# non-transactional passthrough ceiling, relay and its Java peer, a Kafka
# Streams exactly_once_v2 passthrough, in one run, on fresh topics that it
# deletes afterwards; then relay and Kafka Streams again, side by side, on
# the three-broker cluster (replication factor 3, min.insync.replicas=2,
# acks=all): the throughput a production user sees. See docs/PERFORMANCE.md.
#
# usage: scripts/bench.sh [relay-bench flags]   e.g. -records 50000 -latency-seconds 5
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/stack/up.sh
go build -o bin/relay ./cmd/relay
go build -o bin/relay-bench ./cmd/relay-bench
# Mode (k), Kafka Streams beside relay: built once by Maven (cached under
# .cache/bench/streams); -streams= after it on the command line skips it.
streams="$(scripts/tools/streams-bench.sh path)"
# Every figure of the performance table in one run: the hook modes at a
# hook answering after 1 ms and after 20 ms, also through the batch
# protocol, and the tier traffic of key ordering (mode (h)). Flags given
# to this script come after these, and win.
bin/relay-bench -streams "$streams" -key-modes -hook-delays 1ms,20ms \
  -hook-env RELAY_HOOK_BATCH=64,RELAY_HOOK_CONCURRENCY=256 -key-hops 6000 -key-hops-rate 300 "$@"

# relay audit's scan against a plain consumer reading the same topics, on
# a million and 20 million source records and their outputs: speed ratio
# and peak RSS (the larger with small values, to fit the disk).
bin/relay-bench -audit 1000000 -size 100
bin/relay-bench -audit 20000000 -size 20
# ... and with a million quarantined failures in one batch (each failure's
# ledger state held until the batch is judged), against a million
# processed records: peak RSS of each.
bin/relay-bench -audit-failures 1000000 -size 100

# Admission and upcast of the same ~1 KiB order in Avro, Protobuf and
# JSON Schema, in one process, round-robin: records/s and CPU per record,
# as ratios to Avro's.
bin/relay-bench -formats 35 -size 1024

# relay console over 1,000,000 quarantined records: its memory and page
# times, against relay quarantine stats reading the same quarantine.
bin/relay-bench -console 1000000 -size 100

# Three instances over 1,000 source partitions (every derived topic with
# as many): start-up to first commit, RSS per owned partition, commit
# latency under a steady load, and the stall when one instance is killed.
bin/relay-bench -scale 3 -partitions 1000 -size 100

# The replicated cluster: the baselines, relay and Kafka Streams only (the
# other modes measure relay's own work, which replication does not change).
scripts/stack/cluster.sh install
scripts/stack/cluster.sh start
scripts/stack/cluster.sh wait
echo
echo "== on the three-broker cluster (replication factor 3, min.insync.replicas=2)"
exec bin/relay-bench -bootstrap "$(scripts/stack/cluster.sh bootstrap)" -replication-factor 3 \
  -streams "$streams" -admission=false -otlp= "$@"
