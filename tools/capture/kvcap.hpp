// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The capture file (docs/capture-format.md): what kvrelay-capture writes and kvrelay-replay
// plays. A versioned header (magic, version, a JSON description), then records, each one ZMQ
// message as it arrived: its kind (live, or a reply to the capture's replay request), its
// receive time and its frames, every length prefixed, every integer big-endian. Plain files and
// bytes only (no ZMQ here), so tests can build and read captures directly.
//
// A reader never trusts the file: counts and lengths are bounded (max_frames, max_frame_bytes,
// max_meta_bytes), a record that ends early (a capture killed mid-write) is reported as a
// truncated tail, and nothing is allocated before its length was checked against the bound.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace kvrelay::capture {

/// 0x89 "KVCAP" CR LF: a binary first byte, then a name, then the line ending that text-mode
/// transfers mangle (as PNG does), so a damaged copy is told apart from a capture at once.
inline constexpr std::string_view magic{"\x89KVCAP\r\n", 8};
inline constexpr uint16_t format_version = 1;
inline constexpr size_t max_meta_bytes = 64 * 1024;
inline constexpr size_t max_frames = 16;
inline constexpr uint32_t max_frame_bytes = 64u << 20;

enum class record_kind : uint8_t {
  live = 1,          // from the SUB socket: [topic, seq, payload] when well formed
  replay_reply = 2,  // from the DEALER, without the empty delimiter: [seq, payload],
                     // [topic, seq, payload], or the END marker
};

struct record {
  record_kind kind = record_kind::live;
  int64_t recv_unix_ns = 0;  // wall clock when the capture received it
  std::vector<std::string> frames;
};

/// The seq of a well-formed live message ([topic, 8-byte seq, payload], seq not END), or -1.
int64_t live_seq(const record& r);
/// A replay reply's seq frame and payload, or false for the END marker and malformed replies.
bool reply_batch(const record& r, uint64_t& seq, std::string_view& payload);

class writer {
 public:
  /// Creates (truncates) `path` and writes the header with `meta_json` (a JSON object).
  static outcome<std::unique_ptr<writer>> create(const std::string& path,
                                                 const std::string& meta_json);
  ~writer();  // close()
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;

  /// Appends one record. Frames over max_frame_bytes or more than max_frames are refused.
  outcome<void> write(record_kind kind, int64_t recv_unix_ns,
                      const std::vector<std::string_view>& frames);
  /// The size the file has once everything written so far is flushed.
  uint64_t bytes() const noexcept { return bytes_; }
  /// Size of a record with these frames, for a caller that keeps a size bound.
  static uint64_t record_bytes(const std::vector<std::string_view>& frames);
  outcome<void> flush();
  outcome<void> close();

 private:
  writer() = default;
  std::FILE* f_ = nullptr;
  std::string path_;
  uint64_t bytes_ = 0;
};

class reader {
 public:
  /// Opens `path` and reads the header: a failure names what is wrong (not a capture, a newer
  /// version, an oversized header).
  static outcome<std::unique_ptr<reader>> open(const std::string& path);
  ~reader();
  reader(const reader&) = delete;
  reader& operator=(const reader&) = delete;

  uint16_t version() const noexcept { return version_; }
  const std::string& meta_json() const noexcept { return meta_; }

  /// The next record into `out`: true, or false at the end of the file. A failure for a
  /// malformed or truncated record (its offset in the context); records before it were good.
  outcome<bool> next(record& out);
  /// Byte offset of the next record.
  uint64_t offset() const noexcept { return offset_; }
  /// The last failure of next() was a record cut short by the end of the file.
  bool truncated() const noexcept { return truncated_; }

 private:
  reader() = default;
  std::FILE* f_ = nullptr;
  std::string path_;
  uint16_t version_ = 0;
  std::string meta_;
  uint64_t offset_ = 0;
  bool truncated_ = false;
};

/// Every record of a capture, with the header's JSON; stops at the first bad record (the
/// failure then says where) unless `tolerate_truncated_tail` and the bad record is the last,
/// truncated one (`truncated` tells).
struct capture_contents {
  std::string meta_json;
  std::vector<record> records;
  bool truncated = false;
};
outcome<capture_contents> read_all(const std::string& path, bool tolerate_truncated_tail = true);

}  // namespace kvrelay::capture
