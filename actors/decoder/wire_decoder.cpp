// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// One file on purpose (~1.3 k lines): the cursor, the token fast path, the field tables and the
// parser share types no other file should see, and the hot path relies on them inlining.
#include "actors/decoder/wire_decoder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "base/big_endian.hpp"
#include "base/msgpack_int.hpp"

namespace kvrelay {

const char* to_string(decode_error e) noexcept {
  switch (e) {
    case decode_error::none: return "none";
    case decode_error::not_msgpack: return "not_msgpack";
    case decode_error::truncated: return "truncated";
    case decode_error::trailing_bytes: return "trailing_bytes";
    case decode_error::too_large: return "too_large";
    case decode_error::too_many_events: return "too_many_events";
    case decode_error::too_many_hashes: return "too_many_hashes";
    case decode_error::too_many_tokens: return "too_many_tokens";
    case decode_error::bad_envelope: return "bad_envelope";
    case decode_error::bad_timestamp: return "bad_timestamp";
    case decode_error::bad_events: return "bad_events";
    case decode_error::bad_event: return "bad_event";
    case decode_error::bad_tag: return "bad_tag";
    case decode_error::missing_field: return "missing_field";
    case decode_error::bad_hash: return "bad_hash";
    case decode_error::bad_parent: return "bad_parent";
    case decode_error::bad_tokens: return "bad_tokens";
    case decode_error::bad_block_size: return "bad_block_size";
    case decode_error::bad_lora: return "bad_lora";
    case decode_error::bad_medium: return "bad_medium";
    case decode_error::bad_extra_keys: return "bad_extra_keys";
    case decode_error::bad_group: return "bad_group";
    case decode_error::bad_spec: return "bad_spec";
    case decode_error::bad_origin: return "bad_origin";
    case decode_error::bad_copy_counts: return "bad_copy_counts";
    case decode_error::bad_components: return "bad_components";
  }
  return "unknown";
}

const char* to_string(event_kind k) noexcept {
  switch (k) {
    case event_kind::stored: return "stored";
    case event_kind::removed: return "removed";
    case event_kind::cleared: return "cleared";
    case event_kind::unknown: return "unknown";
  }
  return "unknown";
}

namespace {

using de = decode_error;

constexpr uint64_t int64_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr uint64_t uint32_max = std::numeric_limits<uint32_t>::max();

// Released events kept for reuse. Bounded so one huge batch does not pin its memory forever.
constexpr size_t max_spare_events = 4096;
// An unknown medium's text is kept for its counter and warning; longer strings are cut.
constexpr size_t max_medium_text = 64;


using wire_int = msgpack_int;  // base/msgpack_int.hpp

bool equals(std::string_view a, const char* b) { return a == std::string_view(b); }

bool iequals_lower(std::string_view a, const char* lower) {
  const std::string_view b(lower);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

/// A bounds-checked reader over msgpack bytes. Every typed read either consumes one whole value
/// and returns none, returns `on_type` without consuming anything when the value has another
/// type, or returns truncated when a header or body runs past the end. Count headers are checked
/// against the bytes left (every element takes at least one byte) before anyone sizes a buffer
/// from them, so a lying length can never cause an allocation.
class cursor {
 public:
  cursor(const uint8_t* begin, const uint8_t* stop) : p(begin), end(stop) {}

  size_t left() const { return static_cast<size_t>(end - p); }
  bool at_end() const { return p == end; }
  static bool array_header(uint8_t b) { return (b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd; }
  static bool str_header(uint8_t b) { return (b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb); }

  bool take_nil() {
    if (p != end && *p == 0xc0) {
      ++p;
      return true;
    }
    return false;
  }

  de array(uint32_t& n, de on_type) {
    if (p == end) return de::truncated;
    const uint8_t b = *p;
    size_t hdr;
    if ((b & 0xf0) == 0x90) {
      n = b & 0x0fu;
      hdr = 1;
    } else if (b == 0xdc) {
      if (left() < 3) return de::truncated;
      n = load_be16(p + 1);
      hdr = 3;
    } else if (b == 0xdd) {
      if (left() < 5) return de::truncated;
      n = load_be32(p + 1);
      hdr = 5;
    } else {
      return on_type;
    }
    if (n > left() - hdr) return de::truncated;
    p += hdr;
    return de::none;
  }

  de map(uint32_t& n, de on_type) {
    if (p == end) return de::truncated;
    const uint8_t b = *p;
    size_t hdr;
    if ((b & 0xf0) == 0x80) {
      n = b & 0x0fu;
      hdr = 1;
    } else if (b == 0xde) {
      if (left() < 3) return de::truncated;
      n = load_be16(p + 1);
      hdr = 3;
    } else if (b == 0xdf) {
      if (left() < 5) return de::truncated;
      n = load_be32(p + 1);
      hdr = 5;
    } else {
      return on_type;
    }
    if (uint64_t{n} * 2 > left() - hdr) return de::truncated;
    p += hdr;
    return de::none;
  }

  /// str (and bin when allow_bin) as a view into the payload.
  de raw(std::string_view& s, bool allow_bin, de on_type) {
    if (p == end) return de::truncated;
    const uint8_t b = *p;
    size_t hdr;
    size_t len;
    if ((b & 0xe0) == 0xa0) {
      hdr = 1;
      len = b & 0x1fu;
    } else if (b == 0xd9 || (allow_bin && b == 0xc4)) {
      if (left() < 2) return de::truncated;
      hdr = 2;
      len = p[1];
    } else if (b == 0xda || (allow_bin && b == 0xc5)) {
      if (left() < 3) return de::truncated;
      hdr = 3;
      len = load_be16(p + 1);
    } else if (b == 0xdb || (allow_bin && b == 0xc6)) {
      if (left() < 5) return de::truncated;
      hdr = 5;
      len = load_be32(p + 1);
    } else {
      return on_type;
    }
    if (len > left() - hdr) return de::truncated;
    s = std::string_view(reinterpret_cast<const char*>(p + hdr), len);
    p += hdr + len;
    return de::none;
  }

  de str(std::string_view& s, de on_type) { return raw(s, false, on_type); }

  de integer(wire_int& v, de on_type) {
    size_t used = 0;
    switch (read_msgpack_int(p, left(), v, used)) {
      case msgpack_read::ok: p += used; return de::none;
      case msgpack_read::truncated: return de::truncated;
      case msgpack_read::not_an_integer: break;
    }
    return on_type;
  }

  /// float64, float32 or any integer, as a double.
  de number(double& d, de on_type) {
    if (p == end) return de::truncated;
    const uint8_t b = *p;
    if (b == 0xcb) {
      if (left() < 9) return de::truncated;
      const uint64_t bits = load_be64(p + 1);
      std::memcpy(&d, &bits, sizeof d);
      p += 9;
      return de::none;
    }
    if (b == 0xca) {
      if (left() < 5) return de::truncated;
      const uint32_t bits = load_be32(p + 1);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      d = f;
      p += 5;
      return de::none;
    }
    wire_int v;
    const de r = integer(v, on_type);
    if (r != de::none) return r;
    d = v.negative ? static_cast<double>(static_cast<int64_t>(v.bits))
                   : static_cast<double>(v.bits);
    return de::none;
  }

  /// Skips `count` whole values of any type. Iterative (a pending-value counter instead of
  /// recursion), so deeply nested input cannot exhaust the stack.
  de skip(uint64_t count = 1) {
    uint64_t pending = count;
    while (pending != 0) {
      if (p == end) return de::truncated;
      --pending;
      const uint8_t b = *p;
      size_t hdr = 1;
      uint64_t body = 0;
      uint64_t children = 0;
      const size_t avail = left();
      if (b <= 0x7f || b >= 0xe0) {
        // fixint
      } else if (b <= 0x8f) {
        children = 2u * (b & 0x0fu);
      } else if (b <= 0x9f) {
        children = b & 0x0fu;
      } else if (b <= 0xbf) {
        body = b & 0x1fu;
      } else {
        switch (b) {
          case 0xc0: case 0xc2: case 0xc3: break;
          case 0xc1: return de::not_msgpack;
          case 0xc4: case 0xd9:
            if (avail < 2) return de::truncated;
            hdr = 2; body = p[1]; break;
          case 0xc5: case 0xda:
            if (avail < 3) return de::truncated;
            hdr = 3; body = load_be16(p + 1); break;
          case 0xc6: case 0xdb:
            if (avail < 5) return de::truncated;
            hdr = 5; body = load_be32(p + 1); break;
          case 0xc7:  // ext8: len8, type, data
            if (avail < 3) return de::truncated;
            hdr = 3; body = p[1]; break;
          case 0xc8:
            if (avail < 4) return de::truncated;
            hdr = 4; body = load_be16(p + 1); break;
          case 0xc9:
            if (avail < 6) return de::truncated;
            hdr = 6; body = load_be32(p + 1); break;
          case 0xca: body = 4; break;
          case 0xcb: body = 8; break;
          case 0xcc: case 0xd0: body = 1; break;
          case 0xcd: case 0xd1: body = 2; break;
          case 0xce: case 0xd2: body = 4; break;
          case 0xcf: case 0xd3: body = 8; break;
          case 0xd4: hdr = 2; body = 1; break;  // fixext: type byte, then data
          case 0xd5: hdr = 2; body = 2; break;
          case 0xd6: hdr = 2; body = 4; break;
          case 0xd7: hdr = 2; body = 8; break;
          case 0xd8: hdr = 2; body = 16; break;
          case 0xdc:
            if (avail < 3) return de::truncated;
            hdr = 3; children = load_be16(p + 1); break;
          case 0xdd:
            if (avail < 5) return de::truncated;
            hdr = 5; children = load_be32(p + 1); break;
          case 0xde:
            if (avail < 3) return de::truncated;
            hdr = 3; children = 2u * load_be16(p + 1); break;
          case 0xdf:
            if (avail < 5) return de::truncated;
            hdr = 5; children = 2u * uint64_t{load_be32(p + 1)}; break;
          default: return de::not_msgpack;  // unreachable: every byte is covered above
        }
      }
      if (avail < hdr || body > avail - hdr) return de::truncated;
      p += hdr + body;
      pending += children;
      // Each pending value needs at least one byte.
      if (pending > left()) return de::truncated;
    }
    return de::none;
  }

  const uint8_t* p;
  const uint8_t* end;
};

// The token encodings the fast path reads: positive fixint, uint8, uint16, uint32. Everything
// else takes read_token().
inline bool fast_token(uint32_t b) noexcept { return b <= 0x7f || b - 0xccu <= 2; }

// Payload bytes after such a header byte: 0 (fixint), 1, 2, 4 (any other byte gives a width
// that fast_token() has refused). Arithmetic, not a table: the width says where the next header
// is, so it lies on the token loop's dependency chain, and a table lookup put a second load
// (~5 cycles) on it for every token.
inline uint32_t token_payload(uint32_t b) noexcept {
  return b <= 0x7f ? 0 : 1u << ((b - 0xccu) & 3);
}

// A fast token's value, `w` = token_payload(b) payload bytes after its header `b` at `p`.
inline uint32_t token_value(const uint8_t* p, uint32_t b, uint32_t w) noexcept {
  return w == 0 ? b : load_be32(p + 1) >> (32 - 8 * w);  // one load + bswap, no branch
}

/// One token id (a non-negative int that fits u32) at `p`; advances `p`.
inline de read_token(const uint8_t*& p, const uint8_t* end, uint32_t& out) {
  const uint8_t b = *p;  // caller checked p != end
  if (b <= 0x7f) {
    out = b;
    ++p;
    return de::none;
  }
  const size_t avail = static_cast<size_t>(end - p);
  uint64_t u;
  switch (b) {
    case 0xcc:
      if (avail < 2) return de::truncated;
      out = p[1];
      p += 2;
      return de::none;
    case 0xcd:
      if (avail < 3) return de::truncated;
      out = load_be16(p + 1);
      p += 3;
      return de::none;
    case 0xce:
      if (avail < 5) return de::truncated;
      out = load_be32(p + 1);
      p += 5;
      return de::none;
    case 0xcf:
      if (avail < 9) return de::truncated;
      u = load_be64(p + 1);
      if (u > uint32_max) return de::bad_tokens;
      out = static_cast<uint32_t>(u);
      p += 9;
      return de::none;
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
      // Non-minimal signed encodings of non-negative values are legal msgpack.
      cursor c(p, end);
      wire_int v;
      const de r = c.integer(v, de::bad_tokens);
      if (r != de::none) return r;
      if (v.negative || v.bits > uint32_max) return de::bad_tokens;
      out = static_cast<uint32_t>(v.bits);
      p = c.p;
      return de::none;
    }
    default:
      return de::bad_tokens;  // negative fixint, float, str, ...
  }
}

bool istarts_with_lower(std::string_view a, const char* lower_prefix) {
  const std::string_view b(lower_prefix);
  return a.size() >= b.size() && iequals_lower(a.substr(0, b.size()), lower_prefix);
}

// Every medium seen in the wild, case-insensitive (engine-wire §3 "medium values seen"): vLLM,
// SGLang, LMCache, and the aliases Dynamo normalises. An unknown value is never guessed at.
medium_info classify_medium(std::string_view s) {
  struct known_medium {
    const char* lower;
    medium_id id;
    tier t;
  };
  static const known_medium table[] = {
      {"gpu", medium_id::gpu, tier::t1},           {"cpu", medium_id::cpu, tier::t2},
      {"cpu_pinned", medium_id::cpu_pinned, tier::t2}, {"disk", medium_id::disk, tier::t3},
      {"fs", medium_id::fs, tier::t3},             {"obj", medium_id::obj, tier::t3},
      {"storage", medium_id::storage, tier::t3},   {"external", medium_id::external, tier::t3},
      {"lmcache-l1", medium_id::lmcache_l1, tier::t2},
      {"lmcache-l2", medium_id::lmcache_l2, tier::t3},
      {"device", medium_id::device, tier::t1},     {"host", medium_id::host, tier::t2},
      {"cpu_tier1", medium_id::cpu_tier1, tier::t2}, {"cpu_tier2", medium_id::cpu_tier2, tier::t3},
      {"nvme", medium_id::nvme, tier::t3},         {"ssd", medium_id::ssd, tier::t3},
      {"network", medium_id::network, tier::t3},   {"remote", medium_id::remote, tier::t3},
      {"shared", medium_id::shared, tier::t3},
  };
  medium_info m;
  for (const known_medium& k : table) {
    if (iequals_lower(s, k.lower)) {
      m.id = k.id;
      m.tier = k.t;
      return m;
    }
  }
  // LMCache's coordinator names its L2 tiers "lmcache-l2-<backend>".
  if (istarts_with_lower(s, "lmcache-l2-")) {
    m.id = medium_id::lmcache_l2;
    m.tier = tier::t3;
    return m;
  }
  m.id = medium_id::unknown;
  m.tier = tier::t3;
  m.text.assign(s.data(), std::min(s.size(), max_medium_text));
  return m;
}

group_kind classify_kind(std::string_view s) {
  if (iequals_lower(s, "full_attention") || iequals_lower(s, "mla_attention") ||
      iequals_lower(s, "sink_full_attention"))
    return group_kind::main;
  return group_kind::other;
}

/// Field slots shared by the array and map forms of events.
enum class field : uint8_t {
  unknown, type, block_hashes, parent, token_ids, block_size, lora_id, medium, lora_name,
  extra_keys, group_idx, spec_kind, spec_window, cache_salt, locality, origin, remaining_copies,
  mm_keys, component_types,
};

field field_of(std::string_view k) {
  switch (k.size()) {
    case 4: return equals(k, "type") ? field::type : field::unknown;
    case 6:
      if (equals(k, "medium")) return field::medium;
      if (equals(k, "origin")) return field::origin;
      return field::unknown;
    case 7:
      if (equals(k, "lora_id")) return field::lora_id;
      if (equals(k, "mm_keys")) return field::mm_keys;
      return field::unknown;
    case 8: return equals(k, "locality") ? field::locality : field::unknown;
    case 9:
      if (equals(k, "token_ids")) return field::token_ids;
      if (equals(k, "lora_name")) return field::lora_name;
      if (equals(k, "group_idx")) return field::group_idx;
      return field::unknown;
    case 10:
      if (equals(k, "block_size")) return field::block_size;
      if (equals(k, "extra_keys")) return field::extra_keys;
      if (equals(k, "cache_salt")) return field::cache_salt;
      return field::unknown;
    case 12: return equals(k, "block_hashes") ? field::block_hashes : field::unknown;
    case 17: return equals(k, "parent_block_hash") ? field::parent : field::unknown;
    case 18: return equals(k, "kv_cache_spec_kind") ? field::spec_kind : field::unknown;
    case 21:
      return equals(k, "remaining_copy_counts") ? field::remaining_copies : field::unknown;
    case 28:
      return equals(k, "kv_cache_spec_sliding_window") ? field::spec_window : field::unknown;
    case 15: return equals(k, "component_types") ? field::component_types : field::unknown;
    default: return field::unknown;
  }
}

// Array slot → field for BlockStored (engine-wire §3 table).
constexpr field stored_slots[] = {
    field::type,      field::block_hashes, field::parent,    field::token_ids,
    field::block_size, field::lora_id,     field::medium,    field::lora_name,
    field::extra_keys, field::group_idx,   field::spec_kind, field::spec_window,
};
constexpr field removed_slots[] = {field::type, field::block_hashes, field::medium,
                                   field::group_idx};

event_kind tag_of(std::string_view t) {
  if (equals(t, "BlockStored")) return event_kind::stored;
  if (equals(t, "BlockRemoved")) return event_kind::removed;
  if (equals(t, "AllBlocksCleared")) return event_kind::cleared;
  return event_kind::unknown;
}

/// What one BlockStored carried besides its typed fields, resolved after all fields are read
/// (map keys come in any order, and extra_keys is judged against lora_name).
struct stored_extras {
  bool has_hashes = false;
  bool has_tokens = false;
  bool has_block_size = false;
  bool salted = false;
  bool components = false;      // SGLang component_types was present (WD5)
  bool full_component = false;  //   and named the full-attention component
  const uint8_t* extra_begin = nullptr;  // extra_keys bytes, validated as nil or array
  const uint8_t* extra_end = nullptr;
  const uint8_t* mm_begin = nullptr;     // TensorRT-LLM mm_keys bytes, likewise
  const uint8_t* mm_end = nullptr;
};

class parser {
 public:
  parser(const wire_decoder::limits& lim, kv_event_batch& out, std::vector<kv_event>& spare,
         std::vector<event_fault>& faults, const uint8_t* p, size_t n)
      : lim_(lim), out_(out), spare_(spare), faults_(faults), c_(p, p + n) {}

  de run() {
    de r = envelope();
    if (r == de::none && !c_.at_end()) {
      what = "bytes after the envelope";
      r = de::trailing_bytes;
    }
    return r;
  }

  size_t used = 0;              // events of out_.events holding decoded data
  const char* what = nullptr;   // short reason, for the error detail
  int64_t event_index = -1;     // failing event, -1 for the envelope

 private:
  de fail(de code, const char* why) {
    what = why;
    return code;
  }
  // A batch total went over its limit (WD1): the payload goes, not just this event.
  de fail_batch(de code, const char* why) {
    batch_limit_ = true;
    return fail(code, why);
  }

  de envelope() {
    uint32_t n;
    de r = c_.array(n, de::bad_envelope);
    if (r == de::none) {
      if (n < 2) return fail(de::bad_envelope, "envelope array has fewer than 2 elements");
      if ((r = timestamp()) != de::none) return r;
      if ((r = events()) != de::none) return r;
      if (n >= 3 && (r = rank()) != de::none) return r;
      return n > 3 ? skip(n - 3) : de::none;
    }
    if (r != de::bad_envelope) return fail(r, "envelope header");
    r = c_.map(n, de::bad_envelope);
    if (r == de::bad_envelope) return fail(r, "envelope is neither array nor map");
    if (r != de::none) return fail(r, "envelope header");
    bool have_events = false;
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view key;
      r = c_.str(key, de::bad_envelope);
      if (r == de::bad_envelope) {  // non-string key: not ours
        if ((r = skip(2)) != de::none) return r;
        continue;
      }
      if (r != de::none) return fail(r, "envelope key");
      if (equals(key, "ts")) {
        r = timestamp();
      } else if (equals(key, "events")) {
        have_events = true;
        r = events();
      } else if (equals(key, "data_parallel_rank") || equals(key, "attn_dp_rank") ||
                 equals(key, "dp_rank")) {
        r = rank();
      } else {
        r = skip(1);
      }
      if (r != de::none) return r;
    }
    if (!have_events) return fail(de::bad_envelope, "map envelope without \"events\"");
    return de::none;
  }

  de timestamp() {
    double ts = 0;
    const de r = c_.number(ts, de::bad_timestamp);
    if (r != de::none) return fail(r, "ts is not a number");
    // A broken clock must not drop the batch; 0 reads as "now" downstream.
    out_.ts = std::isfinite(ts) ? ts : 0.0;
    return de::none;
  }

  de rank() {
    wire_int v;
    const de r = c_.integer(v, de::bad_envelope);
    if (r == de::bad_envelope) {
      out_.dp_rank.reset();  // nil or foreign: ignored, as the reference does
      return skip(1);
    }
    if (r != de::none) return fail(r, "dp rank");
    int64_t rank = 0;
    if (v.to_int64(rank)) {
      out_.dp_rank = rank;
    } else {
      out_.dp_rank.reset();
    }
    return de::none;
  }

  de skip(uint64_t count) {
    const de r = c_.skip(count);
    return r == de::none ? r : fail(r, "malformed msgpack value");
  }

  de events() {
    used = 0;  // a duplicated "events" key: the last one wins
    out_.skipped_unknown = 0;
    faults_.clear();
    if (c_.take_nil()) return de::none;  // reference D21: nil events = zero events
    uint32_t n;
    const de r = c_.array(n, de::bad_events);
    if (r != de::none) return fail(r, "events is not an array");
    if (n > lim_.max_events) return fail(de::too_many_events, "too many events");
    for (uint32_t i = 0; i < n; ++i) {
      event_index = i;
      const uint8_t* const start = c_.p;
      const size_t used_before = used;
      kind_ = event_kind::unknown;
      const de e = event();
      if (e == de::none) continue;
      if (batch_limit_) return e;
      used = used_before;  // a wrapped event can fail after its inner event was counted
      // WD2: the event's own end, found from its start; bytes that are no msgpack are WD1's.
      c_.p = start;
      const de s = c_.skip(1);
      if (s != de::none) return fail(s, "malformed msgpack value");
      faults_.push_back(event_fault{i, static_cast<uint32_t>(used), kind_, e,
                                    what != nullptr ? what : to_string(e)});
      what = nullptr;
    }
    event_index = -1;
    return de::none;
  }

  kv_event& slot() {
    if (used == out_.events.size()) {
      if (!spare_.empty()) {
        out_.events.push_back(std::move(spare_.back()));
        spare_.pop_back();
      } else {
        out_.events.emplace_back();
      }
    }
    return out_.events[used];
  }

  de event() {
    // An llm-d storage publisher wraps each event, msgpack-encoded, in a bin: [ts, [bin, ...]].
    // The bin's bytes are one whole event, decoded under the same limits; no second wrapping.
    if (!wrapped_ && !c_.at_end() && (*c_.p == 0xc4 || *c_.p == 0xc5 || *c_.p == 0xc6)) {
      std::string_view inner;
      de r = c_.raw(inner, true, de::bad_event);
      if (r != de::none) return fail(r, "wrapped event");
      const cursor outer = c_;
      const auto* b = reinterpret_cast<const uint8_t*>(inner.data());
      c_ = cursor(b, b + inner.size());
      wrapped_ = true;
      r = event();
      wrapped_ = false;
      const bool whole = c_.at_end();
      c_ = outer;
      if (r != de::none) return r;
      if (!whole) return fail(de::bad_event, "bytes after a wrapped event");
      return de::none;
    }
    uint32_t n;
    de r = c_.array(n, de::bad_event);
    if (r == de::none) return array_event(n);
    if (r != de::bad_event) return fail(r, "event header");
    r = c_.map(n, de::bad_event);
    if (r == de::none) return map_event(n);
    if (r == de::bad_event) return fail(r, "event is neither array nor map");
    return fail(r, "event header");
  }

  de array_event(uint32_t n) {
    if (n == 0) return fail(de::bad_event, "empty event array");
    std::string_view tag;
    de r = c_.str(tag, de::bad_tag);
    if (r != de::none) return fail(r, "event tag is not a string");
    kind_ = tag_of(tag);
    switch (kind_) {
      case event_kind::stored: {
        if (n < 5) return fail(de::missing_field, "BlockStored needs at least 5 fields");
        kv_event& e = slot();
        begin_stored(e);
        stored_extras x;
        const size_t known = sizeof stored_slots / sizeof stored_slots[0];
        for (uint32_t i = 1; i < n && i < known; ++i) {
          if ((r = stored_field(stored_slots[i], e.stored, x, true)) != de::none) return r;
        }
        if (n > known && (r = skip(n - known)) != de::none) return r;
        x.has_hashes = x.has_tokens = x.has_block_size = true;
        if ((r = finish_stored(e.stored, x)) != de::none) return r;
        ++used;
        return de::none;
      }
      case event_kind::removed: {
        if (n < 2) return fail(de::missing_field, "BlockRemoved needs block_hashes");
        kv_event& e = slot();
        begin_removed(e);
        const size_t known = sizeof removed_slots / sizeof removed_slots[0];
        for (uint32_t i = 1; i < n && i < known; ++i) {
          if ((r = removed_field(removed_slots[i], e.removed)) != de::none) return r;
        }
        if (n > known && (r = skip(n - known)) != de::none) return r;
        finish_removed(e.removed);
        ++used;
        return de::none;
      }
      case event_kind::cleared: {
        // WD4: slots after the tag are ignored (reference D21), ATOM's medium among them
        // (ROCm/ATOM atom/distributed/kv_events.py @ 0290bb3f917f: [tag, medium]).
        if ((r = skip(n - 1)) != de::none) return r;
        begin_cleared(slot());
        ++used;
        return de::none;
      }
      case event_kind::unknown: break;
    }
    if ((r = skip(n - 1)) != de::none) return r;
    ++out_.skipped_unknown;
    return de::none;
  }

  de map_event(uint32_t n) {
    const uint8_t* body = c_.p;
    // msgspec writes "type" first; any other order costs one extra scan.
    std::string_view tag;
    bool have_tag = false;
    de r;
    for (uint32_t i = 0; i < n && !have_tag; ++i) {
      std::string_view key;
      r = c_.str(key, de::bad_event);
      if (r == de::none && equals(key, "type")) {
        r = c_.str(tag, de::bad_tag);
        if (r != de::none) return fail(r, "event \"type\" is not a string");
        have_tag = true;
        break;
      }
      if (r == de::bad_event) {
        r = skip(2);
      } else if (r == de::none) {
        r = skip(1);
      }
      if (r != de::none) return fail(r, "malformed msgpack value");
    }
    if (!have_tag) return fail(de::missing_field, "map event without \"type\"");
    c_.p = body;
    const event_kind kind = tag_of(tag);
    kind_ = kind;
    if (kind == event_kind::unknown) {
      if ((r = skip(uint64_t{n} * 2)) != de::none) return r;
      ++out_.skipped_unknown;
      return de::none;
    }
    if (kind == event_kind::cleared) {
      for (uint32_t i = 0; i < n; ++i) {  // WD4: only "medium" is looked at
        std::string_view key;
        r = c_.str(key, de::bad_event);
        if (r == de::none && equals(key, "medium")) {
          if ((r = cleared_medium()) != de::none) return r;
          continue;
        }
        if (r == de::none) {
          r = skip(1);
        } else if (r == de::bad_event) {  // non-string key: not ours
          r = skip(2);
        } else {
          return fail(r, "malformed msgpack value");
        }
        if (r != de::none) return r;
      }
      begin_cleared(slot());
      ++used;
      return de::none;
    }
    kv_event& e = slot();
    stored_extras x;
    if (kind == event_kind::stored) {
      begin_stored(e);
    } else {
      begin_removed(e);
    }
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view key;
      r = c_.str(key, de::bad_event);
      if (r == de::bad_event) {  // non-string key: not a field of ours
        if ((r = skip(2)) != de::none) return r;
        continue;
      }
      if (r != de::none) return fail(r, "malformed msgpack value");
      const field f = field_of(key);
      if (kind == event_kind::stored) {
        r = stored_field(f, e.stored, x, false);
      } else if (f == field::block_hashes) {
        x.has_hashes = true;
        r = removed_field(f, e.removed);
      } else {
        r = removed_field(f, e.removed);
      }
      if (r != de::none) return r;
    }
    if (kind == event_kind::removed) {
      if (!x.has_hashes) return fail(de::missing_field, "block_hashes is required");
      finish_removed(e.removed);
    } else if ((r = finish_stored(e.stored, x)) != de::none) {
      return r;
    }
    ++used;
    return de::none;
  }

  // WD4: nil or a string; kvrelay clears every tier either way.
  de cleared_medium() {
    std::string_view s;
    bool is_str;
    return nil_or_str(s, is_str, de::bad_medium, "AllBlocksCleared medium is not nil or a str");
  }

  static void begin_stored(kv_event& e) {
    e.type = event_type::stored;
    block_stored& s = e.stored;
    // block_hashes / token_ids are resized by their readers (keeping buffers); the rest resets.
    s.parent.reset();
    s.token_ids.clear();
    s.block_size = 0;
    s.lora_id.reset();
    s.lora_name.reset();
    s.medium = medium_info{};
    s.group_idx.reset();
    s.kind = group_kind::unspecified;
    s.sliding_window.reset();
    s.first_tainted_block = 0;
    s.eagle_bigram = false;
    s.origin = store_origin::unspecified;
    e.removed.block_hashes.clear();
  }

  // Capacity is kept; only the stale contents go, so a reader never sees another event's data.
  static void begin_cleared(kv_event& e) {
    e.type = event_type::cleared;
    e.stored.block_hashes.clear();
    e.stored.token_ids.clear();
    e.removed.block_hashes.clear();
  }

  static void begin_removed(kv_event& e) {
    e.type = event_type::removed;
    e.removed.medium = medium_info{};
    e.removed.group_idx.reset();
    e.removed.remaining_copies.clear();
    e.removed.has_remaining_copies = false;
    e.stored.block_hashes.clear();
    e.stored.token_ids.clear();
  }

  de removed_field(field f, block_removed& rm) {
    switch (f) {
      case field::block_hashes: return hashes(rm.block_hashes);
      case field::medium: return medium(rm.medium);
      case field::locality: return locality(rm.medium);
      case field::group_idx: return group(rm.group_idx);
      case field::remaining_copies: return copy_counts(rm);
      default: return skip(1);
    }
  }

  // A REMOTE block is never reported warmer than T3, whatever its medium (read in any order).
  static void apply_locality(medium_info& m) {
    if (m.remote) m.tier = tier::t3;
  }
  static void finish_removed(block_removed& rm) { apply_locality(rm.medium); }

  // nil → is_str false; a str → true, with its text; anything else fails with `code`.
  de nil_or_str(std::string_view& s, bool& is_str, de code, const char* why) {
    is_str = false;
    if (c_.take_nil()) return de::none;
    const de r = c_.str(s, code);
    if (r != de::none) return fail(r, why);
    is_str = true;
    return de::none;
  }

  de locality(medium_info& m) {
    std::string_view s;
    bool is_str;
    const de r = nil_or_str(s, is_str, de::bad_medium, "locality is not nil or a str");
    // LOCAL, or an unknown value (counted as remote: colder is the safe guess).
    m.remote = is_str && !iequals_lower(s, "local");
    return r;
  }

  de origin(store_origin& out) {
    std::string_view s;
    bool is_str;
    const de r = nil_or_str(s, is_str, de::bad_origin, "origin is not nil or a str");
    out = !is_str                      ? store_origin::unspecified
          : iequals_lower(s, "reused") ? store_origin::reused
          : iequals_lower(s, "new")    ? store_origin::fresh
                                       : store_origin::unspecified;
    return r;
  }

  // vLLM #48933: nil, or one non-negative int per hash (its length is judged by the index).
  de copy_counts(block_removed& rm) {
    rm.remaining_copies.clear();
    rm.has_remaining_copies = false;
    if (c_.take_nil()) return de::none;
    uint32_t n;
    de r = c_.array(n, de::bad_copy_counts);
    if (r != de::none) return fail(r, "remaining_copy_counts is not nil or an array");
    if (n > lim_.max_hashes_per_event)
      return fail(de::too_many_hashes, "too many remaining_copy_counts");
    batch_hashes_ += n;
    if (batch_hashes_ > lim_.max_hashes_per_batch)
      return fail_batch(de::too_many_hashes, "too many block hashes in the batch");
    rm.remaining_copies.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      wire_int v;
      r = c_.integer(v, de::bad_copy_counts);
      if (r != de::none) return fail(r, "remaining_copy_counts item is not an int");
      if (v.negative) return fail(de::bad_copy_counts, "remaining_copy_counts item is negative");
      rm.remaining_copies[i] = static_cast<uint32_t>(std::min<uint64_t>(v.bits, uint32_max));
    }
    rm.has_remaining_copies = true;
    return de::none;
  }

  de stored_field(field f, block_stored& s, stored_extras& x, bool array_form) {
    switch (f) {
      case field::block_hashes:
        x.has_hashes = true;
        return hashes(s.block_hashes);
      case field::parent: return parent(s.parent);
      case field::token_ids:
        x.has_tokens = true;
        return tokens(s);
      case field::block_size:
        x.has_block_size = true;
        return block_size(s.block_size);
      case field::lora_id: return lora_id(s.lora_id);
      case field::medium: return medium(s.medium);
      case field::locality: return locality(s.medium);
      case field::origin: return origin(s.origin);
      case field::lora_name: return lora_name(s.lora_name, x, array_form);
      case field::extra_keys:
        // WD5: an SGLang metadata map lands at slot 8 when component_types holds slot 7.
        if (array_form && x.components && !c_.at_end() && is_map_header(*c_.p))
          return metadata_map(x);
        // Kept as a byte range and judged in finish_stored(): in a map, lora_name may follow.
        return capture_list(x.extra_begin, x.extra_end, de::bad_extra_keys,
                            "extra_keys is neither nil nor an array");
      case field::mm_keys:  // TensorRT-LLM _torch/pyexecutor/kv_cache_events.py @ 13599e98c71c
        return capture_list(x.mm_begin, x.mm_end, de::bad_extra_keys,
                            "mm_keys is neither nil nor an array");
      case field::component_types: return components(x);
      case field::group_idx: return group(s.group_idx);
      case field::spec_kind: return spec_kind(s.kind);
      case field::spec_window: return spec_window(s.sliding_window);
      case field::cache_salt:
        if (!c_.take_nil()) {
          x.salted = true;
          return skip(1);
        }
        return de::none;
      case field::type:
        if (array_form) return de::none;  // the array tag was consumed by the caller
        return skip(1);
      case field::remaining_copies:
      case field::unknown: return skip(1);
    }
    return skip(1);
  }

  static bool is_map_header(uint8_t b) { return (b & 0xf0) == 0x80 || b == 0xde || b == 0xdf; }

  // nil, or one whole array whose bytes are kept for finish_stored() to judge.
  de capture_list(const uint8_t*& begin_out, const uint8_t*& end_out, de code, const char* why) {
    begin_out = end_out = nullptr;
    if (c_.take_nil()) return de::none;
    const uint8_t* begin = c_.p;
    uint32_t n;
    de r = c_.array(n, code);
    if (r != de::none) return fail(r, why);
    c_.p = begin;
    if ((r = skip(1)) != de::none) return r;
    begin_out = begin;
    end_out = c_.p;
    return de::none;
  }

  // SGLang component_types (WD5; sgl-project/sglang #32514, its wire-shape unit test): nil or an
  // array of strings; notes whether the full-attention component is among them.
  de components(stored_extras& x) {
    if (c_.take_nil()) return de::none;
    uint32_t n;
    de r = c_.array(n, de::bad_components);
    if (r != de::none) return fail(r, "component_types is not nil or an array");
    x.components = true;
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view name;
      r = c_.str(name, de::bad_components);
      if (r != de::none) return fail(r, "component_types item is not a str");
      if (iequals_lower(name, "full") || iequals_lower(name, "full_attention"))
        x.full_component = true;
    }
    return de::none;
  }

  de one_hash(engine_hash& h, de on_type) {
    wire_int v;
    de r = c_.integer(v, on_type);
    if (r == de::none) {
      h.value = v.bits;
      h.bytes.clear();
      return r;
    }
    if (r != on_type) return r;
    std::string_view s;
    r = c_.raw(s, true, on_type);
    if (r != de::none) return r;
    if (s.empty()) return on_type;
    h.value = 0;
    h.bytes.assign(s.data(), s.size());
    return de::none;
  }

  de hashes(std::vector<engine_hash>& out) {
    uint32_t n;
    de r = c_.array(n, de::bad_hash);
    if (r != de::none) return fail(r, "block_hashes is not an array");
    if (n > lim_.max_hashes_per_event) return fail(de::too_many_hashes, "too many block hashes");
    batch_hashes_ += n;
    if (batch_hashes_ > lim_.max_hashes_per_batch)
      return fail_batch(de::too_many_hashes, "too many block hashes in the batch");
    out.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      r = one_hash(out[i], de::bad_hash);
      if (r != de::none) {
        return fail(r, r == de::bad_hash ? "block hash is not an int, bin or non-empty str"
                                         : "block hash");
      }
    }
    return de::none;
  }

  de parent(std::optional<engine_hash>& out) {
    if (c_.take_nil()) {
      out.reset();
      return de::none;
    }
    if (!out) out.emplace();
    const de r = one_hash(*out, de::bad_parent);
    if (r != de::none) {
      out.reset();
      return fail(r, "parent_block_hash is not nil, an int, a bin or a non-empty str");
    }
    return de::none;
  }

  de tokens(block_stored& s) {
    s.eagle_bigram = false;
    first_str_token_ = no_str_token;
    if (c_.take_nil()) {  // reference D17: nil tokens = none
      s.token_ids.clear();
      return de::none;
    }
    uint32_t n;
    de r = c_.array(n, de::bad_tokens);
    if (r != de::none) return fail(r, "token_ids is not an array");
    if (n == 0) {
      s.token_ids.clear();
      return de::none;
    }
    if (*c_.p == 0x92) return eagle_tokens(s, n);
    if ((r = count_tokens(n)) != de::none) return r;
    s.token_ids.resize(n);
    uint32_t* dst = s.token_ids.data();
    const uint8_t* p = c_.p;
    const uint8_t* const end = c_.end;
    uint32_t i = 0;
    // Fast path, two tokens a step while 10 bytes remain: one 8-byte load holds the first
    // header and wherever the second one is (1 to 5 bytes on), so finding the second costs a
    // shift, not a load; the widths are arithmetic (token_payload), and random vocabularies
    // (uint16 and uint32 interleaved) cost no mispredicted branch.
    while (n - i >= 2 && end - p >= 10) {
      const uint64_t head = load_be64(p);
      const auto b0 = static_cast<uint32_t>(head >> 56);
      const uint32_t w0 = token_payload(b0);
      const auto b1 = static_cast<uint32_t>(head >> ((48 - 8 * w0) & 63)) & 0xff;
      if (!fast_token(b0) || !fast_token(b1)) break;
      const uint32_t w1 = token_payload(b1);
      const uint8_t* const second = p + 1 + w0;
      dst[i] = token_value(p, b0, w0);
      dst[i + 1] = token_value(second, b1, w1);
      i += 2;
      p = second + 1 + w1;
    }
    while (i < n && end - p >= 5 && fast_token(*p)) {
      const uint32_t w = token_payload(*p);
      dst[i++] = token_value(p, *p, w);
      p += 1 + w;
    }
    for (; i < n; ++i) {
      if (p == end) return fail(de::truncated, "token_ids");
      if (cursor::str_header(*p)) {
        // WD5: a TensorRT-LLM multimodal digest, hex (NVIDIA/TensorRT-LLM kv_cache_manager_v2/
        // eventData.cpp decodeEventBlock @ 13599e98c71c); its block is tainted in finish_stored().
        cursor sc(p, end);
        std::string_view digest;
        if ((r = sc.str(digest, de::bad_tokens)) != de::none) return fail(r, "token_ids");
        p = sc.p;
        dst[i] = 0;
        first_str_token_ = std::min<uint64_t>(first_str_token_, i);
        continue;
      }
      r = read_token(p, end, dst[i]);
      if (r != de::none) {
        return fail(r, r == de::bad_tokens ? "token id out of uint32 range or not an int"
                                           : "token_ids");
      }
    }
    c_.p = p;
    return de::none;
  }

  de count_tokens(uint64_t n) {
    if (n > lim_.max_tokens_per_event) return fail(de::too_many_tokens, "too many token ids");
    batch_tokens_ += n;
    if (batch_tokens_ > lim_.max_tokens_per_batch)
      return fail_batch(de::too_many_tokens, "too many token ids in the batch");
    return de::none;
  }

  // SGLang EAGLE: every item is an [a, b] bigram; flattened into 2 ids per position.
  de eagle_tokens(block_stored& s, uint32_t n) {
    const de r0 = count_tokens(uint64_t{n} * 2);
    if (r0 != de::none) return r0;
    s.token_ids.resize(size_t{n} * 2);
    s.eagle_bigram = true;
    uint32_t* dst = s.token_ids.data();
    const uint8_t* p = c_.p;
    const uint8_t* const end = c_.end;
    for (uint32_t i = 0; i < n; ++i) {
      if (p == end) return fail(de::truncated, "token_ids");
      if (*p != 0x92) return fail(de::bad_tokens, "token_ids mixes ints and bigram pairs");
      ++p;
      for (int k = 0; k < 2; ++k) {
        if (p == end) return fail(de::truncated, "token_ids");
        const de r = read_token(p, end, dst[2 * size_t{i} + static_cast<size_t>(k)]);
        if (r != de::none) {
          return fail(r, r == de::bad_tokens ? "bigram token id out of uint32 range or not an int"
                                             : "token_ids");
        }
      }
    }
    c_.p = p;
    return de::none;
  }

  de block_size(int64_t& out) {
    wire_int v;
    const de r = c_.integer(v, de::bad_block_size);
    if (r != de::none) return fail(r, "block_size is not an int");
    if (!v.to_int64(out)) return fail(de::bad_block_size, "block_size out of int64 range");
    return de::none;
  }

  de lora_id(std::optional<int64_t>& out) {
    if (c_.take_nil()) {
      out.reset();
      return de::none;
    }
    wire_int v;
    const de r = c_.integer(v, de::bad_lora);
    // Reference D15/D16: never read an undecodable id as "no adapter".
    if (r != de::none) return fail(r, "lora_id is not nil or an int");
    int64_t id = 0;
    if (!v.to_int64(id)) return fail(de::bad_lora, "lora_id above 2^63-1");
    out = id;
    return de::none;
  }

  // Array slot 7 is vLLM's lora_name (str), an SGLang metadata map, or SGLang's component_types
  // (WD5); a map event's "lora_name" is a str (a map is read as metadata too).
  de lora_name(std::optional<std::string>& out, stored_extras& x, bool array_form) {
    out.reset();
    if (c_.take_nil()) return de::none;
    std::string_view s;
    de r = c_.str(s, de::bad_lora);
    if (r == de::none) {
      out.emplace(s.data(), s.size());
      return de::none;
    }
    if (r != de::bad_lora) return fail(r, "lora_name");
    if (is_map_header(*c_.p)) return metadata_map(x);
    if (array_form && c_.array_header(*c_.p)) return components(x);
    return fail(de::bad_lora, "lora_name is not nil, a str or a metadata map");
  }

  // SGLang's metadata map ({"cache_salt": ..., "session_id": ...}); a salt taints the event.
  de metadata_map(stored_extras& x) {
    uint32_t n;
    de r = c_.map(n, de::bad_lora);
    if (r != de::none) return fail(r, "metadata map");
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view key;
      r = c_.str(key, de::bad_lora);
      if (r == de::none && equals(key, "cache_salt")) {
        if (!c_.take_nil()) {
          x.salted = true;
          if ((r = skip(1)) != de::none) return r;
        }
        continue;
      }
      if (r == de::bad_lora) {
        r = skip(2);
      } else if (r == de::none) {
        r = skip(1);
      } else {
        return fail(r, "metadata map");
      }
      if (r != de::none) return r;
    }
    return de::none;
  }

  // Keeps `remote`: locality may come before medium in a map.
  de medium(medium_info& out) {
    const bool remote = out.remote;
    std::string_view s;
    bool is_str;
    const de r = nil_or_str(s, is_str, de::bad_medium, "medium is not nil or a str");
    if (r != de::none) return r;
    out = is_str ? classify_medium(s) : medium_info{};
    out.remote = remote;
    return de::none;
  }

  de group(std::optional<int64_t>& out) {
    if (c_.take_nil()) {
      out.reset();
      return de::none;
    }
    wire_int v;
    const de r = c_.integer(v, de::bad_group);
    if (r != de::none) return fail(r, "group_idx is not nil or an int");
    if (v.negative || v.bits > int64_max) return fail(de::bad_group, "group_idx out of range");
    out = static_cast<int64_t>(v.bits);
    return de::none;
  }

  de spec_kind(group_kind& out) {
    std::string_view s;
    bool is_str;
    const de r = nil_or_str(s, is_str, de::bad_spec, "kv_cache_spec_kind is not nil or a str");
    out = is_str ? classify_kind(s) : group_kind::unspecified;
    return r;
  }

  de spec_window(std::optional<int64_t>& out) {
    if (c_.take_nil()) {
      out.reset();
      return de::none;
    }
    wire_int v;
    const de r = c_.integer(v, de::bad_spec);
    if (r != de::none) return fail(r, "kv_cache_spec_sliding_window is not nil or an int");
    int64_t w = 0;
    if (!v.to_int64(w)) return fail(de::bad_spec, "sliding window out of range");
    out = w;
    return de::none;
  }

  de finish_stored(block_stored& s, const stored_extras& x) {
    if (!x.has_hashes) return fail(de::missing_field, "block_hashes is required");
    if (!x.has_tokens) return fail(de::missing_field, "token_ids is required");
    if (!x.has_block_size) return fail(de::missing_field, "block_size is required");
    if (!s.token_ids.empty() && s.block_size <= 0)
      return fail(de::bad_block_size, "block_size must be > 0 when token_ids are present");
    apply_locality(s.medium);
    const uint32_t n = static_cast<uint32_t>(s.block_hashes.size());
    uint32_t first = x.salted ? 0 : n;
    if (x.extra_begin != nullptr)
      first = std::min(first, first_tainted(x.extra_begin, x.extra_end, n, &s.lora_name));
    if (x.mm_begin != nullptr)
      first = std::min(first, first_tainted(x.mm_begin, x.mm_end, n, nullptr));
    if (first_str_token_ != no_str_token && s.block_size > 0) {
      // block_size > 0 is checked above whenever tokens are present.
      const uint64_t width = s.eagle_bigram ? 2 : 1;
      const uint64_t block = first_str_token_ / width / static_cast<uint64_t>(s.block_size);
      first = static_cast<uint32_t>(std::min<uint64_t>(first, block));
    }
    s.first_tainted_block = first;
    // WD5: without its full-attention component the block is not a reusable prefix here.
    if (x.components && !x.full_component && s.kind == group_kind::unspecified)
      s.kind = group_kind::other;
    return de::none;
  }

  /// First block whose extra_keys entry holds anything but the LoRA name (mm_keys: `lora` is
  /// null, so anything at all). The bytes were validated as one well-formed array when they
  /// were captured.
  static uint32_t first_tainted(const uint8_t* begin, const uint8_t* end, uint32_t n_blocks,
                                const std::optional<std::string>* lora) {
    cursor c(begin, end);
    uint32_t m;
    if (c.array(m, de::bad_extra_keys) != de::none) return 0;
    for (uint32_t i = 0; i < m && i < n_blocks; ++i) {
      if (c.take_nil()) continue;
      uint32_t k;
      if (c.array(k, de::bad_extra_keys) != de::none) return i;  // a bare value: not clean
      for (uint32_t j = 0; j < k; ++j) {
        std::string_view s;
        if (lora == nullptr || c.str(s, de::bad_extra_keys) != de::none || !*lora ||
            s != **lora)
          return i;
      }
    }
    // Blocks that extra_keys does not describe cannot be shown clean.
    return m < n_blocks ? m : n_blocks;
  }

  static constexpr uint64_t no_str_token = ~uint64_t{0};

  const wire_decoder::limits& lim_;
  kv_event_batch& out_;
  std::vector<kv_event>& spare_;
  std::vector<event_fault>& faults_;
  cursor c_;
  uint64_t batch_hashes_ = 0;  // totals, so many mid-sized events cannot add up to gigabytes
  uint64_t batch_tokens_ = 0;
  bool wrapped_ = false;       // inside a bin-wrapped event
  bool batch_limit_ = false;   // a batch total was exceeded: WD1, not WD2
  event_kind kind_ = event_kind::unknown;   // the event being read, by its tag
  uint64_t first_str_token_ = no_str_token;  // first string token id of this store (WD5)
};

}  // namespace

decode_error wire_decoder::decode(const char* data, size_t size, kv_event_batch& out,
                                  std::string* detail) {
  out.ts = 0.0;
  out.dp_rank.reset();
  out.skipped_unknown = 0;
  faults_.clear();
  de r;
  size_t used = 0;
  const char* what = nullptr;
  int64_t event_index = -1;
  if (size > limits_.max_payload_bytes) {
    r = de::too_large;
    what = "payload larger than the configured limit";
  } else if (data == nullptr && size != 0) {
    r = de::truncated;
    what = "null payload";
  } else {
    const auto* p = reinterpret_cast<const uint8_t*>(data);
    parser ps(limits_, out, spare_, faults_, p, size);
    r = ps.run();
    used = ps.used;
    what = ps.what;
    event_index = ps.event_index;
  }
  if (r != de::none) {
    used = 0;  // never half-applied
    faults_.clear();
    out.ts = 0.0;
    out.dp_rank.reset();
    out.skipped_unknown = 0;
    if (detail != nullptr) {
      detail->clear();
      if (event_index >= 0) {
        *detail += "event ";
        *detail += std::to_string(event_index);
        *detail += ": ";
      }
      *detail += what != nullptr ? what : to_string(r);
    }
  }
  // Park the events this batch did not use so their buffers serve later batches.
  while (out.events.size() > used) {
    if (spare_.size() < max_spare_events) spare_.push_back(std::move(out.events.back()));
    out.events.pop_back();
  }
  return r;
}

}  // namespace kvrelay
