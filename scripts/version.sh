# Sourced by release.sh and image.sh: what a release is stamped with, each
# from the environment when set, else from git (SOURCE_DATE_EPOCH is the
# commit's time, so one commit builds to the same bytes), and how to run a
# release binary here.
# The version: a release tag on the commit (v0.7.0 → 0.7.0); else the
# next minor version after CHANGELOG.md's last release, as a pre-release
# of the commit (0.7.0-dev.g1a2b3c4, .dirty with changes not committed):
# SemVer 2, an OCI tag and a chart version alike.
next_version() {
  local last major minor
  last="$(grep -m1 -oE '^## \[[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md 2>/dev/null | tr -d '#[] ')"
  IFS=. read -r major minor _ <<<"${last:-0.0.0}"
  local v="$major.$((minor + 1)).0-dev.g$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)"
  if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
    v+=".dirty"
  fi
  echo "$v"
}
VERSION="${VERSION:-$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null | sed 's/^v//' || true)}"
VERSION="${VERSION:-$(next_version)}"
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
