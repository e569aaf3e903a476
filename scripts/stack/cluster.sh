#!/usr/bin/env bash
# Local three-node Apache Kafka cluster (KRaft, every node a combined
# broker+controller), beside kafka.sh's single broker, for tests that need
# real replication: replication factor 3, min.insync.replicas 2, offsets and
# transaction state replicated as in production, and nodes that can be
# stopped, killed and restarted one at a time. Same jars as kafka.sh (pom.xml)
# plus the kafka-tools jar for the readiness check and `tool`.
#
# usage: cluster.sh {install|start|stop|kill|status|wait|bootstrap}
#        cluster.sh {start-node|stop-node|kill-node} N
#        cluster.sh restart-node N [--kill] [--down SECONDS]
#        cluster.sh tool CLASS [ARGS...]
#
# Node N (1..3) listens on 127.0.0.1:9191+N (broker) and 127.0.0.1:9291+N
# (controller); see RELAY_STACK_CLUSTER_*_PORT_BASE in common.sh. Data and
# config under $RELAY_STACK_DIR/cluster/node-N, log $STACK_LOG_DIR/cluster-N.log.
#
#   start / wait    start all three nodes / wait until every node is up and
#                   the cluster sees all three brokers unfenced
#   stop / kill     SIGTERM (controlled shutdown) / SIGKILL all three
#   start-node N    start node N and wait until it is ready
#   stop-node N     SIGTERM node N and wait until it has exited
#   kill-node N     SIGKILL node N (a crash)
#   restart-node N  stop node N (SIGTERM, or SIGKILL with --kill), keep it
#                   down SECONDS (default 0), start it and wait until ready
#   bootstrap       print the bootstrap servers, for scripts and tests
#   tool CLASS      run a Kafka tool, e.g. `tool TopicCommand --describe
#                   --bootstrap-server "$(cluster.sh bootstrap)"`; a CLASS
#                   without a dot is taken from org.apache.kafka.tools
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CLUSTER_NODES=(1 2 3)
CLUSTER_HOME="$RELAY_STACK_DIR/cluster"
# One cluster id for all three nodes, chosen when the first node is
# formatted; every node's meta.properties must carry it.
CLUSTER_ID_FILE="$CLUSTER_HOME/cluster.id"
# The broker jars: kafka.sh installs them (the same pom.xml).
KAFKA_LIB="$RELAY_STACK_DIR/kafka/lib"
# kafka-tools (TopicCommand, ClusterTool, MetadataQuorumCommand...) is not a
# broker dependency. It lives in a directory of its own so that kafka.sh's
# classpath and install marker stay as they are.
TOOLS_LIB="$RELAY_STACK_DIR/kafka/tools"
TOOLS_JAR="$TOOLS_LIB/kafka-tools-$KAFKA_VERSION.jar"
# Three nodes boot at once on a shared, small machine: more than kafka.sh's.
CLUSTER_WAIT_TIMEOUT=180
CLUSTER_STOP_TIMEOUT=60
# Bounds one readiness probe (the admin client would retry for 60s).
CLUSTER_TOOL_TIMEOUT=30

usage() {
  cat >&2 <<EOF
usage: ${0##*/} {install|start|stop|kill|status|wait|bootstrap}
       ${0##*/} {start-node|stop-node|kill-node} N
       ${0##*/} restart-node N [--kill] [--down SECONDS]
       ${0##*/} tool CLASS [ARGS...]
EOF
  exit 2
}

# Per-node names and paths; N is 1, 2 or 3.
node_name() { printf 'cluster-%s\n' "$1"; }
node_dir() { printf '%s/node-%s\n' "$CLUSTER_HOME" "$1"; }
node_props() { printf '%s/server.properties\n' "$(node_dir "$1")"; }
node_data() { printf '%s/data\n' "$(node_dir "$1")"; }
# The broker logs through log4j2.properties to cluster-N.log; the .out file gets
# only the JVM's own stdout/stderr (early startup failures).
node_log() { printf '%s/cluster-%s.log\n' "$STACK_LOG_DIR" "$1"; }
node_out() { printf '%s/cluster-%s.out\n' "$STACK_LOG_DIR" "$1"; }
# Byte offset of cluster-N.log when the node was last started, so readiness
# only trusts a "started" line written by this run.
node_log_offset() { printf '%s/cluster-%s.log-offset\n' "$STACK_RUN_DIR" "$1"; }
# Recognises the node in /proc/<pid>/cmdline (guards against pid reuse).
node_marker() { node_props "$1"; }
broker_port() { printf '%s\n' "$((RELAY_STACK_CLUSTER_BROKER_PORT_BASE + $1 - 1))"; }
controller_port() { printf '%s\n' "$((RELAY_STACK_CLUSTER_CONTROLLER_PORT_BASE + $1 - 1))"; }

check_node() {
  [[ "${1:-}" =~ ^[123]$ ]] || die "node must be 1, 2 or 3, got '${1:-}'"
}

bootstrap() {
  local n out=""
  for n in "${CLUSTER_NODES[@]}"; do
    out+="${out:+,}127.0.0.1:$(broker_port "$n")"
  done
  printf '%s\n' "$out"
}

quorum_voters() {
  local n out=""
  for n in "${CLUSTER_NODES[@]}"; do
    out+="${out:+,}$n@127.0.0.1:$(controller_port "$n")"
  done
  printf '%s\n' "$out"
}

# now_us / since START_US: wall-clock timings for the log, in seconds.
now_us() { printf '%s\n' "${EPOCHREALTIME//[.,]/}"; }
since() {
  local us=$(($(now_us) - $1))
  printf '%d.%01ds\n' "$((us / 1000000))" "$((us % 1000000 / 100000))"
}

cmd_install() {
  "$STACK_SCRIPT_DIR/kafka.sh" install
  [[ -f "$TOOLS_JAR" ]] && return 0
  require_mvn
  log "installing kafka-tools $KAFKA_VERSION into $TOOLS_LIB (Maven)"
  # The one jar, not its dependencies: those are Kafka Connect's runtime
  # (Jetty, Jersey, ~60 jars) that no tool used here loads; the ones they
  # do load (clients, server-common, argparse4j, jackson) are in the broker
  # jars already. Installed whole or not at all.
  local tmp="$TOOLS_LIB.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (cd "$STACK_SCRIPT_DIR" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -q -B dependency:copy \
    -Dartifact="org.apache.kafka:kafka-tools:$KAFKA_VERSION" -DoutputDirectory="$tmp") ||
    die "Maven could not fetch kafka-tools $KAFKA_VERSION (see output above)"
  [[ -f "$tmp/kafka-tools-$KAFKA_VERSION.jar" ]] ||
    die "kafka-tools-$KAFKA_VERSION.jar missing from $tmp after Maven ran"
  rm -rf "$TOOLS_LIB"
  mv "$tmp" "$TOOLS_LIB"
}

# java_cmd N: the broker JVM of node N. A smaller heap than kafka.sh's
# single broker: three of these share two cores with it and the registry.
java_cmd() {
  # kafka.logs.dir and kafka.log.name feed log4j2.properties's file name.
  printf '%s\0' java -Xms128m -Xmx512m -XX:+UseG1GC \
    -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$STACK_SCRIPT_DIR/log4j2.properties" \
    "-Dkafka.logs.dir=$STACK_LOG_DIR" \
    "-Dkafka.log.name=$(node_name "$1")" \
    -cp "$KAFKA_LIB/*"
}

# tool_java: a short-lived client JVM (tools, the readiness probe): small
# heap, C1 only and the serial GC start fastest and cost least CPU. No log4j2
# config: log4j2's default prints errors only, to the console.
tool_java() {
  printf '%s\0' java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Djava.awt.headless=true \
    -cp "$KAFKA_LIB/*:$TOOLS_LIB/*"
}

# write_config N: regenerated on every start so port overrides always take
# effect; lives in RELAY_STACK_DIR, never in the repo.
write_config() {
  local n="$1" props
  props="$(node_props "$n")"
  mkdir -p "$(node_data "$n")"
  cat >"$props.tmp" <<EOF
# Generated by scripts/stack/cluster.sh; edits are overwritten on next start.
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$(quorum_voters)
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n")
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$(node_data "$n")

# Topics must be created explicitly, as in production.
auto.create.topics.enable=false
num.partitions=1

# Replication as in production: every write acks=all must reach two of the
# three replicas, so one node may be down and writes go on.
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
# Few partitions keep startup and the first group join / transaction fast.
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4

# Do not delay the first consumer-group rebalance (tests would wait 3s).
group.initial.rebalance.delay.ms=0

# Quicker failover than the defaults (heartbeat 2s, session 9s): the active
# controller fences a crashed (SIGKILLed) broker, moves its partitions'
# leadership and shrinks their ISR only once its session expires, and until
# then clients keep failing on it. 5s is still 5 missed heartbeats, room for
# GC pauses and a busy machine. A SIGTERMed node does not wait for this: its
# controlled shutdown (always on in KRaft) hands leadership over first.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=5000

# The log cleaner (compaction of __consumer_offsets and __transaction_state)
# takes its whole dedupe buffer from the heap at startup, 128 MiB by default;
# the internal topics here are small.
log.cleaner.dedupe.buffer.size=33554432
EOF
  mv "$props.tmp" "$props"
}

# meta_cluster_id N: the cluster id node N was formatted with, if any.
meta_cluster_id() {
  local meta
  meta="$(node_data "$1")/meta.properties"
  [[ -f "$meta" ]] || return 1
  sed -n 's/^cluster\.id=//p' "$meta" | head -n 1
}

# ensure_cluster_id: the id file, written once. Should it be lost while nodes
# are formatted, their id is adopted rather than a new one invented.
ensure_cluster_id() {
  [[ -s "$CLUSTER_ID_FILE" ]] && return 0
  mkdir -p "$CLUSTER_HOME"
  local n id=""
  for n in "${CLUSTER_NODES[@]}"; do
    id="$(meta_cluster_id "$n")" && [[ -n "$id" ]] && break
  done
  if [[ -z "$id" ]]; then
    local -a java
    mapfile -d '' -t java < <(tool_java)
    id="$("${java[@]}" kafka.tools.StorageTool random-uuid 2>>"$(node_out 1)")" ||
      die "kafka.tools.StorageTool random-uuid failed (see $(node_out 1))"
  fi
  printf '%s\n' "$id" >"$CLUSTER_ID_FILE.tmp"
  mv "$CLUSTER_ID_FILE.tmp" "$CLUSTER_ID_FILE"
}

# format_storage N: KRaft storage is formatted once per node, with the
# cluster's id; meta.properties is what the formatter writes, so its
# presence means "already formatted".
format_storage() {
  local n="$1" id have data
  id="$(<"$CLUSTER_ID_FILE")"
  data="$(node_data "$n")"
  if have="$(meta_cluster_id "$n")"; then
    [[ "$have" == "$id" ]] ||
      die "node $n was formatted for cluster $have, but $CLUSTER_ID_FILE says $id; purge the cluster (scripts/stack/down.sh --purge, or rm -rf $CLUSTER_HOME)"
    return 0
  fi
  local -a java
  mapfile -d '' -t java < <(java_cmd "$n")
  log "formatting KRaft storage of node $n in $data (cluster id $id)"
  "${java[@]}" kafka.tools.StorageTool format -t "$id" -c "$(node_props "$n")" >>"$(node_out "$n")" 2>&1 ||
    die "kafka.tools.StorageTool format failed for node $n (see $(node_out "$n") and $(node_log "$n"))"
}

# prepare: what every start needs once, whichever nodes it starts.
prepare() {
  ensure_dirs
  require_java
  cmd_install
  ensure_cluster_id
}

# start_node N: launches node N (no wait); a no-op when it already runs.
start_node() {
  local n="$1" name pid port
  name="$(node_name "$n")"
  if pid="$(our_pid "$name" "$(node_marker "$n")")"; then
    if port_in_use "$(broker_port "$n")"; then
      log "$name already running (pid $pid) on 127.0.0.1:$(broker_port "$n")"
    else
      log "$name already starting (pid $pid)"
    fi
    return 0
  fi
  rm -f "$(pid_file "$name")"
  for port in "$(broker_port "$n")" "$(controller_port "$n")"; do
    if port_in_use "$port"; then
      die "port 127.0.0.1:$port is already in use by another process (not our $name); stop it or set RELAY_STACK_CLUSTER_BROKER_PORT_BASE / RELAY_STACK_CLUSTER_CONTROLLER_PORT_BASE. $(describe_port "$port")"
    fi
  done
  write_config "$n"
  format_storage "$n"
  local -a java
  mapfile -d '' -t java < <(java_cmd "$n")
  local logfile
  logfile="$(node_log "$n")"
  stat -c %s "$logfile" 2>/dev/null >"$(node_log_offset "$n")" || echo 0 >"$(node_log_offset "$n")"
  start_bg "$name" "$(node_out "$n")" "${java[@]}" kafka.Kafka "$(node_props "$n")"
  log "$name started (pid $(<"$(pid_file "$name")")), log: $logfile"
}

# node_ready N: this run of node N logged "Kafka Server started" AND its
# broker port accepts connections. A KRaft broker logs that line only after
# "Finished waiting for the broker to be unfenced", so a ready node has
# joined the quorum, caught up with the metadata and been unfenced.
node_ready() {
  local n="$1" offset=0 logfile offset_file
  logfile="$(node_log "$n")"
  offset_file="$(node_log_offset "$n")"
  [[ -f "$offset_file" ]] && offset="$(<"$offset_file")"
  [[ -f "$logfile" ]] || return 1
  # A log that shrank was rolled over: read it whole.
  (($(stat -c %s "$logfile") < offset)) && offset=0
  # grep without -q reads to the end: with -q it exits at the first match,
  # tail dies of SIGPIPE, and under pipefail the check would never pass.
  tail -c "+$((offset + 1))" "$logfile" | grep 'Kafka Server started' >/dev/null &&
    port_in_use "$(broker_port "$n")"
}

# brokers_unfenced: the cluster itself says all three brokers are unfenced
# now. node_ready already saw each node unfenced once, at its start; this
# asks the metadata (one broker's image of the controller's log) in one
# short client JVM, ~1.5s and no work for the brokers: ClusterTool
# list-endpoints with --include-fenced-brokers lists every registered broker
# with its state. MetadataQuorumCommand would describe the raft quorum but
# not fencing; BrokerApiVersionsCommand would connect to every broker.
brokers_unfenced() {
  local -a java
  mapfile -d '' -t java < <(tool_java)
  timeout "$CLUSTER_TOOL_TIMEOUT" "${java[@]}" org.apache.kafka.tools.ClusterTool list-endpoints \
    --bootstrap-server "$(bootstrap)" --include-fenced-brokers 2>/dev/null |
    awk -v want="${#CLUSTER_NODES[@]}" '$5 == "unfenced" && $6 == "broker" { n++ } END { exit n != want }'
}

# cluster_ready: every node alive (else fail at once with its log) and all
# brokers unfenced.
cluster_ready() {
  local n
  for n in "${CLUSTER_NODES[@]}"; do
    our_pid "$(node_name "$n")" "$(node_marker "$n")" >/dev/null ||
      wait_failed "$(node_name "$n")" "$(node_log "$n")" "$(node_name "$n") is not running"
  done
  brokers_unfenced
}

# wait_node N TIMEOUT
wait_node() {
  wait_for "$(node_name "$1")" "$(node_marker "$1")" "$2" "$(node_log "$1")" node_ready "$1"
}

cmd_start() {
  prepare
  # All three at once: none can finish starting before a quorum of
  # controllers is up.
  local n
  for n in "${CLUSTER_NODES[@]}"; do
    start_node "$n"
  done
}

cmd_wait() {
  local start deadline n
  start="$(now_us)"
  deadline=$((SECONDS + CLUSTER_WAIT_TIMEOUT))
  for n in "${CLUSTER_NODES[@]}"; do
    wait_node "$n" "$((deadline - SECONDS > 1 ? deadline - SECONDS : 1))"
  done
  wait_for "$(node_name 1)" "$(node_marker 1)" "$((deadline - SECONDS > 1 ? deadline - SECONDS : 1))" \
    "$(node_log 1)" cluster_ready
  log "cluster ready in $(since "$start"): 3 brokers unfenced, bootstrap $(bootstrap)"
}

cmd_start_node() {
  check_node "${1:-}"
  local start
  prepare
  start="$(now_us)"
  start_node "$1"
  wait_node "$1" "$CLUSTER_WAIT_TIMEOUT"
  log "$(node_name "$1") ready in $(since "$start") on 127.0.0.1:$(broker_port "$1")"
}

cmd_stop_node() {
  check_node "${1:-}"
  local start
  start="$(now_us)"
  stop_pid "$(node_name "$1")" "$(node_marker "$1")" "$CLUSTER_STOP_TIMEOUT"
  log "$(node_name "$1") down after $(since "$start")"
}

cmd_kill_node() {
  check_node "${1:-}"
  kill_pid "$(node_name "$1")" "$(node_marker "$1")"
}

cmd_restart_node() {
  check_node "${1:-}"
  local n="$1" crash=false down=0 start
  shift
  while (($# > 0)); do
    case "$1" in
      --kill) crash=true ;;
      --down)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--down takes whole seconds, got '${2:-}'"
        down="$2"
        shift
        ;;
      *) usage ;;
    esac
    shift
  done
  start="$(now_us)"
  if "$crash"; then
    cmd_kill_node "$n"
  else
    cmd_stop_node "$n"
  fi
  if ((down > 0)); then
    log "keeping $(node_name "$n") down for ${down}s"
    sleep "$down"
  fi
  cmd_start_node "$n"
  log "$(node_name "$n") restarted in $(since "$start") (down ${down}s)"
}

# Stops all nodes at once: one after the other, the last node would be
# left without a controller quorum to grant its controlled shutdown.
cmd_stop_all() {
  local signal="$1" n failed=0
  local -a pids=()
  for n in "${CLUSTER_NODES[@]}"; do
    if [[ "$signal" == TERM ]]; then
      stop_pid "$(node_name "$n")" "$(node_marker "$n")" "$CLUSTER_STOP_TIMEOUT" &
    else
      kill_pid "$(node_name "$n")" "$(node_marker "$n")" &
    fi
    pids+=("$!")
  done
  for n in "${pids[@]}"; do
    wait "$n" || failed=1
  done
  ((failed == 0)) || die "could not stop the cluster (see errors above)"
}

cmd_status() {
  local n name pid stopped=0
  for n in "${CLUSTER_NODES[@]}"; do
    name="$(node_name "$n")"
    if pid="$(our_pid "$name" "$(node_marker "$n")")"; then
      if port_in_use "$(broker_port "$n")"; then
        echo "$name: running (pid $pid, broker 127.0.0.1:$(broker_port "$n"), controller 127.0.0.1:$(controller_port "$n"))"
      else
        echo "$name: running (pid $pid, port $(broker_port "$n") not answering yet)"
      fi
    else
      echo "$name: stopped"
      stopped=1
    fi
  done
  ((stopped == 0)) || return 3
}

cmd_tool() {
  (($# > 0)) || usage
  local class="$1"
  shift
  [[ "$class" == *.* ]] || class="org.apache.kafka.tools.$class"
  [[ -f "$TOOLS_JAR" ]] || die "kafka-tools not installed; run ${0##*/} install"
  local -a java
  mapfile -d '' -t java < <(tool_java)
  exec "${java[@]}" "$class" "$@"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop_all TERM ;;
  kill) cmd_stop_all KILL ;;
  status) cmd_status ;;
  wait) cmd_wait ;;
  bootstrap) bootstrap ;;
  start-node) cmd_start_node "${2:-}" ;;
  stop-node) cmd_stop_node "${2:-}" ;;
  kill-node) cmd_kill_node "${2:-}" ;;
  restart-node)
    shift
    cmd_restart_node "$@"
    ;;
  tool)
    shift
    cmd_tool "$@"
    ;;
  *) usage ;;
esac
