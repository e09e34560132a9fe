#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# The benchmark list in one command (root: v1 cgroups): kvrelay alone in a 128 MiB memory
# cgroup and a 0.2-core cpu cgroup (cfs_quota_us 20000 / cfs_period_us 100000), the loadgen and
# sink outside, each case run by bench/memory/cgroup_burst.sh; then the same without limits.
# Writes the JSON lines to OUT.jsonl and a Markdown table (BENCHMARKS.md's) to OUT.md.
#
#   bench/memory/sidecar_cases.sh [--build-dir build/default] [--out /tmp/sidecar-cases] [--cases LIST]
#
# LIST (comma separated, default all): a20k a100k b200k outage catchup overrun, and each of them
# prefixed nolimit- (the default runs nolimit- of b200k, catchup, a100k, outage, overrun).
# "overrun" is b200k against an engine whose PUB drops past 1 000 queued messages (ZMQ's default
# high-water mark) and which serves a 10 000-batch replay ring: an overrun becomes gaps, repaired
# by replay or declared lost. Needs the targets kvrelay, kvrelay-bench-loadgen and
# kvrelay-bench-sink. Takes about 15 minutes; never asserts a timing. Not in the default list:
# burst1m, burst4m (1 M- and 4 M-block bursts, as fast as the loadgen publishes).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/memory/lib.sh
source "$HERE/lib.sh"
BUILD=build/default OUT=/tmp/sidecar-cases
CASES="a20k,a100k,b200k,outage,catchup,overrun"
CASES+=",nolimit-b200k,nolimit-catchup,nolimit-a100k,nolimit-outage,nolimit-overrun"
parse_case_args "$@"

LIMITS=(--limit-mib 128 --cpu-quota-us 20000)
# A full-cache engine (16 Ki blocks, LRU evictions); the catch-up's engine publishes 10 000
# batches before kvrelay starts (its ring holds them all), then 20 k blocks/s live.
declare -A ARGS=(
  [a20k]="--case full-cache-20k --rate 20000 --seconds 15"
  [a100k]="--case full-cache-100k --rate 100000 --seconds 15"
  [b200k]="--case sustained-200k --rate 200000 --seconds 30"
  [outage]="--case outage-60s-20k --rate 20000 --seconds 80 --outage 60"
  [catchup]="--case catch-up-10000 --catch-up 10000 --blocks 5100000 --rate 20000"
  [burst1m]="--blocks 1000000"
  [burst4m]="--blocks 4000000"
  [overrun]="--case overrun-200k-hwm1000 --rate 200000 --seconds 30 --engine-sndhwm 1000 --ring 10000"
)
: >"$OUT.jsonl"
IFS=, read -r -a list <<<"$CASES"
for c in "${list[@]}"; do
  base="${c#nolimit-}"
  [[ -n "${ARGS[$base]:-}" ]] || { echo "unknown case $c" >&2; exit 2; }
  # shellcheck disable=SC2206
  args=(${ARGS[$base]})
  if [[ "$c" == nolimit-* ]]; then args+=(--no-cgroup); else args+=("${LIMITS[@]}"); fi
  echo "[sidecar_cases $(date -u +%H:%M:%S)] $c: cgroup_burst.sh ${args[*]}" >&2
  "$HERE/cgroup_burst.sh" --build-dir "$BUILD" "${args[@]}" | tee -a "$OUT.jsonl" >&2
done

python3 - "$OUT.jsonl" >"$OUT.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def f(v, fmt="{}"):
    return "—" if v is None else fmt.format(v)
print("| case | blocks (engine resident) | rate target → achieved | alive (exit) | OOM kills / failcnt "
      "| cgroup peak | VmHWM | RSS idle → after | CPU throttled (periods, s) | overloads (paused s) "
      "| gaps / replays / recovered | batches lost / history lost | s until exact |")
print("|" + "---|" * 13)
for r in rows:
    rate = "burst" if not r["rate_target"] else f"{r['rate_target']/1000:g} k → {r['rate_achieved']/1000:.1f} k"
    thr = "—" if r["cpu_throttled"] is None else f"{r['cpu_throttled']} of {r['cpu_periods']}, {r['cpu_throttled_s']} s"
    exact = f(r["seconds_until_exact"]) if r["seconds_until_exact"] is not None else \
        f"**never** (resident {r['kvrelay_resident']} of {r['engine_resident']}, incomplete {r['index_incomplete']}" \
        + (f", decoded {r['batches_decoded']} of {r['engine_batches']} batches" if "engine_batches" in r else "") + ")"
    if r.get("resync_s") is not None: exact += f" (resync {r['resync_s']} s after the restart)"
    print(f"| {r['case']} | {r['blocks']:,} ({r['engine_resident']:,}) | {rate} "
          f"| {'yes' if r['alive'] else '**no**'}{'' if r['exit_status'] is None else ' (' + str(r['exit_status']) + ')'} "
          f"| {f(r['oom_kills'])} / {f(r['failcnt'])} | {f(r['cgroup_max_usage_mib'], '{} MiB')} "
          f"| {r['vm_hwm_mib']} MiB | {r['rss_idle_mib']} → {r['rss_after_mib']} MiB | {thr} "
          f"| {r['overloads']} ({r['paused_s']}) | {r['gaps']} / {r['replays']} / {r['recovered']} "
          f"| {r['batches_lost']} / {r['history_lost']} | {f(r.get('replay_shed'))} | {exact} |")
PY
cat "$OUT.md"
