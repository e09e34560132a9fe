// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// kvrelay's atoms and the message types CAF may carry. Everything that travels between actors is
// either a CAF built-in (integers, strings, atoms) or one of the shared_ptr<const T> below, which
// never leave the process (hence "unsafe": no serializer needed, zero copies).

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/type_id.hpp>

#include <caf/error.hpp>

#include "base/error.hpp"
#include "base/status.hpp"
#include "messages/discovery.hpp"
#include "messages/health.hpp"
#include "messages/pipeline.hpp"
#include "messages/state.hpp"
#include "messages/supervision.hpp"

// Atom texts are ≤ 10 characters of [a-z0-9_] (CAF 0.17 stores them in 60 bits). One atom, one
// meaning: a handler's atom names what the message is, never which timer happened to fire.
CAF_BEGIN_TYPE_ID_BLOCK(kvrelay, caf::first_custom_type_id)
  // -- every supervised actor ----------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, status, "status")        // snapshot for the admin tree
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, crash, "crash")          // fault injection: throw
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, update, "update")        // a peer was replaced: new handle
  // -- pipeline control ------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, clear, "clear")          // AllBlocksCleared / lost history
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, resync, "resync")        // re-report everything resident
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, drain, "drain")          // shutdown: flush and answer
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, adapter, "adapter")      // LoRA id → name mapping
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, snapshot, "snapshot")    // durable index: take one (cut)
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, restore, "restore")      // a data path's restore plan
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, saved, "saved")          // a snapshot write's outcome
  // -- shard -------------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, size_index, "size_index") // timer: size the index, no work yet
  // -- supervisor --------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, restart, "restart")      // timer: a unit's backoff elapsed
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, stable, "stable")        // timer: a unit stayed up a window
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, teardown, "teardown")    // timer: teardown deadline; kill
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, ready, "ready")          // readiness and its reasons
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, pipelines, "pipelines")  // the running pipelines' names
  // -- ingress -----------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, publish, "publish")      // timer: ZMQ counters → /metrics
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, drain_step, "drain_step") // timer: one shutdown read step
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, src_failed, "src_failed") // the ZMQ thread ended on error
  // -- debouncer ---------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, flush, "flush")          // timer: the window elapsed
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, refresh, "refresh")      // timer: periodic re-report
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, walk, "walk")            // the next chunk of an index walk
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, join, "join")            // merged DP: a rank's data path started
  // -- emitter -----------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, completed, "completed")  // RPC completions in the inbox
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, reconnected, "reconnect") // transport to the server is back
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, targets, "targets")      // the emitter's set of target names
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, resolve, "resolve")      // timer: resolve DNS targets again
  // -- scraper -----------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, scrape, "scrape")        // timer: one scrape interval
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, fetched, "fetched")      // the fetch thread's result
  // -- discovery ---------------------------------------------------------------------------------
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, stream, "stream")        // an engine stream stopped / flows
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, discover, "discover")    // timer: read an engine's sources again
CAF_END_TYPE_ID_BLOCK(kvrelay)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::raw_batch_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::ingress_notice_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::shard_work_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::shard_ops_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::emit_unit_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::emit_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::stats_sample_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::actor_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::health_fact)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::pipeline_unit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::actor_kind)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::drain_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrelay::drain_report>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<kvrelay::pipeline_view>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::discovery_update_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::discovery_fetch_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::snapshot_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::restore_plan_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::write_report)

// kvrelay::ec travels as a caf::error (exit reasons, failed requests); category "kvrelay".
CAF_ERROR_CODE_ENUM(kvrelay::ec, "kvrelay")
