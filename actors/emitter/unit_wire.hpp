// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A unit's ReportCacheState messages in wire form, written straight from the unit: no protobuf
// message is built. Building one cost a reused PrefixEntry per entry, with its two strings
// assigned (the 8-byte key, the adapter), cleared again for the next message, and sized before
// it was serialized: with gRPC's part, 13-17 % of a blast's pipeline samples, 5-8 % since.
//
// The bytes are protobuf's own serialization of the same CacheStateUpdate (fields in number
// order, proto3 defaults left out), which tests/emitter/unit_wire_test.cpp holds by comparing
// every message with what protobuf's message classes serialize for the same content.
//
//  UW1. Sections: the adds (stamped adds_ts_us), each downgrade group (its own ts_us) and, with
//       expirations, the evictions stamped expired_ts_us (unit_sequencer.hpp UQ3). A message
//       never spans two sections; an empty section makes none.
//  UW2. A message takes entries while it holds fewer than max_entries and its rough size (24
//       bytes and the adapter's length an entry) is under max_bytes; at least one.
//  UW3. Every message carries the replica's identity (replica_id, model_id, tenant_id,
//       hash_scheme) and its section's timestamp, negative taken as 0.
//  UW4. An entry: its fingerprint, 8 bytes big-endian; an add's or downgrade's token count and
//       tier; the adapter when not "" (the base model).

#include <cstddef>
#include <cstdint>
#include <string>

#include "messages/pipeline.hpp"

namespace kvrelay::emitter {

/// UW3: a message's timestamp, negative taken as 0 (the port's evictions and stats follow it).
inline int64_t wire_timestamp_us(int64_t us) { return us > 0 ? us : 0; }

class unit_wire {
 public:
  unit_wire(const replica_identity& id, size_t max_entries, size_t max_bytes, emit_unit_ptr unit,
            bool with_expirations);

  /// The size of the next message (UW1, UW2), 0 when the unit has no more.
  size_t next_size();
  /// Writes that message, exactly next_size() bytes, to `out`; once per next_size().
  void write(uint8_t* out);

 private:
  struct entry_view;
  size_t section_size(size_t s) const;
  int64_t section_ts(size_t s) const;
  entry_view entry(size_t s, size_t i) const;

  std::string identity_;  // UW3's fields 1-4, the same in every message
  size_t max_entries_, max_bytes_;
  emit_unit_ptr unit_;
  size_t sections_;
  size_t section_ = 0, pos_ = 0;   // where the next message starts
  size_t end_ = 0;                 // where the current one ends (next_size)
  size_t size_ = 0;
};

}  // namespace kvrelay::emitter
