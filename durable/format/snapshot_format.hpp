// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The durable index's file format: one pipeline's state, enough to continue exactly as
// if kvrelay had never stopped. Pure: bytes in, bytes out; no files, no clock.
// durable/state_store writes and reads the files; whether a decoded snapshot may be used is
// snapshot_proof.hpp's decision.
//
//  SF1. A file starts with the magic "KVRSNAP\0" and a format version. Another magic: not a
//       snapshot; another version: a snapshot of another kvrelay release, never read (the
//       index's meta word below is only meaningful to the release that wrote it).
//  SF2. The header states the body's length; a file shorter than header + body + trailer is
//       truncated (a SIGKILL mid-write leaves a temporary file, never this one: the writer
//       renames a complete file over the old one), one longer is corrupt.
//  SF3. The trailer is the XXH3-64 of everything before it; a mismatch is corruption.
//  SF4. Every count is checked against the bytes left before anything is allocated for it, so
//       a corrupt count costs an error, never memory or a crash.
//  SF5. Encoding is deterministic (the same snapshot gives the same bytes) and little-endian.
//  SF6. A block keyed by a 64-bit engine hash costs 20 bytes (hash, fingerprint, meta word); a
//       block keyed by bytes costs its length + 16. Fixed parts are a few hundred bytes, plus
//       the names of partitions and adapters.
//
// Layout (version 2): header {magic[8], u32 version, u32 reserved, u64 body_bytes} | body {meta,
// adapters, groups, partitions} | trailer {u64 xxh3 of header and body}. Version 2 added the
// delta log's generation to the meta (snapshot_log.hpp); a version 1 file is `other_version`.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrelay::snapshot {

inline constexpr uint32_t format_version = 2;
inline constexpr size_t header_bytes = 24;
inline constexpr size_t trailer_bytes = 8;
inline constexpr size_t block_record_bytes = 20;

/// Whose state it is: a file is used only by the pipeline that wrote it (same replica, model,
/// tenant, hash scheme, engine endpoint, topic and DP rank).
struct identity {
  std::string replica_id;
  std::string model_id;
  std::string tenant_id;
  std::string hash_scheme;
  std::string endpoint;
  std::string topic;
  int64_t dp_rank = 0;
  bool operator==(const identity& o) const {
    return replica_id == o.replica_id && model_id == o.model_id && tenant_id == o.tenant_id &&
           hash_scheme == o.hash_scheme && endpoint == o.endpoint && topic == o.topic &&
           dp_rank == o.dp_rank;
  }
  bool operator!=(const identity& o) const { return !(*this == o); }
};

/// What identifies the engine process whose events the snapshot holds (snapshot_proof.hpp).
struct evidence {
  /// `process_start_time_seconds` of the engine's /metrics (vLLM and SGLang export it through
  /// prometheus_client's process collector), when it was read.
  std::optional<double> start_time;
  /// A publisher lifetime id, where an engine offers one (newest SGLang's topic suffix
  /// `\0sgl-kv-epoch=<uuid>`; vLLM #57789 proposes one). "" = none.
  std::string lifetime_id;
  bool empty() const { return !start_time && lifetime_id.empty(); }
};

/// One block as the index holds it: engine hash, fingerprint, and the index's meta word (token
/// count, copies per tier, taint: positional_index's own layout, which SF1's version pins).
/// Packed: 20 bytes in memory as on disk (a snapshot of 1 M blocks holds 20 MB of them).
#pragma pack(push, 1)
struct block_record {
  uint64_t hash = 0;
  uint64_t fingerprint = 0;
  uint32_t meta = 0;
};
#pragma pack(pop)
static_assert(sizeof(block_record) == 20, "block_record is not packed");
/// The same for a block whose engine hash is bytes (vLLM with int hashes off, LMCache).
struct bytes_record {
  std::string hash;
  uint64_t fingerprint = 0;
  uint32_t meta = 0;
};

/// One adapter partition's reverse map.
struct partition_image {
  std::string adapter;  // "" = the base model
  std::vector<block_record> blocks;
  std::vector<bytes_record> byte_blocks;
  size_t size() const { return blocks.size() + byte_blocks.size(); }
};

/// One pipeline's state at a cut: everything after applying batch `next_seq - 1`.
struct pipeline_snapshot {
  identity who;
  evidence engine;
  uint64_t next_seq = 0;  // the last applied batch's seq + 1
  /// The first seq of the engine's history the index was built from (0: all of it); unset when
  /// the index is incomplete for another reason (history lost since).
  std::optional<uint64_t> history_from;
  uint64_t epoch = 1;          // the decoder's epoch at the cut (for the log: a restored data
                               // path counts its epochs afresh, like its debouncer)
  uint64_t incarnation = 0;    // engine incarnations seen by the data path that took it
  /// The delta log's generation the cut belongs to (snapshot_log.hpp LF5): the snapshot's
  /// position in the log is (generation, next_seq).
  uint32_t generation = 0;
  int64_t taken_at_us = 0;     // wall clock of the cut (for the age in logs)
  std::vector<std::pair<int64_t, std::string>> adapters;  // LoRA id → name, runtime-added too
  std::vector<std::pair<int64_t, uint8_t>> group_kinds;   // learnt group_idx → group_kind
  std::vector<partition_image> partitions;                // in partition id order

  size_t blocks() const {
    size_t n = 0;
    for (const auto& p : partitions) n += p.size();
    return n;
  }
};

/// Why bytes are not a usable snapshot (SF1-SF4).
enum class fault : uint8_t { not_a_snapshot, other_version, truncated, corrupt };
const char* to_string(fault f) noexcept;

struct decode_result {
  std::optional<pipeline_snapshot> snapshot;
  fault why = fault::corrupt;
  std::string detail;  // one line for the log
};

/// SF5: the file's bytes, in order, handed to `out` in pieces of about `piece` bytes (a snapshot
/// is written without ever being whole in memory; the checksum is computed on the way).
void encode(const pipeline_snapshot& s, const std::function<void(std::string_view)>& out,
            size_t piece = size_t{1} << 20);
/// All of it at once.
std::string encode(const pipeline_snapshot& s);
/// SF1-SF4.
decode_result decode(std::string_view bytes);

}  // namespace kvrelay::snapshot
