// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Builders for decoder test inputs: hex dumps (docs/spec/engine-wire.md §7) and msgpack-cxx packers.

#include "actors/decoder/wire_decoder.hpp"

#include <msgpack.hpp>

#include <cctype>
#include <cstring>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvrelay::test {

using packer = msgpack::packer<msgpack::sbuffer>;
/// One msgpack value to be written.
using item = std::function<void(packer&)>;

inline std::string hex(const std::string& text) {
  std::string out;
  int hi = -1;
  for (char ch : text) {
    if (std::isspace(static_cast<unsigned char>(ch))) continue;
    const int v = std::isdigit(static_cast<unsigned char>(ch))
                      ? ch - '0'
                      : std::tolower(static_cast<unsigned char>(ch)) - 'a' + 10;
    if (v < 0 || v > 15) throw std::invalid_argument("bad hex");
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<char>(hi * 16 + v));
      hi = -1;
    }
  }
  if (hi >= 0) throw std::invalid_argument("odd hex");
  return out;
}

/// The buffer enc() is writing, so Raw() can splice bytes (packer hides its stream).
inline msgpack::sbuffer*& current_buffer() {
  static thread_local msgpack::sbuffer* buf = nullptr;
  return buf;
}

inline std::string enc(const item& i) {
  msgpack::sbuffer buf;
  msgpack::sbuffer* const outer = current_buffer();
  current_buffer() = &buf;
  packer pk(buf);
  i(pk);
  current_buffer() = outer;
  return std::string(buf.data(), buf.size());
}

inline item S(std::string s) {
  return [s](packer& p) { p.pack(s); };
}
inline item I(int64_t v) {
  return [v](packer& p) { p.pack_int64(v); };
}
inline item U(uint64_t v) {
  return [v](packer& p) { p.pack_uint64(v); };
}
// msgpack-cxx packs integral floats as ints; engines (msgspec) always write float64, so these
// write the float encodings byte by byte.
inline item F64(double v) {
  return [v](packer&) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char b[9] = {static_cast<char>(0xcb)};
    for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    current_buffer()->write(b, sizeof b);
  };
}
inline item F32(float v) {
  return [v](packer&) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char b[5] = {static_cast<char>(0xca)};
    for (int i = 0; i < 4; ++i) b[1 + i] = static_cast<char>(bits >> (24 - 8 * i));
    current_buffer()->write(b, sizeof b);
  };
}
inline item Nil() {
  return [](packer& p) { p.pack_nil(); };
}
inline item Bool(bool b) {
  return [b](packer& p) {
    if (b) {
      p.pack_true();
    } else {
      p.pack_false();
    }
  };
}
inline item Bin(std::string b) {
  return [b](packer& p) {
    p.pack_bin(static_cast<uint32_t>(b.size()));
    p.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
  };
}
/// Already-encoded bytes, spliced in as they are.
inline item Raw(std::string bytes) {
  return [bytes](packer&) { current_buffer()->write(bytes.data(), bytes.size()); };
}
inline item A(std::vector<item> items) {
  return [items](packer& p) {
    p.pack_array(static_cast<uint32_t>(items.size()));
    for (const auto& i : items) i(p);
  };
}
inline item M(std::vector<std::pair<std::string, item>> kv) {
  return [kv](packer& p) {
    p.pack_map(static_cast<uint32_t>(kv.size()));
    for (const auto& e : kv) {
      p.pack(e.first);
      e.second(p);
    }
  };
}
inline item Toks(const std::vector<uint32_t>& t) {
  return [t](packer& p) {
    p.pack_array(static_cast<uint32_t>(t.size()));
    for (uint32_t v : t) p.pack_uint32(v);
  };
}
inline item Hashes(const std::vector<uint64_t>& h) {
  return [h](packer& p) {
    p.pack_array(static_cast<uint32_t>(h.size()));
    for (uint64_t v : h) p.pack_uint64(v);
  };
}

inline std::vector<uint32_t> iota_tokens(uint32_t first, uint32_t count) {
  std::vector<uint32_t> v(count);
  for (uint32_t i = 0; i < count; ++i) v[i] = first + i;
  return v;
}

/// `[ts, events, rank]` (or `[ts, events]` when rank is nullopt).
inline std::string batch(const std::vector<item>& events, std::optional<int64_t> rank = 0,
                         double ts = 1767225600.5) {
  std::vector<item> env{F64(ts), A(events)};
  if (rank) env.push_back(I(*rank));
  return enc(A(env));
}

/// A vLLM era-E-style array BlockStored with int hashes.
inline item stored_tuple(const std::vector<uint64_t>& hashes, item parent,
                         const std::vector<uint32_t>& tokens, int64_t block_size) {
  return A({S("BlockStored"), Hashes(hashes), std::move(parent), Toks(tokens), I(block_size),
            Nil()});
}

struct decoded {
  decode_error err = decode_error::none;
  kv_event_batch batch;
  std::string detail;
  std::vector<event_fault> faults;  // WD2: the events skipped
};

inline decoded decode(const std::string& bytes, const wire_decoder::limits& l = {}) {
  wire_decoder d(l);
  decoded r;
  r.err = d.decode(bytes.data(), bytes.size(), r.batch, &r.detail);
  r.faults = d.faults();
  return r;
}

}  // namespace kvrelay::test
