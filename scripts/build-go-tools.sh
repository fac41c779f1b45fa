#!/usr/bin/env bash
# Builds the Go programs the tests run, each from a module pinned under e2e/ (go.mod and
# go.sum checked in), into $CACHE/bin. A program is rebuilt only when its module's files
# (go.mod, go.sum, its own *.go) changed since its last build.
# - statecraft-porcupine (e2e/porcupine): the linearizability checker of the e2e tests'
#   histories, a small CLI over github.com/anishathalye/porcupine;
# - promtool (e2e/promtool): Prometheus's own rule checker and rule unit-test runner (the
#   operators' tests/alerts.rs), without service discovery (`remove_all_sd`: promtool's rule
#   commands do not use it, and it is most of Prometheus's dependencies);
# - helm (e2e/helm): Helm's own CLI, so that the chart is linted, rendered and installed by
#   the code users install it with;
# - statecraft-olm-validate (e2e/olm-validate): OLM bundles checked with the Operator
#   Framework's own bundle loader and validators, a small CLI over
#   github.com/operator-framework/api;
# - mysqld_exporter (deploy/images/mysqld-exporter): the Prometheus project's MySQL
#   exporter, the MySQL clusters' metrics sidecar; its image packs this binary, and the
#   MySQL operator's tests scrape it against real MariaDB servers.
source "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
shopt -s nullglob

# go_tool NAME DIR PACKAGE [FLAG...]: builds PACKAGE of the module in $ROOT/DIR as
# $BIN/NAME with the extra `go build` flags, unless it is up to date; LDFLAGS adds linker
# flags.
go_tool() {
  local name="$1" dir="$ROOT/$2" package="$3"
  shift 3
  local stamp="$BIN/.$name.stamp" h
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/*.go)"
  if up_to_date "$stamp" "$h" && [ -x "$BIN/$name" ]; then
    log "$name: up to date"
    return
  fi
  log "building $name"
  (cd "$dir" && go build -trimpath -ldflags "-s -w ${LDFLAGS:-}" "$@" -o "$BIN/$name" "$package")
  echo "$h" > "$stamp"
}

go_tool statecraft-porcupine e2e/porcupine .
go_tool promtool e2e/promtool github.com/prometheus/prometheus/cmd/promtool -tags remove_all_sd
# Helm's release build stamps its version in; without it `helm version` says only "v4.3".
helm_version="$(cd "$ROOT/e2e/helm" && go list -m -f '{{.Version}}' helm.sh/helm/v4)"
LDFLAGS="-X helm.sh/helm/v4/internal/version.version=$helm_version" go_tool helm e2e/helm helm.sh/helm/v4/cmd/helm
go_tool statecraft-olm-validate e2e/olm-validate .
# The exporter's release build stamps its version in (the image's tag is checked against it).
exporter_version="$(cd "$ROOT/deploy/images/mysqld-exporter" && go list -m -f '{{.Version}}' github.com/prometheus/mysqld_exporter)"
LDFLAGS="-X github.com/prometheus/common/version.Version=${exporter_version#v}" \
  go_tool mysqld_exporter deploy/images/mysqld-exporter github.com/prometheus/mysqld_exporter
