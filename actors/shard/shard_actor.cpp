#include "actors/shard/shard_actor.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/rate_limiter.hpp"
#include "base/metrics_registry.hpp"

namespace kvrelay {

namespace {

constexpr size_t resync_chunk = 16384;


struct shard_state {
  static inline constexpr const char* name = "shard";

  pipeline_context ctx;
  shard_options opts;
  positional_index index;
  debouncer_actor debouncer;
  uint64_t epoch = 0;
  std::vector<index_op> scratch;
  index_stats last;  // counters already published
  gauge_series* resident = nullptr;
  rate_limiter no_entries_log{5, 10'000};
};

using shard_self = shard_actor::stateful_pointer<shard_state>;

// Publishes the index counters' growth since last time (cheap: a handful of adds per batch).
void publish_stats(shard_state& st) {
  const auto& now = st.index.stats();
  const auto bump = [&](const char* outcome, uint64_t cur, uint64_t& prev) {
    if (cur == prev) return;
    st.ctx.counter("kvrelay_index_blocks_total",
                   "Index outcomes per block or event, by adapter partition",
                   {{"adapter", st.opts.adapter}, {"outcome", outcome}})
        .inc(cur - prev);
    prev = cur;
  };
  auto& l = st.last;
  bump("stored", now.stored_blocks, l.stored_blocks);
  bump("mismatch_event", now.mismatches, l.mismatches);
  bump("empty_event", now.empty_events, l.empty_events);
  bump("unknown_parent_dropped_event", now.unknown_parent_dropped, l.unknown_parent_dropped);
  bump("unknown_parent_rerooted_event", now.unknown_parent_rerooted, l.unknown_parent_rerooted);
  bump("tainted", now.tainted_blocks, l.tainted_blocks);
  bump("location_update", now.location_updates, l.location_updates);
  bump("location_unknown", now.location_unknown, l.location_unknown);
  bump("unknown_removal", now.unknown_removals, l.unknown_removals);
  bump("downgrade", now.downgrades, l.downgrades);
  bump("evicted", now.evictions, l.evictions);
  bump("cap_evicted", now.cap_evictions, l.cap_evictions);
  bump("token_overflow_event", now.token_overflow, l.token_overflow);
  st.resident->set(static_cast<double>(st.index.size()));
}

void send_ops(shard_self self, int64_t ts_us, bool had_store, bool resync) {
  auto& st = self->state;
  auto out = std::make_shared<shard_ops>();
  out->adapter = st.opts.adapter;
  out->epoch = st.epoch;
  out->ts_us = ts_us;
  out->had_store = had_store;
  out->resync = resync;
  out->ops.swap(st.scratch);  // the index's ops go out as they are: no per-op copy
  self->send(st.debouncer, shard_ops_ptr{std::move(out)});
}

void on_work(shard_self self, const shard_work& w) {
  auto& st = self->state;
  if (w.epoch < st.epoch) return;  // raced a clear; the decoder already superseded it
  st.epoch = w.epoch;
  bool had_store = false;
  for (const auto& ev : w.events) {
    if (ev.type == event_type::stored) {
      had_store = true;
      const auto before = st.index.stats().mismatches + st.index.stats().empty_events;
      const auto ops_before = st.scratch.size();
      st.index.stored(ev.stored, st.scratch);
      const auto after = st.index.stats().mismatches + st.index.stats().empty_events;
      uint64_t suppressed = 0;
      if (after != before && st.scratch.size() == ops_before && !ev.stored.block_hashes.empty() &&
          st.no_entries_log.allow(suppressed))
        log::warn("BlockStored produced no index entries (missing or mismatched token_ids)",
                  {{"replica", st.ctx.name},
                   {"block_hashes", ev.stored.block_hashes.size()},
                   {"token_ids", ev.stored.token_ids.size()},
                   {"block_size", ev.stored.block_size},
                   {"suppressed", suppressed}});
    } else if (ev.type == event_type::removed) {
      st.index.removed(ev.removed, st.scratch);
    }
  }
  if (!st.scratch.empty() || had_store) send_ops(self, engine_ts_to_us(w.ts), had_store, false);
  publish_stats(st);
}

shard_actor::behavior_type shard_fn(shard_self self, pipeline_context ctx, shard_options opts,
                                    debouncer_actor debouncer) {
  auto& st = self->state;
  st.index = positional_index(opts.index);
  st.opts = std::move(opts);
  st.debouncer = std::move(debouncer);
  st.ctx = std::move(ctx);
  st.resident = &st.ctx.gauge("kvrelay_resident_blocks",
                              "Blocks in the reverse map, by adapter partition",
                              {{"adapter", st.opts.adapter}});
  return {
      [=](shard_work_ptr w) { on_work(self, *w); },
      [=](atom::clear, uint64_t epoch) {
        auto& s = self->state;
        if (epoch < s.epoch) return;
        s.epoch = epoch;
        s.index.clear();
        publish_stats(s);
      },
      [=](atom::resync, uint64_t epoch) {
        auto& s = self->state;
        if (epoch < s.epoch) return;
        s.index.for_each_resident([&](uint64_t fp, uint32_t tokens, tier t) {
          s.scratch.push_back(index_op{index_op::kind::upsert, fp, tokens, t});
          if (s.scratch.size() >= resync_chunk) send_ops(self, 0, false, true);
        });
        if (!s.scratch.empty()) send_ops(self, 0, false, true);
      },
      [=](atom::drain) { return true; },  // mailbox order makes this a barrier
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        actor_status j("shard", self->mailbox().size());
        j.add("adapter", s.opts.adapter);
        j.add("resident_blocks", s.index.size());
        j.add("heap_bytes", s.index.heap_bytes());
        j.add("epoch", s.epoch);
        j.add("stored_blocks", s.index.stats().stored_blocks);
        j.add("evictions", s.index.stats().evictions);
        return j;
      },
  };
}

}  // namespace

shard_actor spawn_shard(caf::local_actor* parent, const pipeline_context& ctx,
                        const shard_options& opts, debouncer_actor debouncer) {
  return parent->spawn<caf::linked>(shard_fn, ctx, opts, std::move(debouncer));
}

}  // namespace kvrelay
