# shellcheck shell=bash disable=SC2034  # it sets its callers' variables
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# What the memory benches share (sourced, not run): the case-list arguments, ports and clocks,
# the policy sink, and kvrelay's v1 cgroups (memory limit, cfs quota) as the reference injector
# gives a sidecar.

# --build-dir DIR, --out PATH, --cases LIST into BUILD, OUT, CASES (their defaults set before);
# anything else is an error.
parse_case_args() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --build-dir) BUILD="$2"; shift ;;
      --out) OUT="$2"; shift ;;
      --cases) CASES="$2"; shift ;;
      *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
now() { date +%s.%N; }
since() { python3 -c "print(round($(now) - $1, 2))"; }

# Starts the bench sink on $1 (listen address) with the rest as its extra arguments; it writes
# its port to $WORK/sink.port and its stats to $WORK/sink.json. Sets SINK_PID.
start_sink() {
  local listen="$1"
  shift
  rm -f "$WORK/sink.port"
  "$SINK" --listen "$listen" --port-file "$WORK/sink.port" --stats-file "$WORK/sink.json" \
    "$@" 2>>"$WORK/sink.log" &
  SINK_PID=$!
  for _ in $(seq 300); do [[ -s "$WORK/sink.port" ]] && break; sleep 0.02; done
}

# v1 cgroups named $1-$$: memory limited to $2 MiB (no swap), and when $3 is given a cpu
# cgroup with cfs_quota_us $3 per 100 000 µs. Sets CG and CPU_CG (empty when not made).
make_cgroups() {
  CG="/sys/fs/cgroup/memory/$1-$$"
  mkdir "$CG"
  echo $(($2 << 20)) >"$CG/memory.limit_in_bytes"
  echo 0 >"$CG/memory.swappiness" 2>/dev/null || true
  CPU_CG=""
  if [[ -n "${3:-}" ]]; then
    CPU_CG="/sys/fs/cgroup/cpu/$1-$$"
    mkdir "$CPU_CG"
    echo 100000 >"$CPU_CG/cpu.cfs_period_us"
    echo "$3" >"$CPU_CG/cpu.cfs_quota_us"
  fi
}
# Moves the calling (sub)shell into CG and CPU_CG, where made: call it in the subshell that then
# execs kvrelay.
join_cgroups() {
  [[ -z "${CG:-}" ]] || echo "$BASHPID" >"$CG/cgroup.procs"
  [[ -z "${CPU_CG:-}" ]] || echo "$BASHPID" >"$CPU_CG/cgroup.procs"
}
remove_cgroups() {
  [[ -z "${CG:-}" ]] || rmdir "$CG" 2>/dev/null || true
  [[ -z "${CPU_CG:-}" ]] || rmdir "$CPU_CG" 2>/dev/null || true
}
