// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The scheduling policy of kvrelay's threads ([cpu] scheduling), set once at start on the main
// thread before any other exists: every thread made afterwards (CAF's workers and clock, ZMQ's
// I/O thread, gRPC's, kvrelay's own) inherits it, so no thread sets its own.
//
// Why `batch` by default: kvrelay hands every batch and every unit from thread to thread (ZMQ's
// I/O thread, the ingress thread, a CAF worker, the publish thread). Under the normal policy a
// woken thread preempts the one that woke it when they share a CPU, so each hand-off costs the
// waker a second switch, and a kvrelay thread that wakes preempts an engine thread (a
// scheduler loop that keeps a GPU busy) in the same way. SCHED_BATCH only drops that wake-up
// preemption: the thread runs when the running one sleeps or its slice ends. Measured: 23-35 %
// fewer context switches a block at 10^4-10^5 blocks/s and ~40 % fewer in a blast, the same
// latency, CPU a block within -4 % to +6 % (inside the spread of identical runs; BENCHMARKS.md).

#include "base/log.hpp"
#include "config/settings.hpp"

namespace kvrelay {

/// The name of a Linux scheduling policy (SCHED_OTHER is "normal"); "unknown" for others.
const char* scheduling_policy_name(int policy);

/// Applies `want` to the calling thread and says what it did, for the log. Fails open: a
/// policy that cannot be set leaves the one kvrelay has (a warning, never an exit). `batch`
/// replaces only the normal policy (keeping reset-on-fork if set); one chosen by whoever
/// started kvrelay is kept.
log::record apply_cpu_scheduling(config::cpu_scheduling want);

}  // namespace kvrelay
