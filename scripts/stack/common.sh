# shellcheck shell=bash
# Shared settings and helpers for the local stack scripts (kafka.sh,
# cluster.sh, registry.sh, jaeger.sh, up.sh, down.sh). Sourced, never
# executed directly.

# Everything the stack downloads or writes lives outside the source tree
# proper, in RELAY_STACK_DIR (default <repo>/.cache), so `git clean` or a
# purge never touches the scripts themselves.
STACK_SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STACK_REPO_DIR="$(cd "$STACK_SCRIPT_DIR/../.." && pwd)"

RELAY_STACK_DIR="${RELAY_STACK_DIR:-$STACK_REPO_DIR/.cache}"
RELAY_STACK_KAFKA_PORT="${RELAY_STACK_KAFKA_PORT:-9092}"
RELAY_STACK_CONTROLLER_PORT="${RELAY_STACK_CONTROLLER_PORT:-9093}"
# A second client listener of the single broker that advertises another
# port, where integration tests put a proxy that sees every request (and
# can withhold answers): clients bootstrapped through the proxy are sent
# back to it by the broker's metadata.
RELAY_STACK_KAFKA_PROXIED_PORT="${RELAY_STACK_KAFKA_PROXIED_PORT:-9095}"
RELAY_STACK_KAFKA_PROXY_PORT="${RELAY_STACK_KAFKA_PROXY_PORT:-9096}"
# The secured listeners of the same broker (kafka.sh): SASL_SSL with SCRAM
# and SSL with client certificates required, both under an authorizer with
# no ACL but those the tests create. The plain listeners' clients are
# ANONYMOUS, a super user, so the other tests see no difference. The CA,
# the broker's and a client's certificates live in $RELAY_STACK_DIR/kafka/tls.
RELAY_STACK_KAFKA_SASL_SSL_PORT="${RELAY_STACK_KAFKA_SASL_SSL_PORT:-9097}"
RELAY_STACK_KAFKA_SSL_PORT="${RELAY_STACK_KAFKA_SSL_PORT:-9098}"
# A plain listener on another address, for clients that cannot reach
# loopback: the pods of the Kubernetes of `make test-k8s` reach the
# broker at the node's address (scripts/k8s/cluster.sh node-ip). Off
# unless the address is set; kafka.sh restarts a running broker without it.
RELAY_STACK_KAFKA_NODE_ADDR="${RELAY_STACK_KAFKA_NODE_ADDR:-}"
RELAY_STACK_KAFKA_NODE_PORT="${RELAY_STACK_KAFKA_NODE_PORT:-9099}"
# The three-node cluster (cluster.sh): node N listens on BASE+N-1, so the
# defaults are brokers 9192-9194 and controllers 9292-9294. Both ranges are
# below the ephemeral range, so a restarted node always gets its port back.
RELAY_STACK_CLUSTER_BROKER_PORT_BASE="${RELAY_STACK_CLUSTER_BROKER_PORT_BASE:-9192}"
RELAY_STACK_CLUSTER_CONTROLLER_PORT_BASE="${RELAY_STACK_CLUSTER_CONTROLLER_PORT_BASE:-9292}"
RELAY_STACK_REGISTRY_PORT="${RELAY_STACK_REGISTRY_PORT:-8081}"
# The registry's HTTPS port, which requires a client certificate.
RELAY_STACK_REGISTRY_TLS_PORT="${RELAY_STACK_REGISTRY_TLS_PORT:-8444}"
# Apicurio (Quarkus) always opens a management interface (health/metrics);
# it is fixed at build time, so we can only move it, not turn it off.
RELAY_STACK_REGISTRY_MGMT_PORT="${RELAY_STACK_REGISTRY_MGMT_PORT:-9000}"
# Jaeger v2: OTLP receivers (gRPC, HTTP) and the query API/UI. The query
# extension always opens a gRPC port as well.
RELAY_STACK_JAEGER_OTLP_GRPC_PORT="${RELAY_STACK_JAEGER_OTLP_GRPC_PORT:-4317}"
RELAY_STACK_JAEGER_OTLP_HTTP_PORT="${RELAY_STACK_JAEGER_OTLP_HTTP_PORT:-4318}"
RELAY_STACK_JAEGER_QUERY_PORT="${RELAY_STACK_JAEGER_QUERY_PORT:-16686}"
RELAY_STACK_JAEGER_QUERY_GRPC_PORT="${RELAY_STACK_JAEGER_QUERY_GRPC_PORT:-16685}"

STACK_LOG_DIR="$RELAY_STACK_DIR/logs"
# The test CA and certificates of the secured listeners and the registry's
# HTTPS port (tls_material).
STACK_TLS_DIR="$RELAY_STACK_DIR/tls"
STACK_RUN_DIR="$RELAY_STACK_DIR/run"
# Programs the stack builds (jaeger) or installs (golangci-lint, by make).
# shellcheck disable=SC2034
STACK_BIN_DIR="$RELAY_STACK_DIR/bin"

# Used by the sourcing scripts. The default must match pom.xml's
# kafka.version; RELAY_STACK_KAFKA_VERSION runs another (make test-matrix),
# in its own RELAY_STACK_DIR.
# shellcheck disable=SC2034
KAFKA_VERSION="${RELAY_STACK_KAFKA_VERSION:-4.1.1}"
# shellcheck disable=SC2034
APICURIO_VERSION=3.0.9

# Single place for the install hint so every "missing tool" error says the
# same; scripts/install.sh knows the packages (make demo and make test run it).
STACK_INSTALL_HINT="scripts/install.sh installs it (or prints the command that would)"

die() {
  printf '%s: error: %s\n' "${0##*/}" "$*" >&2
  exit 1
}

log() {
  printf '[%s] %s\n' "${0##*/}" "$*"
}

require_java() {
  command -v java >/dev/null 2>&1 || die "java not found on PATH (Java 17+ required); $STACK_INSTALL_HINT"
  # Kafka 4.x brokers and Apicurio 3.x both need Java 17+.
  local ver
  ver="$(java_major java)"
  if [[ -n "$ver" && "$ver" -lt 17 ]]; then
    die "java $ver found, Java 17+ required; $STACK_INSTALL_HINT"
  fi
}

# java_major JAVA_BIN: prints the major version (17, 21, 25...) of a java.
java_major() {
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

# find_java MIN: prints a java binary of major version MIN or newer. Looks at
# RELAY_STACK_REGISTRY_JAVA_HOME, JAVA_HOME, `java` on PATH, then the JDKs in
# /usr/lib/jvm; first one new enough wins. RELAY_STACK_REGISTRY_JAVA_HOME lets
# the registry run on another JDK than the broker.
find_java() {
  local min="$1" cand v
  local -a cands=()
  [[ -n "${RELAY_STACK_REGISTRY_JAVA_HOME:-}" ]] && cands+=("$RELAY_STACK_REGISTRY_JAVA_HOME/bin/java")
  [[ -n "${JAVA_HOME:-}" ]] && cands+=("$JAVA_HOME/bin/java")
  command -v java >/dev/null 2>&1 && cands+=("$(command -v java)")
  local d
  for d in /usr/lib/jvm/*/; do
    [[ -d "$d" ]] && cands+=("${d%/}/bin/java")
  done
  for cand in "${cands[@]}"; do
    [[ -x "$cand" ]] || continue
    v="$(java_major "$cand")"
    if [[ -n "$v" && "$v" -ge "$min" ]]; then
      printf '%s\n' "$cand"
      return 0
    fi
  done
  return 1
}

require_mvn() {
  command -v mvn >/dev/null 2>&1 || die "mvn (Maven) not found on PATH, needed to download the stack jars; $STACK_INSTALL_HINT"
}

require_curl() {
  command -v curl >/dev/null 2>&1 || die "curl not found on PATH; $STACK_INSTALL_HINT"
}

ensure_dirs() {
  mkdir -p "$STACK_LOG_DIR" "$STACK_RUN_DIR"
}

# port_in_use PORT: true when something accepts TCP connections on
# 127.0.0.1:PORT. Uses bash's /dev/tcp so no extra tool is needed; a closed
# local port is refused immediately, the timeout only guards odd firewalls.
port_in_use() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# describe_port PORT: best-effort "who is listening" for error messages.
describe_port() {
  if command -v ss >/dev/null 2>&1; then
    ss -ltnpH "sport = :$1" 2>/dev/null || true
  fi
}

pid_file() {
  printf '%s/%s.pid\n' "$STACK_RUN_DIR" "$1"
}

# our_pid NAME MARKER: prints the pid recorded for NAME when that process is
# alive AND its command line contains MARKER. The marker check protects
# against a recycled pid after a reboot or a crash.
our_pid() {
  local file pid
  file="$(pid_file "$1")"
  [[ -f "$file" ]] || return 1
  pid="$(<"$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r "/proc/$pid/cmdline" ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -F -- "$2" >/dev/null || return 1
  fi
  printf '%s\n' "$pid"
}

# start_bg NAME LOGFILE CMD...: starts CMD detached (own session, so a Ctrl-C
# in the calling terminal or the end of a CI step does not kill it), appends
# its stdout/stderr to LOGFILE and records its pid.
start_bg() {
  local name="$1" logfile="$2"
  shift 2
  # setsid does not fork here (we are not a process group leader), so $! is
  # the java process itself.
  setsid nohup "$@" >>"$logfile" 2>&1 </dev/null &
  printf '%s\n' "$!" >"$(pid_file "$name")"
}

# stop_pid NAME MARKER TIMEOUT: SIGTERM, wait up to TIMEOUT seconds for a
# clean shutdown, then SIGKILL.
stop_pid() {
  local name="$1" marker="$2" timeout="$3" pid i
  if ! pid="$(our_pid "$name" "$marker")"; then
    rm -f "$(pid_file "$name")"
    log "$name is not running"
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop within ${timeout}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid"
  fi
  rm -f "$(pid_file "$name")"
}

# kill_pid NAME MARKER: SIGKILL at once (simulates a crash).
kill_pid() {
  local name="$1" marker="$2" pid
  if ! pid="$(our_pid "$name" "$marker")"; then
    rm -f "$(pid_file "$name")"
    log "$name is not running"
    return 0
  fi
  log "killing $name (pid $pid) with SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid"
  rm -f "$(pid_file "$name")"
}

# wait_gone PID: the kernel needs a moment to release the process (and its
# ports) after SIGKILL; restarting before that fails with "port in use".
wait_gone() {
  local i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
}

# wait_for NAME MARKER TIMEOUT LOGFILE CMD...: polls CMD until it succeeds.
# Fails fast if the process dies, and on any failure prints the tail of the
# service log so the cause is visible without digging.
wait_for() {
  local name="$1" marker="$2" timeout="$3" logfile="$4"
  shift 4
  local deadline=$((SECONDS + timeout)) since=$SECONDS
  while ((SECONDS < deadline)); do
    if "$@"; then
      return 0
    fi
    # For a moment after start the recorded pid is still the shell that
    # is about to exec the program, whose command line lacks the marker:
    # "not running" counts only after that moment.
    if ! our_pid "$name" "$marker" >/dev/null && ((SECONDS - since >= 5)); then
      wait_failed "$name" "$logfile" "$name is not running (it exited or was never started)"
    fi
    sleep 0.5
  done
  wait_failed "$name" "$logfile" "$name not ready after ${timeout}s"
}

wait_failed() {
  local name="$1" logfile="$2" msg="$3"
  {
    printf '%s: error: %s\n' "${0##*/}" "$msg"
    if [[ -f "$logfile" ]]; then
      printf -- '--- last 40 lines of %s ---\n' "$logfile"
      tail -n 40 "$logfile"
      printf -- '---\n'
    fi
  } >&2
  exit 1
}

# file_sha FILE: content hash used in install markers so an edited pom or a
# version bump triggers a reinstall.
file_sha() {
  sha256sum "$1" | cut -d' ' -f1
}

# go_tool_version DIR MODULE: the version of MODULE that the tools module
# in DIR pins.
go_tool_version() {
  sed -n "s|^[[:space:]]*$2 \(v[^ ]*\).*|\1|p" "$1/go.mod" | head -n 1
}

# k8s_version_ldflags VERSION: the -ldflags that stamp a Kubernetes
# program built from the module with its version (it would say
# v0.0.0-master, which a chart's kubeVersion refuses).
k8s_version_ldflags() {
  local minor="${1#v1.}" v
  minor="${minor%%.*}"
  for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean ' "$v" "$1" "$v" "$v" "$minor" "$v"
  done
}

# go_tool_install NAME DIR PKG WHAT [BUILD_ARGS...]: builds PKG from the
# tools module in DIR (its go.mod and go.sum pin the program and every
# dependency) into $STACK_BIN_DIR/NAME, once. A stamp written only after a
# successful build holds the hash of go.mod, go.sum, the module's own Go
# files and BUILD_ARGS, so a version bump or an edit rebuilds. WHAT says
# how long the first build takes, for the log line. GOWORK=off: a go.work
# above the repo must not pull the tools module in; nice: it may build
# beside the stack's JVMs and the tests. Only the finished binary is moved into place.
go_tool_install() {
  local name="$1" dir="$2" pkg="$3" what="$4"
  shift 4
  local bin="$STACK_BIN_DIR/$name" stamp_file="$STACK_BIN_DIR/$name.stamp"
  local build_log="$STACK_LOG_DIR/$name-build.log" stamp
  stamp="$({
    cat "$dir/go.mod" "$dir/go.sum"
    cat "$dir"/*.go 2>/dev/null || true
    printf '%s\0' "$@"
  } | sha256sum | cut -d' ' -f1)"
  if [[ -x "$bin" && -f "$stamp_file" && "$(<"$stamp_file")" == "$stamp" ]]; then
    return 0
  fi
  command -v go >/dev/null 2>&1 || die "go not found on PATH, needed to build $name"
  mkdir -p "$STACK_BIN_DIR" "$STACK_LOG_DIR"
  local start=$SECONDS tmp="$bin.tmp.$$"
  log "building $name from source into $bin ($what), log: $build_log"
  if ! (cd "$dir" && GOWORK=off nice -n 10 go build "$@" -o "$tmp" "$pkg") >"$build_log" 2>&1; then
    rm -f "$tmp"
    wait_failed "$name" "$build_log" "go build $pkg failed"
  fi
  mv -f "$tmp" "$bin"
  printf '%s\n' "$stamp" >"$stamp_file"
  log "built $name in $((SECONDS - start))s"
}

# tls_material writes, once, a CA and a server certificate (valid for
# 127.0.0.1 and localhost) for the broker's secured listeners and the
# registry's HTTPS port, a client certificate (CN=relay-tls) that the mTLS
# tests present, and the signing key of the OAuth tests' token issuer with
# its JWKS. Tests sign others with the CA's key when they need them.
tls_material() {
  [[ -f "$STACK_TLS_DIR/broker.pem" && -f "$STACK_TLS_DIR/jwks.json" ]] && return 0
  command -v openssl >/dev/null || die "openssl is missing; $STACK_INSTALL_HINT"
  mkdir -p "$STACK_LOG_DIR"
  log "writing a CA and certificates for the secured listeners into $STACK_TLS_DIR"
  local tmp="$STACK_TLS_DIR.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (
    cd "$tmp"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=relay test CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=broker"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.crt -days 3650 -extfile broker.ext
    # Kafka reads a PEM keystore as the PKCS#8 key followed by the chain.
    openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker.pk8
    cat broker.pk8 broker.crt ca.pem >broker.pem
    openssl req -newkey rsa:2048 -nodes -keyout relay-tls.key -out relay-tls.csr -subj "/CN=relay-tls"
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in relay-tls.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out relay-tls.pem -days 3650 -extfile client.ext
    # The test issuer's signing key, and its public half as the JWKS the
    # broker validates OAUTHBEARER tokens with (n in base64url).
    openssl genrsa -out oauth.key 2048
    n="$(openssl rsa -in oauth.key -noout -modulus | cut -d= -f2 | perl -ne 'chomp; print pack("H*", $_)' | base64 -w0 | tr '+/' '-_' | tr -d '=')"
    printf '{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"relay-test","n":"%s","e":"AQAB"}]}\n' "$n" >jwks.json
    rm -f ./*.csr ./*.ext broker.pk8 ca.srl
  ) >>"$STACK_LOG_DIR/tls.log" 2>&1 || die "openssl could not write the certificates (see $STACK_LOG_DIR/tls.log)"
  chmod 600 "$tmp"/*.key "$tmp/broker.pem"
  rm -rf "$STACK_TLS_DIR"
  mv "$tmp" "$STACK_TLS_DIR"
}
