# docker.io/statecraft/statecraft-<name>: one recipe for every operator; $ID is the binary's
# (and the cargo package's) name, except statecraft-echo, the shared library's reference
# operator, a binary of statecraft-shared behind its `testing` feature. The release binary, linked statically against glibc
# (+crt-static on x86_64-unknown-linux-gnu; musl is not installed), stripped, as
# /usr/local/bin/$ID on the static base; entrypoint the binary, CMD run, user 65532.
BASE=static
ENTRYPOINT=("/usr/local/bin/$ID")
CMD=(run)
USER_ID=65532:65532
WORKDIR=/home/nonroot
PORTS=(8080/tcp 8081/tcp)
INPUTS=("$OUT/bin/$ID")

# Every operator binary, the echo operator's too, comes from ONE cargo invocation (one
# feature resolution, each dependency compiled once): built per package, the dependencies
# were resolved and compiled again for each (the echo operator's `testing` feature alone
# changed the TLS stack's features and cost another 12 minutes). The first operator image to
# build pays for all of them; the others find cargo's output up to date. The product binaries
# thereby link a library built with `testing` on; they never call its test-server code.
prepare() {
  local target=x86_64-unknown-linux-gnu package=() id
  for id in $(image_list | cut -d' ' -f1); do
    [[ "$id" == statecraft-* && "$id" != statecraft-echo ]] && package+=(-p "$id")
  done
  package+=(-p statecraft-shared --features statecraft-shared/testing --bins)
  log "$ID: cargo build --release --target $target ${package[*]} (static; target dir $OPERATOR_TARGET_DIR)"
  (cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR="$OPERATOR_TARGET_DIR" \
    cargo build --release --locked --quiet --target "$target" "${package[@]}")
  local built="$OPERATOR_TARGET_DIR/$target/release/$ID"
  file_is_static "$built" || die "$built is not statically linked"
  strip -o "$OUT/bin/$ID.tmp" "$built"
  mv "$OUT/bin/$ID.tmp" "$OUT/bin/$ID"
}

populate() {
  install -m 0755 "$OUT/bin/$ID" "$ROOTFS/usr/local/bin/$ID"
}
