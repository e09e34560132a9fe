#pragma once
// kvrelay's atoms and the message types CAF may carry. Everything that travels between actors is
// either a CAF built-in (integers, strings, atoms) or one of the shared_ptr<const T> below, which
// never leave the process (hence "unsafe": no serializer needed, zero copies).

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/type_id.hpp>

#include "messages/pipeline.hpp"

// Atom texts are ≤ 10 characters of [a-z0-9_] (CAF 0.17 stores them in 60 bits).
CAF_BEGIN_TYPE_ID_BLOCK(kvrelay, caf::first_custom_type_id)
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, status, "status")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, flush, "flush")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, tick, "tick")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, clear, "clear")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, resync, "resync")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, restart, "restart")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, update, "update")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, done, "done")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, crash, "crash")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, drain, "drain")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, adapter, "adapter")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, ingress, "ingress")
  CAF_ADD_ATOM(kvrelay, kvrelay::atom, ready, "ready")
CAF_END_TYPE_ID_BLOCK(kvrelay)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::raw_batch_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::ingress_notice_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::shard_work_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::shard_ops_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::emit_unit_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::emit_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvrelay::stats_sample_ptr)
