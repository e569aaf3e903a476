#!/usr/bin/env bash
# Local Apicurio Registry 3 (in-memory storage) exposing the Confluent
# Schema Registry compatible API at /apis/ccompat/v7. No Docker: the Quarkus
# "all" tarball comes from Maven and runs straight on the local JVM.
#
# usage: registry.sh {install|start|stop|status|wait}
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

APICURIO_DIR="$RELAY_STACK_DIR/apicurio"
APICURIO_TARBALL="$APICURIO_DIR/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
# Unpacked next to the tarball, in a versioned dir so a bump never mixes jars.
APICURIO_HOME="$APICURIO_DIR/registry-$APICURIO_VERSION"
# 3.0.x ships a Quarkus "legacy jar": a runner jar beside lib/.
APICURIO_JAR="$APICURIO_HOME/apicurio-registry-app-$APICURIO_VERSION-runner.jar"
# Written only after a complete unpack, so an interrupted install is redone.
APICURIO_MARKER="$APICURIO_HOME/.installed"
REGISTRY_LOG="$STACK_LOG_DIR/registry.log"
REGISTRY_URL="http://127.0.0.1:$RELAY_STACK_REGISTRY_PORT"
REGISTRY_CCOMPAT="$REGISTRY_URL/apis/ccompat/v7"
# Recognises our registry in /proc/<pid>/cmdline (guards against pid reuse).
REGISTRY_MARKER_ARG="$APICURIO_JAR"
REGISTRY_WAIT_TIMEOUT=120
REGISTRY_STOP_TIMEOUT=30

usage() {
  echo "usage: ${0##*/} {install|start|stop|status|wait}" >&2
  exit 2
}

cmd_install() {
  [[ -f "$APICURIO_MARKER" && -f "$APICURIO_JAR" ]] && return 0
  mkdir -p "$APICURIO_DIR"
  if [[ ! -f "$APICURIO_TARBALL" ]]; then
    require_mvn
    log "downloading Apicurio Registry $APICURIO_VERSION (Maven)"
    # Run from the stack dir so the same Maven settings apply as for Kafka;
    # jansi.noreset: Maven 3.8 prints stray ANSI resets even with -q -B.
    (cd "$STACK_SCRIPT_DIR" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -q -B dependency:copy \
      "-Dartifact=io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" \
      -DoutputDirectory="$APICURIO_DIR") ||
      die "Maven could not fetch io.apicurio:apicurio-registry-app:$APICURIO_VERSION (see output above)"
  fi
  log "unpacking Apicurio Registry into $APICURIO_HOME"
  rm -rf "$APICURIO_HOME"
  mkdir -p "$APICURIO_HOME"
  if ! tar -xzf "$APICURIO_TARBALL" -C "$APICURIO_HOME"; then
    # A truncated download would fail forever; drop it so the next run refetches.
    rm -rf "$APICURIO_HOME" "$APICURIO_TARBALL"
    die "could not unpack $APICURIO_TARBALL (removed it; run again to re-download)"
  fi
  [[ -f "$APICURIO_JAR" ]] || die "${APICURIO_JAR##*/} not found in $APICURIO_TARBALL"
  touch "$APICURIO_MARKER"
}

cmd_start() {
  ensure_dirs
  local pid
  if pid="$(our_pid registry "$REGISTRY_MARKER_ARG")"; then
    if port_in_use "$RELAY_STACK_REGISTRY_PORT"; then
      log "registry already running (pid $pid) on $REGISTRY_URL"
    else
      log "registry already starting (pid $pid)"
    fi
    return 0
  fi
  rm -f "$(pid_file registry)"
  local port
  for port in "$RELAY_STACK_REGISTRY_PORT" "$RELAY_STACK_REGISTRY_MGMT_PORT" "$RELAY_STACK_REGISTRY_TLS_PORT"; do
    if port_in_use "$port"; then
      die "port 127.0.0.1:$port is already in use by another process (not our registry); stop it or set RELAY_STACK_REGISTRY_PORT / RELAY_STACK_REGISTRY_MGMT_PORT. $(describe_port "$port")"
    fi
  done
  # Apicurio Registry 3.0.x runs on Java 17, the JDK every machine here has
  # (3.1+ is Java 21 bytecode, which Debian 12 does not package).
  local java
  java="$(find_java 17)" ||
    die "Apicurio Registry $APICURIO_VERSION needs Java 17+, none found (checked RELAY_STACK_REGISTRY_JAVA_HOME, JAVA_HOME, PATH, /usr/lib/jvm); $STACK_INSTALL_HINT"
  cmd_install
  tls_material
  # Settings are Quarkus/Apicurio env vars (the app reads env over its
  # bundled application.properties):
  # - storage: SQL on in-memory H2 (Apicurio's default, spelled out so a
  #   future default change cannot silently make it persistent);
  # - HTTP and management interfaces bound to loopback only;
  # - ccompat legacy id mode OFF (the default): ccompat "id" is Apicurio's
  #   contentId, which like Confluent's schema id is shared by identical
  #   schemas across subjects. ON would return per-version globalIds
  #   (Apicurio 2.x behaviour), unlike Confluent.
  # - an HTTPS port beside the plain one, its certificate signed by the
  #   stack's CA (the registry TLS tests). Apicurio 3.0.9 cannot require a
  #   client certificate: its build fixes quarkus.http.ssl.client-auth to
  #   NONE ("build time fixed to 'NONE'"), so the tests put a proxy that
  #   does in front of it;
  # - the working dir is the install dir so nothing is written into the repo.
  (
    cd "$APICURIO_HOME"
    export APICURIO_STORAGE_KIND=sql
    export APICURIO_STORAGE_SQL_KIND=h2
    export QUARKUS_HTTP_HOST=127.0.0.1
    export QUARKUS_HTTP_PORT="$RELAY_STACK_REGISTRY_PORT"
    export QUARKUS_MANAGEMENT_HOST=127.0.0.1
    export QUARKUS_MANAGEMENT_PORT="$RELAY_STACK_REGISTRY_MGMT_PORT"
    export APICURIO_CCOMPAT_LEGACY_ID_MODE_ENABLED=false
    export QUARKUS_HTTP_SSL_PORT="$RELAY_STACK_REGISTRY_TLS_PORT"
    export QUARKUS_HTTP_INSECURE_REQUESTS=enabled
    export QUARKUS_HTTP_SSL_CERTIFICATE_FILES="$STACK_TLS_DIR/broker.crt"
    export QUARKUS_HTTP_SSL_CERTIFICATE_KEY_FILES="$STACK_TLS_DIR/broker.key"
    # The bundled console format has a broken date pattern ("YYYY-MMx-dd").
    export QUARKUS_LOG_CONSOLE_FORMAT='%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p [%c{3.}] (%t) %m%n'
    start_bg registry "$REGISTRY_LOG" "$java" -Xms128m -Xmx512m -XX:+UseG1GC \
      -Djava.awt.headless=true -jar "$APICURIO_JAR"
  )
  log "registry started (pid $(<"$(pid_file registry)"), $java), log: $REGISTRY_LOG"
}

registry_ready() {
  [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$REGISTRY_CCOMPAT/subjects")" == 200 ]]
}

cmd_wait() {
  require_curl
  wait_for registry "$REGISTRY_MARKER_ARG" "$REGISTRY_WAIT_TIMEOUT" "$REGISTRY_LOG" registry_ready
  log "registry ready at $REGISTRY_CCOMPAT"
}

cmd_status() {
  local pid
  if pid="$(our_pid registry "$REGISTRY_MARKER_ARG")"; then
    if port_in_use "$RELAY_STACK_REGISTRY_PORT"; then
      echo "registry: running (pid $pid, $REGISTRY_CCOMPAT)"
    else
      echo "registry: running (pid $pid, port $RELAY_STACK_REGISTRY_PORT not answering yet)"
    fi
    return 0
  fi
  echo "registry: stopped"
  return 3
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) stop_pid registry "$REGISTRY_MARKER_ARG" "$REGISTRY_STOP_TIMEOUT" ;;
  status) cmd_status ;;
  wait) cmd_wait ;;
  *) usage ;;
esac
