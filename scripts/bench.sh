#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# End-to-end benchmark: load generator (fake engine workload, ZMQ PUB) → kvrelay → counting policy
# server (gRPC), all on TCP loopback, plus the same-run floor (msgpack parse + XXH3 over the very
# payloads published). See BENCHMARKS.md for what each figure means.
#
#   ./scripts/bench.sh                 full run (several minutes on 2 shared cores)
#   ./scripts/bench.sh --smoke         a few seconds, for CI: runs every piece once, no thresholds
# Options: --build-dir DIR (default build/bench), --no-build, --out DIR (default
# $BUILD_DIR/bench-results), --repeats N (repeats of each case, default 2), --cases LIST
# (comma-separated from: micro,throughput,memory,evicting,latency,dp4,node4,lora,server_model,
# replay,evictdrain, and profile (perf + callgrind) and outage (a 60 s policy-server outage at
# 50 k blocks/s, OUTAGE_SECONDS to change it), which are not in the default list).
#
# Exit status: 0 when every case ran, kvrelay received every published block without a sequence
# gap and, in evictdrain, the sink got one eviction per add; 1 otherwise. Figures are reported,
# never asserted (the machine is shared).
# The durable case (ingestion with a snapshot every second vs none) runs only when
# --cases names it, as does the fanout case (one kvrelay and 1 vs 3 policy servers, then
# one of three stopped for FANOUT_STOP_SECONDS, 30; results in fanout.jsonl).
# The fullcache case (the full-cache engine, both eviction modes) runs unless --cases names
# others; KVRELAY_BASELINE=/path/to/kvrelay adds that binary's run of it (its own default eviction
# mode) to the same run, for "rpc mode at least 2x today's rate"; it adds one to evictdrain too.
# BENCH_DUMP=1 saves, per case once drained, kvrelay's /debug/tree (CASE.tree.json: the shard's
# heap_bytes, pending sizes) and /proc/PID/smaps (CASE.smaps: which mappings hold the RSS).
# BENCH_NO_CALLGRIND=1 leaves the callgrind run out of the profile case (perf alone, minutes less).
# The profile case's perf runs: a 1 M-block blast, an evicting blast, and paced 100 k and 10 k
# blocks/s; BENCH_PERF_FLAGS adds flags to their `perf record` (e.g. -g, for call graphs).
# Every case also writes threads-CASE.txt: each kvrelay thread's CPU from the go until drained
# (schedstat, in ns: the headline figure is CLK_TCK's, ~170 ns a block at 10 k/s for 6 s) and its
# context switches, voluntary and not.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build/bench"
OUT=""
REPEATS=2
SMOKE=0
BUILD=1
DEFAULT_CASES="micro,throughput,memory,evicting,latency,dp4,node4,lora,server_model,replay,evictdrain"
CASES="$DEFAULT_CASES"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift ;;
    --out) OUT="$(realpath -m "$2")"; shift ;;
    --repeats) REPEATS="$2"; shift ;;
    --cases) CASES="$2"; CASES_GIVEN=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$OUT" ]] || OUT="$BUILD_DIR/bench-results"
if [[ $SMOKE == 1 ]]; then
  REPEATS=1
  [[ "$CASES" == "$DEFAULT_CASES" ]] &&
    CASES="throughput,evicting,latency,dp4,node4,lora,server_model,replay,evictdrain"
fi
[[ ${CASES_GIVEN:-0} == 1 ]] || CASES="$CASES,fullcache"
has_case() { [[ ",$CASES," == *",$1,"* ]]; }

if [[ $BUILD == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  targets=(kvrelay_bin kvrelay-bench-loadgen kvrelay-bench-sink)
  has_case micro && targets+=(bench_decoder bench_shard bench_flush bench_ingress_stop)
  has_case server_model && targets+=(bench_server_model)
  has_case replay && targets+=(kvrelay-fake-engine kvrelay-capture kvrelay-replay)
  has_case outage && targets+=(kvrelay-policy-server)
  cmake --build "$BUILD_DIR" --target "${targets[@]}" -j2
fi
KVRELAY="$BUILD_DIR/kvrelay"
LOADGEN="$BUILD_DIR/bench/e2e/kvrelay-bench-loadgen"
SINK="$BUILD_DIR/bench/e2e/kvrelay-bench-sink"
for b in "$KVRELAY" "$LOADGEN" "$SINK"; do
  [[ -x "$b" ]] || { echo "bench.sh: missing $b (build it or drop --no-build)" >&2; exit 1; }
done

mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"
WORK="$(mktemp -d /tmp/kvrelay-bench.XXXXXX)"
CLK_TCK="$(getconf CLK_TCK)"
FAILED=0
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

log() { echo "[bench $(date -u +%H:%M:%S)] $*" >&2; }
now() { date +%s.%N; }

# A free TCP port on loopback (bound and released; good enough on a quiet host).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# Base port with room for 4 engines (port+30) or 4 DP ranks.
free_base_port() {
  local p
  for _ in $(seq 50); do
    p=$(( (RANDOM % 20000) + 30000 ))
    if python3 - "$p" <<'EOF' 2>/dev/null; then echo "$p"; return; fi
import socket, sys
base = int(sys.argv[1])
socks = []
for off in (0, 1, 2, 3, 10, 20, 30):
    s = socket.socket(); s.bind(("127.0.0.1", base + off)); socks.append(s)
EOF
  done
  echo "bench.sh: no free port range" >&2
  exit 1
}

cpu_seconds() {  # utime + stime of a process, seconds
  awk -v t="$CLK_TCK" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"
}
ctx_switches() {  # voluntary + involuntary context switches of every live thread of a process
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { printf "%d", s + 0 }'
}
thread_snapshot() {  # per live thread of a process: tid, name, CPU ns (schedstat), switches (vol. inv.)
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s\t%s\t%s\t%s\n' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null)" \
      "$(awk '/^voluntary_ctxt_switches:/ { v = $2 } /^nonvoluntary_ctxt_switches:/ { n = $2 }
              END { if (NR) print v + 0 " " n + 0 }' "$t/status" 2>/dev/null)"
  done
}
status_kb() {  # VmRSS / VmHWM of a process, kB
  awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"
}

ADMIN=""
metrics() { curl -sf --noproxy '*' --max-time 2 "http://$ADMIN/metrics" || true; }
# Sum of every sample of metric $1 whose line contains $2 (optional).
metric_sum() {
  metrics | awk -v n="$1" -v f="${2:-}" '
    index($0, n) == 1 && (substr($0, length(n) + 1, 1) == "{" || substr($0, length(n) + 1, 1) == " ") &&
    (f == "" || index($0, f) > 0) { s += $NF } END { printf "%.0f", s + 0 }'
}

SINK_PID=""; SINK_PORT=""; SINK_STATS=""
SINK_EXTRA=()  # extra flags of the next start_sink (the fanout case's --resident-set)
start_sink() {
  SINK_STATS="$WORK/sink-$1.json"
  rm -f "$WORK/sink.port"
  "$SINK" --listen 127.0.0.1:0 --port-file "$WORK/sink.port" --stats-file "$SINK_STATS" \
    --receipts "$WORK/receipts-$1.bin" --eviction-receipts "$WORK/ereceipts-$1.bin" \
    "${SINK_EXTRA[@]}" 2>>"$OUT/sink.log" &
  SINK_PID=$!
  PIDS+=("$SINK_PID")
  for _ in $(seq 200); do [[ -s "$WORK/sink.port" ]] && break; sleep 0.02; done
  SINK_PORT="$(cat "$WORK/sink.port")"
}
sink_stats() {  # fresh JSON from the sink
  rm -f "$SINK_STATS"
  kill -USR1 "$SINK_PID"
  for _ in $(seq 250); do [[ -s "$SINK_STATS" ]] && break; sleep 0.02; done
  cat "$SINK_STATS"
}
# Per thread name, between two thread_snapshot files ($1, $2) over $3 blocks: CPU (schedstat, ns
# exact where CLK_TCK quantises a paced run to ~170 ns a block) and context switches. A thread
# that started or ended inside the window counts from zero or is missing.
thread_table() {
  python3 - "$@" <<'EOF'
import collections, sys
def load(p):
    out = {}
    for line in open(p):
        f = line.rstrip("\n").split("\t")
        if len(f) == 4 and f[2] and f[3]:
            vol, inv = (int(x) for x in f[3].split())
            out[f[0]] = (f[1], int(f[2]), vol, inv)
    return out
a, b, blocks = load(sys.argv[1]), load(sys.argv[2]), max(1, int(sys.argv[3] or 1))
by = collections.defaultdict(lambda: [0, 0, 0, 0])
for tid, (name, ns, vol, inv) in b.items():
    _, ns0, vol0, inv0 = a.get(tid, (name, 0, 0, 0))
    row = by[name]; row[0] += 1; row[1] += ns - ns0; row[2] += vol - vol0; row[3] += inv - inv0
if not b:
    print("no thread's schedstat could be read (a kernel without CONFIG_SCHED_INFO?)")
    sys.exit(0)
total = [sum(r[i] for r in by.values()) for i in range(4)]
print(f"{'thread':<18}{'n':>3}{'cpu ms':>10}{'ns/block':>10}{'share':>8}{'switches':>10}"
      f"{'/1k blocks':>12}{'involuntary':>13}")
def row(name, n, ns, vol, inv, share=True):
    pct = f"{100 * ns / max(1, total[1]):>7.1f}%" if share else " " * 8
    print(f"{name:<18}{n:>3}{ns / 1e6:>10.1f}{ns / blocks:>10.1f}{pct}{vol + inv:>10}"
          f"{1e3 * (vol + inv) / blocks:>12.2f}{inv:>13}")
for name, r in sorted(by.items(), key=lambda kv: -kv[1][1]):
    row(name, *r)
row("all", len(b), *total[1:], share=False)
EOF
}
# A number field of the sink's one-line JSON, in bash alone: polled while kvrelay and the sink
# drain, a python3 per field (three a poll, each ~20 ms of CPU, far more behind a version
# manager's shims) took a core's third from the two being measured.
json_field() { local re="\"$2\":(-?[0-9.]+)"; [[ $1 =~ $re ]] && echo "${BASH_REMATCH[1]}"; }

KV_PID=""
KV_EXTRA=()    # extra kvrelay flags of the next run_case (the full-cache case's eviction mode)
BACKLOG_FILE=""  # when set: "unix_s pending_entries" lines sampled while the next run_case runs
KV_WRAP=""     # e.g. "valgrind --tool=callgrind ..." (same pid: valgrind runs the program in-process)
PERF_DATA=""   # when set: perf record -e cpu-clock on kvrelay from go until drained
EVICT_PHASE="" # when set: once the stored phase has drained, the loadgen removes every resident
               # block and evict_phase times it (the evictdrain case)
start_kvrelay() {  # $1 = case name, rest = kvrelay flags
  local name="$1"; shift
  ADMIN="127.0.0.1:$(free_port)"
  # shellcheck disable=SC2086  # KV_WRAP is a command prefix (valgrind for the profile case)
  $KV_WRAP "$KVRELAY" --server "127.0.0.1:$SINK_PORT" --admin-listen "$ADMIN" --log-level warn "$@" \
    >>"$OUT/kvrelay-$name.log" 2>&1 &
  KV_PID=$!
  PIDS+=("$KV_PID")
}
# Drained: nothing pending in kvrelay and the sink quiet for 3 windows. Leaves the sink's last
# stats JSON in DRAINED_STATS.
DRAINED_STATS=""
wait_drained() {
  local pend s quiet=0 prev_any="" any
  for _ in $(seq 3000); do
    pend="$(metric_sum kvrelay_pending_entries)"
    [[ -z "$BACKLOG_FILE" ]] || echo "$(now) $pend" >>"$BACKLOG_FILE"
    # Quiet means no entry and no eviction arrived: the stats reports (every --stats-interval)
    # go on whatever kvrelay's backlog, so they are not counted.
    s="$(sink_stats)"; any="$(json_field "$s" last_prefix_us)/$(json_field "$s" last_eviction_us)/$(json_field "$s" clears)"
    if [[ "$pend" == 0 && "$any" == "$prev_any" ]]; then quiet=$((quiet + 1)); else quiet=0; fi
    prev_any="$any"
    [[ $quiet -ge 3 ]] && break
    sleep 0.1
  done
  DRAINED_STATS="$s"
}
wait_connected() {  # $1 = engine sources expected
  for _ in $(seq 1200); do
    [[ "$(metric_sum kvrelay_engine_connected)" -ge "$1" ]] && { sleep 0.5; return 0; }
    sleep 0.05
  done
  log "kvrelay never connected to $1 source(s)"
  return 1
}
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

# The eviction phase of the evictdrain case, called by run_case once the stored phase has drained
# ($1 case, $2 kvrelay's resident blocks): the loadgen removes every resident block; done when the
# sink has one eviction per add it received (the server saw each, so kvrelay must send each), or
# 20 s pass without progress. Writes $WORK/evict-$1.json for run_case's result row.
evict_phase() {
  local name="$1" resident="$2" s0 s base expected have=0 last=-1 stall=0 c0 c1 done=""
  s0="$(sink_stats)"
  read -r expected base < <(python3 -c 'import json,sys; d=json.loads(sys.argv[1])
print(d["prefixes"], d["evictions"])' "$s0")
  log "case $name: stored phase drained (server holds $expected, kvrelay $resident); evicting all"
  c0="$(cpu_seconds "$KV_PID")"
  touch "$WORK/evict-go"
  for _ in $(seq 36000); do
    sleep 0.1
    s="$(sink_stats)"; have=$(( $(json_field "$s" evictions) - base ))
    [[ $have -ge $expected ]] && { done=1; break; }
    if [[ $have == "$last" ]]; then stall=$((stall + 1)); else stall=0; last=$have; fi
    [[ $stall -ge 200 ]] && break
  done
  wait_drained; s="$DRAINED_STATS"
  c1="$(cpu_seconds "$KV_PID")"
  [[ -n "$done" ]] || { log "case $name: the sink got $have of $expected evictions"; FAILED=1; }
  python3 - "$s" "$expected" "$base" "$resident" "$c0" "$c1" "$(status_kb "$KV_PID" VmRSS)" \
    "$(status_kb "$KV_PID" VmHWM)" "$(metric_sum kvrelay_resident_blocks)" \
    >"$WORK/evict-$name.json" <<'EOF'
import json, sys
s, expected, base, resident, c0, c1, rss, hwm, after = sys.argv[1:]
print(json.dumps({"sink": json.loads(s), "expected": int(expected), "base_evictions": int(base),
                  "resident": int(resident), "c0": float(c0), "c1": float(c1),
                  "rss_kb": int(rss), "hwm_kb": int(hwm), "resident_after": int(after)}))
EOF
}

# A single-engine run_case with kvrelay flags: $1 case, $2 blocks, $3 rate, $4 loadgen flags,
# rest: kvrelay flags (the full-cache and evictdrain cases' eviction modes).
run_case_with() {
  local name="$1" blocks="$2" rate="$3" lg="$4"; shift 4
  KV_EXTRA=("$@")
  run_case "$name" single "$blocks" "$rate" "$lg"
  KV_EXTRA=()
}
# Runs a command with KVRELAY_BASELINE as the kvrelay binary (the same-run baseline).
with_baseline() {
  local saved="$KVRELAY"
  KVRELAY="$KVRELAY_BASELINE"
  "$@"
  KVRELAY="$saved"
}

ADAPTERS="1=lora-0,2=lora-1,3=lora-2,4=lora-3,5=lora-4,6=lora-5,7=lora-6,8=lora-7"
# Python the result scripts share (fed ahead of their own text: { echo "$PY_TIMES"; cat; }):
# pairs(path) reads a file of native int64 pairs (fingerprint, µs since the epoch), as the
# loadgen's --block-times and the sink's --receipts write them; publish_times(path) maps each
# stored fingerprint to its first publish time; first_receipts(path, published) joins a sink's
# receipts with it: (publish µs, latency µs) per block, re-stored fingerprints once (first
# publish, first receipt).
PY_TIMES='import array, os
def pairs(path):
    a = array.array("q")
    if os.path.exists(path):
        with open(path, "rb") as f:
            a.frombytes(f.read())
    return a
def publish_times(path):
    published, t = {}, pairs(path)
    for i in range(0, len(t) - 1, 2):
        published.setdefault(t[i], t[i + 1])
    return published
def first_receipts(path, published):
    seen, r, out = set(), pairs(path), []
    for i in range(0, len(r) - 1, 2):
        fp = r[i]
        if fp in seen or fp not in published:
            continue
        seen.add(fp)
        out.append((published[fp], r[i + 1] - published[fp]))
    return out'
# One run: $1 case, $2 mode (single|dp4|node4), $3 blocks per source, $4 rate (0 = max),
# $5 extra loadgen flags (quoted string). Appends one JSON line to $RESULTS.
run_case() {
  local name="$1" mode="$2" blocks="$3" rate="$4" extra="$5"
  local base sources=1 kv_flags=() lg_flags=()
  base="$(free_base_port)"
  start_sink "$name"
  case "$mode" in
    dp4) sources=4; lg_flags=(--dp-size 4)
         kv_flags=(--engine-endpoint "tcp://127.0.0.1:$base" --dp-size 4 --replica-id bench
                   --model-id bench --engine-metrics-url "" --lora-adapter-names "$ADAPTERS") ;;
    node4) sources=4; lg_flags=(--engines 4)
           node_config "$base" >"$WORK/node4.toml"
           kv_flags=(--config "$WORK/node4.toml") ;;
    *) kv_flags=(--engine-endpoint "tcp://127.0.0.1:$base" --replica-id bench --model-id bench
                 --lora-adapter-names "$ADAPTERS")
       # The engine's /metrics (vLLM's cache_config_info: the cache's size, which kvrelay sizes
       # its index from); BENCH_NO_ENGINE_METRICS=1 runs without, as the runs before it did. A
       # case that serves its own (durable: the engine's start time) keeps it.
       if [[ " ${KV_EXTRA[*]} " == *" --engine-metrics-url "* ]]; then
         :
       elif [[ -z "${BENCH_NO_ENGINE_METRICS:-}" ]]; then
         lg_flags=(--metrics-port-file "$WORK/metrics-$name.port")
       else
         kv_flags+=(--engine-metrics-url "")
       fi ;;
  esac
  kv_flags+=("${KV_EXTRA[@]}")
  log "case $name: mode=$mode blocks/source=$blocks rate=$rate $extra ${KV_EXTRA[*]}"
  local lg_out="$WORK/loadgen-$name.out"
  rm -f "$WORK/go" "$WORK/evict-go" "$WORK/evict-$name.json"
  [[ -z "$EVICT_PHASE" ]] || lg_flags+=(--evict-go-file "$WORK/evict-go")
  # shellcheck disable=SC2086
  "$LOADGEN" --bind "tcp://127.0.0.1:$base" --blocks "$blocks" --rate "$rate" \
    --go-file "$WORK/go" --block-times "$WORK/times-$name.bin" \
    --eviction-times "$WORK/etimes-$name.bin" "${lg_flags[@]}" $extra \
    >"$lg_out" 2>>"$OUT/loadgen.log" &
  local lg_pid=$!
  PIDS+=("$lg_pid")
  if [[ " ${lg_flags[*]} " == *" --metrics-port-file "* ]]; then
    for _ in $(seq 500); do [[ -s "$WORK/metrics-$name.port" ]] && break; sleep 0.02; done
    # Scraped once a second so the first scrape (one interval after the start) falls inside the
    # idle measurement before the go; the engine's server is asked for nothing else.
    kv_flags+=(--engine-metrics-url "http://127.0.0.1:$(cat "$WORK/metrics-$name.port")/metrics"
               --stats-interval 1s --discover-via-metrics=false)
  fi
  start_kvrelay "$name" "${kv_flags[@]}"
  # The loadgen prints its floor once generation is done; wait for it before measuring anything.
  for _ in $(seq 3000); do
    grep -q '"kind":"floor"' "$lg_out" 2>/dev/null && break
    kill -0 "$lg_pid" 2>/dev/null || break
    sleep 0.1
  done
  wait_connected "$sources" || { FAILED=1; stop_all; return; }
  local expected
  expected="$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d["kind"]=="generated": print(d["blocks"])' "$lg_out")"
  # Idle: connected, nothing published yet.
  # CLK_TCK is 100 Hz: 5 s resolves 0.2 % of a core.
  local idle_s=5; [[ $SMOKE == 1 ]] && idle_s=1
  local c_idle0 c_idle1 rss_base
  c_idle0="$(cpu_seconds "$KV_PID")"; sleep "$idle_s"; c_idle1="$(cpu_seconds "$KV_PID")"
  rss_base="$(status_kb "$KV_PID" VmRSS)"
  kill -USR2 "$SINK_PID"; sleep 0.05
  local c0 t0 t1="" c1 stored=0 last=-1 stall=0
  c0="$(cpu_seconds "$KV_PID")"; t0="$(now)"
  local x0 x2
  x0="$(ctx_switches "$KV_PID")"
  thread_snapshot "$KV_PID" >"$WORK/threads0-$name.tsv"
  local perf_pid=""
  if [[ -n "$PERF_DATA" ]]; then
    perf record -e cpu-clock -F 1999 ${BENCH_PERF_FLAGS:-} -p "$KV_PID" -o "$PERF_DATA" 2>>"$OUT/perf.log" &
    perf_pid=$!
    sleep 0.3
  fi
  touch "$WORK/go"
  # A paced run publishes for blocks ÷ rate seconds; the count is looked at only from half a
  # second before that. Each look is a /metrics render in kvrelay (~1 ms of its CPU in the VMs
  # measured): polled every 0.25 s from the go, a 6 s run at 10 k blocks/s charged kvrelay ~0.4 µs
  # a block for being watched, ~100 times as often as a Prometheus scrape would.
  if [[ "$rate" != 0 && -z "$BACKLOG_FILE" ]]; then
    sleep "$(python3 -c 'import sys
try: print(max(0.0, int(sys.argv[1]) / float(sys.argv[2]) - 0.5))
except ValueError: print(0)' "$expected" "$rate")"
  fi
  while :; do
    stored="$(metric_sum kvrelay_blocks_total 'type="stored"')"
    [[ -z "$BACKLOG_FILE" ]] || echo "$(now) $(metric_sum kvrelay_pending_entries)" >>"$BACKLOG_FILE"
    if [[ "$stored" -ge "$expected" ]]; then t1="$(now)"; c1="$(cpu_seconds "$KV_PID")"; break; fi
    if [[ "$stored" == "$last" ]]; then stall=$((stall + 1)); else stall=0; last="$stored"; fi
    [[ "$rate" != 0 && $stall -ge 40 ]] && stall=200  # 10 s without progress at 0.25 s polls
    # Pre-publish generation can be slow; stall counting starts once blocks flow.
    if [[ "$stored" -gt 0 && $stall -ge 200 ]]; then log "case $name: stalled at $stored/$expected"; break; fi
    # Each /metrics scrape costs kvrelay ~0.3 ms: poll less when the run is paced anyway. At max
    # rate the poll times ingest, so the emitter's CPU until the poll sees the count (up to ~70
    # ms) counts as ingest CPU. 10 ms polls were tried: no less spread between identical runs
    # (the emitter's share of the ingest window moves the figure by ±150 ns per block), more load.
    if [[ "$rate" == 0 ]]; then sleep 0.05; else sleep 0.25; fi
  done
  [[ -n "$t1" ]] || { t1="$(now)"; c1="$(cpu_seconds "$KV_PID")"; FAILED=1; }
  local s
  wait_drained; s="$DRAINED_STATS"
  if [[ -n "$perf_pid" ]]; then kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; fi
  local c2 rss hwm resident gaps lost events_total
  c2="$(cpu_seconds "$KV_PID")"; x2="$(ctx_switches "$KV_PID")"
  thread_snapshot "$KV_PID" >"$WORK/threads1-$name.tsv"
  thread_table "$WORK/threads0-$name.tsv" "$WORK/threads1-$name.tsv" "$stored" >"$OUT/threads-$name.txt"
  rss="$(status_kb "$KV_PID" VmRSS)"; hwm="$(status_kb "$KV_PID" VmHWM)"
  if [[ -n "${BENCH_DUMP:-}" ]]; then
    curl -sf --noproxy '*' --max-time 5 "http://$ADMIN/debug/tree" > "$OUT/$name.tree.json" || true
    cp "/proc/$KV_PID/smaps" "$OUT/$name.smaps" || true
  fi
  resident="$(metric_sum kvrelay_resident_blocks)"
  gaps="$(metric_sum kvrelay_seq_gaps_total)"
  lost="$(metric_sum kvrelay_batches_lost_total)"
  events_total="$(metric_sum kvrelay_events_total)"
  [[ -z "$EVICT_PHASE" ]] || evict_phase "$name" "$resident"
  # Idle again, now holding state (resync timers, scrapes off).
  local c_post0 c_post1
  c_post0="$(cpu_seconds "$KV_PID")"; sleep "$idle_s"; c_post1="$(cpu_seconds "$KV_PID")"
  wait "$lg_pid" 2>/dev/null || true
  kill -TERM "$SINK_PID" 2>/dev/null; wait "$SINK_PID" 2>/dev/null || true  # writes its receipts
  python3 - "$name" "$mode" "$rate" "$lg_out" "$s" "$t0" "$t1" "$c0" "$c1" "$c2" "$expected" \
    "$stored" "$gaps" "$lost" "$events_total" "$resident" "$rss_base" "$rss" "$hwm" \
    "$c_idle0" "$c_idle1" "$c_post0" "$c_post1" "$idle_s" \
    "$WORK/times-$name.bin" "$WORK/receipts-$name.bin" \
    "$WORK/etimes-$name.bin" "$WORK/ereceipts-$name.bin" "$WORK/evict-$name.json" \
    "$x0" "$x2" >>"$RESULTS" < <(echo "$PY_TIMES"; cat <<'EOF'
import bisect, json, os, sys
(name, mode, rate, lg_out, sink, t0, t1, c0, c1, c2, expected, stored, gaps, lost, events,
 resident, rss_base, rss, hwm, ci0, ci1, cp0, cp1, idle_s, times_bin, receipts_bin,
 etimes_bin, ereceipts_bin, evict_json, x0, x2) = sys.argv[1:]

# Exact per-block latency: each stored block's publish time (loadgen) joined by fingerprint with
# its first receipt at the sink. Re-stored fingerprints count once (first publish, first receipt).
published = publish_times(times_bin)
lat = sorted(l for _, l in first_receipts(receipts_bin, published))
def pct(q, lat=lat):
    return round(lat[min(len(lat) - 1, int(q * len(lat)))] / 1e3, 3) if lat else None
# Eviction latency: each eviction the server received (PREFIX_EVICTED or expired entry) joined with
# the latest BlockRemoved of that fingerprint published before it (a block may be stored and
# evicted many times; kvrelay coalesces within a window, so the latest removal is the cause).
removals = {}
t = pairs(etimes_bin)
for i in range(0, len(t) - 1, 2):
    removals.setdefault(t[i], []).append(t[i + 1])
for v in removals.values():
    v.sort()
elat = []
er = pairs(ereceipts_bin)
for i in range(0, len(er) - 1, 2):
    v = removals.get(er[i])
    k = bisect.bisect_right(v, er[i + 1]) - 1 if v else -1
    if k >= 0:
        elat.append(er[i + 1] - v[k])
elat.sort()
lg = {}
for line in open(lg_out):
    d = json.loads(line); lg[d["kind"]] = d
sink = json.loads(sink)
t0, t1, c0, c1, c2 = map(float, (t0, t1, c0, c1, c2))
stored, expected, resident = int(stored), int(expected), int(resident)
pub = lg.get("published", {})
ingest_s = t1 - t0
e2e_s = (sink["last_prefix_us"] / 1e6 - pub["start_unix"]) if pub and sink["last_prefix_us"] else 0
floor = lg.get("floor", {})
r = {
    "case": name, "mode": mode, "target_rate": float(rate),
    "blocks": stored, "expected_blocks": expected, "events": int(events),
    "seq_gaps": int(gaps), "batches_lost": int(lost),
    "publish_s": pub.get("seconds"), "publish_blocks_per_s": pub.get("blocks_per_s"),
    # Primary: first publish → last prefix received by the server (both exact wall clocks).
    "e2e_s": round(e2e_s, 3),
    "blocks_per_s": round(stored / e2e_s) if e2e_s > 0 else 0,
    "events_per_s": round(int(events) / e2e_s) if e2e_s > 0 else 0,
    # Secondary: go → kvrelay decoded the last block (polled every ~0.05 s: coarse).
    "ingest_s": round(ingest_s, 3),
    "ingest_blocks_per_s": round(stored / ingest_s) if ingest_s > 0 else 0,
    "cpu_s_ingest": round(c1 - c0, 3), "cpu_s_total": round(c2 - c0, 3),
    "cpu_s_per_m_blocks": round((c2 - c0) / stored * 1e6, 3) if stored else None,
    "cpu_ns_per_block": round((c2 - c0) / stored * 1e9, 1) if stored else None,
    "ingest_cpu_ns_per_block": round((c1 - c0) / stored * 1e9, 1) if stored else None,
    # Wake-ups: kvrelay's threads' context switches, go → drained (the scrapes' included).
    "ctx_switches": int(x2) - int(x0),
    "ctx_switches_per_k_blocks": round((int(x2) - int(x0)) / stored * 1e3, 2) if stored else None,
    "resident_blocks": resident,
    "rss_base_kb": int(rss_base), "rss_kb": int(rss), "hwm_kb": int(hwm),
    "bytes_per_resident_block": round((int(rss) - int(rss_base)) * 1024 / resident, 1) if resident else None,
    "hwm_bytes_per_resident_block": round(int(hwm) * 1024 / resident, 1) if resident else None,
    "idle_cpu_pct_before": round((float(ci1) - float(ci0)) / float(idle_s) * 100, 2),
    "idle_cpu_pct_after": round((float(cp1) - float(cp0)) / float(idle_s) * 100, 2),
    "server_prefixes": sink["prefixes"], "server_evictions": sink["evictions"],
    "server_clears": sink["clears"], "server_updates": sink["csu_with_prefixes"],
    # Evictions keep arriving after the last add: rate them over first publish → last RPC.
    # (not last_any_us: the stats reports go on every --stats-interval after the data.)
    "drain_s": round(max(sink["last_prefix_us"], sink["last_eviction_us"]) / 1e6 - pub["start_unix"], 3)
               if pub and max(sink["last_prefix_us"], sink["last_eviction_us"]) else 0,
    "lat_p50_ms": sink["lat_p50_ms"], "lat_p90_ms": sink["lat_p90_ms"],
    "lat_p99_ms": sink["lat_p99_ms"], "lat_max_ms": sink["lat_max_ms"],
    "block_lat_matched": len(lat), "block_lat_published": len(published),
    "block_lat_p50_ms": pct(0.50), "block_lat_p90_ms": pct(0.90),
    "block_lat_p99_ms": pct(0.99), "block_lat_max_ms": pct(1.0),
    "server_evictions_rpc": sink.get("evictions_rpc"),
    "server_evictions_expired": sink.get("evictions_expired"),
    "evict_lat_matched": len(elat), "evict_lat_received": len(er) // 2,
    "evict_lat_p50_ms": pct(0.50, elat), "evict_lat_p90_ms": pct(0.90, elat),
    "evict_lat_p99_ms": pct(0.99, elat), "evict_lat_max_ms": pct(1.0, elat),
    "floor": floor, "generated": lg.get("generated", {}),
}
r["server_evictions_per_s"] = round(sink["evictions"] / r["drain_s"]) if r["drain_s"] > 0 else 0
if os.path.exists(evict_json):
    # The eviction phase (evictdrain): the figures above are the stored phase's, measured before
    # it; the eviction latency join above sees only this phase's removals (its cache never
    # evicts). Rate: first BlockRemoved published → the sink's last eviction receipt.
    ev = json.load(open(evict_json))
    es, pe = ev["sink"], lg.get("evicted", {})
    got = es["evictions"] - ev["base_evictions"]
    span = es["last_eviction_us"] / 1e6 - pe["start_unix"] if pe and es["last_eviction_us"] else 0
    cpu = ev["c1"] - ev["c0"]
    r.update({
        "evict_expected": ev["expected"], "evict_kvrelay_resident": ev["resident"],
        "evict_published": pe.get("blocks"), "evict_publish_s": pe.get("seconds"),
        "evict_received": got, "evict_rpc": es["evictions_rpc"], "evict_expired": es["evictions_expired"],
        "evict_s": round(span, 3), "evictions_per_s": round(got / span) if span > 0 else 0,
        "evict_cpu_s": round(cpu, 3),
        "evict_cpu_s_per_m": round(cpu / got * 1e6, 3) if got else None,
        "evict_rss_kb_after": ev["rss_kb"], "evict_hwm_kb": ev["hwm_kb"],
        "evict_resident_after": ev["resident_after"],
    })
    r["server_evictions_per_s"] = r["evictions_per_s"]  # the main table's column: this phase
if floor.get("floor_ns") and r["cpu_ns_per_block"]:
    r["cpu_vs_floor"] = round(r["cpu_ns_per_block"] / floor["floor_ns"], 2)
    r["ingest_cpu_vs_floor"] = round(r["ingest_cpu_ns_per_block"] / floor["floor_ns"], 2)
    r["decode_fp_vs_floor"] = round(floor["decode_fp_ns"] / floor["floor_ns"], 2)
    floor_rate = 1e9 / floor["floor_ns"]
    r["floor_blocks_per_s"] = round(floor_rate)
    r["throughput_vs_floor"] = round(r["blocks_per_s"] / floor_rate, 3) if r["blocks_per_s"] else None
if floor.get("floor_index_ns") and r["cpu_ns_per_block"]:
    # The second floor: parse + XXH3 + the insert into a table of the resident size.
    fi = floor["floor_index_ns"]
    r["cpu_vs_floor_index"] = round(r["cpu_ns_per_block"] / fi, 2)
    r["ingest_cpu_vs_floor_index"] = round(r["ingest_cpu_ns_per_block"] / fi, 2)
    r["decode_fp_vs_floor_index"] = round(floor["decode_fp_ns"] / fi, 2)
    r["throughput_vs_floor_index"] = (round(r["blocks_per_s"] / (1e9 / fi), 3)
                                      if r["blocks_per_s"] else None)
print(json.dumps(r))
EOF
)
  tail -1 "$RESULTS" >&2
  if [[ "$stored" -lt "$expected" || "$gaps" != 0 ]]; then
    log "case $name: received $stored of $expected blocks, $gaps gap(s)"
    FAILED=1
  fi
  stop_all
}

node_config() {  # four single-rank engines on base, base+10, base+20, base+30
  local base="$1" i
  printf '[server]\naddress = "127.0.0.1:%s"\n' "$SINK_PORT"
  for i in 0 1 2 3; do
    printf '\n[[engine]]\nreplica_id = "node-gpu%s"\nmodel_id = "bench"\nendpoint = "tcp://127.0.0.1:%s"\n' \
      "$i" "$((base + 10 * i))"
    printf '[engine.adapters]\n'
    local a; for a in 1 2 3 4 5 6 7 8; do printf '%s = "lora-%s"\n' "$a" "$((a - 1))"; done
    printf '[engine.metrics]\nurl = ""\n'
  done
}

log "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
log "results → $RESULTS"

if has_case micro; then
  for exe in "$BUILD_DIR/bench/decoder/bench_decoder" "$BUILD_DIR/bench/shard/bench_shard" \
             "$BUILD_DIR/bench/e2e/bench_flush" "$BUILD_DIR/bench/ingress/bench_ingress_stop"; do
    [[ -x "$exe" ]] || { log "missing $exe"; continue; }
    b="${exe##*/bench_}"
    log "microbenchmark bench_$b"
    "$exe" --benchmark_counters_tabular=true --benchmark_min_time=0.2 \
      --benchmark_out="$OUT/bench_$b.json" --benchmark_out_format=json >"$OUT/bench_$b.txt" 2>&1 ||
      FAILED=1
  done
fi

# Server model: what one eviction costs the reference policy server (a C++ model of its index) in
# each eviction mode at 100 k and 1 M resident keys, and how long a LookupRoute waits. Google
# Benchmark's table and JSON go to $OUT/bench_server_model.*, the summary to server_model.txt.
server_model_case() {
  local exe="$BUILD_DIR/bench/server_model/bench_server_model" flags=(--benchmark_min_time=1)
  [[ -x "$exe" ]] || { log "missing $exe"; FAILED=1; return; }
  [[ $SMOKE == 1 ]] && flags=(--benchmark_min_time=0.01 '--benchmark_filter=keys:100000/')
  log "server model (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$exe" "${flags[@]}" --benchmark_out="$OUT/bench_server_model.json" \
    --benchmark_out_format=json >"$OUT/bench_server_model.txt" 2>&1 || { FAILED=1; return; }
  python3 - "$OUT/bench_server_model.json" >"$OUT/server_model.txt" <<'EOF'
import json, sys
rows = {b["name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
def us(name, field="cpu_time"):  # the bench reports microseconds
    b = rows.get(name)
    return b[field] if b else None
fmt = lambda v: "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.3g}")
print("| keys | rpc: CPU µs per eviction | expire, 1 per message | 64 per message "
      "| 1024 per message | 16384 per message | rpc ÷ expire (1024) "
      "| lookup behind PREFIX_EVICTED µs | lookup behind a gauge pass µs |")
print("|---|---|---|---|---|---|---|---|---|")
for keys in (100000, 1000000):
    rpc = us(f"BM_PrefixEvicted/keys:{keys}/gauge:1")
    per = []
    for k in (1, 64, 1024, 16384):
        e = us(f"BM_ExpireMessage/keys:{keys}/per_msg:{k}")
        per.append(e / k if e is not None else None)
    ratio = round(rpc / per[2]) if rpc and per[2] else None
    wait_rpc = us(f"BM_LookupBehindPrefixEvicted/keys:{keys}/manual_time", "real_time")
    wait_gauge = us(f"BM_LookupBehindGaugePass/keys:{keys}/manual_time", "real_time")
    print(f"| {keys} | {fmt(rpc)} | " + " | ".join(fmt(v) for v in per) +
          f" | {ratio} | {fmt(wait_rpc)} | {fmt(wait_gauge)} |")
EOF
  cat "$OUT/server_model.txt" >&2
}
if has_case server_model; then server_model_case; fi

# Engine cache sizes: "big" never fills (no evictions: the add path alone, and 1 M resident
# blocks for the memory figure); "small" is a 64 Ki-block GPU cache that fills in a few batches, so
# the steady state is one eviction per stored block, as on a busy engine.
# BIG's cache is just over the 1 M blocks the throughput case stores: it never fills, and the
# capacity the engine reports on its /metrics (kvrelay sizes its index from it) is a real
# engine's, not four times what it ever holds.
BIG="--capacity 1100000 --clear-prob 0"
SMALL="--capacity 65536 --clear-prob 0.0005"
# The latency runs last seconds, so their "small" cache is 16 Ki blocks: it fills within the
# first two seconds even at 10 k blocks/s, and the rest of the run evicts.
LAT_SMALL="--capacity 16384 --clear-prob 0.0005"
if [[ $SMOKE == 1 ]]; then
  TP_BLOCKS=20000; EV_BLOCKS=20000; LAT_SECS=2; LAT_CASES=("10000 small")
else
  TP_BLOCKS=1000000; EV_BLOCKS=300000; LAT_SECS=6
  LAT_CASES=("10000 big" "10000 small" "100000 big" "100000 small")
fi

if has_case throughput; then
  for i in $(seq "$REPEATS"); do run_case "throughput-$i" single "$TP_BLOCKS" 0 "$BIG"; done
fi
if has_case memory; then
  # 1 M resident again, paced: a blast parks the whole stream in kvrelay's ZMQ receive queue, and
  # the heap it leaves behind would be charged to the index.
  run_case "memory-1M-paced" single "$TP_BLOCKS" 250000 "$BIG --floor-repeats 1"
  # The same after an engine clear halfway: the index is rebuilt in a process whose allocator has
  # already seen its big arrays freed (probe_table rule T6 is what keeps this near the above).
  run_case "memory-rebuild" single $((TP_BLOCKS * 3 / 2)) 250000 \
    "$BIG --clear-after $((TP_BLOCKS * 3 / 4)) --floor-repeats 1"
fi
if has_case evicting; then
  for i in $(seq "$REPEATS"); do run_case "evicting-$i" single "$EV_BLOCKS" 0 "$SMALL"; done
fi
if has_case latency; then
  for lc in "${LAT_CASES[@]}"; do
    read -r r cache <<<"$lc"
    flags="$BIG"; [[ $cache == small ]] && flags="$LAT_SMALL"
    n="$REPEATS"; [[ $r -ge 100000 && $cache == small ]] && n=1  # its eviction backlog is slow
    for i in $(seq "$n"); do
      run_case "latency-${r}-${cache}-$i" single $((r * LAT_SECS)) "$r" "$flags --floor-repeats 1"
    done
  done
fi
if has_case dp4; then
  for i in $(seq "$REPEATS"); do run_case "dp4-$i" dp4 $((TP_BLOCKS / 4)) 0 "$BIG"; done
fi
if has_case node4; then
  for i in $(seq "$REPEATS"); do run_case "node4-$i" node4 $((TP_BLOCKS / 4)) 0 "$BIG"; done
fi

if has_case lora; then
  # A LoRA fleet: the evicting workload (64 Ki-block cache) with 90 % of the
  # requests on 1 adapter, then on 256. Removals name no adapter; kvrelay routes each to the
  # partition holding its hash. Target: ingest at 256 within 1.3x of 1, RSS per resident block
  # within 1.2x (compared below, same run).
  LORA_BLOCKS=300000; [[ $SMOKE == 1 ]] && LORA_BLOCKS=20000
  for i in $(seq "$REPEATS"); do
    for n in 1 256; do
      run_case "lora-$n-$i" single "$LORA_BLOCKS" 0 \
        "$SMALL --lora-adapters $n --lora-fraction 0.9 --floor-repeats 1"
    done
  done
  python3 - "$RESULTS" <<'EOF2' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(n, key):
    v = [r[key] for r in rows if r["case"].startswith("lora-%d-" % n) and r.get(key)]
    return statistics.median(v) if v else None
i1, i256 = med(1, "ingest_blocks_per_s"), med(256, "ingest_blocks_per_s")
m1, m256 = med(1, "bytes_per_resident_block"), med(256, "bytes_per_resident_block")
if i1 and i256 and m1 and m256:
    print("[bench] lora fleet: ingest 1 adapter %.0f, 256 adapters %.0f blocks/s (1 / 256 = %.2fx,"
          " target <= 1.3x); B/resident block %.0f vs %.0f (256 / 1 = %.2fx, target <= 1.2x)"
          % (i1, i256, i1 / i256, m1, m256, m256 / m1))
EOF2
fi

if has_case durable; then
  # ingestion while the durable index snapshots every second (state.interval = 1s),
  # against the same run without a state dir. 1 M resident blocks paced at 250 k/s (the engine
  # cache never full), so the last snapshots copy a whole 1 M-block index out of the shard: the
  # block latency (publish -> server receipt) p99 is what a pause would show in. The engine's
  # incarnation is proved by a static /metrics with process_start_time_seconds.
  DUR_BLOCKS="$TP_BLOCKS"
  mkdir -p "$WORK/durable-metrics" "$WORK/durable-state"
  echo "process_start_time_seconds 1767225600.25" >"$WORK/durable-metrics/metrics"
  MPORT="$(free_port)"
  python3 -m http.server "$MPORT" --bind 127.0.0.1 --directory "$WORK/durable-metrics" \
    >>"$OUT/durable-metrics.log" 2>&1 &
  MPID=$!
  printf '[state]\ndir = "%s"\ninterval = "1s"\n' "$WORK/durable-state" >"$WORK/durable.toml"
  for i in $(seq "$REPEATS"); do
    run_case "durable-none-$i" single "$DUR_BLOCKS" 250000 "$BIG --floor-repeats 1"
    rm -rf "$WORK/durable-state"/*
    run_case_with "durable-1s-$i" "$DUR_BLOCKS" 250000 "$BIG --floor-repeats 1" \
      --config "$WORK/durable.toml" --engine-metrics-url "http://127.0.0.1:$MPORT/metrics"
    log "case durable-1s-$i: state dir holds $(ls "$WORK/durable-state" | wc -l) file(s)," \
        "$(stat -c %s "$WORK"/durable-state/*.kvsnap 2>/dev/null | head -1) bytes"
  done
  kill "$MPID" 2>/dev/null || true
  python3 - "$RESULTS" <<'EOF2' >&2
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for mode in ("none", "1s"):
    for r in rows:
        if r["case"].startswith("durable-%s-" % mode):
            print("[bench] durable %-4s %s: block latency p50/p99/max %s/%s/%s ms, ingest %s blocks/s"
                  % (mode, r["case"], r.get("block_lat_p50_ms"), r.get("block_lat_p99_ms"),
                     r.get("block_lat_max_ms"), r.get("ingest_blocks_per_s")))
EOF2
fi

if has_case fullcache; then
  # The headline: a full-cache engine (16 Ki blocks, block size 16, the Zipf/LoRA
  # workload), so every stored block evicts one, at 100 k blocks/s and as fast as possible, in
  # each eviction mode. Per run: evictions/s reaching the sink, add and eviction latency
  # (publish → receipt, p50/p99), CPU-s per M blocks, peak RSS, and the backlog over time
  # (kvrelay_pending_entries sampled while it runs: backlog-<case>.txt, summarised below).
  FULL="--capacity 16384 --clear-prob 0 --block-size 16 --floor-repeats 1"
  # FULLCACHE_BLOCKS / FULLCACHE_MODES / FULLCACHE_RATES narrow it (e.g. "rpc", "0").
  if [[ $SMOKE == 1 ]]; then FC_SECS=1; FC_MAX=20000; else FC_SECS=6; FC_MAX=300000; fi
  FC_MAX="${FULLCACHE_BLOCKS:-$FC_MAX}"
  fullcache_run() {  # $1 case name, $2 blocks, $3 rate, rest: kvrelay flags
    local name="$1" blocks="$2" rate="$3"; shift 3
    BACKLOG_FILE="$OUT/backlog-$name.txt"; : >"$BACKLOG_FILE"
    run_case_with "$name" "$blocks" "$rate" "$FULL" "$@"
    BACKLOG_FILE=""
  }
  for em in ${FULLCACHE_MODES:-expire rpc}; do
    for fr in ${FULLCACHE_RATES:-100000 0}; do
      if [[ $fr == 0 ]]; then
        fullcache_run "fullcache-$em-max" "$FC_MAX" 0 --eviction-mode "$em"
      else
        fullcache_run "fullcache-$em-$((fr / 1000))k" $((fr * FC_SECS)) "$fr" --eviction-mode "$em"
      fi
    done
  done
  if [[ -n "${KVRELAY_BASELINE:-}" ]]; then
    with_baseline fullcache_run "fullcache-baseline-max" "$FC_MAX" 0
  fi
  python3 - "$RESULTS" "$OUT" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| full-cache case | evictions/s at sink | add p50/p99 ms | eviction p50/p99 ms "
      "| CPU s/M blocks | peak RSS MiB | backlog max | backlog → 0 after (s) |")
print("|" + "---|" * 8)
for r in rows:
    if not r["case"].startswith("fullcache-"):
        continue
    t = []
    path = os.path.join(sys.argv[2], "backlog-%s.txt" % r["case"])
    if os.path.exists(path):
        t = [tuple(map(float, l.split())) for l in open(path) if len(l.split()) == 2]
    peak = max((p for _, p in t), default=0)
    # From the peak backlog to the first sample at 0 after it: how long it takes to clear.
    clear = None
    if t:
        ip = max(range(len(t)), key=lambda i: t[i][1])
        zero = next((s for s, p in t[ip:] if p == 0), None)
        clear = round(zero - t[ip][0], 2) if zero is not None else None
    print("| {case} | {ev} | {a50}/{a99} | {e50}/{e99} | {cpu} | {rss} | {peak:.0f} | {clear} |".format(
        case=r["case"], ev=r.get("server_evictions_per_s"),
        a50=r.get("block_lat_p50_ms"), a99=r.get("block_lat_p99_ms"),
        e50=r.get("evict_lat_p50_ms", "-"), e99=r.get("evict_lat_p99_ms", "-"),
        cpu=r.get("cpu_s_per_m_blocks"), rss=round(r.get("hwm_kb", 0) / 1024, 1),
        peak=peak, clear=clear))
EOF
fi

if has_case evictdrain; then
  # Eviction throughput (the ">= 500 k evictions/s at the sink in expire mode", "rpc at
  # least 2x today's rate"): the fullcache case cannot show it, since kvrelay never sends the
  # eviction of a block whose add it has not flushed, and there most blocks are stored and evicted
  # inside one window. Here the stored phase fills a cache that never evicts; once kvrelay has
  # drained it (the server holds every block), the loadgen removes every resident block as fast as
  # it can (--evict-go-file), and evict_phase times it until the sink has one eviction per add.
  # rpc sends one PublishEvent per eviction (~15 k/s): fewer blocks. EVICTDRAIN_BLOCKS="E R" and
  # EVICTDRAIN_MODES narrow it; --smoke runs expire alone (fullcache's smoke runs rpc already).
  if [[ $SMOKE == 1 ]]; then ED_BLOCKS="20000 3000"; ED_MODES=expire
  else ED_BLOCKS="1000000 100000"; ED_MODES="expire rpc"; fi
  read -r ED_EXPIRE ED_RPC <<<"${EVICTDRAIN_BLOCKS:-$ED_BLOCKS}"
  ED_FLAGS="$BIG --floor-repeats 1"
  evictdrain_run() {  # $1 case name, $2 blocks, rest: kvrelay flags
    local name="$1" blocks="$2"; shift 2
    EVICT_PHASE=1
    run_case_with "$name" "$blocks" 0 "$ED_FLAGS" "$@"
    EVICT_PHASE=""
  }
  # The baseline as "today's rate": one PublishEvent per eviction. The first wave's emitter sends
  # that whatever it is told (its daemon accepts --eviction-mode, unwired); a baseline that knows
  # the flag is told rpc, so that a later one, whose default is expire, compares like with like.
  ED_BASE_FLAGS=()
  if [[ -n "${KVRELAY_BASELINE:-}" ]] && "$KVRELAY_BASELINE" --help 2>&1 | grep -q -- --eviction-mode; then
    ED_BASE_FLAGS=(--eviction-mode rpc)
  fi
  for i in $(seq "$REPEATS"); do
    for em in ${EVICTDRAIN_MODES:-$ED_MODES}; do
      n="$ED_RPC"; [[ $em == expire ]] && n="$ED_EXPIRE"
      evictdrain_run "evictdrain-$em-$i" "$n" --eviction-mode "$em"
    done
    [[ -z "${KVRELAY_BASELINE:-}" ]] ||
      with_baseline evictdrain_run "evictdrain-baseline-$i" "$ED_RPC" "${ED_BASE_FLAGS[@]}"
  done
  python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["case"].startswith("evictdrain-") and "evict_received" in r]
print("| evictdrain case | evictions at sink / server held | evictions/s | eviction p50/p99 ms "
      "| CPU s/M evictions | peak RSS MiB | RSS after MiB |")
print("|" + "---|" * 7)
for r in rows:
    print("| {case} | {got}/{exp} | {eps} | {e50}/{e99} | {cpu} | {hwm} | {rss} |".format(
        case=r["case"], got=r["evict_received"], exp=r["evict_expected"], eps=r["evictions_per_s"],
        e50=r.get("evict_lat_p50_ms"), e99=r.get("evict_lat_p99_ms"), cpu=r["evict_cpu_s_per_m"],
        hwm=round(r["evict_hwm_kb"] / 1024, 1), rss=round(r["evict_rss_kb_after"] / 1024, 1)))
def med(kind):
    v = [r["evictions_per_s"] for r in rows if r["case"].startswith("evictdrain-%s-" % kind)]
    return statistics.median(v) if v else None
ex, rpc, base = med("expire"), med("rpc"), med("baseline")
parts = ["%s %.0f evictions/s" % (k, v) for k, v in
         (("expire", ex), ("rpc", rpc), ("baseline", base)) if v is not None]
if ex is not None:
    parts[0] += " (target >= 500000)"
if rpc and base:
    parts.append("rpc / baseline = %.2fx (target >= 2x)" % (rpc / base))
print("[bench] evictdrain (medians): " + ", ".join(parts), file=sys.stderr)
EOF
fi

if has_case profile; then
  # Where the time goes. perf with the cpu-clock software event works in this VM (no hardware
  # counters); callgrind is exact but ~50x slower, so it gets a short, paced run.
  if command -v perf >/dev/null; then
    # A blast, an evicting blast, and the paced rates real engines send at (where wake-ups and
    # per-batch costs, not per-block ones, decide).
    for pc in "throughput $TP_BLOCKS 0 $BIG" "evicting $EV_BLOCKS 0 $SMALL" \
              "paced100k $((100000 * LAT_SECS)) 100000 $BIG" "paced10k $((10000 * LAT_SECS)) 10000 $BIG"; do
      read -r what n rate flags <<<"$pc"
      PERF_DATA="$OUT/perf-$what.data"
      # shellcheck disable=SC2086
      run_case "profile-perf-$what" single "$n" "$rate" "$flags --floor-repeats 1"
      PERF_DATA=""
      perf report -i "$OUT/perf-$what.data" --no-children --sort dso,symbol --stdio 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -60 >"$OUT/perf-$what-self.txt" || true
      perf report -i "$OUT/perf-$what.data" --no-children --sort comm,dso --stdio 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -30 >"$OUT/perf-$what-threads.txt" || true
    done
  fi
  if [[ -z "${BENCH_NO_CALLGRIND:-}" ]] && command -v valgrind >/dev/null; then
    KV_WRAP="valgrind --tool=callgrind --callgrind-out-file=$OUT/callgrind.out"
    run_case "profile-callgrind" single 100000 10000 "$BIG --floor-repeats 1"
    KV_WRAP=""
    callgrind_annotate --inclusive=yes "$OUT/callgrind.out" 2>/dev/null | head -90 \
      >"$OUT/callgrind-inclusive.txt" || true
    callgrind_annotate "$OUT/callgrind.out" 2>/dev/null | head -70 >"$OUT/callgrind-self.txt" || true
  fi
fi

# ---- replay: a captured stream played back as fast as possible ------------------------------
# The fake engine's random workload (LoRA, evictions) is captured once with kvrelay-capture (live
# and its replay ring), then kvrelay-replay serves the file at --speed max to kvrelay and the
# counting sink: what a bug-report capture costs to reproduce, and a recorded stream's rate.
# Its own results file (replay.jsonl) and table; the figures are reported, never asserted.
run_replay_case() {
  local batches="$1" name="replay-$2"
  local fe="$BUILD_DIR/tools/fake-engine/kvrelay-fake-engine"
  local cap="$BUILD_DIR/tools/capture/kvrelay-capture" rep="$BUILD_DIR/tools/replay/kvrelay-replay"
  local file="$WORK/$name.kvcap" base
  base="$(free_base_port)"
  log "case $name: capture $batches fake-engine batches, replay at max speed"
  "$cap" --endpoint "tcp://127.0.0.1:$base" --replay-endpoint "tcp://127.0.0.1:$((base + 1))" \
    --out "$file" 2>>"$OUT/capture.log" &
  local cap_pid=$!
  PIDS+=("$cap_pid")
  "$fe" --bind "tcp://127.0.0.1:$base" --replay-bind "tcp://127.0.0.1:$((base + 1))" \
    --workload random --rate 2000 --count "$batches" --lora-adapters 4 --capacity 65536 \
    --era D 2>>"$OUT/fake-engine.log"
  sleep 1  # the capture's ring request is answered within milliseconds
  kill -INT "$cap_pid"; wait "$cap_pid" 2>/dev/null || true
  local size; size="$(stat -c %s "$file")"
  start_sink "$name"
  local live=$((base + 2)) ring=$((base + 3))
  # kvrelay catches up from the ring (the capture's history) before anything live is sent: at max
  # speed a subscriber still catching up when the stream starts overflows its reorder buffer.
  rm -f "$WORK/replay-go"
  "$rep" --in "$file" --bind "tcp://127.0.0.1:$live" --replay-bind "tcp://127.0.0.1:$ring" \
    --speed max --linger 30s --go-file "$WORK/replay-go" 2>>"$OUT/replay.log" &
  PIDS+=("$!")
  start_kvrelay "$name" --engine-endpoint "tcp://127.0.0.1:$live" \
    --replay-endpoint "tcp://127.0.0.1:$ring" --replica-id bench --model-id bench \
    --engine-metrics-url "" --lora-adapter-names "$ADAPTERS"
  local caught_up=0
  for _ in $(seq 1200); do
    [[ "$(metric_sum kvrelay_replays_total 'outcome="succeeded"')" -ge 1 ]] && { caught_up=1; break; }
    sleep 0.05
  done
  [[ $caught_up == 1 ]] || { log "case $name: kvrelay's catch-up from the ring never ended"; FAILED=1; }
  local t0 c0 t1="" c1 b=0
  t0="$(now)"; c0="$(cpu_seconds "$KV_PID")"
  touch "$WORK/replay-go"
  for _ in $(seq 1200); do
    b="$(metric_sum kvrelay_batches_total)"
    if [[ "$b" -ge "$batches" ]]; then t1="$(now)"; c1="$(cpu_seconds "$KV_PID")"; break; fi
    sleep 0.05
  done
  if [[ -z "$t1" ]]; then
    log "case $name: kvrelay decoded $b of $batches batches"
    FAILED=1; t1="$(now)"; c1="$(cpu_seconds "$KV_PID")"
  fi
  local stored gaps
  stored="$(metric_sum kvrelay_blocks_total 'type="stored"')"
  gaps="$(metric_sum kvrelay_seq_gaps_total)"
  python3 - "$name" "$batches" "$b" "$stored" "$gaps" "$size" "$t0" "$t1" "$c0" "$c1" \
    >>"$OUT/replay.jsonl" <<'EOF'
import json, sys
name, batches, decoded, stored, gaps, size, t0, t1, c0, c1 = sys.argv[1:]
s = float(t1) - float(t0)
cpu = float(c1) - float(c0)
print(json.dumps({"case": name, "batches": int(batches), "decoded_batches": int(decoded),
                  "blocks": int(stored), "seq_gaps": int(gaps), "capture_bytes": int(size),
                  "replay_s": round(s, 3), "blocks_per_s": round(int(stored) / s) if s > 0 else 0,
                  "cpu_s": round(cpu, 3),
                  "cpu_ns_per_block": round(cpu / int(stored) * 1e9, 1) if int(stored) else None}))
EOF
  tail -1 "$OUT/replay.jsonl" >&2
  stop_all
}
if has_case replay; then
  : >"$OUT/replay.jsonl"
  if [[ $SMOKE == 1 ]]; then
    run_replay_case 1000 1
  else
    for i in $(seq "$REPEATS"); do run_replay_case 20000 "$i"; done
  fi
fi

# ---- outage: the policy server is away while the engine evicts ----------------
# The demo policy server (it keeps the index, with the reference's freshness rule) is killed 5 s
# into a 50 k blocks/s full-cache run (16 Ki blocks: one eviction per store) and started again,
# empty, on the same port when the engine stops publishing OUTAGE_SECONDS (60) later. The figure:
# from its return until its fresh entries for the replica equal kvrelay's resident blocks with
# nothing pending (the resync's ALL_CLEARED, then the re-report). Not in the default list.
run_outage_case() {
  local name="outage-$1" secs="${OUTAGE_SECONDS:-60}" rate=50000 warm=5
  [[ $SMOKE == 1 ]] && secs=3
  local srv="$BUILD_DIR/tools/policy-server/kvrelay-policy-server"
  local base port dump="$WORK/$name-dump.json"
  base="$(free_base_port)"; port=$((base + 5))
  "$srv" --listen "127.0.0.1:$port" --dump-file "$dump" 2>>"$OUT/policy-server.log" &
  local srv_pid=$!; PIDS+=("$srv_pid")
  local lg_out="$WORK/loadgen-$name.out"; rm -f "$WORK/go"
  "$LOADGEN" --bind "tcp://127.0.0.1:$base" --blocks $((rate * (warm + secs))) --rate "$rate" \
    --go-file "$WORK/go" --capacity 16384 --clear-prob 0 --block-size 16 --floor-repeats 0 \
    >"$lg_out" 2>>"$OUT/loadgen.log" &
  local lg_pid=$!; PIDS+=("$lg_pid")
  SINK_PORT=$port
  start_kvrelay "$name" --engine-endpoint "tcp://127.0.0.1:$base" --replica-id bench \
    --model-id bench --engine-metrics-url "" --lora-adapter-names "$ADAPTERS"
  for _ in $(seq 3000); do
    grep -q '"kind":"generated"' "$lg_out" 2>/dev/null && break
    sleep 0.1
  done
  wait_connected 1 || { FAILED=1; stop_all; return; }
  log "case $name: ${rate} blocks/s, server away for ${secs} s from t=${warm} s"
  touch "$WORK/go"
  sleep "$warm"
  kill -KILL "$srv_pid"; wait "$srv_pid" 2>/dev/null || true
  wait "$lg_pid" 2>/dev/null || true
  local t_back t_exact="" fresh=0 resident=0 pending=0
  "$srv" --listen "127.0.0.1:$port" --dump-file "$dump" 2>>"$OUT/policy-server.log" &
  srv_pid=$!; PIDS+=("$srv_pid")
  t_back="$(now)"
  for _ in $(seq 1200); do
    sleep 0.1
    rm -f "$dump"; kill -USR1 "$srv_pid" 2>/dev/null || break
    for _ in $(seq 100); do [[ -s "$dump" ]] && break; sleep 0.01; done
    fresh="$(python3 -c 'import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception: print(-1); sys.exit()
print(sum(1 for m in d["models"] for p in m["prefixes"] for r,e in p["replicas"].items() if r=="bench" and e["fresh"]))' "$dump")"
    resident="$(metric_sum kvrelay_resident_blocks)"; pending="$(metric_sum kvrelay_pending_entries)"
    if [[ "$fresh" == "$resident" && "$pending" == 0 && "$resident" -gt 0 ]]; then t_exact="$(now)"; break; fi
  done
  [[ -n "$t_exact" ]] || { log "case $name: not exact after 120 s: server $fresh, kvrelay $resident, pending $pending"; FAILED=1; t_exact="$(now)"; }
  python3 - "$name" "$secs" "$rate" "$t_back" "$t_exact" "$fresh" "$resident" >>"$OUT/outage.jsonl" <<'PY'
import json, sys
name, secs, rate, t_back, t_exact, fresh, resident = sys.argv[1:]
print(json.dumps({"case": name, "outage_s": int(secs), "rate": int(rate),
                  "back_to_exact_s": round(float(t_exact) - float(t_back), 3),
                  "server_fresh": int(fresh), "kvrelay_resident": int(resident)}))
PY
  tail -1 "$OUT/outage.jsonl" >&2
  stop_all
}
if has_case outage; then
  : >"$OUT/outage.jsonl"
  for i in $(seq "$REPEATS"); do run_outage_case "$i"; done
fi

# ---- fanout: one kvrelay, several policy servers ------------------------------------
# The same paced load (FANOUT_RATE, 20 k blocks/s, a 64 Ki-block engine cache: stores and expire-
# mode evictions) into kvrelay with one sink, then with three (kvrelay given --server three
# times), interleaved: kvrelay's CPU per stored block (go -> drained) and each sink's block p99
# (publish -> first receipt). Then the stop run: three sinks, one SIGSTOPped FANOUT_STOP_SECONDS
# (30) from 10 s in and SIGCONTed, the load going on 10 s more: the other sinks' p99 of blocks
# published before vs during the stop, kvrelay's RSS and VmHWM over the stop, and how long after
# SIGCONT the stopped sink holds the same set as the others (the sinks' --resident-set: size and
# XOR of fingerprints). server.rpc_timeout is 1 s so the stopped sink is declared down fast;
# server.max_target_lag is the default 16 MiB. Rows in fanout.jsonl; only when --cases names it.
FAN_PIDS=(); FAN_PORTS=(); FAN_STATS=()
fan_snapshot() {  # fresh "resident xor last_any_us" of every sink, one line each, in sink order
  local k
  for k in "${!FAN_PIDS[@]}"; do rm -f "${FAN_STATS[$k]}"; kill -USR1 "${FAN_PIDS[$k]}" 2>/dev/null || true; done
  for k in "${!FAN_PIDS[@]}"; do
    for _ in $(seq 250); do [[ -s "${FAN_STATS[$k]}" ]] && break; sleep 0.02; done
  done
  python3 - "${FAN_STATS[@]}" <<'PY'
import json, sys
for p in sys.argv[1:]:
    try: d = json.load(open(p)); print(d["resident"], d["resident_xor"], d["last_any_us"])
    except Exception: print(-1, 0, 0)
PY
}
# True when sinks $@ (indices) hold the same non-empty set in the snapshot on stdin.
fan_same() {
  python3 -c 'import sys
rows = [l.split() for l in sys.stdin.read().splitlines()]
sel = [rows[int(i)][:2] for i in sys.argv[1:]]
sys.exit(0 if int(sel[0][0]) > 0 and all(r == sel[0] for r in sel) else 1)' "$@"
}
run_fanout() {  # $1 case, $2 sinks, $3 blocks, $4 = stop: one sink stopped mid-run
  local name="$1" n="$2" blocks="$3" stop="${4:-}" base k
  base="$(free_base_port)"
  FAN_PIDS=(); FAN_PORTS=(); FAN_STATS=()
  SINK_EXTRA=(--resident-set)
  for k in $(seq "$n"); do
    start_sink "$name-s$k"
    FAN_PIDS+=("$SINK_PID"); FAN_PORTS+=("$SINK_PORT"); FAN_STATS+=("$SINK_STATS")
  done
  SINK_EXTRA=()
  SINK_PORT="${FAN_PORTS[0]}"  # start_kvrelay's --server; the others follow
  local servers=()
  for k in $(seq 1 $((n - 1))); do servers+=(--server "127.0.0.1:${FAN_PORTS[$k]}"); done
  printf '[server]\nrpc_timeout = "1s"\n' >"$WORK/fanout.toml"
  local lg_out="$WORK/loadgen-$name.out"
  rm -f "$WORK/go"
  log "case $name: $n sink(s), $blocks blocks at $FAN_RATE blocks/s${stop:+, one sink stopped ${FAN_STOP} s}"
  # shellcheck disable=SC2086
  "$LOADGEN" --bind "tcp://127.0.0.1:$base" --blocks "$blocks" --rate "$FAN_RATE" \
    --go-file "$WORK/go" --block-times "$WORK/times-$name.bin" $FAN_LG \
    >"$lg_out" 2>>"$OUT/loadgen.log" &
  local lg_pid=$!
  PIDS+=("$lg_pid")
  start_kvrelay "$name" --config "$WORK/fanout.toml" "${servers[@]}" \
    --engine-endpoint "tcp://127.0.0.1:$base" --replica-id bench --model-id bench \
    --engine-metrics-url "" --lora-adapter-names "$ADAPTERS"
  for _ in $(seq 3000); do
    grep -q '"kind":"generated"' "$lg_out" 2>/dev/null && break
    kill -0 "$lg_pid" 2>/dev/null || break
    sleep 0.1
  done
  wait_connected 1 || { FAILED=1; stop_all; return; }
  for _ in $(seq 300); do
    [[ "$(metric_sum kvrelay_target_up)" -ge "$n" ]] && break
    sleep 0.1
  done
  local expected
  expected="$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d["kind"]=="generated": print(d["blocks"])' "$lg_out")"
  for k in "${FAN_PIDS[@]}"; do kill -USR2 "$k"; done
  sleep 0.05
  local c0 t0 c1="" t1="" c2 stored=0 last=-1 stall=0
  local t_stop="" t_cont="" t_exact="" hwm0=0 hwm1=0 rss_peak=0 lag_peak=0 up_min=1 resyncs0=0
  local resyncs1=0 rss sp="" target=""
  c0="$(cpu_seconds "$KV_PID")"; t0="$(now)"
  touch "$WORK/go"
  if [[ -n "$stop" ]]; then
    sp="${FAN_PIDS[$((n - 1))]}"; target="target=\"127.0.0.1:${FAN_PORTS[$((n - 1))]}\""
    sleep "$FAN_WARM"
    hwm0="$(status_kb "$KV_PID" VmHWM)"
    resyncs0="$(metric_sum kvrelay_target_resyncs_total "$target")"
    kill -STOP "$sp"; t_stop="$(now)"
    log "case $name: sink $n stopped at t=$(python3 -c "print(round($t_stop - $t0, 1))") s"
    while python3 -c "import sys; sys.exit(0 if $(now) - $t_stop < $FAN_STOP else 1)"; do
      rss="$(status_kb "$KV_PID" VmRSS)"; [[ "$rss" -gt "$rss_peak" ]] && rss_peak="$rss"
      k="$(metric_sum kvrelay_target_lag_bytes "$target")"; [[ "$k" -gt "$lag_peak" ]] && lag_peak="$k"
      [[ "$(metric_sum kvrelay_target_up "$target")" == 0 ]] && up_min=0
      sleep 0.5
    done
    hwm1="$(status_kb "$KV_PID" VmHWM)"
    kill -CONT "$sp"; t_cont="$(now)"
    # Exact: the stopped sink holds the set the others hold (polled while the load goes on).
    for _ in $(seq 1200); do
      if fan_snapshot | fan_same $(seq 0 $((n - 1))); then t_exact="$(now)"; break; fi
      sleep 0.1
    done
    [[ -n "$t_exact" ]] || log "case $name: the stopped sink never matched the others within 120 s"
  fi
  while :; do
    stored="$(metric_sum kvrelay_blocks_total 'type="stored"')"
    if [[ "$stored" -ge "$expected" ]]; then t1="$(now)"; c1="$(cpu_seconds "$KV_PID")"; break; fi
    if [[ "$stored" == "$last" ]]; then stall=$((stall + 1)); else stall=0; last="$stored"; fi
    [[ $stall -ge 40 ]] && { log "case $name: stalled at $stored/$expected"; break; }
    sleep 0.25
  done
  [[ -n "$t1" ]] || { t1="$(now)"; c1="$(cpu_seconds "$KV_PID")"; FAILED=1; }
  # Drained: nothing pending in kvrelay, every sink quiet for 3 polls and all holding one set.
  local snap prev="" quiet=0 same=0
  for _ in $(seq 1200); do
    snap="$(fan_snapshot)"
    if [[ "$(metric_sum kvrelay_pending_entries)" == 0 && "$snap" == "$prev" ]]; then
      quiet=$((quiet + 1)); else quiet=0; fi
    prev="$snap"
    [[ $quiet -ge 3 ]] && break
    sleep 0.1
  done
  fan_same $(seq 0 $((n - 1))) <<<"$snap" && same=1
  c2="$(cpu_seconds "$KV_PID")"
  [[ -z "$stop" ]] || resyncs1="$(metric_sum kvrelay_target_resyncs_total "$target")"
  local resident gaps
  resident="$(metric_sum kvrelay_resident_blocks)"; gaps="$(metric_sum kvrelay_seq_gaps_total)"
  for k in "${FAN_PIDS[@]}"; do kill -TERM "$k" 2>/dev/null; wait "$k" 2>/dev/null || true; done
  wait "$lg_pid" 2>/dev/null || true
  local receipts=()
  for k in $(seq "$n"); do receipts+=("$WORK/receipts-$name-s$k.bin"); done
  python3 - "$name" "$n" "$stop" "$expected" "$stored" "$gaps" "$resident" "$same" "$snap" \
    "$t0" "$t1" "$c0" "$c1" "$c2" "$t_stop" "$t_cont" "$t_exact" "$hwm0" "$hwm1" "$rss_peak" \
    "$lag_peak" "$up_min" "$resyncs0" "$resyncs1" "$(status_kb "$KV_PID" VmHWM)" \
    "$WORK/times-$name.bin" "${receipts[@]}" >>"$OUT/fanout.jsonl" < <(echo "$PY_TIMES"; cat <<'PY'
import json, sys
(name, n, stop, expected, stored, gaps, resident, same, snap, t0, t1, c0, c1, c2, t_stop, t_cont,
 t_exact, hwm0, hwm1, rss_peak, lag_peak, up_min, rs0, rs1, hwm_end, times) = sys.argv[1:27]
receipts = sys.argv[27:]
published = publish_times(times)
def pct(lat, q):
    lat = sorted(lat)
    return round(lat[min(len(lat) - 1, int(q * len(lat)))] / 1e3, 3) if lat else None
# Per sink: block latency (publish -> first receipt), all blocks and, in the stop run, by publish
# time: the 5 s before the stop (the engine cache full since long: the steady state the stop
# interrupts; the first seconds, while it fills, run slower), during the stop, after SIGCONT.
cut = [float(x) * 1e6 for x in (t_stop, t_cont)] if stop else []
sinks = []
for path in receipts:
    lat, parts = [], {"before": [], "during": [], "after": []}
    for pub, l in first_receipts(path, published):
        lat.append(l)
        if cut and pub >= cut[0] - 5e6:
            parts["before" if pub < cut[0] else "during" if pub < cut[1] else "after"].append(l)
    s = {"matched": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}
    for k, v in parts.items():
        if cut:
            s[k + "_p99_ms"] = pct(v, 0.99); s[k + "_n"] = len(v)
    sinks.append(s)
stored = int(stored); cpu = float(c2) - float(c0)
row = {"case": name, "sinks": int(n), "stop": bool(stop), "expected_blocks": int(expected),
       "blocks": stored, "seq_gaps": int(gaps), "kvrelay_resident": int(resident),
       "sinks_resident": [int(l.split()[0]) for l in snap.splitlines()],
       "sinks_same_set": same == "1",
       "ingest_s": round(float(t1) - float(t0), 3), "cpu_s": round(cpu, 3),
       "cpu_s_per_m_blocks": round(cpu / stored * 1e6, 3) if stored else None,
       "ingest_cpu_s_per_m_blocks": round((float(c1) - float(c0)) / stored * 1e6, 3) if stored else None,
       "hwm_kb_end": int(hwm_end), "sink": sinks}
if stop:
    row.update({"stop_s": round(float(t_cont) - float(t_stop), 3),
                "hwm_kb_before_stop": int(hwm0), "hwm_kb_at_cont": int(hwm1),
                "rss_kb_peak_during_stop": int(rss_peak), "stopped_lag_bytes_peak": int(lag_peak),
                "stopped_marked_down": up_min == "0", "stopped_resyncs": int(rs1) - int(rs0),
                "exact_after_cont_s": round(float(t_exact) - float(t_cont), 3) if t_exact else None})
print(json.dumps(row))
PY
)
  tail -1 "$OUT/fanout.jsonl" >&2
  python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1])][-1]
ok = r["blocks"] >= r["expected_blocks"] and r["seq_gaps"] == 0 and r["sinks_same_set"]
ok = ok and r["sinks_resident"][0] == r["kvrelay_resident"]
ok = ok and (not r["stop"] or r["exact_after_cont_s"] is not None)
sys.exit(0 if ok else 1)' "$OUT/fanout.jsonl" || { log "case $name: blocks lost, sinks differ or never exact"; FAILED=1; }
  stop_all
}
if has_case fanout; then
  : >"$OUT/fanout.jsonl"
  FAN_RATE="${FANOUT_RATE:-20000}"
  FAN_LG="--capacity 65536 --clear-prob 0 --floor-repeats 0"
  FAN_STOP="${FANOUT_STOP_SECONDS:-30}"; FAN_WARM=10
  FAN_BLOCKS=$((FAN_RATE * 20))
  if [[ $SMOKE == 1 ]]; then FAN_STOP=3; FAN_WARM=2; FAN_BLOCKS=$((FAN_RATE * 2)); fi
  for i in $(seq "$REPEATS"); do
    run_fanout "fanout-1sink-$i" 1 "$FAN_BLOCKS"
    run_fanout "fanout-3sinks-$i" 3 "$FAN_BLOCKS"
  done
  for i in $(seq "$REPEATS"); do
    run_fanout "fanout-stop-$i" 3 $((FAN_RATE * (FAN_WARM + FAN_STOP + 10))) stop
  done
  python3 - "$OUT/fanout.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("\n| fanout case | sinks | blocks | CPU s/M blocks | block p99 ms per sink "
      "| sinks hold one set | its size / kvrelay's resident |")
print("|" + "---|" * 7)
for r in rows:
    if r["stop"]:
        continue
    print("| {} | {} | {} | {} | {} | {} | {} / {} |".format(
        r["case"], r["sinks"], r["blocks"], r["cpu_s_per_m_blocks"],
        " / ".join(str(s["p99_ms"]) for s in r["sink"]), r["sinks_same_set"],
        "/".join(map(str, r["sinks_resident"])), r["kvrelay_resident"]))
ratios = []
for i in range(1, 100):
    one = [r for r in rows if r["case"] == "fanout-1sink-%d" % i]
    three = [r for r in rows if r["case"] == "fanout-3sinks-%d" % i]
    if one and three and one[0]["cpu_s_per_m_blocks"]:
        ratios.append(three[0]["cpu_s_per_m_blocks"] / one[0]["cpu_s_per_m_blocks"])
if ratios:
    print("[bench] fanout: 3-sink / 1-sink CPU per block %s (median %.2f; bar <= 1.3)"
          % (", ".join("%.2f" % x for x in ratios), statistics.median(ratios)), file=sys.stderr)
stops = [r for r in rows if r["stop"]]
if stops:
    print("\n| stop case | others' p99 ms: 5 s before / during the stop / after | stopped: lag peak "
          "MiB, marked down, resyncs | kvrelay VmHWM MiB before / at SIGCONT (RSS peak) "
          "| exact after SIGCONT s |")
    print("|" + "---|" * 5)
    for r in stops:
        others = r["sink"][:-1]
        print("| {} | {} | {:.1f}, {}, {} | {:.1f} / {:.1f} ({:.1f}) | {} |".format(
            r["case"], ", ".join("%s / %s / %s" % (s.get("before_p99_ms"), s.get("during_p99_ms"),
                                                   s.get("after_p99_ms")) for s in others),
            r["stopped_lag_bytes_peak"] / 2**20, r["stopped_marked_down"], r["stopped_resyncs"],
            r["hwm_kb_before_stop"] / 1024, r["hwm_kb_at_cont"] / 1024,
            r["rss_kb_peak_during_stop"] / 1024, r["exact_after_cont_s"]))
PY
fi

# Summary table (medians are the reader's job: every run is listed).
[[ ! -s "$RESULTS" ]] || python3 - "$RESULTS" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| case | blocks | e2e blocks/s | events/s | ingest blocks/s | gaps | evictions/s | CPU s/M blocks "
      "| ingest CPU ns/block | floor ns/block (+ index) | CPU ÷ floor (all, ingest) "
      "| CPU ÷ floor with index (all, ingest) | decode+fp ÷ floor "
      "| flush p50/p99 ms | block p50/p99 ms | resident | B/resident block | idle CPU % (before/after) |")
print("|" + "---|" * 18)
for r in rows:
    f = r.get("floor", {})
    print("| {case} | {blocks} | {blocks_per_s} | {events_per_s} | {ingest_blocks_per_s} | {seq_gaps} | "
          "{server_evictions_per_s} | {cpu_s_per_m_blocks} | {ingest_cpu_ns_per_block} | {fl} ({fli}) | "
          "{cvf}, {icvf} | {cvfi}, {icvfi} | "
          "{dvf} | {lat_p50_ms}/{lat_p99_ms} | {block_lat_p50_ms}/{block_lat_p99_ms} | {resident_blocks} | {bprb} | "
          "{idle_cpu_pct_before}/{idle_cpu_pct_after} |".format(
              fl=f.get("floor_ns", "-"), fli=f.get("floor_index_ns", "-"),
              cvf=r.get("cpu_vs_floor", "-"), cvfi=r.get("cpu_vs_floor_index", "-"),
              icvfi=r.get("ingest_cpu_vs_floor_index", "-"),
              icvf=r.get("ingest_cpu_vs_floor", "-"),
              dvf=r.get("decode_fp_vs_floor", "-"), bprb=r.get("bytes_per_resident_block", "-"), **r))
EOF
if [[ -s "$OUT/replay.jsonl" ]]; then
  python3 - "$OUT/replay.jsonl" <<'EOF'
import json, sys
print("\n| replay case | batches | blocks | capture bytes | replay s | blocks/s | CPU ns/block | gaps |")
print("|" + "---|" * 8)
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("| {case} | {batches} | {blocks} | {capture_bytes} | {replay_s} | {blocks_per_s} | "
          "{cpu_ns_per_block} | {seq_gaps} |".format(**r))
EOF
fi
[[ $FAILED == 0 ]] || log "some case failed (see above and $OUT/*.log)"
exit "$FAILED"
