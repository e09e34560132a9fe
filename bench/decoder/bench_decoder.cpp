// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Decoder throughput against the parse floor, in one run (docs/spec/design-rules.md DR38).
//   bench_decoder --benchmark_counters_tabular=true
// Payload: one EventBatch of 32 BlockStored events × 4 blocks × 16 random token ids (vLLM era-G
// array events; a map-form (era H) variant too). Counters: blocks/s (rate) and time_per_block
// (inverted rate, printed as e.g. "190ns"). Floors over the same bytes:
//   MsgpackVisitorParse  msgpack-cxx v2 parse with a visitor that touches every value
//   MsgpackUnpack        msgpack::unpack into an object tree (what a naive decoder does)
//   XXH3Content          fingerprint::content over the same token bytes
//   Floor                MsgpackUnpack + XXH3Content
//   Decode / DecodeAndFingerprint   ours: decode, then decode + content + chain per block
// The machine is shared: compare numbers from the same run only.
#include <benchmark/benchmark.h>

#include <msgpack.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "actors/decoder/wire_decoder.hpp"
#include "base/fingerprint.hpp"

namespace {

using packer = msgpack::packer<msgpack::sbuffer>;

constexpr uint32_t events_per_batch = 32;
constexpr uint32_t blocks_per_event = 4;
constexpr uint32_t blocks_per_batch = events_per_batch * blocks_per_event;

// Every benchmark runs at block size 16 (the common engine setting) and 64 (SGLang pages, and
// XXH3's long-input path): Arg(16)->Arg(64), read as state.range(0).
struct payload {
  std::string bytes;
  std::vector<uint32_t> tokens;  // every token of the batch, in order (for the hash floor)
  uint32_t block_size = 16;
};

void pack_str(packer& pk, const char* s) { pk.pack(std::string(s)); }

void pack_float64(msgpack::sbuffer& buf, double v) {
  // msgpack-cxx writes integral doubles as ints; engines always send float64.
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  char b[9] = {static_cast<char>(0xcb)};
  for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buf.write(b, sizeof b);
}

payload make_payload(bool map_events, uint64_t seed, uint32_t block_size) {
  std::mt19937_64 rng(seed);
  payload p;
  p.block_size = block_size;
  msgpack::sbuffer buf;
  packer pk(buf);
  pk.pack_array(3);
  pack_float64(buf, 1767225600.5);
  pk.pack_array(events_per_batch);
  uint64_t parent = rng();
  for (uint32_t e = 0; e < events_per_batch; ++e) {
    std::vector<uint64_t> hashes(blocks_per_event);
    for (auto& h : hashes) h = rng();
    std::vector<uint32_t> toks(blocks_per_event * block_size);
    for (auto& t : toks) t = static_cast<uint32_t>(rng() % 151936);  // Qwen-sized vocabulary
    p.tokens.insert(p.tokens.end(), toks.begin(), toks.end());
    auto hashes_f = [&] {
      pk.pack_array(blocks_per_event);
      for (uint64_t h : hashes) pk.pack_uint64(h);
    };
    auto tokens_f = [&] {
      pk.pack_array(static_cast<uint32_t>(toks.size()));
      for (uint32_t t : toks) pk.pack_uint32(t);
    };
    if (!map_events) {
      pk.pack_array(12);
      pack_str(pk, "BlockStored");
      hashes_f();
      pk.pack_uint64(parent);
      tokens_f();
      pk.pack_uint32(block_size);
      pk.pack_nil();
      pack_str(pk, "GPU");
      pk.pack_nil();
      pk.pack_array(blocks_per_event);
      for (uint32_t b = 0; b < blocks_per_event; ++b) pk.pack_nil();
      pk.pack_uint32(0);
      pack_str(pk, "full_attention");
      pk.pack_nil();
    } else {
      pk.pack_map(10);
      pack_str(pk, "type");
      pack_str(pk, "BlockStored");
      pack_str(pk, "block_hashes");
      hashes_f();
      pack_str(pk, "parent_block_hash");
      pk.pack_uint64(parent);
      pack_str(pk, "token_ids");
      tokens_f();
      pack_str(pk, "block_size");
      pk.pack_uint32(block_size);
      pack_str(pk, "lora_id");
      pk.pack_nil();
      pack_str(pk, "medium");
      pack_str(pk, "GPU");
      pack_str(pk, "lora_name");
      pk.pack_nil();
      pack_str(pk, "group_idx");
      pk.pack_uint32(0);
      pack_str(pk, "kv_cache_spec_kind");
      pack_str(pk, "full_attention");
    }
    parent = hashes.back();
  }
  pk.pack_uint32(0);
  p.bytes.assign(buf.data(), buf.size());
  return p;
}

const payload& array_payload(uint32_t block_size) {
  static const payload p16 = make_payload(false, 7, 16);
  static const payload p64 = make_payload(false, 7, 64);
  return block_size == 64 ? p64 : p16;
}
const payload& map_payload(uint32_t block_size) {
  static const payload p16 = make_payload(true, 7, 16);
  static const payload p64 = make_payload(true, 7, 64);
  return block_size == 64 ? p64 : p16;
}
uint32_t bs_arg(const benchmark::State& state) { return static_cast<uint32_t>(state.range(0)); }

void set_counters(benchmark::State& state) {
  const double blocks = static_cast<double>(state.iterations()) * blocks_per_batch;
  state.counters["blocks/s"] = benchmark::Counter(blocks, benchmark::Counter::kIsRate);
  state.counters["time_per_block"] =
      benchmark::Counter(blocks, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// A visitor that touches every scalar the way a decoder must (so nothing is optimised away).
struct touch_visitor : msgpack::v2::null_visitor {
  uint64_t acc = 0;
  bool visit_positive_integer(uint64_t v) {
    acc += v;
    return true;
  }
  bool visit_negative_integer(int64_t v) {
    acc += static_cast<uint64_t>(v);
    return true;
  }
  bool visit_str(const char* s, uint32_t n) {
    acc += n + static_cast<uint8_t>(n ? s[0] : 0);
    return true;
  }
  bool visit_float64(double v) {
    acc += static_cast<uint64_t>(v);
    return true;
  }
};

void MsgpackVisitorParse(benchmark::State& state) {
  const payload& p = array_payload(bs_arg(state));
  for (auto _ : state) {
    touch_visitor v;
    std::size_t off = 0;
    const bool ok = msgpack::v2::parse(p.bytes.data(), p.bytes.size(), off, v);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(v.acc);
  }
  set_counters(state);
}
BENCHMARK(MsgpackVisitorParse)->Arg(16)->Arg(64);

void MsgpackUnpack(benchmark::State& state) {
  const payload& p = array_payload(bs_arg(state));
  for (auto _ : state) {
    msgpack::object_handle oh = msgpack::unpack(p.bytes.data(), p.bytes.size());
    benchmark::DoNotOptimize(oh.get().via.array.size);
  }
  set_counters(state);
}
BENCHMARK(MsgpackUnpack)->Arg(16)->Arg(64);

void XXH3Content(benchmark::State& state) {
  const payload& p = array_payload(bs_arg(state));
  const uint32_t block_size = p.block_size;
  for (auto _ : state) {
    uint64_t acc = 0;
    for (size_t b = 0; b < blocks_per_batch; ++b)
      acc ^= kvrelay::fingerprint::content(p.tokens.data() + b * block_size, block_size);
    benchmark::DoNotOptimize(acc);
  }
  set_counters(state);
}
BENCHMARK(XXH3Content)->Arg(16)->Arg(64);

void Floor(benchmark::State& state) {
  const payload& p = array_payload(bs_arg(state));
  const uint32_t block_size = p.block_size;
  for (auto _ : state) {
    msgpack::object_handle oh = msgpack::unpack(p.bytes.data(), p.bytes.size());
    benchmark::DoNotOptimize(oh.get().via.array.size);
    uint64_t acc = 0;
    for (size_t b = 0; b < blocks_per_batch; ++b)
      acc ^= kvrelay::fingerprint::content(p.tokens.data() + b * block_size, block_size);
    benchmark::DoNotOptimize(acc);
  }
  set_counters(state);
}
BENCHMARK(Floor)->Arg(16)->Arg(64);

void run_decode(benchmark::State& state, const payload& p) {
  kvrelay::wire_decoder dec;
  kvrelay::kv_event_batch out;
  for (auto _ : state) {
    const auto err = dec.decode(p.bytes.data(), p.bytes.size(), out);
    if (err != kvrelay::decode_error::none) state.SkipWithError(kvrelay::to_string(err));
    benchmark::DoNotOptimize(out.events.data());
  }
  set_counters(state);
}

void Decode(benchmark::State& state) { run_decode(state, array_payload(bs_arg(state))); }
BENCHMARK(Decode)->Arg(16)->Arg(64);

void DecodeMapEvents(benchmark::State& state) { run_decode(state, map_payload(bs_arg(state))); }
BENCHMARK(DecodeMapEvents)->Arg(16)->Arg(64);

void DecodeAndFingerprint(benchmark::State& state) {
  const payload& p = array_payload(bs_arg(state));
  kvrelay::wire_decoder dec;
  kvrelay::kv_event_batch out;
  for (auto _ : state) {
    const auto err = dec.decode(p.bytes.data(), p.bytes.size(), out);
    if (err != kvrelay::decode_error::none) state.SkipWithError(kvrelay::to_string(err));
    uint64_t acc = 0;
    for (const auto& e : out.events) {
      const auto& s = e.stored;
      const size_t bs = static_cast<size_t>(s.block_size);
      const size_t n = s.token_ids.size() / bs;
      // Chained from the event's parent as the shard does for a known parent (P01).
      uint64_t prev = s.parent ? s.parent->value : 0;
      for (size_t b = 0; b < n; ++b) {
        const uint64_t c = kvrelay::fingerprint::content(s.token_ids.data() + b * bs, bs);
        prev = kvrelay::fingerprint::chain(prev, c);
      }
      acc ^= prev;
    }
    benchmark::DoNotOptimize(acc);
  }
  set_counters(state);
}
BENCHMARK(DecodeAndFingerprint)->Arg(16)->Arg(64);

}  // namespace
