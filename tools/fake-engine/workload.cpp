// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/fake-engine/workload.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>

#include "base/fingerprint.hpp"

namespace kvrelay::fake {
namespace {

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A 32-byte "digest" whose last 8 bytes big-endian are `h`, so the bin and int modes of one
// workload name the same blocks the way vLLM's two modes do (spec §3 "Block hashes").
std::string digest32(uint64_t h) {
  std::string out(32, '\0');
  uint64_t state = h;
  for (size_t i = 0; i < 24; ++i) out[i] = static_cast<char>(splitmix(state) & 0xff);
  for (size_t i = 0; i < 8; ++i) out[24 + i] = static_cast<char>((h >> (56 - 8 * i)) & 0xff);
  return out;
}

}  // namespace

struct workload::impl {
  workload_options opt;
  std::mt19937_64 rng;
  std::vector<std::vector<uint32_t>> system_prompts;
  std::vector<double> zipf_cdf;
  uint64_t tick = 0;
  counters stats;
  bool planned_clear_done = false;  // opt.clear_after_blocks: random clears do not count

  // A tier's resident blocks with LRU order; ties evict the deeper block first, as a prefix
  // cache frees a sequence's tail before its head.
  struct tier_set {
    struct info {
      uint64_t tick;
      uint32_t depth;
    };
    std::unordered_map<uint64_t, info> blocks;
    std::set<std::tuple<uint64_t, int64_t, uint64_t>> lru;  // (tick, -depth, hash)

    bool contains(uint64_t h) const { return blocks.count(h) != 0; }
    void touch(uint64_t h, uint64_t now, uint32_t depth) {
      auto it = blocks.find(h);
      if (it != blocks.end()) {
        lru.erase({it->second.tick, -static_cast<int64_t>(it->second.depth), h});
        it->second.tick = now;
      } else {
        it = blocks.emplace(h, info{now, depth}).first;
      }
      lru.insert({now, -static_cast<int64_t>(it->second.depth), h});
    }
    // Frees room for `incoming` blocks without touching blocks used at `now`.
    std::vector<uint64_t> evict_for(size_t incoming, size_t capacity, uint64_t now) {
      std::vector<uint64_t> out;
      while (blocks.size() + incoming > capacity && !lru.empty()) {
        const auto [t, neg_depth, h] = *lru.begin();
        if (t == now) break;
        lru.erase(lru.begin());
        blocks.erase(h);
        out.push_back(h);
      }
      return out;
    }
    void clear() {
      blocks.clear();
      lru.clear();
    }
  };
  tier_set gpu, cpu;

  explicit impl(workload_options o) : opt(std::move(o)), rng(opt.seed) {
    if (opt.block_size <= 0) opt.block_size = 16;
    if (opt.system_prompts == 0) opt.system_prompts = 1;
    if (opt.vocab == 0) opt.vocab = 32000;
    opt.system_blocks_max = std::max(opt.system_blocks_max, opt.system_blocks_min);
    // At least one fresh user block per request: an all-hit step would send nothing, and
    // next_batch() must not spin looking for a miss.
    opt.user_blocks_min = std::max<size_t>(opt.user_blocks_min, 1);
    opt.user_blocks_max = std::max(opt.user_blocks_max, opt.user_blocks_min);
    opt.requests_max = std::max(opt.requests_max, std::max<size_t>(opt.requests_min, 1));
    // A request must fit in the cache, or it would evict its own prefix.
    const size_t longest = opt.system_blocks_max + opt.user_blocks_max;
    opt.capacity_blocks = std::max(opt.capacity_blocks, 2 * longest);
    opt.cpu_capacity_blocks = std::max(opt.cpu_capacity_blocks, 2 * longest);
    double total = 0;
    for (size_t k = 0; k < opt.system_prompts; ++k) {
      total += 1.0 / std::pow(static_cast<double>(k + 1), opt.zipf_s);
      zipf_cdf.push_back(total);
      const size_t blocks = uniform(opt.system_blocks_min, opt.system_blocks_max);
      system_prompts.push_back(random_tokens(blocks * static_cast<size_t>(opt.block_size)));
    }
    for (auto& c : zipf_cdf) c /= total;
  }

  size_t uniform(size_t lo, size_t hi) { return lo + static_cast<size_t>(rng() % (hi - lo + 1)); }
  double unit() { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

  std::vector<uint32_t> random_tokens(size_t n) {
    std::vector<uint32_t> out(n);
    for (auto& t : out) t = static_cast<uint32_t>(rng() % opt.vocab);
    return out;
  }

  fake_hash wire_hash(uint64_t h) const {
    switch (opt.hashes) {
      case hash_mode::u64: return fake_hash::u(h);
      case hash_mode::i64: return fake_hash::i(static_cast<int64_t>(h));
      case hash_mode::bytes: return fake_hash::bin(digest32(h));
    }
    return fake_hash::u(h);
  }

  // (has_parent, parent) rather than std::optional: g++ 12 warns maybe-uninitialized on it.
  fake_event stored_event(const std::vector<uint64_t>& hashes, bool has_parent, uint64_t parent,
                          const std::vector<uint32_t>& tokens, int adapter, const char* medium,
                          int64_t group, size_t first_block) const {
    fake_event ev;
    ev.t = fake_event::type::stored;
    // ATOM #1316 (written only in that era): the first block's position in the sequence.
    ev.token_offset = static_cast<int64_t>(first_block) * opt.block_size;
    for (uint64_t h : hashes) ev.block_hashes.push_back(wire_hash(h));
    if (has_parent) ev.parent = wire_hash(parent);
    ev.token_ids = tokens;
    ev.block_size = opt.block_size;
    if (adapter >= 0) {
      if (opt.lora_ids) ev.lora_id = adapter + 1;
      if (opt.lora_names) ev.lora_name = "lora-" + std::to_string(adapter);
    }
    ev.medium = std::string(medium);
    ev.extra_keys = std::vector<block_extra_keys>(hashes.size());
    if (adapter >= 0 && opt.lora_names) {
      for (auto& k : *ev.extra_keys) k = std::vector<extra_key>{extra_key::str(*ev.lora_name)};
    }
    ev.group_idx = group;
    if (group == 0) {
      ev.spec_kind = std::string("full_attention");
    } else {
      ev.spec_kind = std::string("sliding_window");
      ev.sliding_window = opt.sliding_window;
    }
    return ev;
  }

  fake_event removed_event(const std::vector<uint64_t>& hashes, const char* medium,
                           int64_t group) const {
    fake_event ev;
    ev.t = fake_event::type::removed;
    for (uint64_t h : hashes) ev.block_hashes.push_back(wire_hash(h));
    ev.medium = std::string(medium);
    ev.group_idx = group;
    return ev;
  }

  void one_request(std::vector<fake_event>& removals, std::vector<fake_event>& stores) {
    ++stats.requests;
    ++tick;
    const double u = unit();
    const size_t sys = static_cast<size_t>(
        std::lower_bound(zipf_cdf.begin(), zipf_cdf.end(), u) - zipf_cdf.begin());
    std::vector<uint32_t> tokens = system_prompts[std::min(sys, system_prompts.size() - 1)];
    const auto user = random_tokens(uniform(opt.user_blocks_min, opt.user_blocks_max) *
                                    static_cast<size_t>(opt.block_size));
    tokens.insert(tokens.end(), user.begin(), user.end());
    int adapter = -1;
    if (opt.lora_adapters > 0 && unit() < opt.lora_fraction) {
      adapter = static_cast<int>(rng() % opt.lora_adapters);
    }

    // The engine's own chained block hashes; the adapter enters them as vLLM's extra keys do.
    const size_t bs = static_cast<size_t>(opt.block_size);
    const size_t nblocks = tokens.size() / bs;
    std::vector<uint64_t> hashes(nblocks);
    uint64_t prev = adapter >= 0 ? fingerprint::chain(0x10a4ULL, static_cast<uint64_t>(adapter))
                                 : 0x5eedULL;
    for (size_t b = 0; b < nblocks; ++b) {
      prev = fingerprint::chain(prev, fingerprint::content(tokens.data() + b * bs, bs));
      hashes[b] = prev;
    }

    // Leading resident blocks are cache hits; everything after the first miss is stored anew.
    size_t first_new = 0;
    while (first_new < nblocks && gpu.contains(hashes[first_new])) {
      gpu.touch(hashes[first_new], tick, static_cast<uint32_t>(first_new));
      ++first_new;
    }
    stats.blocks_hit += first_new;
    if (first_new == nblocks) return;

    const std::vector<uint64_t> fresh(hashes.begin() + static_cast<std::ptrdiff_t>(first_new),
                                      hashes.end());
    const auto evicted = gpu.evict_for(fresh.size(), opt.capacity_blocks, tick);
    if (!evicted.empty()) {
      stats.blocks_evicted += evicted.size();
      removals.push_back(removed_event(evicted, "GPU", 0));
    }
    for (size_t b = first_new; b < nblocks; ++b) {
      gpu.touch(hashes[b], tick, static_cast<uint32_t>(b));
    }
    stats.blocks_stored += fresh.size();
    const bool has_parent = first_new > 0;
    const uint64_t parent = has_parent ? hashes[first_new - 1] : 0;
    const std::vector<uint32_t> fresh_tokens(
        tokens.begin() + static_cast<std::ptrdiff_t>(first_new * bs),
        tokens.begin() + static_cast<std::ptrdiff_t>(nblocks * bs));
    stores.push_back(
        stored_event(fresh, has_parent, parent, fresh_tokens, adapter, "GPU", 0, first_new));

    if (opt.hybrid) {
      // The sliding-window group stores the same blocks, then drops those outside its window
      // while the full-attention group keeps them: a consumer must not lose the prefix.
      stores.push_back(
          stored_event(fresh, has_parent, parent, fresh_tokens, adapter, "GPU", 1, first_new));
      const size_t window_blocks =
          static_cast<size_t>(std::max<int64_t>(1, opt.sliding_window / opt.block_size));
      if (nblocks > window_blocks) {
        std::vector<uint64_t> out;
        for (size_t b = first_new; b < nblocks - window_blocks; ++b) out.push_back(hashes[b]);
        if (!out.empty()) stores.push_back(removed_event(out, "GPU", 1));
      }
    }

    if (opt.cpu_offload) {
      std::vector<uint64_t> to_cpu;
      size_t first_cpu = nblocks;
      for (size_t b = first_new; b < nblocks; ++b) {
        if (cpu.contains(hashes[b])) continue;
        if (first_cpu == nblocks) first_cpu = b;
        to_cpu.push_back(hashes[b]);
      }
      if (!to_cpu.empty()) {
        const auto cpu_evicted = cpu.evict_for(to_cpu.size(), opt.cpu_capacity_blocks, tick);
        if (!cpu_evicted.empty()) {
          stats.cpu_evicted += cpu_evicted.size();
          // LMCache's multi-process mode (#5076) evicts from its CPU store silently.
          if (opt.cpu_removals) removals.push_back(removed_event(cpu_evicted, "CPU", 0));
        }
        for (size_t b = first_cpu; b < nblocks; ++b) {
          cpu.touch(hashes[b], tick, static_cast<uint32_t>(b));
        }
        stats.cpu_stored += to_cpu.size();
        // Only a contiguous run is one event; offload copies the request's new tail in order.
        const bool cpu_has_parent = first_cpu > 0;
        const uint64_t cpu_parent = cpu_has_parent ? hashes[first_cpu - 1] : 0;
        const std::vector<uint64_t> run(hashes.begin() + static_cast<std::ptrdiff_t>(first_cpu),
                                        hashes.end());
        const std::vector<uint32_t> run_tokens(
            tokens.begin() + static_cast<std::ptrdiff_t>(first_cpu * bs),
            tokens.begin() + static_cast<std::ptrdiff_t>(nblocks * bs));
        stores.push_back(stored_event(run, cpu_has_parent, cpu_parent, run_tokens, adapter, "CPU", 0,
                                      first_cpu));
      }
    }
  }

  fake_event evict_all() {
    std::vector<uint64_t> order;
    order.reserve(gpu.lru.size());
    for (const auto& [t, neg_depth, h] : gpu.lru) order.push_back(h);
    stats.blocks_evicted += order.size();
    gpu.clear();
    return removed_event(order, "GPU", 0);
  }

  std::vector<fake_event> next_batch() {
    std::vector<fake_event> out;
    const bool planned = opt.clear_after_blocks > 0 && !planned_clear_done &&
                         stats.blocks_stored >= opt.clear_after_blocks;
    planned_clear_done = planned_clear_done || planned;
    if (planned || (opt.clear_probability > 0 && unit() < opt.clear_probability)) {
      ++stats.clears;
      gpu.clear();
      cpu.clear();
      fake_event ev;
      ev.t = fake_event::type::cleared;
      out.push_back(ev);
    }
    const size_t requests = uniform(opt.requests_min, opt.requests_max);
    std::vector<fake_event> removals, stores;
    for (size_t r = 0; r < requests; ++r) one_request(removals, stores);
    out.insert(out.end(), removals.begin(), removals.end());
    out.insert(out.end(), stores.begin(), stores.end());
    // Only cache hits: the engine would send nothing this step; a fake step must send something.
    while (out.empty()) {
      one_request(removals, stores);
      out.insert(out.end(), removals.begin(), removals.end());
      out.insert(out.end(), stores.begin(), stores.end());
    }
    return out;
  }
};

workload::workload(workload_options opt) : impl_(std::make_unique<impl>(std::move(opt))) {}
workload::~workload() = default;

std::vector<fake_event> workload::next_batch() { return impl_->next_batch(); }
fake_event workload::evict_all() { return impl_->evict_all(); }

workload::counters workload::stats() const {
  auto s = impl_->stats;
  s.gpu_resident = impl_->gpu.blocks.size();
  s.cpu_resident = impl_->cpu.blocks.size();
  return s;
}

std::string validate(const scripted_options& opt) {
  if (opt.block_size <= 0) return "-block-size must be > 0";
  if (opt.num_blocks <= 0) return "-num-blocks must be > 0";
  if (opt.block_size > (int64_t{1} << 24) || opt.num_blocks > (int64_t{1} << 24) ||
      opt.block_size * opt.num_blocks > (int64_t{1} << 24)) {
    return "-block-size * -num-blocks must be <= 16777216 tokens";
  }
  if (opt.start_token < 0) return "-start-token must be >= 0";
  if (opt.start_token + opt.block_size * opt.num_blocks - 1 > int64_t{0xFFFFFFFF}) {
    return "the last token id must be <= 4294967295";
  }
  if (opt.events < 1 || opt.events > opt.num_blocks) return "-events must be in [1, -num-blocks]";
  return {};
}

std::vector<fake_event> scripted_events(const scripted_options& opt) {
  std::vector<fake_event> out;
  if (!validate(opt).empty()) return out;
  const int64_t base = opt.num_blocks / opt.events;
  const int64_t extra = opt.num_blocks % opt.events;
  int64_t block = 0;
  for (int64_t e = 0; e < opt.events; ++e) {
    const int64_t n = base + (e < extra ? 1 : 0);
    fake_event ev;
    ev.t = fake_event::type::stored;
    if (block > 0) ev.parent = fake_hash::i(0xE000 + block - 1);
    for (int64_t b = 0; b < n; ++b) ev.block_hashes.push_back(fake_hash::i(0xE000 + block + b));
    if (opt.omit_token_ids) {
      ev.token_ids_nil = true;
    } else {
      const int64_t first = opt.start_token + block * opt.block_size;
      ev.token_ids.reserve(static_cast<size_t>(n * opt.block_size));
      for (int64_t t = 0; t < n * opt.block_size; ++t) {
        ev.token_ids.push_back(static_cast<uint32_t>(first + t));
      }
    }
    ev.block_size = opt.block_size;
    ev.medium.reset();
    out.push_back(std::move(ev));
    block += n;
  }
  return out;
}

std::vector<std::string> expect_lines(const scripted_options& opt) {
  std::vector<std::string> out;
  if (!validate(opt).empty()) return out;
  if (opt.omit_token_ids) {
    out.push_back("EXPECT no index entries (token ids omitted: nothing to fingerprint)");
    return out;
  }
  std::vector<uint32_t> tokens;
  const int64_t total = opt.block_size * opt.num_blocks;
  tokens.reserve(static_cast<size_t>(total));
  for (int64_t t = 0; t < total; ++t) tokens.push_back(static_cast<uint32_t>(opt.start_token + t));
  const auto prefixes = fingerprint::prefixes(tokens, opt.block_size);
  for (size_t i = 0; i < prefixes.size(); ++i) {
    std::string hex;
    for (char c : fingerprint::to_be8(prefixes[i])) {
      static const char digits[] = "0123456789abcdef";
      hex.push_back(digits[(static_cast<unsigned char>(c) >> 4) & 0xf]);
      hex.push_back(digits[static_cast<unsigned char>(c) & 0xf]);
    }
    out.push_back("EXPECT prefix_hash[" + std::to_string(i) + "]=" + hex + " token_count=" +
                  std::to_string(static_cast<int64_t>(i + 1) * opt.block_size));
  }
  return out;
}

}  // namespace kvrelay::fake
