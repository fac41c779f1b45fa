#!/usr/bin/env bash
# Installs s3s-fs, a small S3-compatible server that keeps objects as plain files (one
# top-level directory per bucket), into $CACHE/bin. Tests and benchmarks of the S3 backup
# store run against it (statecraft_shared::testing::s3). Skips the install when that
# version is already there.
#
# Pinned to 0.14.1: later releases need a newer rustc than the workspace's 1.95.
source "$(dirname "$0")/lib.sh"

S3S_FS_VERSION="0.14.1"

# The binary reports its own version, so no stamp file can get out of sync with it.
if [ -x "$BIN/s3s-fs" ] && [ "$("$BIN/s3s-fs" --version 2>/dev/null)" = "s3s-fs $S3S_FS_VERSION" ]; then
  log "s3s-fs $S3S_FS_VERSION: up to date"
  exit 0
fi

log "installing s3s-fs $S3S_FS_VERSION (cold: ~2 min on 2 cores)"
# --locked uses the versions the release was tested with; fall back to fresh resolution
# only if the lock file no longer resolves (e.g. a yanked crate).
if ! cargo install "s3s-fs@$S3S_FS_VERSION" --features binary --locked --root "$CACHE" --force; then
  log "s3s-fs: --locked install failed, retrying without --locked"
  cargo install "s3s-fs@$S3S_FS_VERSION" --features binary --root "$CACHE" --force
fi
log "s3s-fs $S3S_FS_VERSION installed in $BIN"
