// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Every actor interface of kvrelay, in one place (VAST style). One pipeline per engine source:
//   ingress → decoder → shard (every adapter partition) → debouncer → emitter;  scraper → emitter.
// Each handler has a one-line comment; every supervised actor answers `status` for the admin
// tree and `crash` (fault injection, only reachable when the admin switch enables it).

#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

#include "base/status.hpp"
#include "messages/fwd.hpp"
#include "messages/health.hpp"
#include "messages/supervision.hpp"

namespace kvrelay {

// clang-format off

/// What every supervised actor answers.
using supervised_actor = caf::typed_actor<
  // Returns this actor's status: kind, mailbox, counters, last error (and its children's).
  caf::replies_to<atom::status>::with<actor_status>,
  // Fault injection: throws.
  caf::reacts_to<atom::crash>>;

/// Whoever owns a pipeline's health (its supervisor): told facts as they change.
using health_listener_actor = caf::typed_actor<
  // A fact about the pipeline changed (first batch, engine connected, server ok, ...).
  caf::reacts_to<health_fact>>;

/// Hears from the emitter which policy-server targets exist and when one's transport came back
/// after it was lost (that server may have restarted empty: resync it). The debouncer
/// implements it.
using reconnect_listener_actor = caf::typed_actor<
  // Target T's channel went from connected to lost and is connected again.
  caf::reacts_to<atom::reconnected, std::string>,
  // The full, sorted set of target names: at registration and after every change.
  caf::reacts_to<atom::targets, std::vector<std::string>>>;

/// Talks to the policy servers (one link per target): ordered units of index changes, and stats.
using emitter_actor = caf::typed_actor<
  // Sends one ordered unit to target T; answers the sender with an emit_result (target T) when
  // all its RPCs finished, at once when T is no target ("unknown target").
  caf::reacts_to<std::string, emit_unit_ptr>,
  // Sends a stats-only CacheStateUpdate to every target; true when at least one acknowledged it
  // (accepted=true), answered once every target answered.
  caf::replies_to<stats_sample_ptr>::with<bool>,
  // Internal: RPC completions are waiting in a link's inbox (one message per batch of them).
  caf::reacts_to<atom::completed>,
  // Internal: resolve DNS fan-out targets again (0: the periodic timer; i + 1: name i, a lost
  // link's deferred re-resolve).
  caf::reacts_to<atom::resolve, uint64_t>,
  // Internal: the resolver thread's answer for DNS fan-out name i: its addresses, or an error.
  caf::reacts_to<atom::resolve, uint64_t, std::vector<std::string>, std::string>,
  // Who to tell when the transport to the server comes back (the debouncer, at its start).
  caf::reacts_to<atom::update, reconnect_listener_actor>>
  ::extend_with<supervised_actor>;

/// Holds the reverse maps of a pipeline's adapter partitions and routes removals between them.
using shard_actor = caf::typed_actor<
  // Applies one batch's events in order; sends shard_ops per touched partition to the debouncer.
  caf::reacts_to<shard_work_ptr>,
  // AllBlocksCleared: forgets everything; later work carries epoch >= the given one.
  caf::reacts_to<atom::clear, uint64_t>,
  // Timer (its own): sizes the index from the engine's capacity while no work has come (PS8).
  caf::reacts_to<atom::size_index>,
  // The next chunk of a walk (request id, partition, position, blocks wanted): its resident
  // blocks from there, as shard_ops to the debouncer (debouncer rules WK1-WK6).
  caf::reacts_to<atom::walk, uint64_t, uint32_t, uint64_t, uint32_t>,
  // Barrier: answers once everything sent to this shard before it has become ops.
  caf::replies_to<atom::drain>::with<bool>,
  // Durable index: adds every partition's blocks to the decoder's snapshot (the cut: all work
  // sent before it is applied) and hands it back.
  caf::replies_to<atom::snapshot, snapshot_ptr>::with<snapshot_ptr>>
  ::extend_with<supervised_actor>;

/// Turns raw batches into the shard's work; owns the adapter map, the group table and the epoch.
using decoder_actor = caf::typed_actor<
  // One ZMQ payload, in sequence order.
  caf::reacts_to<raw_batch_ptr>,
  // History lost / incarnation reset: either clears the pipeline.
  caf::reacts_to<ingress_notice_ptr>,
  // A walk's next chunk: passed to the shard after every batch before it (mailbox order).
  caf::reacts_to<atom::walk, uint64_t, uint32_t, uint64_t, uint32_t>,
  // Adds a LoRA id → name mapping at runtime (admin); answers once batches after it use it.
  caf::replies_to<atom::adapter, int64_t, std::string>::with<bool>,
  // Makes the shard throw (fault injection); true once it was told.
  caf::replies_to<atom::crash, std::string>::with<bool>,
  // Barrier: answers once every batch sent before it has become ops at the debouncer.
  caf::replies_to<atom::drain>::with<bool>,
  // Durable index: the pipeline's state after the last batch it decoded (a consistent cut).
  caf::replies_to<atom::snapshot>::with<snapshot_ptr>>
  ::extend_with<supervised_actor>;

/// Coalesces index changes to their final state and hands ordered units to the emitter.
using debouncer_actor = caf::typed_actor<
  // Index changes of one shard.
  caf::reacts_to<shard_ops_ptr>,
  // AllBlocksCleared (or lost history): epoch and batch time; older-epoch ops are dropped.
  caf::reacts_to<atom::clear, uint64_t, int64_t>,
  // The emitter finished a unit.
  caf::reacts_to<emit_result>,
  // Window timer (generation counter: stale timers are ignored).
  caf::reacts_to<atom::flush, uint64_t>,
  // A new emitter after a restart: units in flight to the old one are treated as lost.
  caf::reacts_to<atom::update, emitter_actor>,
  // The decoder to ask for a resync.
  caf::reacts_to<atom::update, decoder_actor>,
  // Timer: the next resync probe (backoff) or a deferred reconnect resync (generation counter).
  caf::reacts_to<atom::resync, uint64_t>,
  // Periodic refresh: re-report everything resident so the server's TTL never expires it.
  caf::reacts_to<atom::refresh>,
  // Target T's transport came back: that server may have lost its state.
  caf::reacts_to<atom::reconnected, std::string>,
  // The emitter's full, sorted set of target names (at registration and after every change).
  caf::reacts_to<atom::targets, std::vector<std::string>>,
  // Shutdown: flush everything (or end with ALL_CLEARED); true when the emitter acknowledged it.
  caf::replies_to<atom::drain>::with<bool>>
  ::extend_with<supervised_actor>;

/// Merged DP mode: the one debouncer of a replica whose data-parallel ranks report as one. It
/// owns the holder set and the replica's only stream of units; each rank's data path reaches it
/// through a port (a debouncer_actor that tags what it forwards with its rank).
using replica_debouncer_actor = caf::typed_actor<
  // A rank's data path (re)started; its supervisor is to hear the server's health.
  caf::reacts_to<atom::join, uint32_t, health_listener_actor>,
  // A rank's index changes.
  caf::reacts_to<uint32_t, shard_ops_ptr>,
  // A rank's clear (rank, epoch, batch time): evicts what that rank alone held.
  caf::reacts_to<atom::clear, uint32_t, uint64_t, int64_t>,
  // A rank's decoder, to ask for re-reports.
  caf::reacts_to<atom::update, uint32_t, decoder_actor>,
  // The replica's emitter (rank 0's), also after it restarted.
  caf::reacts_to<atom::update, emitter_actor>,
  // The emitter finished a unit.
  caf::reacts_to<emit_result>,
  // Window timer (generation counter).
  caf::reacts_to<atom::flush, uint64_t>,
  // Resync timer (generation counter).
  caf::reacts_to<atom::resync, uint64_t>,
  // Periodic refresh.
  caf::reacts_to<atom::refresh>,
  // Target T's transport came back.
  caf::reacts_to<atom::reconnected, std::string>,
  // The emitter's full, sorted set of target names.
  caf::reacts_to<atom::targets, std::vector<std::string>>,
  // Shutdown (any rank's): as the debouncer's drain, for the whole replica.
  caf::replies_to<atom::drain>::with<bool>>
  ::extend_with<supervised_actor>;

/// Owns the ZMQ thread (SUB + replay DEALER) of one engine source.
using ingress_actor = caf::typed_actor<
  // Periodic: publishes the ZMQ thread's counters to /metrics.
  caf::reacts_to<atom::publish>,
  // Shutdown timer: one step of reading what the engine already sent.
  caf::reacts_to<atom::drain_step>,
  // Shutdown, first step: stop reading; answers once every batch read went to the decoder.
  caf::replies_to<atom::drain>::with<bool>,
  // The ZMQ thread ended with an error: quit so the supervisor restarts the data path.
  caf::reacts_to<atom::src_failed, std::string>,
  // A notice from outside the stream (the engine sleeps): logged and delivered in stream order.
  caf::reacts_to<ingress_notice_ptr>>
  ::extend_with<supervised_actor>;

/// Scrapes the engine's /metrics and reports ReplicaStats.
using scraper_actor = caf::typed_actor<
  // One scrape interval elapsed.
  caf::reacts_to<atom::scrape>,
  // Internal: the fetch thread's result: transport ok, HTTP status, body, error.
  caf::reacts_to<atom::fetched, bool, int32_t, std::string, std::string>,
  // A new emitter after a restart.
  caf::reacts_to<atom::update, emitter_actor>>
  ::extend_with<supervised_actor>;

/// Hears what engine discovery learnt (the daemon's root): per engine, a target or why none.
using discovery_listener_actor = caf::typed_actor<
  // An engine's pipelines changed (its first answer included), or why it has none yet.
  caf::reacts_to<discovery_update_ptr>>;

/// Watches the engines that have a URL: asks each where its publishers are, again when one of
/// its streams stops, and tells the listener (actors/discovery/discovery_protocol.hpp).
using discovery_actor = caf::typed_actor<
  // Engine (config index), DP rank: its stream stopped (false, why) or flows again (true, "").
  caf::reacts_to<atom::stream, uint64_t, int64_t, bool, std::string>,
  // Internal: a fetch thread's result for the engine (config index).
  caf::reacts_to<atom::fetched, uint64_t, discovery_fetch_ptr>,
  // Internal: an engine's retry or poll timer (config index, generation).
  caf::reacts_to<atom::discover, uint64_t, uint64_t>>
  ::extend_with<supervised_actor>;

/// Supervises one pipeline: restarts children with backoff and an intensity limit, isolates the
/// side actors (emitter, scraper) from the data path, and drains it on shutdown
/// (supervision/supervision_protocol.hpp holds the rules).
using pipeline_actor = caf::typed_actor<
  // Returns the pipeline's subtree (every child's status, restarts, last error) and readiness.
  caf::replies_to<atom::status>::with<actor_status>,
  // Whether the pipeline is ready, and why not (the reasons; empty when ready).
  caf::replies_to<atom::ready>::with<bool, std::vector<std::string>>,
  // Internal timer: the unit's restart backoff elapsed (unit, generation: stale ones are ignored).
  caf::reacts_to<atom::restart, pipeline_unit, uint64_t>,
  // Internal timer: a unit restarted while unhealthy stayed up for a window (unit, incarnation).
  caf::reacts_to<atom::stable, pipeline_unit, uint64_t>,
  // Internal timer: the teardown deadline passed; children still alive are killed.
  caf::reacts_to<atom::teardown>,
  // Fault injection: makes the child of that kind throw; false when it is not running.
  caf::replies_to<atom::crash, actor_kind>::with<bool>,
  // Shutdown: stop ingress, drain the data path, final flush, all within the time budget; the
  // report says whether everything was sent and what the server is left with.
  caf::replies_to<atom::drain, caf::timespan>::with<drain_report>,
  // Adds a LoRA id → name mapping at runtime (kept across data-path restarts); answers once
  // the running decoder applied it, so a caller told "added" never races the next batch.
  caf::replies_to<atom::adapter, int64_t, std::string>::with<bool>,
  // Durable index timer: take and write a snapshot (generation: stale timers are ignored).
  caf::reacts_to<atom::snapshot, uint64_t>,
  // Durable index: the restore step's plan for the data path about to start.
  caf::reacts_to<atom::restore, restore_plan_ptr>,
  // Durable index: what a write came to (from the writer's thread).
  caf::reacts_to<atom::saved, write_report>,
  // Durable index: the shutdown's last write is overdue (generation).
  caf::reacts_to<atom::saved, uint64_t>>
  ::extend_with<health_listener_actor>;

/// The daemon's root: holds every pipeline's handle and serialises what the admin port and
/// signals ask (one owner: HTTP threads talk to it, never to the daemon object's fields). With
/// engines that have a URL it owns the discovery actor and spawns their pipelines when it answers.
using daemon_actor = caf::typed_actor<
  // Every pipeline: the facts fixed at start and its status subtree, in configuration order;
  // and the discovery actor's status (kind "" when no engine has a URL).
  caf::replies_to<atom::status>::with<std::vector<pipeline_view>, actor_status>,
  // Every pipeline is ready; the reasons of those that are not ("<pipeline>: <reason>").
  caf::replies_to<atom::ready>::with<bool, std::vector<std::string>>,
  // Fault injection in pipeline P (by name); false when there is no such pipeline or actor.
  caf::replies_to<atom::crash, std::string, actor_kind>::with<bool>,
  // Adds a LoRA id → name mapping to every pipeline of replica R ("" = all); false when none
  // matched.
  caf::replies_to<atom::adapter, std::string, int64_t, std::string>::with<bool>,
  // Shutdown: drains every pipeline at once within the budget; one report per pipeline.
  caf::replies_to<atom::drain, caf::timespan>::with<std::vector<drain_report>>,
  // The names of the running pipelines, in configuration order (no child is asked).
  caf::replies_to<atom::pipelines>::with<std::vector<std::string>>,
  // Internal: the discovery actor's restart backoff elapsed.
  caf::reacts_to<atom::restart>>
  // Discovery's word on engines with a URL: their pipelines are (re)spawned from it.
  ::extend_with<discovery_listener_actor>;

// clang-format on

}  // namespace kvrelay
