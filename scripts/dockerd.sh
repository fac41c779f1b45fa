#!/usr/bin/env bash
# A Docker engine for the scripts that need one (scripts/release-images.sh and its test),
# started so that it leaves the machine's network alone.
#
#   export DOCKER_HOST="$(scripts/dockerd.sh)"   start, or find, a usable docker; prints the
#                                                DOCKER_HOST to use (nothing else on stdout)
#   scripts/dockerd.sh status                    exit 0 when the dockerd this script starts runs
#   scripts/dockerd.sh stop                      stops that dockerd, never any other
#
# A docker that already answers `docker info` (with the caller's DOCKER_HOST, or the CLI's
# default context) is used as it is. Otherwise this script installs Debian's docker.io when
# dockerd is missing and starts a dockerd of its own:
#   - no iptables or ip6tables rules, no docker0 bridge, no ip_forward or masquerading change:
#     the local cluster (e2e/cluster) owns this machine's bridge and iptables rules, and
#     building and running `--network none` containers needs none of it;
#   - its own data root, exec root, socket and containerd (dockerd starts one under the exec
#     root), so the cluster's containerd (/run/statecraft/containerd) is never involved;
#   - a daemon.json of its own, so a host /etc/docker/daemon.json cannot clash with these
#     flags (and dockerd 20.10 keeps its key under the data root, not in /etc/docker);
#   - --oom-score-adjust=0: these machines withhold CAP_SYS_RESOURCE, so no process may lower
#     its OOM score below 0 (dockerd 20.10 asks for -500 and passes it on to its containerd).
# Data: /var/lib/statecraft-docker; runtime state and socket: /run/statecraft-docker; log:
# /var/log/statecraft-dockerd.log.
source "$(dirname "$0")/lib.sh"

die() { printf '\033[1;31mdockerd: %s\033[0m\n' "$*" >&2; exit 1; }

DATA_ROOT=/var/lib/statecraft-docker
EXEC_ROOT=/run/statecraft-docker
SOCKET="$EXEC_ROOT/docker.sock"
OWN_HOST="unix://$SOCKET"
PIDFILE="$EXEC_ROOT/dockerd.pid"
LOGFILE=/var/log/statecraft-dockerd.log
START_TIMEOUT=90

# The pid of the dockerd this script started, if it still runs: the pid file's process must
# be a dockerd with our exec root, so a recycled pid never gets a signal from us.
own_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE" 2>/dev/null)" && [ -n "$pid" ] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "dockerd .*--exec-root $EXEC_ROOT " || return 1
  echo "$pid"
}

# docker_answers [HOST]: `docker info` succeeds (with HOST, or the caller's settings).
docker_answers() {
  command -v docker >/dev/null || return 1
  if [ $# -gt 0 ]; then DOCKER_HOST="$1" timeout 20 docker info >/dev/null 2>&1
  else timeout 20 docker info >/dev/null 2>&1; fi
}

# The endpoint the caller's docker settings reach (DOCKER_HOST, else the current context's).
callers_host() {
  if [ -n "${DOCKER_HOST:-}" ]; then echo "$DOCKER_HOST"
  else docker context inspect --format '{{.Endpoints.docker.Host}}' 2>/dev/null || echo unix:///var/run/docker.sock; fi
}

# Debian's docker.io when dockerd is missing (the project's scripts install what they use).
# Its maintainer scripts would start the packaged service with default settings (docker0
# bridge, iptables rules); a policy-rc.d that refuses every start prevents that, and is
# removed again unless the host already had one.
install_docker() {
  command -v dockerd >/dev/null && command -v docker >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "dockerd is not installed and installing it needs root"
  log "installing Debian package docker.io"
  local policy=/usr/sbin/policy-rc.d own_policy=false rc=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/dockerd.sh: no service starts while docker.io installs\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    own_policy=true
  fi
  {
    export DEBIAN_FRONTEND=noninteractive
    # Without recommends: cgroupfs-mount would mount cgroups from its init script.
    apt-get install -y -q --no-install-recommends docker.io >&2 ||
      { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends docker.io >&2; }
  } || rc=$?
  if $own_policy; then rm -f "$policy"; fi
  [ $rc -eq 0 ] || die "apt-get install docker.io failed (exit $rc)"
  command -v dockerd >/dev/null || die "docker.io installed but dockerd is not on PATH"
}

start() {
  # 1. the caller's docker, if it works
  if docker_answers; then callers_host; return 0; fi
  mkdir -p "$EXEC_ROOT"
  # One start at a time: two callers must not both start a dockerd on the same roots.
  exec 8>"$EXEC_ROOT.lock"
  flock -w 120 8 || die "another scripts/dockerd.sh holds $EXEC_ROOT.lock"
  # 2. ours, already running (a second caller, or a previous run that left it up)
  if own_pid >/dev/null; then
    wait_until_up && { echo "$OWN_HOST"; return 0; }
    die "the dockerd of $PIDFILE (pid $(own_pid)) runs but does not answer; see $LOGFILE, or run $0 stop"
  fi
  # 3. start one
  install_docker
  [ "$(id -u)" = 0 ] || die "starting dockerd needs root"
  mkdir -p "$DATA_ROOT"
  # dockerd before 23 keeps a "trust key" in /etc/docker/key.json unless its config file says
  # otherwise (the setting exists only there, and later versions reject it).
  local major
  major="$(dockerd --version | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')"
  if [ -n "$major" ] && [ "$major" -lt 23 ]; then
    printf '{"deprecated-key-path": "%s/key.json"}\n' "$DATA_ROOT" > "$EXEC_ROOT/daemon.json"
  else
    echo '{}' > "$EXEC_ROOT/daemon.json"
  fi
  local help flags
  help="$(dockerd --help 2>&1)"
  flags=(--config-file "$EXEC_ROOT/daemon.json" --data-root "$DATA_ROOT" --exec-root "$EXEC_ROOT"
    -H "$OWN_HOST" --pidfile "$PIDFILE"
    --bridge=none --iptables=false --ip-forward=false --ip-masq=false)
  # Flags that not every dockerd has (ip6tables came in 20.10, oom-score-adjust went in 25).
  grep -q -- '--ip6tables' <<<"$help" && flags+=(--ip6tables=false)
  grep -q -- '--oom-score-adjust' <<<"$help" && flags+=(--oom-score-adjust=0)
  log "starting dockerd (log: $LOGFILE)"
  printf '\n==== %s scripts/dockerd.sh: dockerd %s\n' "$(date -u +%FT%TZ)" "${flags[*]}" >> "$LOGFILE"
  # setsid: its own session, so the caller's terminal or process group going away leaves it be;
  # 8>&-: it must not inherit the start lock, or the next start would wait on it forever.
  setsid dockerd "${flags[@]}" >> "$LOGFILE" 2>&1 < /dev/null 8>&- &
  local pid=$!
  if ! wait_until_up "$pid"; then
    tail -n 30 "$LOGFILE" >&2
    kill "$pid" 2>/dev/null || true
    die "dockerd did not answer within ${START_TIMEOUT} s (log: $LOGFILE)"
  fi
  log "dockerd up (pid $(own_pid), $(DOCKER_HOST="$OWN_HOST" docker version --format 'engine {{.Server.Version}}' 2>/dev/null))"
  echo "$OWN_HOST"
}

# wait_until_up [PID]: until our socket answers; fails early when PID has exited.
wait_until_up() {
  local deadline=$((SECONDS + START_TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    docker_answers "$OWN_HOST" && return 0
    if [ $# -gt 0 ] && ! kill -0 "$1" 2>/dev/null; then return 1; fi
    sleep 0.5
  done
  return 1
}

stop() {
  local pid deadline
  if ! pid="$(own_pid)"; then
    log "no dockerd started by this script is running"
    return 0
  fi
  log "stopping dockerd (pid $pid)"
  # SIGTERM: dockerd stops its containers and the containerd it started, then exits.
  kill -TERM "$pid"
  deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    log "dockerd (pid $pid) still runs after 60 s; killing it and its containerd"
    kill -KILL "$pid" 2>/dev/null || true
    local cpid
    cpid="$(cat "$EXEC_ROOT/containerd/containerd.pid" 2>/dev/null || true)"
    if [ -n "$cpid" ] && tr '\0' ' ' < "/proc/$cpid/cmdline" 2>/dev/null | grep -q "$EXEC_ROOT/containerd"; then
      kill -KILL "$cpid" 2>/dev/null || true
    fi
  fi
  rm -f "$PIDFILE"
  log "dockerd stopped"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) own_pid >/dev/null ;;
  -h|--help) sed -n '2,9p' "$0" ;;
  *) die "usage: $0 [start|stop|status]" ;;
esac
