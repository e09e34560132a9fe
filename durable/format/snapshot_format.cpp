// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/format/snapshot_format.hpp"

#include <xxhash.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

namespace kvrelay::snapshot {

namespace {

constexpr char magic[8] = {'K', 'V', 'R', 'S', 'N', 'A', 'P', '\0'};
constexpr bool little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// -- writing (SF5: fixed widths, little-endian) ------------------------------------------------

// Appends to a buffer handed out in pieces (or only counts, for the body's length); the
// checksum follows everything handed out.
class writer {
 public:
  writer() = default;  // counting only
  writer(const std::function<void(std::string_view)>* out, size_t piece)
      : out_(out), piece_(piece), state_(XXH3_createState()) {
    XXH3_64bits_reset(state_);
    buf_.reserve(piece + 64);
  }
  ~writer() {
    if (state_) XXH3_freeState(state_);
  }
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;

  size_t count() const { return count_; }

  void bytes(const void* p, size_t n) {
    count_ += n;
    if (!out_) return;
    buf_.append(static_cast<const char*>(p), n);
    if (buf_.size() >= piece_) flush();
  }
  template <class T>
  void num(T v) {
    static_assert(std::is_integral_v<T>, "integers only");
    using U = std::make_unsigned_t<T>;
    U u = static_cast<U>(v);
    char b[sizeof(U)];
    for (size_t i = 0; i < sizeof(U); ++i, u = static_cast<U>(u >> 8))
      b[i] = static_cast<char>(u & 0xff);
    bytes(b, sizeof b);
  }
  void f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    num(bits);
  }
  void str(std::string_view s) {
    num(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void record(const block_record& r) {
    if constexpr (little_endian) {
      bytes(&r, block_record_bytes);  // packed, little-endian: the disk layout itself
    } else {
      num(uint64_t{r.hash});
      num(uint64_t{r.fingerprint});
      num(uint32_t{r.meta});
    }
  }
  // SF3: the checksum of everything so far, appended, and the rest handed out.
  void finish() {
    if (!out_) return;
    flush();
    const uint64_t sum = XXH3_64bits_digest(state_);
    char b[8];
    for (size_t i = 0; i < 8; ++i) b[i] = static_cast<char>((sum >> (8 * i)) & 0xff);
    (*out_)(std::string_view(b, sizeof b));
  }

 private:
  void flush() {
    if (buf_.empty()) return;
    XXH3_64bits_update(state_, buf_.data(), buf_.size());
    (*out_)(buf_);
    buf_.clear();
  }
  const std::function<void(std::string_view)>* out_ = nullptr;
  size_t piece_ = 0;
  XXH3_state_t* state_ = nullptr;
  std::string buf_;
  size_t count_ = 0;
};

// -- reading (SF4: every read checked against what is left) ----------------------------------

class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size() - pos_; }

  template <class T>
  T num() {
    using U = std::make_unsigned_t<T>;
    if (!take(sizeof(U))) return T{};
    U u = 0;
    for (size_t i = sizeof(U); i-- > 0;)
      u = static_cast<U>((u << 8) | static_cast<unsigned char>(in_[pos_ - sizeof(U) + i]));
    return static_cast<T>(u);
  }
  double f64() {
    const uint64_t bits = num<uint64_t>();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str() {
    const uint32_t n = num<uint32_t>();
    if (!take(n)) return {};
    return std::string(in_.substr(pos_ - n, n));
  }
  /// A count of items of at least `min_item` bytes each: never more than the bytes left allow.
  size_t count(size_t min_item) {
    const uint64_t n = num<uint64_t>();
    if (!ok_ || n > left() / min_item) {
      ok_ = false;
      return 0;
    }
    return static_cast<size_t>(n);
  }
  block_record record() {
    block_record r;
    if (!take(block_record_bytes)) return r;
    const char* p = in_.data() + pos_ - block_record_bytes;
    if constexpr (little_endian) {
      std::memcpy(static_cast<void*>(&r), p, block_record_bytes);
    } else {
      pos_ -= block_record_bytes;
      r.hash = num<uint64_t>();
      r.fingerprint = num<uint64_t>();
      r.meta = num<uint32_t>();
    }
    return r;
  }

 private:
  bool take(size_t n) {
    if (!ok_ || n > left()) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

uint64_t checksum(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

void write_body(writer& w, const pipeline_snapshot& s) {
  w.str(s.who.replica_id);
  w.str(s.who.model_id);
  w.str(s.who.tenant_id);
  w.str(s.who.hash_scheme);
  w.str(s.who.endpoint);
  w.str(s.who.topic);
  w.num(s.who.dp_rank);
  w.num(static_cast<uint8_t>(s.engine.start_time ? 1 : 0));
  w.f64(s.engine.start_time.value_or(0.0));
  w.str(s.engine.lifetime_id);
  w.num(s.next_seq);
  w.num(static_cast<uint8_t>(s.history_from ? 1 : 0));
  w.num(s.history_from.value_or(0));
  w.num(s.epoch);
  w.num(s.incarnation);
  w.num(s.generation);
  w.num(s.taken_at_us);
  w.num(static_cast<uint64_t>(s.adapters.size()));
  for (const auto& [id, name] : s.adapters) {
    w.num(id);
    w.str(name);
  }
  w.num(static_cast<uint64_t>(s.group_kinds.size()));
  for (const auto& [group, kind] : s.group_kinds) {
    w.num(group);
    w.num(kind);
  }
  w.num(static_cast<uint64_t>(s.partitions.size()));
  for (const auto& p : s.partitions) {
    w.str(p.adapter);
    w.num(static_cast<uint64_t>(p.blocks.size()));
    for (const auto& r : p.blocks) w.record(r);
    w.num(static_cast<uint64_t>(p.byte_blocks.size()));
    for (const auto& r : p.byte_blocks) {
      w.str(r.hash);
      w.num(r.fingerprint);
      w.num(r.meta);
    }
  }
}

bool read_body(reader& r, pipeline_snapshot& s) {
  s.who.replica_id = r.str();
  s.who.model_id = r.str();
  s.who.tenant_id = r.str();
  s.who.hash_scheme = r.str();
  s.who.endpoint = r.str();
  s.who.topic = r.str();
  s.who.dp_rank = r.num<int64_t>();
  const bool has_start = r.num<uint8_t>() != 0;
  const double start = r.f64();
  if (has_start) s.engine.start_time = start;
  s.engine.lifetime_id = r.str();
  s.next_seq = r.num<uint64_t>();
  const bool has_history = r.num<uint8_t>() != 0;
  const uint64_t history = r.num<uint64_t>();
  if (has_history) s.history_from = history;
  s.epoch = r.num<uint64_t>();
  s.incarnation = r.num<uint64_t>();
  s.generation = r.num<uint32_t>();
  s.taken_at_us = r.num<int64_t>();
  const size_t adapters = r.count(8 + 4);
  for (size_t i = 0; i < adapters && r.ok(); ++i) {
    const auto id = r.num<int64_t>();
    s.adapters.emplace_back(id, r.str());
  }
  const size_t groups = r.count(8 + 1);
  for (size_t i = 0; i < groups && r.ok(); ++i) {
    const auto group = r.num<int64_t>();
    s.group_kinds.emplace_back(group, r.num<uint8_t>());
  }
  const size_t parts = r.count(4 + 8 + 8);
  for (size_t i = 0; i < parts && r.ok(); ++i) {
    partition_image p;
    p.adapter = r.str();
    const size_t n = r.count(block_record_bytes);
    p.blocks.reserve(n);
    for (size_t j = 0; j < n && r.ok(); ++j) p.blocks.push_back(r.record());
    const size_t b = r.count(4 + 8 + 4);
    for (size_t j = 0; j < b && r.ok(); ++j) {
      bytes_record rec;
      rec.hash = r.str();
      rec.fingerprint = r.num<uint64_t>();
      rec.meta = r.num<uint32_t>();
      p.byte_blocks.push_back(std::move(rec));
    }
    s.partitions.push_back(std::move(p));
  }
  // A partition's id is its position: a name twice would give two ids one adapter.
  std::set<std::string_view> names;
  for (const auto& p : s.partitions)
    if (!names.insert(p.adapter).second) return false;
  return r.ok() && r.left() == 0;
}

decode_result failed(fault f, std::string detail) {
  decode_result d;
  d.why = f;
  d.detail = std::move(detail);
  return d;
}

}  // namespace

const char* to_string(fault f) noexcept {
  switch (f) {
    case fault::not_a_snapshot: return "not_a_snapshot";
    case fault::other_version: return "other_version";
    case fault::truncated: return "truncated";
    case fault::corrupt: return "corrupt";
  }
  return "unknown";
}

void encode(const pipeline_snapshot& s, const std::function<void(std::string_view)>& out,
            size_t piece) {
  writer counter;
  write_body(counter, s);
  writer w(&out, std::max<size_t>(piece, 64));
  w.bytes(magic, sizeof magic);
  w.num(format_version);
  w.num(uint32_t{0});
  w.num(static_cast<uint64_t>(counter.count()));
  write_body(w, s);
  w.finish();
}

std::string encode(const pipeline_snapshot& s) {
  std::string out;
  out.reserve(header_bytes + 512 + s.blocks() * block_record_bytes + trailer_bytes);
  encode(s, [&out](std::string_view piece) { out.append(piece.data(), piece.size()); });
  return out;
}

decode_result decode(std::string_view bytes) {
  if (bytes.size() < sizeof magic || std::memcmp(bytes.data(), magic, sizeof magic) != 0)
    return failed(fault::not_a_snapshot, "no snapshot magic at the start of the file");
  if (bytes.size() < header_bytes) return failed(fault::truncated, "shorter than its header");
  reader head(bytes.substr(sizeof magic, header_bytes - sizeof magic));
  const auto version = head.num<uint32_t>();
  head.num<uint32_t>();
  const auto body = head.num<uint64_t>();
  if (version != format_version)
    return failed(fault::other_version, "format version " + std::to_string(version) +
                                            ", this kvrelay reads " +
                                            std::to_string(format_version));
  const uint64_t want = header_bytes + body + trailer_bytes;
  if (body > bytes.size() || bytes.size() < want)
    return failed(fault::truncated, std::to_string(bytes.size()) + " bytes of " +
                                        (body > bytes.size() ? std::string("more than that")
                                                             : std::to_string(want)));
  if (bytes.size() > want)
    return failed(fault::corrupt, std::to_string(bytes.size() - want) + " bytes past its end");
  reader tail(bytes.substr(want - trailer_bytes));
  if (tail.num<uint64_t>() != checksum(bytes.substr(0, want - trailer_bytes)))
    return failed(fault::corrupt, "checksum mismatch");
  pipeline_snapshot s;
  reader r(bytes.substr(header_bytes, body));
  if (!read_body(r, s)) return failed(fault::corrupt, "body does not parse (checksum matched)");
  decode_result d;
  d.snapshot = std::move(s);
  return d;
}

}  // namespace kvrelay::snapshot
