#!/usr/bin/env bash
# Installs what `make demo` and `make test` need and a fresh machine may
# lack: Java 17+ and Maven (the local stack), curl (its readiness checks),
# gcc (cgo, for librdkafka), etcd (the chart's dry run), Chromium and npm
# (the console's browser tests), and make for
# .ci/run, which runs this before make. `make demo`, `make test` and
# .ci/run all start here, so all three need and install the same things.
#
# As root with apt-get, it installs what is missing. Otherwise it prints the
# one command that would, and fails. Go is not installed: Debian's golang
# package is older than go.mod needs; with any Go 1.21 or newer the go
# command fetches the toolchain go.mod names by itself.
#
# With `release`, it also installs what scripts/release.sh needs for the
# architectures named after it: Debian's musl-tools (amd64), and the
# aarch64 cross compiler, the arm64 musl (a foreign architecture for dpkg)
# and qemu-user to run the result (arm64).
#
# With `k8s`, also what `make test-k8s` needs: the release's tools for
# this machine's architecture, iptables and conntrack (kube-proxy), and
# libseccomp-dev with pkg-config (runc is built with seccomp).
#
# usage: install.sh [release [amd64] [arm64] | k8s]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf '[install.sh] %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

# java_ok: `java` on PATH is Java 17 or newer (or of a version it does
# not print in the usual way, which the stack scripts accept too).
java_ok() {
  have java || return 1
  local v
  v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)"
  [[ -z "$v" || "$v" -ge 17 ]]
}

if ! have go; then
  echo "install.sh: go not found; Go $(sed -n 's/^go //p' go.mod) or newer is required (https://go.dev/dl/)" >&2
  exit 1
fi

# find_missing sets missing to the Debian packages of what is not there.
# Kafka 4 and Apicurio 3.0 both run on Java 17; the stack scripts use the
# java on PATH for the broker.
release=()
k8s=0
if [[ "${1:-}" == release ]]; then
  shift
  release=("$@")
elif [[ "${1:-}" == k8s ]]; then
  # make test-k8s: relay's image for this machine's architecture, and
  # what the cluster's programs are built with and run on.
  k8s=1
  release=("$(go env GOARCH)")
fi

find_missing() {
  missing=()
  java_ok || missing+=(openjdk-17-jre-headless)
  have mvn || missing+=(maven)
  have curl || missing+=(curl)
  have gcc || missing+=(gcc)
  have make || missing+=(make)
  # The secured listeners' CA and certificates (scripts/stack/kafka.sh).
  have openssl || missing+=(openssl)
  # The chart's server-side dry run (make test) runs kube-apiserver on it.
  have etcd || missing+=(etcd-server)
  # The console's browser tests drive Debian's Chromium (make test).
  have chromium || missing+=(chromium)
  # axe-core, the browser tests' accessibility check, comes from npm.
  have npm || missing+=(npm)
  # The release's, installed without recommends (qemu-user's would
  # register binfmt handlers with the kernel).
  bare=()
  local a
  for a in "${release[@]}"; do
    case "$a" in
      amd64) have musl-gcc || bare+=(musl-tools) ;;
      arm64)
        have aarch64-linux-gnu-gcc || bare+=(gcc-aarch64-linux-gnu)
        [[ -f /usr/lib/aarch64-linux-musl/libc.a ]] || bare+=(musl-dev:arm64)
        have qemu-aarch64 || bare+=(qemu-user)
        ;;
    esac
  done
  if ((k8s)); then
    have iptables || bare+=(iptables)
    have conntrack || bare+=(conntrack)
    have pkg-config || bare+=(pkg-config)
    [[ -f /usr/include/seccomp.h ]] || bare+=(libseccomp-dev)
  fi
}

find_missing
((${#missing[@]} + ${#bare[@]} == 0)) && exit 0

if [[ "$(id -u)" -ne 0 ]] || ! have apt-get; then
  {
    echo "install.sh: missing: ${missing[*]} ${bare[*]}"
    if have apt-get; then
      echo "install them with:"
      ((${#bare[@]} == 0)) || [[ " ${bare[*]} " != *":arm64 "* ]] || echo "  sudo dpkg --add-architecture arm64 && sudo apt-get update"
      ((${#missing[@]} == 0)) || echo "  sudo apt-get install -y ${missing[*]}"
      ((${#bare[@]} == 0)) || echo "  sudo apt-get install -y --no-install-recommends ${bare[*]}"
    else
      echo "install them (Java 17 or newer, Maven, curl, gcc, make; for a release, musl and an aarch64 cross compiler) with the system's package manager"
    fi
  } >&2
  exit 1
fi
say "installing ${missing[*]} ${bare[*]}"
if [[ " ${bare[*]} " == *":arm64 "* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
fi
# A fresh container has no package lists yet (nor an added architecture's).
DEBIAN_FRONTEND=noninteractive apt-get update -qq
# With recommends: gcc needs libc6-dev, which it only recommends, for cgo.
((${#missing[@]} == 0)) || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
((${#bare[@]} == 0)) || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${bare[@]}"
find_missing
if ((${#missing[@]} + ${#bare[@]})); then
  echo "install.sh: still missing after apt-get: ${missing[*]} ${bare[*]} (is another java first on PATH?)" >&2
  exit 1
fi
