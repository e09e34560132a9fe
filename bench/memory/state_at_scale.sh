#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# State at scale: kvrelay against an engine whose cache keeps every block it stores (no
# evictions), so the resident set grows to the case's size, then an incident. kvrelay runs alone
# in a v1 memory cgroup and a 0.2-core cpu cgroup (cfs_quota_us 20000 / cfs_period_us 100000;
# root), as the reference injector runs the sidecar, or without limits (the default budget); the
# loadgen and the sink (a policy server that keeps the set of entries it holds) outside.
# One JSON line per case, then a Markdown table:
#
#   bench/memory/state_at_scale.sh [--build-dir build/default] [--out /tmp/scale] [--cases LIST]
#
# Cases (comma separated; default hold2m,restart1m,refresh1m,burst4m):
#   hold2m      2 M resident blocks in 128 MiB / 0.2 core: held exactly?
#   restart1m   1 M resident in 128 MiB / 0.2 core, then the server restarts empty
#   refresh1m   1 M resident in 128 MiB / 0.2 core, refresh_interval 120 s, two passes watched
#   burst4m     4 M blocks as fast as the loadgen publishes, in 128 MiB / 0.2 core
#   hold10m     10 M resident, the default budget, no limit
#   restart10m  10 M resident, no limit, then the server restarts empty
#
# For each: kvrelay's peak memory (the cgroup's max_usage, VmHWM), its CPU seconds, seconds until
# exact (kvrelay holds what the engine holds, nothing pending, and the server holds as many
# entries), the ALL_CLEARED the server received, and the server's ingest rate (entries/s; mean
# and the largest 1-second window) during a walk or the refresh. Never asserts a timing.
set -uo pipefail

# shellcheck source=bench/memory/lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=build/default OUT=/tmp/scale CASES="hold2m,restart1m,refresh1m,burst4m"
parse_case_args "$@"
KV="$BUILD/kvrelay"
LG="$BUILD/bench/e2e/kvrelay-bench-loadgen"
SINK="$BUILD/bench/e2e/kvrelay-bench-sink"
ADAPTERS="1=lora-0,2=lora-1,3=lora-2,4=lora-3,5=lora-4,6=lora-5,7=lora-6,8=lora-7"

later() { python3 -c "import sys; sys.exit(0 if $(now) < $1 else 1)"; }

run_case() {  # $1 name; globals BLOCKS RATE LIMIT INCIDENT REFRESH
  local name="$1" WORK CG="" CPU_CG="" SINK_PID="" KV_PID="" LG_PID=""
  WORK="$(mktemp -d)"
  cleanup_case() {
    for p in $KV_PID $LG_PID $SINK_PID; do kill "$p" 2>/dev/null || true; done
    for p in $KV_PID $LG_PID $SINK_PID; do wait "$p" 2>/dev/null || true; done
    remove_cgroups
  }
  sink() {  # $1 field of the sink's stats (fresh)
    kill -USR1 "$SINK_PID" 2>/dev/null || { echo 0; return; }
    sleep 0.05
    python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))[sys.argv[2]])
except Exception: print(0)' "$WORK/sink.json" "$1"
  }
  scrape() {
    curl -s --max-time 2 "http://$ADMIN/metrics" >"$WORK/metrics.new" 2>/dev/null &&
      mv "$WORK/metrics.new" "$WORK/metrics" || true
  }
  msum() {
    awk -v n="$1" -v f="${2:-}" '
      index($0, n) == 1 && (substr($0, length(n) + 1, 1) == "{" || substr($0, length(n) + 1, 1) == " ") &&
      (f == "" || index($0, f) > 0) { s += $NF } END { printf("%.0f", s + 0) }' "$WORK/metrics" 2>/dev/null
  }
  cpu_s() {  # utime + stime of kvrelay, seconds
    awk '{ printf("%.2f", ($14 + $15) / 100) }' "/proc/$KV_PID/stat" 2>/dev/null || echo 0
  }
  rates() {  # $1 the phase's start: entries/s over the phase, and the largest over ~1 s
    python3 - "$1" "$WORK/samples" <<'PY'
import sys
t0 = float(sys.argv[1])
pts = [(t0, 0)] + [(float(t), int(n)) for t, n in (l.split() for l in open(sys.argv[2]) if l.strip())]
mean = pts[-1][1] / max(1e-9, pts[-1][0] - t0)
# The largest rate over a window of at least one second (samples come about a second apart,
# further on a loaded machine: each window is divided by its own length).
best, j = 0.0, 0
for i in range(1, len(pts)):
    while j < i - 1 and pts[i][0] - pts[j + 1][0] >= 1.0: j += 1
    dt = pts[i][0] - pts[j][0]
    if dt > 0: best = max(best, (pts[i][1] - pts[j][1]) / dt)
print(round(mean), round(best))
PY
  }
  exact() {  # kvrelay holds what the engine holds, nothing waits, the server holds as many
    scrape
    [[ "$(msum kvrelay_resident_blocks)" == "$ENGINE_RESIDENT" && "$(msum kvrelay_pending_entries)" == 0 &&
       "$(msum kvrelay_queue_bytes)" == 0 && "$(sink resident)" == "$ENGINE_RESIDENT" ]]
  }

  start_sink 127.0.0.1:0 --resident-set
  local SINK_PORT PUB_PORT ADMIN
  SINK_PORT="$(cat "$WORK/sink.port")"
  PUB_PORT="$(free_port)"
  ADMIN="127.0.0.1:$(free_port)"
  "$LG" --bind "tcp://127.0.0.1:$PUB_PORT" --blocks "$BLOCKS" --rate "$RATE" \
    --capacity $((BLOCKS * 2)) --clear-prob 0 --floor-repeats 0 --go-file "$WORK/go" \
    --linger-ms 600000 >"$WORK/loadgen.out" 2>"$WORK/loadgen.log" &
  LG_PID=$!
  [[ "$LIMIT" != 1 ]] || make_cgroups kvrelay-scale 128 20000
  (
    join_cgroups
    cat >"$WORK/kvrelay.toml" <<TOML
[server]
address = "127.0.0.1:$SINK_PORT"
refresh_interval = "${REFRESH}"
[admin]
listen = "$ADMIN"
[log]
level = "warn"
[[engine]]
replica_id = "bench"
model_id = "bench"
endpoint = "tcp://127.0.0.1:$PUB_PORT"
[engine.adapters]
$(echo "$ADAPTERS" | tr ',' '\n' | sed 's/=\(.*\)/ = "\1"/')
TOML
    exec "$KV" --config "$WORK/kvrelay.toml"
  ) >"$WORK/kvrelay.log" 2>&1 &
  KV_PID=$!
  for _ in $(seq 3000); do grep -q '"kind":"generated"' "$WORK/loadgen.out" 2>/dev/null && break; sleep 0.1; done
  local ENGINE_RESIDENT
  ENGINE_RESIDENT="$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d["kind"]=="generated": print(d["engine_resident_blocks"])' "$WORK/loadgen.out")"
  for _ in $(seq 600); do scrape; [[ "$(msum kvrelay_engine_connected)" == 1 ]] && break; sleep 0.05; done
  local T0 EXACT_S="" INCIDENT_S="" ALIVE=1 RATE_MEAN="" RATE_MAX="" CLEARS0 CPU0 INC_CLEARS=""
  T0="$(now)"
  touch "$WORK/go"
  local deadline
  deadline="$(python3 -c "print($(now) + 900)")"
  while later "$deadline"; do
    kill -0 "$KV_PID" 2>/dev/null || { ALIVE=0; break; }
    if grep -q '"kind":"published"' "$WORK/loadgen.out" 2>/dev/null && exact; then
      EXACT_S="$(since "$T0")"; break
    fi
    if [[ "$INCIDENT" == burst ]] && grep -q '"kind":"published"' "$WORK/loadgen.out" 2>/dev/null; then
      scrape
      # Settled: declared incomplete, nothing waits, and the server holds what kvrelay holds
      # (a shed's walk streams chunks while pending is empty between them).
      [[ "$(msum kvrelay_index_incomplete)" == 1 && "$(msum kvrelay_pending_entries)" == 0 &&
         "$(msum kvrelay_queue_bytes)" == 0 &&
         "$(sink resident)" == "$(msum kvrelay_resident_blocks)" ]] &&
        { EXACT_S="$(since "$T0")"; break; }
    fi
    sleep 0.5
  done
  local CPU_HOLD
  CPU_HOLD="$(cpu_s)"
  CLEARS0="$(sink clears)"
  # The incident.
  if [[ -n "$EXACT_S" && "$INCIDENT" == restart ]]; then
    CPU0="$(cpu_s)"
    kill "$SINK_PID"; wait "$SINK_PID" 2>/dev/null || true
    start_sink "127.0.0.1:$SINK_PORT" --resident-set
    CLEARS0=0
    local T1
    T1="$(now)"
    : >"$WORK/samples"
    deadline="$(python3 -c "print($(now) + 600)")"
    while later "$deadline"; do
      kill -0 "$KV_PID" 2>/dev/null || { ALIVE=0; break; }
      sleep 1
      echo "$(now) $(sink prefixes)" >>"$WORK/samples"
      if exact; then INCIDENT_S="$(since "$T1")"; break; fi
    done
    read -r RATE_MEAN RATE_MAX < <(rates "$T1")
    INC_CLEARS="$(sink clears)"
    CPU_HOLD="$(python3 -c "print(round($(cpu_s) - $CPU0, 2))")"
  elif [[ -n "$EXACT_S" && "$INCIDENT" == refresh ]]; then
    CPU0="$(cpu_s)"
    kill -USR2 "$SINK_PID"  # counters from here
    local T1
    T1="$(now)"
    : >"$WORK/samples"
    deadline="$(python3 -c "print($(now) + 240)")"  # two refresh intervals
    while later "$deadline"; do
      kill -0 "$KV_PID" 2>/dev/null || { ALIVE=0; break; }
      sleep 1
      echo "$(now) $(sink prefixes)" >>"$WORK/samples"
    done
    read -r RATE_MEAN RATE_MAX < <(rates "$T1")
    INC_CLEARS="$(sink clears)"
    CPU_HOLD="$(python3 -c "print(round($(cpu_s) - $CPU0, 2))")"
    exact && INCIDENT_S=0
  fi
  scrape
  local HWM CG_PEAK="" OOM="" RESIDENT INCOMPLETE REFUSED SHEDS HOLDS
  HWM="$(awk '$1 == "VmHWM:" { printf("%.1f", $2 / 1024) }' "/proc/$KV_PID/status" 2>/dev/null)"
  if [[ -n "$CG" ]]; then
    CG_PEAK="$(python3 -c "print(round($(cat "$CG/memory.max_usage_in_bytes") / 1048576, 1))")"
    OOM="$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control")"
  fi
  RESIDENT="$(msum kvrelay_resident_blocks)"
  INCOMPLETE="$(msum kvrelay_index_incomplete)"
  REFUSED="$(msum kvrelay_index_blocks_total 'outcome="refused"')"
  SHEDS="$(msum kvrelay_pending_sheds_total)"
  HOLDS="$(msum kvrelay_pending_holds_total)"
  local SINK_RES; SINK_RES="$(sink resident)"
  python3 - <<PY
import json
def num(s):
    try: return float(s)
    except Exception: return None
print(json.dumps({
  "case": "$name", "blocks": $BLOCKS, "engine_resident": int("$ENGINE_RESIDENT" or 0),
  "limit": "$([[ "$LIMIT" == 1 ]] && echo "128 MiB / 0.2 core" || echo none)",
  "alive": bool($ALIVE), "kvrelay_resident": int("$RESIDENT" or 0), "server_resident": int("$SINK_RES" or 0),
  "index_incomplete": int("$INCOMPLETE" or 0), "refused_blocks": int("$REFUSED" or 0),
  "seconds_until_exact": num("$EXACT_S"), "incident": "$INCIDENT",
  "incident_seconds_until_exact": num("$INCIDENT_S"),
  "all_cleared_during_incident": num("$INC_CLEARS"),
  "server_rate_mean": num("$RATE_MEAN"), "server_rate_max_1s": num("$RATE_MAX"),
  "cpu_s_phase": num("$CPU_HOLD"), "vm_hwm_mib": num("$HWM"), "cgroup_peak_mib": num("$CG_PEAK"),
  "oom_kills": num("$OOM"), "pending_sheds": int("$SHEDS" or 0), "pending_holds": int("$HOLDS" or 0),
  "work": "$WORK",
}))
PY
  cleanup_case
}

: >"$OUT.jsonl"
IFS=, read -r -a list <<<"$CASES"
for c in "${list[@]}"; do
  RATE=0 LIMIT=1 INCIDENT=none REFRESH="0"
  case "$c" in
    hold2m) BLOCKS=2000000 ;;
    restart1m) BLOCKS=1000000 INCIDENT=restart ;;
    refresh1m) BLOCKS=1000000 INCIDENT=refresh REFRESH="120s" ;;
    burst4m) BLOCKS=4000000 INCIDENT=burst ;;
    hold10m) BLOCKS=10000000 LIMIT=0 ;;
    restart10m) BLOCKS=10000000 LIMIT=0 INCIDENT=restart ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  echo "[scale $(date -u +%H:%M:%S)] $c" >&2
  run_case "$c" | tee -a "$OUT.jsonl" >&2
done

python3 - "$OUT.jsonl" >"$OUT.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
f = lambda v, s="": "—" if v is None else f"{v:g}{s}" if isinstance(v, float) else f"{v}{s}"
print("| case | limit | engine resident | kvrelay / server hold | alive | s to exact | incident: s to exact, ALL_CLEARED | server entries/s (mean, max 1 s) | CPU s (phase) | cgroup peak | VmHWM | incomplete (refused) |")
print("|" + "---|" * 12)
for r in rows:
    inc = "—" if r["incident"] == "none" else f'{r["incident"]}: {f(r["incident_seconds_until_exact"])} s, {f(r["all_cleared_during_incident"])}'
    print(f'| {r["case"]} | {r["limit"]} | {r["engine_resident"]:,} | {r["kvrelay_resident"]:,} / {r["server_resident"]:,} '
          f'| {"yes" if r["alive"] else "**no**"} | {f(r["seconds_until_exact"])} | {inc} '
          f'| {f(r["server_rate_mean"])}, {f(r["server_rate_max_1s"])} | {f(r["cpu_s_phase"])} '
          f'| {f(r["cgroup_peak_mib"], " MiB")} | {f(r["vm_hwm_mib"], " MiB")} | {r["index_incomplete"]} ({r["refused_blocks"]:,}) |')
PY
cat "$OUT.md"
