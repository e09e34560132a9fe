#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# The embedded demo: two fake engines -> kvrelay -> the demo policy server, all on loopback.
#   engine "vllm-0": the reference's scripted scenario (2 blocks of 128 tokens from token 5000)
#   engine "vllm-1": a random realistic workload with two LoRA adapters, evictions and replay
# Zero-config: each engine binds its publishers at port 0 and serves its HTTP API (vLLM's
# GET /kv_event_sources, /v1/models, /metrics); kvrelay is given only each engine's URL
# (--engine-url, or `url` in the file) and learns endpoints, replay, topic, model and metrics URL.
# Then it asks the policy server what a router would get back for a few prompts, shows what
# kvrelay reports about itself, and stops kvrelay with SIGTERM (graceful drain, exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake --preset default >/dev/null
cmake --build --preset default --target kvrelay_bin kvrelay-fake-engine kvrelay-policy-server \
  kvrelay-route-probe kvrelay-capture kvrelay-replay

B=build/default
WORK=$(mktemp -d /tmp/kvrelay-demo.XXXXXX)
# Ports: a base picked per run so two demos (or a leftover) do not collide.
BASE=$(( 20000 + (RANDOM % 20000) ))
SERVER=127.0.0.1:$BASE ADMIN=127.0.0.1:$((BASE + 1))
E0=http://127.0.0.1:$((BASE + 2)) E1=http://127.0.0.1:$((BASE + 3))  # the engines' HTTP servers
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }

say "starting the demo policy server on $SERVER"
$B/tools/policy-server/kvrelay-policy-server --listen "$SERVER" --min-matched-tokens 64 \
  >"$WORK/policy-server.log" 2>&1 & pids+=($!)

say "starting fake engine vllm-0 (scripted: 2 blocks x 128 tokens from token 5000), HTTP $E0"
$B/tools/fake-engine/kvrelay-fake-engine -bind "tcp://127.0.0.1:0" --replay-bind "tcp://127.0.0.1:0" \
  --http-port "${E0##*:}" --model demo-model \
  -block-size 128 -num-blocks 2 -events 2 -start-token 5000 -interval 200ms \
  >"$WORK/engine-0.log" 2>&1 & pids+=($!)
say "starting fake engine vllm-1 (random workload, LoRA adapters, evictions), HTTP $E1"
$B/tools/fake-engine/kvrelay-fake-engine -bind "tcp://127.0.0.1:0" --replay-bind "tcp://127.0.0.1:0" \
  --http-port "${E1##*:}" --model demo-model \
  --workload random --era D --rate 50 --lora-adapters 2 --capacity 2000 --seed 7 \
  >"$WORK/engine-1.log" 2>&1 & pids+=($!)

cat >"$WORK/kvrelay.toml" <<TOML
[server]
address = "$SERVER"

[admin]
listen = "$ADMIN"

[log]
format = "text"

# Zero-config engines: the URL is all kvrelay needs (one [[engine]] each, as --engine-url would).
[[engine]]
replica_id = "vllm-0"
url = "$E0"
window = "20ms"

[[engine]]
replica_id = "vllm-1"
url = "$E1"
window = "20ms"
TOML

say "kvrelay --engine-url $E0 --server $SERVER --replica-id vllm-0 --check   # one engine, by flags"
for _ in $(seq 1 100); do curl -sf "$E0/kv_event_sources" >/dev/null 2>&1 && break; sleep 0.1; done
$B/kvrelay --engine-url "$E0" --server "$SERVER" --replica-id vllm-0 --check | sed -n '/^\[\[engine\]\]/,$p'
say "kvrelay --config $WORK/kvrelay.toml --check"
$B/kvrelay --config "$WORK/kvrelay.toml" --check >/dev/null && echo "configuration valid"
say "starting kvrelay (2 pipelines, admin on $ADMIN)"
$B/kvrelay --config "$WORK/kvrelay.toml" >"$WORK/kvrelay.log" 2>&1 & KV=$!
pids+=($KV)

for _ in $(seq 1 100); do
  if curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -s "http://$ADMIN/readyz" || true
sleep 1  # let a few windows flush

probe() {
  echo "\$ kvrelay-route-probe --tokens $2   # $1"
  $B/tools/route-probe/kvrelay-route-probe --server "$SERVER" --model demo-model \
    --block-size 128 --tokens "$2" | sed 's/^/  /'
}
say "what a router gets back (LookupRoute with the prompt's block fingerprints)"
probe "the scripted prompt: both blocks cached on vllm-0" "5000-5255"
probe "same first block, different second block" "5000-5127,1-128"
probe "a prompt no engine has seen" "1-256"

say "kvrelay's view: /debug/engines"
curl -sS --max-time 5 "http://$ADMIN/debug/engines" -o "$WORK/engines.json" -w "(HTTP %{http_code})\n" || true
python3 -m json.tool "$WORK/engines.json" 2>/dev/null || cat "$WORK/engines.json"
say "a few of kvrelay's metrics"
curl -s "http://$ADMIN/metrics" | grep -E '^kvrelay_(batches_total|events_total|resident_blocks|rpc_total|replays_total)' | head -20

say "SIGTERM: kvrelay drains and exits"
kill -TERM "$KV"
set +e; wait "$KV"; rc=$?; set -e
echo "kvrelay exited with $rc"
say "also built, for a bug report (docs/operations.md): $B/tools/capture/kvrelay-capture records an engine's stream, $B/tools/replay/kvrelay-replay plays it back"
say "logs are in $WORK"
tail -n 3 "$WORK/kvrelay.log"
exit "$rc"
