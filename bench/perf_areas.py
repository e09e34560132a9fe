#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# perf self time of kvrelay by area, as BENCHMARKS.md tables it: bench/perf_areas.py [--comms
# LIST] [--process NAME] NAME perf.data [NAME perf.data ...] prints one markdown column per profile (perf report,
# self time by DSO and symbol, each symbol put in the first area whose pattern it matches).
# --comms keeps the samples of those thread names only (perf's --comm; for a system-wide
# recording, e.g. kvrelay's pipeline threads "caf.multiplexer,ZMQbg/IO/0,kvr.ingress,kvr.publish"),
# each share then of their samples. --process NAME keeps the processes that exec'd NAME while perf
# recorded (other programs' threads share names: the bench's load generator has a "ZMQbg/IO/0").
import collections
import re
import subprocess
import sys

comms = []
process = None
while len(sys.argv) > 2 and sys.argv[1] in ("--comms", "--process"):
    if sys.argv[1] == "--comms":
        comms = ["--comm", sys.argv[2], "--percentage", "relative"]
    else:
        process = sys.argv[2]
    del sys.argv[1:3]

def pids_of(data, name):
    # The processes that exec'd NAME while perf recorded (the bench starts kvrelay after perf).
    run = subprocess.run(["perf","script","-i",data,"--show-task-events","-F","comm,pid,tid"],capture_output=True,text=True)
    if run.returncode != 0: sys.exit("perf_areas.py: perf script failed on %s: %s" % (data, run.stderr.strip()))
    out = run.stdout
    pids = set()
    for line in out.splitlines():
        m = re.search(r'PERF_RECORD_COMM exec: (.*):(\d+)/(\d+)\s*$', line)
        if m and m[1] == name: pids.add(m[2])
    return pids

def areas(data):
    only = []
    if process:
        pids = pids_of(data, process)
        if not pids: sys.exit("perf_areas.py: no process named %s in %s" % (process, data))
        only = ["--pid", ",".join(sorted(pids)), "--percentage", "relative"]
    out = subprocess.run(["perf","report","-i",data,"--no-children","--sort","dso,symbol","--stdio"] + comms + only,capture_output=True,text=True).stdout
    acc = collections.OrderedDict((k,0.0) for k in ["kernel (faults, wake-ups, loopback TCP)","index: table growth (rehash)","index: positional_index, directory, partitions","debouncer: pending map","emitter: protobuf + gRPC","decoder + XXH3","malloc / libc","CAF","ZMQ","other"])
    for line in out.splitlines():
        m = re.match(r'\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)', line)
        if not m: continue
        pct, dso, kind, sym = float(m[1]), m[2], m[3], m[4]
        if kind == 'k' or 'kernel' in dso: a = "kernel (faults, wake-ups, loopback TCP)"
        elif 'rehash' in sym and 'probe_table' in sym: a = "index: table growth (rehash)"
        elif any(s in sym for s in ('positional_index','probe_table','partition_set','dir_table','directory','cap_queue','batch_router')): a = "index: positional_index, directory, partitions"
        elif 'pending_set' in sym or ('raw_hash_set' in sym and 'pair<unsigned int' in sym) or 'debounce' in sym: a = "debouncer: pending map"
        elif any(s in dso for s in ('protobuf','grpc','libgpr','libupb','libabsl_')) or 'inferencecache' in sym or 'unit_stream' in sym or 'emitter' in sym or 'policy_client' in sym: a = "emitter: protobuf + gRPC"
        elif 'xxhash' in dso or 'parser' in sym or 'wire_decoder' in sym or 'engine_hash' in sym or 'msgpack' in sym or 'fingerprint' in sym or 'decoder' in sym: a = "decoder + XXH3"
        elif 'libc' in dso or 'libstdc' in dso: a = "malloc / libc"
        elif 'caf' in dso or 'caf::' in sym: a = "CAF"
        elif 'zmq' in dso: a = "ZMQ"
        else: a = "other"
        acc[a] += pct
    return acc
cols = [(n, areas(p)) for n, p in zip(sys.argv[1::2], sys.argv[2::2])]
print("| area | " + " | ".join(n for n,_ in cols) + " |")
print("|---|" + "---|"*len(cols))
for k in cols[0][1]:
    print("| %s | %s |" % (k, " | ".join("%.1f %%" % c[k] for _,c in cols)))
