// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/emitter/unit_wire.hpp"

#include <cassert>
#include <cstring>
#include <string_view>
#include <utility>

#include "actors/emitter/unit_sequencer.hpp"
#include "base/fingerprint.hpp"

namespace kvrelay::emitter {

namespace {

// Protobuf's wire format: a tag is (field << 3) | type; 0 a varint, 2 a length-delimited run.
constexpr uint8_t tag(unsigned field, unsigned type) {
  return static_cast<uint8_t>((field << 3) | type);
}
// CacheStateUpdate
constexpr uint8_t update_timestamp = tag(5, 0);
constexpr uint8_t update_prefix = tag(6, 2);
// PrefixEntry
constexpr uint8_t entry_hash = tag(1, 2);
constexpr uint8_t entry_tokens = tag(2, 0);
constexpr uint8_t entry_tier = tag(5, 0);
constexpr uint8_t entry_adapter = tag(6, 2);

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// int32 and enum fields: a negative value is sign-extended to ten bytes, as protobuf writes it.
uint64_t int32_wire(int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

size_t string_field_size(std::string_view s) {
  return s.empty() ? 0 : 1 + varint_size(s.size()) + s.size();
}

uint8_t* put_string_field(uint8_t* p, uint8_t t, std::string_view s) {
  if (s.empty()) return p;
  *p++ = t;
  p = put_varint(p, s.size());
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

// UW2's rough size of an entry.
size_t rough_bytes(const std::string& adapter) { return 24 + adapter.size(); }

}  // namespace

struct unit_wire::entry_view {
  uint64_t fingerprint;
  int32_t tokens;  // 0 for an eviction: not written
  int32_t tier;    // as above
  const std::string* adapter;

  size_t body_size() const {
    size_t n = 1 + 1 + 8;
    if (tokens != 0) n += 1 + varint_size(int32_wire(tokens));
    if (tier != 0) n += 1 + varint_size(int32_wire(tier));
    return n + string_field_size(*adapter);
  }
};

unit_wire::unit_wire(const replica_identity& id, size_t max_entries, size_t max_bytes,
                     emit_unit_ptr unit, bool with_expirations)
    : max_entries_(max_entries == 0 ? 1 : max_entries),
      max_bytes_(max_bytes),
      unit_(std::move(unit)),
      sections_(1 + unit_->downgrades.size() + (with_expirations ? 1 : 0)) {
  const std::string_view fields[] = {id.replica_id, id.model_id, id.tenant_id, id.hash_scheme};
  size_t n = 0;
  for (auto f : fields) n += string_field_size(f);
  identity_.resize(n);
  auto* p = reinterpret_cast<uint8_t*>(identity_.data());
  for (unsigned i = 0; i < 4; ++i) p = put_string_field(p, tag(i + 1, 2), fields[i]);
}

size_t unit_wire::section_size(size_t s) const {
  if (s == 0) return unit_->adds.size();
  if (s == 1 + unit_->downgrades.size()) return unit_->evicts.size();
  return unit_->downgrades[s - 1].entries.size();
}

int64_t unit_wire::section_ts(size_t s) const {
  if (s == 0) return wire_timestamp_us(unit_->adds_ts_us);
  if (s == 1 + unit_->downgrades.size()) return expired_ts_us;
  return wire_timestamp_us(unit_->downgrades[s - 1].ts_us);
}

unit_wire::entry_view unit_wire::entry(size_t s, size_t i) const {
  if (s == 1 + unit_->downgrades.size()) {
    const prefix_evict& e = unit_->evicts[i];
    return {e.fingerprint, 0, 0, &e.adapter};
  }
  const prefix_add& a = s == 0 ? unit_->adds[i] : unit_->downgrades[s - 1].entries[i];
  return {a.fingerprint, static_cast<int32_t>(a.token_count), static_cast<int32_t>(a.t),
          &a.adapter};
}

size_t unit_wire::next_size() {
  while (section_ < sections_ && pos_ >= section_size(section_)) {
    ++section_;
    pos_ = 0;
  }
  if (section_ >= sections_) return size_ = 0;
  const size_t n = section_size(section_);
  const int64_t ts = section_ts(section_);
  size_ = identity_.size() + (ts != 0 ? 1 + varint_size(static_cast<uint64_t>(ts)) : 0);
  size_t rough = 0;
  end_ = pos_;
  while (end_ < n && end_ - pos_ < max_entries_ && (end_ == pos_ || rough < max_bytes_)) {
    const entry_view e = entry(section_, end_++);
    const size_t body = e.body_size();
    size_ += 1 + varint_size(body) + body;
    rough += rough_bytes(*e.adapter);
  }
  return size_;
}

void unit_wire::write(uint8_t* out) {
  assert(size_ != 0);  // next_size() chose this message
  std::memcpy(out, identity_.data(), identity_.size());
  uint8_t* p = out + identity_.size();
  if (const int64_t ts = section_ts(section_); ts != 0) {
    *p++ = update_timestamp;
    p = put_varint(p, static_cast<uint64_t>(ts));
  }
  for (; pos_ < end_; ++pos_) {
    const entry_view e = entry(section_, pos_);
    *p++ = update_prefix;
    p = put_varint(p, e.body_size());
    *p++ = entry_hash;
    *p++ = 8;
    fingerprint::write_be8(e.fingerprint, reinterpret_cast<char*>(p));
    p += 8;
    if (e.tokens != 0) {
      *p++ = entry_tokens;
      p = put_varint(p, int32_wire(e.tokens));
    }
    if (e.tier != 0) {
      *p++ = entry_tier;
      p = put_varint(p, int32_wire(e.tier));
    }
    p = put_string_field(p, entry_adapter, *e.adapter);
  }
  assert(p == out + size_);  // next_size() and write() agree on every byte
  size_ = 0;
}

}  // namespace kvrelay::emitter
