#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# How often an idle kvrelay wakes up: starts a demo policy server, N fake engines that publish one
# batch and then stay quiet (PUB + replay ROUTER), and a daemon with N pipelines on loopback; lets
# them settle, then counts every thread's context switches (voluntary + involuntary, from
# /proc/<pid>/task/*/status) over a window and prints them per thread name and in total, and the
# CPU time it used meanwhile (utime + stime of /proc/<pid>/stat, coarse: 10 ms ticks).
# The goal: an idle daemon with 4 pipelines wakes a handful of times per second.
#
#   scripts/idle-wakeups.sh                        # 4 pipelines, 10 s window, build/default
#   scripts/idle-wakeups.sh --bin /tmp/old/kvrelay --pipelines 4 --window 10
#
# Scraping is off (metrics.url = ""): a scraper wakes once per interval (10 s by default) by
# design. The numbers hardly depend on machine load (they count wake-ups, not time), but a busy
# machine adds involuntary switches: say how loaded it was when you quote them.
set -euo pipefail

build_dir=build/default
bin=
pipelines=4
window=10
settle=30  # past the cold-start tail probes (25.5 s: these engines publish before kvrelay starts)
base_port=${KVRELAY_WAKEUP_PORT:-27500}

while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --pipelines) pipelines="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --settle) settle="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "idle-wakeups: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin="${bin:-$build_dir/kvrelay}"
engine_bin="$build_dir/tools/fake-engine/kvrelay-fake-engine"
server_bin="$build_dir/tools/policy-server/kvrelay-policy-server"
for b in "$bin" "$engine_bin" "$server_bin"; do
  [ -x "$b" ] || { echo "idle-wakeups: $b is not built" >&2; exit 2; }
done

work=$(mktemp -d /tmp/kvrelay-wakeups.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

server_port=$base_port
"$server_bin" --listen "127.0.0.1:$server_port" >"$work/server.log" 2>&1 &
pids+=($!)

{
  printf '[server]\naddress = "127.0.0.1:%s"\nrefresh_interval = "0s"\n\n' "$server_port"
  printf '[admin]\nlisten = ""\n\n[log]\nformat = "text"\nlevel = "warn"\n'
} >"$work/kvrelay.toml"
for i in $(seq 0 $((pipelines - 1))); do
  live=$((base_port + 10 + 2 * i))
  replay=$((live + 1))
  "$engine_bin" -bind "tcp://127.0.0.1:$live" -topic kv-events -interval 3600s \
    --replay-bind "tcp://127.0.0.1:$replay" >"$work/engine-$i.log" 2>&1 &
  pids+=($!)
  printf '\n[[engine]]\nreplica_id = "idle-%s"\nmodel_id = "m"\nhash_scheme = "vllm"\n' "$i" \
    >>"$work/kvrelay.toml"
  printf 'endpoint = "tcp://127.0.0.1:%s"\nreplay_endpoint = "tcp://127.0.0.1:%s"\n' \
    "$live" "$replay" >>"$work/kvrelay.toml"
  printf 'topic = "kv-events"\n\n[engine.metrics]\nurl = ""\n' >>"$work/kvrelay.toml"
done

"$bin" --config "$work/kvrelay.toml" >"$work/kvrelay.log" 2>&1 &
daemon=$!
pids+=($daemon)
sleep "$settle"
kill -0 "$daemon" 2>/dev/null || { echo "idle-wakeups: the daemon exited:"; cat "$work/kvrelay.log"; exit 1; }

# name -> switches, for every thread of the daemon
snapshot() {
  for t in /proc/"$daemon"/task/*; do
    local name v n
    name=$(tr ' ' '_' <"$t/comm" 2>/dev/null) || continue
    v=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) || continue
    n=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) || continue
    echo "$(basename "$t") $name $((v + n))"
  done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }  # utime + stime
snapshot >"$work/before"
c0=$(cpu_ticks)
sleep "$window"
c1=$(cpu_ticks)
snapshot >"$work/after"

echo "kvrelay idle wake-ups over ${window} s, ${pipelines} pipelines ($bin), load: $(cut -d' ' -f1-3 /proc/loadavg)"
join <(sort "$work/before") <(sort "$work/after") |
  awk -v w="$window" '{ d = $5 - $3; by[$2] += d; n[$2]++; total += d }
       END { for (k in by) printf "  %-18s threads %2d  switches %6d  (%.1f/s)\n", k, n[k], by[k], by[k] / w;
             printf "  %-18s            switches %6d  (%.1f/s)\n", "total", total, total / w }' |
  sort -k1,1
awk -v a="$c0" -v b="$c1" -v hz="$(getconf CLK_TCK)" -v w="$window" -v n="$pipelines" \
  'BEGIN { p = (b - a) / hz / w * 100; printf "  cpu: %.2f %% of one core (%.3f %% per pipeline; %d ticks of 1/%d s)\n", p, p / n, b - a, hz }'
