// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The ingress actor: owns the event source (the ZMQ thread, zmq_source) of one engine and lets it
// forward what it delivers straight to the decoder (anon_send from the ZMQ thread: no hop through
// this actor's mailbox on the hot path). The actor itself publishes the source's counters when
// they change (at most once a second, never while idle), tells the supervisor the health facts it
// observes, answers status, and dies with an error when the source fails so the supervisor
// restarts the data path.

#include <memory>

#include "actors/ingress/zmq_source.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

/// The delta log's series (the supervisor's durable state declares them, the ingress advances
/// them): one help text for both.
inline constexpr const char* ingress_log_bytes_help =
    "Bytes appended to the durable index's delta log (records of every batch and notice)";
inline constexpr const char* ingress_log_writing_help =
    "1 while the durable index's delta log is written; 0 when there is none (the engine's "
    "process cannot be proved) or it stopped (I/O error, its bound) until the data path restarts";

/// The decoder returns credits here; the ingress' source reads the total (lock-free).
using credit_line = ingress::credit_line;

struct ingress_options {
  ingress::zmq_source_options source;
  /// Makes the source; empty → a zmq_source. Tests inject one that needs no sockets.
  ingress::source_factory make_source;
};

/// Spawns the ingress. An unusable endpoint makes it quit with an error at once (the
/// supervisor's restart backoff is the retry).
ingress_actor spawn_ingress(caf::actor_system& sys, const pipeline_context& ctx,
                            const ingress_options& opts, decoder_actor decoder,
                            std::shared_ptr<credit_line> credits);

}  // namespace kvrelay
