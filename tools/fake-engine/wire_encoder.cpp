// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/fake-engine/wire_encoder.hpp"

#include <msgpack.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace kvrelay::fake {
namespace {

// msgpack::packer writes into any stream with write(const char*, size_t).
struct string_sink {
  std::string* out;
  void write(const char* data, size_t size) { out->append(data, size); }
};
using packer = msgpack::packer<string_sink>;

void pack_str(packer& pk, const std::string& s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_bin(packer& pk, const std::string& b) {
  pk.pack_bin(static_cast<uint32_t>(b.size()));
  pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
}

void pack_opt_str(packer& pk, const std::optional<std::string>& s) {
  if (s) pack_str(pk, *s); else pk.pack_nil();
}

void pack_opt_int(packer& pk, const std::optional<int64_t>& v) {
  if (v) pk.pack_int64(*v); else pk.pack_nil();
}

// Minimal-width ints (msgpack-c's pack_int64/pack_uint64 choose the smallest form, as msgspec).
void pack_hash(packer& pk, const fake_hash& h) {
  switch (h.k) {
    case fake_hash::kind::u64: pk.pack_uint64(h.value); break;
    case fake_hash::kind::i64: pk.pack_int64(static_cast<int64_t>(h.value)); break;
    case fake_hash::kind::bin: pack_bin(pk, h.bytes); break;
  }
}

void pack_hashes(packer& pk, const std::vector<fake_hash>& hashes) {
  pk.pack_array(static_cast<uint32_t>(hashes.size()));
  for (const auto& h : hashes) pack_hash(pk, h);
}

void pack_parent(packer& pk, const std::optional<fake_hash>& parent) {
  if (parent) pack_hash(pk, *parent); else pk.pack_nil();
}

void pack_tokens(packer& pk, const fake_event& ev) {
  if (ev.token_ids_nil) { pk.pack_nil(); return; }
  if (!ev.bigram_tokens.empty()) {
    pk.pack_array(static_cast<uint32_t>(ev.bigram_tokens.size()));
    for (const auto& [a, b] : ev.bigram_tokens) {
      pk.pack_array(2);
      pk.pack_uint32(a);
      pk.pack_uint32(b);
    }
    return;
  }
  pk.pack_array(static_cast<uint32_t>(ev.token_ids.size()));
  auto digest = ev.token_digests.begin();  // in position order
  for (size_t i = 0; i < ev.token_ids.size(); ++i) {
    if (digest != ev.token_digests.end() && digest->first == i) {
      pack_str(pk, digest->second);
      ++digest;
    } else {
      pk.pack_uint32(ev.token_ids[i]);
    }
  }
}

// TensorRT-LLM's mm_keys: per block, a list of tagged maps {type: "mm_key", hash, start_offset,
// uuid?} (msgspec, omit_defaults: uuid only when set).
void pack_mm_keys(packer& pk, const std::vector<std::vector<mm_key>>& blocks) {
  pk.pack_array(static_cast<uint32_t>(blocks.size()));
  for (const auto& keys : blocks) {
    pk.pack_array(static_cast<uint32_t>(keys.size()));
    for (const auto& k : keys) {
      pk.pack_map(k.uuid ? 4 : 3);
      pack_str(pk, "type");
      pack_str(pk, "mm_key");
      pack_str(pk, "hash");
      pack_str(pk, k.hash);
      pack_str(pk, "start_offset");
      pk.pack_int64(k.start_offset);
      if (k.uuid) {
        pack_str(pk, "uuid");
        pack_str(pk, *k.uuid);
      }
    }
  }
}

void pack_extra_keys(packer& pk, const std::optional<std::vector<block_extra_keys>>& keys) {
  if (!keys) { pk.pack_nil(); return; }
  pk.pack_array(static_cast<uint32_t>(keys->size()));
  for (const auto& block : *keys) {
    if (!block) { pk.pack_nil(); continue; }
    pk.pack_array(static_cast<uint32_t>(block->size()));
    for (const auto& k : *block) {
      switch (k.k) {
        case extra_key::kind::str: pack_str(pk, k.text); break;
        case extra_key::kind::integer: pk.pack_int64(k.number); break;
        case extra_key::kind::bin: pack_bin(pk, k.text); break;
        case extra_key::kind::mm_pair:
          pk.pack_array(2);
          pack_str(pk, k.text);
          pk.pack_int64(k.number);
          break;
      }
    }
  }
}

// Number of positional fields after the tag that each tuple era writes (spec §0 tables).
size_t stored_fields(wire_era era) {
  switch (era) {
    case wire_era::a: case wire_era::b: case wire_era::s1: return 5;
    case wire_era::c: case wire_era::s2: return 6;
    case wire_era::d: return 7;
    case wire_era::e: return 8;
    case wire_era::f: return 9;
    case wire_era::atom: return 12;  // G's 11 + token_offset
    default: return 11;  // G, ATOM #869
  }
}

size_t removed_fields(wire_era era) {
  switch (era) {
    case wire_era::a: case wire_era::b: case wire_era::s1: return 1;
    case wire_era::c: case wire_era::d: case wire_era::e: case wire_era::s2: return 2;
    default: return 3;  // F, G
  }
}

// ATOM #869 defaults group_idx to 0; everyone else to nil.
void pack_group(packer& pk, const fake_event& ev, wire_era era) {
  if (era == wire_era::atom0 && !ev.group_idx) {
    pk.pack_int64(0);
    return;
  }
  pack_opt_int(pk, ev.group_idx);
}

void encode_stored_tuple(packer& pk, const fake_event& ev, wire_era era) {
  const size_t n = stored_fields(era);
  // SGLang's salted subclass appends a metadata map after medium (era S3 on the wire), after
  // component_types when that is on (slot 7).
  const bool salt_map = era == wire_era::s2 && ev.cache_salt.has_value();
  const bool components = era == wire_era::s2 && ev.component_types.has_value();
  pk.pack_array(static_cast<uint32_t>(1 + n + (salt_map ? 1 : 0) + (components ? 1 : 0)));
  pack_str(pk, "BlockStored");
  pack_hashes(pk, ev.block_hashes);
  pack_parent(pk, ev.parent);
  pack_tokens(pk, ev);
  pk.pack_int64(ev.block_size);
  pack_opt_int(pk, ev.lora_id);
  if (n >= 6) pack_opt_str(pk, ev.medium);
  if (components) {
    pk.pack_array(static_cast<uint32_t>(ev.component_types->size()));
    for (const auto& c : *ev.component_types) pack_str(pk, c);
  }
  if (salt_map) {
    pk.pack_map(1);
    pack_str(pk, "cache_salt");
    pack_str(pk, *ev.cache_salt);
  }
  if (n >= 7) pack_opt_str(pk, ev.lora_name);
  if (n >= 8) pack_extra_keys(pk, ev.extra_keys);
  if (n >= 9) pack_group(pk, ev, era);
  if (n >= 11) {
    pack_opt_str(pk, ev.spec_kind);
    pack_opt_int(pk, ev.sliding_window);
  }
  if (n >= 12) pack_opt_int(pk, ev.token_offset);
}

void encode_removed_tuple(packer& pk, const fake_event& ev, wire_era era) {
  const size_t n = removed_fields(era);
  pk.pack_array(static_cast<uint32_t>(1 + n));
  pack_str(pk, "BlockRemoved");
  pack_hashes(pk, ev.block_hashes);
  if (n >= 2) pack_opt_str(pk, ev.medium);
  if (n >= 3) pack_group(pk, ev, era);
}

// msgspec map structs with omit_defaults: fields without a default are always written (nil
// included); defaulted fields only when not None. Key order = declaration order.
void encode_stored_map(packer& pk, const fake_event& ev, wire_era era) {
  const bool sglang = era == wire_era::s4;
  const bool trt = era == wire_era::trt;
  const bool with_locality = (era == wire_era::i || trt) && ev.locality;
  uint32_t count = 8;  // type, block_hashes, parent, token_ids, block_size, lora_id, medium, +1
  if (sglang) {
    count = 7 + (ev.cache_salt ? 1 : 0);
  } else {
    count += (ev.extra_keys ? 1 : 0) + (ev.group_idx ? 1 : 0) + (ev.spec_kind ? 1 : 0) +
             (ev.sliding_window ? 1 : 0) + (with_locality ? 1 : 0) +
             (era == wire_era::i && ev.origin ? 1 : 0) +
             (era == wire_era::i && ev.session_id ? 1 : 0) + (trt && ev.mm_keys ? 1 : 0);
  }
  pk.pack_map(count);
  pack_str(pk, "type");
  pack_str(pk, "BlockStored");
  pack_str(pk, "block_hashes");
  pack_hashes(pk, ev.block_hashes);
  pack_str(pk, "parent_block_hash");
  pack_parent(pk, ev.parent);
  pack_str(pk, "token_ids");
  pack_tokens(pk, ev);
  pack_str(pk, "block_size");
  pk.pack_int64(ev.block_size);
  pack_str(pk, "lora_id");
  pack_opt_int(pk, ev.lora_id);
  pack_str(pk, "medium");
  pack_opt_str(pk, ev.medium);
  if (sglang) {
    if (ev.cache_salt) {
      pack_str(pk, "cache_salt");
      pack_str(pk, *ev.cache_salt);
    }
    return;
  }
  pack_str(pk, "lora_name");
  pack_opt_str(pk, ev.lora_name);
  if (ev.extra_keys) {
    pack_str(pk, "extra_keys");
    pack_extra_keys(pk, ev.extra_keys);
  }
  if (ev.group_idx) {
    pack_str(pk, "group_idx");
    pk.pack_int64(*ev.group_idx);
  }
  if (ev.spec_kind) {
    pack_str(pk, "kv_cache_spec_kind");
    pack_str(pk, *ev.spec_kind);
  }
  if (ev.sliding_window) {
    pack_str(pk, "kv_cache_spec_sliding_window");
    pk.pack_int64(*ev.sliding_window);
  }
  if (with_locality) {
    pack_str(pk, "locality");
    pack_str(pk, *ev.locality);
  }
  if (era == wire_era::i && ev.origin) {
    pack_str(pk, "origin");
    pack_str(pk, *ev.origin);
  }
  if (era == wire_era::i && ev.session_id) {
    pack_str(pk, "session_id");
    pack_str(pk, *ev.session_id);
  }
  if (trt && ev.mm_keys) {
    pack_str(pk, "mm_keys");
    pack_mm_keys(pk, *ev.mm_keys);
  }
}

void encode_removed_map(packer& pk, const fake_event& ev, wire_era era) {
  const bool sglang = era == wire_era::s4;
  const bool with_locality = (era == wire_era::i || era == wire_era::trt) && ev.locality;
  uint32_t count = 3;
  if (!sglang)
    count += (ev.group_idx ? 1 : 0) + (with_locality ? 1 : 0) +
             (era == wire_era::i && ev.remaining_copy_counts ? 1 : 0);
  pk.pack_map(count);
  pack_str(pk, "type");
  pack_str(pk, "BlockRemoved");
  pack_str(pk, "block_hashes");
  pack_hashes(pk, ev.block_hashes);
  pack_str(pk, "medium");
  pack_opt_str(pk, ev.medium);
  if (sglang) return;
  if (ev.group_idx) {
    pack_str(pk, "group_idx");
    pk.pack_int64(*ev.group_idx);
  }
  if (with_locality) {
    pack_str(pk, "locality");
    pack_str(pk, *ev.locality);
  }
  if (era == wire_era::i && ev.remaining_copy_counts) {
    pack_str(pk, "remaining_copy_counts");
    pk.pack_array(static_cast<uint32_t>(ev.remaining_copy_counts->size()));
    for (uint32_t c : *ev.remaining_copy_counts) pk.pack_uint32(c);
  }
}

void encode_tag_only(packer& pk, const std::string& tag, bool map) {
  if (map) {
    pk.pack_map(1);
    pack_str(pk, "type");
  } else {
    pk.pack_array(1);
  }
  pack_str(pk, tag);
}

void encode_into(packer& pk, const fake_event& ev, wire_era era);

// Re-packs the first N slots of the full tuple: the slow path is fine for a fault injector.
void encode_truncated(packer& pk, const fake_event& ev, wire_era era) {
  fake_event full = ev;
  full.truncate_slots.reset();
  std::string bytes;
  string_sink sink{&bytes};
  packer inner(sink);
  encode_into(inner, full, era);
  const auto oh = msgpack::unpack(bytes.data(), bytes.size());
  const auto& arr = oh.get().via.array;
  const uint32_t n = std::min<uint32_t>(arr.size, static_cast<uint32_t>(
                                                      std::min<size_t>(*ev.truncate_slots, 0xffffffffu)));
  pk.pack_array(n);
  for (uint32_t i = 0; i < n; ++i) pk.pack(arr.ptr[i]);
}

void encode_into(packer& pk, const fake_event& ev, wire_era era) {
  const bool map = is_map_era(era);
  if (ev.truncate_slots && !map) {
    encode_truncated(pk, ev, era);
    return;
  }
  switch (ev.t) {
    case fake_event::type::stored:
      if (map) encode_stored_map(pk, ev, era); else encode_stored_tuple(pk, ev, era);
      break;
    case fake_event::type::removed:
      if (map) encode_removed_map(pk, ev, era); else encode_removed_tuple(pk, ev, era);
      break;
    case fake_event::type::cleared:
      if (era == wire_era::atom0 || era == wire_era::atom) {
        pk.pack_array(2);  // ATOM: [tag, medium] (nil: every medium)
        pack_str(pk, "AllBlocksCleared");
        pack_opt_str(pk, ev.cleared_medium);
        break;
      }
      encode_tag_only(pk, "AllBlocksCleared", map);
      break;
    case fake_event::type::unknown: encode_tag_only(pk, ev.unknown_tag, map); break;
  }
}

}  // namespace

std::optional<wire_era> parse_era(const std::string& text) {
  std::string t;
  for (char c : text) t.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  static const std::pair<const char*, wire_era> names[] = {
      {"A", wire_era::a},   {"B", wire_era::b},   {"C", wire_era::c},   {"D", wire_era::d},
      {"E", wire_era::e},   {"F", wire_era::f},   {"G", wire_era::g},   {"H", wire_era::h},
      {"I", wire_era::i},   {"S1", wire_era::s1}, {"S2", wire_era::s2}, {"S3", wire_era::s2},
      {"S4", wire_era::s4}, {"TRT", wire_era::trt}, {"ATOM0", wire_era::atom0},
      {"ATOM", wire_era::atom}};
  for (const auto& [name, era] : names) {
    if (t == name) return era;
  }
  return std::nullopt;
}

const char* era_name(wire_era era) noexcept {
  switch (era) {
    case wire_era::a: return "A";
    case wire_era::b: return "B";
    case wire_era::c: return "C";
    case wire_era::d: return "D";
    case wire_era::e: return "E";
    case wire_era::f: return "F";
    case wire_era::g: return "G";
    case wire_era::h: return "H";
    case wire_era::i: return "I";
    case wire_era::s1: return "S1";
    case wire_era::s2: return "S2";
    case wire_era::s4: return "S4";
    case wire_era::trt: return "TRT";
    case wire_era::atom0: return "ATOM0";
    case wire_era::atom: return "ATOM";
  }
  return "?";
}

bool is_sglang(wire_era era) noexcept {
  return era == wire_era::s1 || era == wire_era::s2 || era == wire_era::s4;
}

bool is_map_era(wire_era era) noexcept {
  return era == wire_era::h || era == wire_era::i || era == wire_era::s4 || era == wire_era::trt;
}

bool is_unsequenced(wire_era era) noexcept { return era == wire_era::atom0; }

void encode_event(const fake_event& ev, wire_era era, std::string& out) {
  string_sink sink{&out};
  packer pk(sink);
  encode_into(pk, ev, era);
}

std::string encode_event(const fake_event& ev, wire_era era) {
  std::string out;
  encode_event(ev, era, out);
  return out;
}

std::string encode_batch(const std::vector<fake_event>& events, const encode_options& opt) {
  std::string out;
  out.reserve(64 + events.size() * 96);
  string_sink sink{&out};
  packer pk(sink);
  // Era A (vLLM v0.9.0) and the bin-wrapping storage publisher have the 2-element envelope;
  // every later engine adds the DP rank.
  const bool with_rank = opt.era != wire_era::a && !opt.bin_wrapped;
  if (opt.map_envelope) {
    pk.pack_map(with_rank ? 3 : 2);
    pack_str(pk, "ts");
  } else {
    pk.pack_array(with_rank ? 3 : 2);
  }
  pk.pack_double(opt.ts);
  if (opt.map_envelope) pack_str(pk, "events");
  pk.pack_array(static_cast<uint32_t>(events.size()));
  std::string wrapped;
  for (const auto& ev : events) {
    if (!opt.bin_wrapped) {
      encode_into(pk, ev, opt.era);
      continue;
    }
    wrapped.clear();
    encode_event(ev, opt.era, wrapped);
    pack_bin(pk, wrapped);
  }
  if (with_rank) {
    if (opt.map_envelope) pack_str(pk, "data_parallel_rank");
    pk.pack_int64(opt.dp_rank);
  }
  return out;
}

std::string to_hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 3);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i) out.push_back(' ');
    const auto b = static_cast<unsigned char>(bytes[i]);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

std::optional<std::string> from_hex(const std::string& text) {
  std::string out;
  int high = -1;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else return std::nullopt;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<char>((high << 4) | v));
      high = -1;
    }
  }
  if (high >= 0) return std::nullopt;
  return out;
}

}  // namespace kvrelay::fake
