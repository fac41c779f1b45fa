# Common settings for the project's scripts. Sourced, not run.
# Everything built or downloaded lives in a cache outside the checkout, so a fresh
# clone reuses it and `git clean` never throws away a 20-minute Go build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${STATECRAFT_CACHE:-$HOME/.cache/statecraft}"
BIN="$CACHE/bin"
mkdir -p "$BIN"
export PATH="$BIN:$HOME/.cargo/bin:/usr/local/go/bin:$PATH"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# inputs_hash FILE... prints one hash over the named files' contents and their paths
# relative to the checkout, so that another clone of the same commit reuses the cache.
inputs_hash() {
  local f
  for f in "$@"; do printf '%s\n' "${f#"$ROOT"/}"; cat "$f"; done | sha256sum | cut -c1-16
}

# up_to_date STAMP HASH succeeds when STAMP records HASH.
up_to_date() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
