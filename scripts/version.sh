# Sourced by release.sh and image.sh: what a release is stamped with, each
# from the environment when set, else from git (SOURCE_DATE_EPOCH is the
# commit's time, so one commit builds to the same bytes), and how to run a
# release binary here.
VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
COMMIT="${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
DATE="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
OUT="${OUT:-dist}"
export VERSION COMMIT SOURCE_DATE_EPOCH DATE OUT

# run_release ARCH FILE ARGS...: runs FILE, a relay for linux/ARCH, on this
# machine: directly on its own architecture, else (arm64 on amd64) under
# qemu-user.
run_release() {
  local arch="$1"
  shift
  if [[ "$arch" == "$(go env GOHOSTARCH)" ]]; then
    "$@"
  else
    qemu-aarch64 "$@"
  fi
}
