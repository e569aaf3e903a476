#!/usr/bin/env bash
# Installs what `make demo` and `make test` need and a fresh machine may
# lack: Java 17+ and Maven (the local stack), curl (its readiness checks),
# gcc (cgo, for librdkafka), and make for .ci/run, which runs this before
# make. `make demo`, `make test` and .ci/run all start here, so all three
# need and install the same things.
#
# As root with apt-get, it installs what is missing. Otherwise it prints the
# one command that would, and fails. Go is not installed: Debian's golang
# package is older than go.mod needs; with any Go 1.21 or newer the go
# command fetches the toolchain go.mod names by itself.
#
# usage: install.sh
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
find_missing() {
  missing=()
  java_ok || missing+=(openjdk-17-jre-headless)
  have mvn || missing+=(maven)
  have curl || missing+=(curl)
  have gcc || missing+=(gcc)
  have make || missing+=(make)
}

find_missing
((${#missing[@]} == 0)) && exit 0

if [[ "$(id -u)" -ne 0 ]] || ! have apt-get; then
  {
    echo "install.sh: missing: ${missing[*]}"
    if have apt-get; then
      echo "install them with:"
      echo "  sudo apt-get install -y ${missing[*]}"
    else
      echo "install them (Java 17 or newer, Maven, curl, gcc, make) with the system's package manager"
    fi
  } >&2
  exit 1
fi
say "installing ${missing[*]}"
# A fresh container has no package lists yet.
DEBIAN_FRONTEND=noninteractive apt-get update -qq
# With recommends: gcc needs libc6-dev, which it only recommends, for cgo.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
find_missing
if ((${#missing[@]})); then
  echo "install.sh: still missing after apt-get: ${missing[*]} (is another java first on PATH?)" >&2
  exit 1
fi
