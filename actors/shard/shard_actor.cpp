// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/shard/shard_actor.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "actors/shard/partition_set.hpp"
#include "base/clock.hpp"
#include "base/counter_table.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/rate_limiter.hpp"
#include "base/tsan.hpp"

namespace kvrelay {

namespace {

constexpr size_t status_partitions = 64;  // partitions listed by name in /debug/tree

// Every counter the shard publishes, declared once: one row per series (base/counter_table.hpp).
// kvrelay_index_blocks_total{adapter, outcome}: the index counters, per partition, each series
// made on its first count (partitions times outcomes would list mostly zeros).
constexpr const char* index_blocks = "kvrelay_index_blocks_total";
constexpr const char* index_help = "Index outcomes per block or event, by adapter partition";

constexpr counter_row<index_stats> index_rows[] = {
    {index_blocks, index_help, "outcome", "stored", &index_stats::stored_blocks},
    {index_blocks, index_help, "outcome", "mismatch_event", &index_stats::mismatches},
    {index_blocks, index_help, "outcome", "empty_event", &index_stats::empty_events},
    {index_blocks, index_help, "outcome", "unknown_parent_dropped_event",
     &index_stats::unknown_parent_dropped},
    {index_blocks, index_help, "outcome", "unknown_parent_rerooted_event",
     &index_stats::unknown_parent_rerooted},
    {index_blocks, index_help, "outcome", "tainted", &index_stats::tainted_blocks},
    {index_blocks, index_help, "outcome", "fingerprint_change", &index_stats::fingerprint_changes},
    {index_blocks, index_help, "outcome", "location_update", &index_stats::location_updates},
    {index_blocks, index_help, "outcome", "location_unknown", &index_stats::location_unknown},
    {index_blocks, index_help, "outcome", "unknown_removal", &index_stats::unknown_removals},
    {index_blocks, index_help, "outcome", "removal_tier_absent", &index_stats::removal_tier_absent},
    {index_blocks, index_help, "outcome", "copy_added", &index_stats::copy_added},
    {index_blocks, index_help, "outcome", "reannounced", &index_stats::reannounced},
    {index_blocks, index_help, "outcome", "copies_saturated", &index_stats::copies_saturated},
    {index_blocks, index_help, "outcome", "copy_removed", &index_stats::copy_removed},
    {index_blocks, index_help, "outcome", "authoritative_count",
     &index_stats::authoritative_counts},
    {index_blocks, index_help, "outcome", "copy_counts_ignored_event",
     &index_stats::copy_counts_ignored},
    {index_blocks, index_help, "outcome", "unknown_medium_event",
     &index_stats::unknown_medium_events},
    {index_blocks, index_help, "outcome", "downgrade", &index_stats::downgrades},
    {index_blocks, index_help, "outcome", "evicted", &index_stats::evictions},
    {index_blocks, index_help, "outcome", "l2_downgrade", &index_stats::l2_downgrades},
    {index_blocks, index_help, "outcome", "cap_evicted", &index_stats::cap_evictions},
    {index_blocks, index_help, "outcome", "t2_cap_dropped", &index_stats::t2_cap_drops},
    {index_blocks, index_help, "outcome", "t3_cap_dropped", &index_stats::t3_cap_drops},
    {index_blocks, index_help, "outcome", "token_overflow_event", &index_stats::token_overflow},
    {index_blocks, index_help, "outcome", "refused", &index_stats::refused_blocks},
};

constexpr const char* routing_name = "kvrelay_removal_routing_total";
constexpr const char* routing_help = "Removed hashes by how they were routed to partitions";

constexpr counter_row<partition_set::counters> routing_rows[] = {
    {routing_name, routing_help, "outcome", "unrouted", &partition_set::counters::unrouted_hashes},
    {routing_name, routing_help, "outcome", "shared", &partition_set::counters::shared_hashes},
    {routing_name, routing_help, "outcome", "copy_counts_ignored",
     &partition_set::counters::copy_counts_ignored},
    {routing_name, routing_help, "outcome", "bad_partition",
     &partition_set::counters::bad_partition_events},
};

// One partition's series: the gauge at creation, the index counters on first count.
struct partition_series {
  gauge_series* resident = nullptr;
  counter_table<index_stats> outcomes;
};

struct shard_state {
  static inline constexpr const char* name = "shard";

  pipeline_context ctx;
  partition_set parts;
  debouncer_actor debouncer;
  uint64_t epoch = 0;
  std::vector<partition_series> series;
  std::optional<counter_table<partition_set::counters>> routing;
  rate_limiter no_entries_log{5, 10'000};
  standing_charge charge;    // the index's bytes, on the memory budget (IB1)
  gauge_series* index_bytes = nullptr;
  uint64_t refused = 0;      // blocks the budget refused, as last published
  bool over_budget = false;  // told the supervisor
  rate_limiter refused_log{1, 10'000};
  // PS8: the engine's capacity as the scraper last read it, looked up every `capacity_every`
  // works (the registry's lock and a search, far off the per-block path), and what the base
  // partition was sized for.
  uint32_t works_to_capacity_look = 0;
  size_t reserved = 0;
  // PS8 before traffic: until the first work the shard looks on a timer of its own (backing
  // off, a bounded number of times), so the table is faulted in while the engine is quiet, not
  // under its first batches. A standby table made then for a base partition that the traffic
  // never names goes back at the second look after the traffic started.
  bool quiet = true;
  bool quiet_look_pending = false;
  uint32_t quiet_looks_left = 0;
  uint32_t looks_since_quiet = 0;
};

// Works between two looks at the engine's capacity: a few per second at a real engine's rate.
constexpr uint32_t capacity_every = 256;
// The quiet looks: the first soon after the start (the scraper's first read of the engine),
// then less and less often, ~100 s in all: an engine that has said nothing by then (or no
// scraping) leaves the sizing to the first work's look, and an idle shard no timer.
constexpr caf::timespan quiet_look_first = std::chrono::milliseconds(100);
constexpr caf::timespan quiet_look_max = std::chrono::seconds(10);
constexpr uint32_t quiet_looks = 16;

using shard_self = shard_actor::stateful_pointer<shard_state>;

// New partitions get their series once; every touched one publishes its counters' growth.
void publish(shard_state& st, uint32_t partition) {
  while (st.series.size() < st.parts.size()) {
    const std::string& adapter = st.parts.name(static_cast<uint32_t>(st.series.size()));
    gauge_series* resident = &st.ctx.gauge(
        "kvrelay_resident_blocks", "Blocks in the reverse map, by adapter partition",
        {{"adapter", adapter}});
    st.series.push_back(
        {resident, counter_table<index_stats>(index_rows, st.ctx.metrics,
                                              st.ctx.labels({{"adapter", adapter}}),
                                              counter_table<index_stats>::create::on_first_count)});
  }
  if (partition >= st.series.size()) return;
  const positional_index& idx = st.parts.index(partition);
  const index_stats& now = idx.stats();
  partition_series& ps = st.series[partition];
  const index_stats& was = ps.outcomes.published();
  const uint64_t no_entries_before = was.mismatches + was.empty_events;
  ps.outcomes.publish(now);
  ps.resident->set(static_cast<double>(idx.size()));
  const uint64_t no_entries = now.mismatches + now.empty_events - no_entries_before;
  uint64_t suppressed = 0;
  if (no_entries != 0 && st.no_entries_log.allow(suppressed))
    log::warn("BlockStored produced no index entries (missing or mismatched token_ids)",
              {{"replica", st.ctx.name},
               {"adapter", st.parts.name(partition)},
               {"events", no_entries},
               {"suppressed", suppressed}});
}

void publish_routing(shard_state& st) {
  st.routing->publish(st.parts.stats());
}

std::shared_ptr<shard_ops> make_ops(shard_state& st, uint32_t partition, int64_t ts_us,
                                    bool had_store, std::vector<index_op>&& ops) {
  auto out = std::make_shared<shard_ops>();
  if (partition < st.parts.size()) out->adapter = st.parts.name(partition);
  out->epoch = st.epoch;
  out->ts_us = ts_us;
  out->had_store = had_store;
  out->ops = std::move(ops);  // the index's ops go out as they are: no per-op copy
  return out;
}

void send(shard_self self, std::shared_ptr<shard_ops> out) {
  auto& st = self->state;
  // Charged until the debouncer has folded them into pending or sent the walk's chunk on
  // (messages/pipeline.hpp).
  if (st.ctx.budget)
    out->ticket = st.ctx.budget->charge(
        budget_queue::debouncer,
        sizeof(shard_ops) + out->ops.capacity() * sizeof(index_op) + out->adapter.capacity());
  self->send(st.debouncer, shard_ops_ptr{std::move(out)});
}

void send_ops(shard_self self, uint32_t partition, int64_t ts_us, bool had_store, bool replayed,
              std::vector<index_op>&& ops) {
  auto out = make_ops(self->state, partition, ts_us, had_store, std::move(ops));
  out->replayed = replayed;
  send(self, std::move(out));
}

size_t resident(const partition_set& parts) {
  size_t n = 0;
  for (uint32_t p = 0; p < parts.size(); ++p) n += parts.index(p).size();
  return n;
}

// The index's bytes, charged to the memory budget after every change of its size; a refusal
// (the budget cannot hold another block) is said once per episode (IB rules, memory_budget.hpp).
void charge_index(shard_self self) {
  auto& st = self->state;
  st.charge.set(st.parts.heap_bytes());
  st.index_bytes->set(static_cast<double>(st.charge.bytes()));
  uint64_t refused = 0;
  for (uint32_t p = 0; p < st.parts.size(); ++p) refused += st.parts.index(p).stats().refused_blocks;
  if (refused == st.refused) return;
  const uint64_t now = refused - st.refused;
  st.refused = refused;
  if (st.ctx.health && !st.over_budget) self->send(st.ctx.health, health_fact::index_over_budget);
  st.over_budget = true;
  uint64_t suppressed = 0;
  if (st.refused_log.allow(suppressed))
    log::warn("the memory budget cannot hold every block the engine holds; blocks past it are "
              "not tracked (never reported, so nothing on the server is left unevictable)",
              {{"replica", st.ctx.name}, {"refused_blocks", now}, {"resident", resident(st.parts)},
               {"index_bytes", st.parts.heap_bytes()},
               {"index_limit_bytes", st.ctx.budget ? st.ctx.budget->index_limit_bytes() : 0},
               {"suppressed", suppressed}});
}

// PS8: the scraper publishes the engine's own cache size (kvrelay_engine_cache_blocks
// {kind="capacity"}, from vLLM's cache_config_info num_gpu_blocks or SGLang's pages); read from
// the pipeline's registry, it reaches the shard without a message of its own between two actors
// that otherwise never talk. True when the index is sized for what the engine says (now or
// before); `quiet`: no work yet, so room for an undeclared base partition goes to a standby.
bool look_at_capacity(shard_state& st, bool quiet) {
  const double capacity =
      st.ctx.metrics->sum("kvrelay_engine_cache_blocks", st.ctx.labels({{"kind", "capacity"}}));
  const memory_budget* b = st.ctx.budget.get();
  const uint64_t room = b == nullptr || b->index_bytes() >= b->index_limit_bytes()
                            ? 0
                            : b->index_limit_bytes() - b->index_bytes();
  const size_t want = partition_set::reserve_target(capacity, room, b != nullptr, st.reserved);
  if (want == 0) return st.reserved > 0;
  try {
    if (!(quiet ? st.parts.prepare_base(want) : st.parts.reserve_base(want))) return false;
  } catch (const std::bad_alloc&) {
    return false;  // the table grows as blocks come instead, as without a capacity
  }
  st.reserved = want;
  log::info("index sized from the engine's cache",
            {{"replica", st.ctx.name}, {"engine_capacity_blocks", static_cast<uint64_t>(capacity)},
             {"reserved_blocks", want}, {"index_bytes", st.parts.heap_bytes()},
             {"before_traffic", quiet}});
  return true;
}

void size_from_engine(shard_state& st) {
  if (st.works_to_capacity_look > 0) {
    --st.works_to_capacity_look;
    return;
  }
  st.works_to_capacity_look = capacity_every;
  // A look interval of traffic that never named the base model: its standby goes back.
  if (st.looks_since_quiet++ > 0 && st.parts.drop_standby()) st.reserved = 0;
  look_at_capacity(st, false);
}

void look_while_quiet(shard_self self) {
  auto& st = self->state;
  if (!st.quiet || st.quiet_look_pending || st.quiet_looks_left == 0) return;
  // 100 ms, doubling with every look made, at most quiet_look_max.
  const uint32_t made = quiet_looks - st.quiet_looks_left--;
  const caf::timespan wait = std::min(quiet_look_first * (1 << made), quiet_look_max);
  st.quiet_look_pending = true;
  self->delayed_send(self, wait, atom::size_index_v);
}

void on_work(shard_self self, const shard_work& w) {
  auto& st = self->state;
  if (w.epoch < st.epoch) {  // raced a clear; the decoder already superseded it
    st.parts.declare(w);
    publish(st, ~0u);
    return;
  }
  st.epoch = w.epoch;
  st.quiet = false;
  const int64_t ts_us = engine_ts_to_us(w.ts);
  for (auto& r : st.parts.apply(w)) {
    publish(st, r.partition);
    send_ops(self, r.partition, ts_us, r.had_store, w.replayed, std::move(r.ops));
  }
  publish(st, ~0u);  // series for partitions declared but not touched
  publish_routing(st);
  size_from_engine(st);  // after the work: it may have declared the base partition
  charge_index(self);
}

// A walk's next chunk (debouncer WK1-WK6; partition_set PS7): read at this point of the mailbox,
// so every op this shard sent before reached the debouncer first.
void on_walk(shard_self self, uint64_t id, uint32_t partition, uint64_t key, uint32_t max) {
  auto& st = self->state;
  partition_set::walk_position at{partition, key};
  std::vector<partition_set::result> chunk;
  const walk_cursor c = st.parts.walk(at, std::max<uint32_t>(max, 1), chunk);
  if (chunk.empty()) chunk.push_back(partition_set::result{at.partition, false, {}});
  for (size_t i = 0; i < chunk.size(); ++i) {
    auto out = make_ops(st, chunk[i].partition, 0, false, std::move(chunk[i].ops));
    out->resync = true;
    out->walk = id;
    if (i + 1 == chunk.size()) {
      out->walk_last = true;
      out->walk_done = c.done;
      out->walk_partition = at.partition;
      out->walk_key = at.key;
      out->resident = resident(st.parts);
    }
    send(self, std::move(out));
  }
}

// Durable index: the restored partitions are the index, emitting nothing; the debouncer walks
// them to the server after its start clear (WK4), told by one empty message.
void restore(shard_self self, const snapshot::pipeline_snapshot& s) {
  tsan::handoff_consume();  // the snapshot came through the pipeline and the decoder
  auto& st = self->state;
  // A new data path's epochs start at 1, the decoder's and the debouncer's alike (the
  // snapshot's epoch is the old process's count: an op from a later one would make the
  // debouncer clear again, DB1).
  st.epoch = 1;
  const size_t blocks = st.parts.import_partitions(s.partitions);
  auto note = make_ops(st, 0, 0, false, {});
  note->restored = blocks > 0;
  if (note->restored) send(self, std::move(note));
  for (uint32_t p = 0; p < st.parts.size(); ++p) publish(st, p);
  charge_index(self);
  log::info("index restored from snapshot",
            {{"replica", st.ctx.name}, {"partitions", st.parts.size()},
             {"blocks", s.blocks()}, {"next_seq", s.next_seq}});
}

actor_status status_of(shard_self self) {
  auto& s = self->state;
  actor_status j("shard", self->mailbox().size());
  size_t resident = 0;
  uint64_t stored = 0, evictions = 0;
  actor_status::string_map adapters;
  for (uint32_t p = 0; p < s.parts.size(); ++p) {
    const auto& idx = s.parts.index(p);
    resident += idx.size();
    stored += idx.stats().stored_blocks;
    evictions += idx.stats().evictions;
    if (p < status_partitions) adapters.emplace_back(s.parts.name(p), std::to_string(idx.size()));
  }
  j.add("partitions", s.parts.size());
  j.add("resident_blocks", resident);
  j.add("heap_bytes", s.parts.heap_bytes());
  j.add("directory_entries", s.parts.directory_size());
  j.add("epoch", s.epoch);
  j.add("stored_blocks", stored);
  j.add("evictions", evictions);
  j.add("unrouted_removals", s.parts.stats().unrouted_hashes);
  j.add("resident_by_adapter", std::move(adapters));
  return j;
}

shard_actor::behavior_type shard_fn(shard_self self, pipeline_context ctx, shard_options opts,
                                    debouncer_actor debouncer) {
  auto& st = self->state;
  index_options io = opts.index;
  if (!io.budget) io.budget = ctx.budget;
  st.parts = partition_set(io);
  st.debouncer = std::move(debouncer);
  st.ctx = std::move(ctx);
  st.charge = standing_charge(st.ctx.budget, standing_charge::on::index);
  st.index_bytes = &st.ctx.gauge("kvrelay_index_bytes",
                                 "Bytes the index's tables hold (charged to the memory budget)");
  st.routing.emplace(routing_rows, st.ctx.metrics, st.ctx.labels());
  if (opts.restore) restore(self, *opts.restore);
  st.quiet_looks_left = quiet_looks;
  look_while_quiet(self);
  return {
      [=](shard_work_ptr w) { on_work(self, *w); },
      [=](atom::size_index) {
        auto& s = self->state;
        s.quiet_look_pending = false;
        if (!s.quiet) return;
        const bool sized = look_at_capacity(s, true);
        // The standby's bytes too, and what a reserve that ran out of memory left made.
        charge_index(self);
        if (!sized) look_while_quiet(self);
      },
      [=](atom::snapshot, snapshot_ptr s) {
        // Mailbox order makes this the cut: every work sent before it is applied.
        tsan::handoff_consume();  // the decoder's part of the cut (base/tsan.hpp)
        if (s) self->state.parts.export_partitions(s->partitions);
        tsan::handoff_publish();  // read by the pipeline and the state store's thread
        return s;
      },
      [=](atom::clear, uint64_t epoch) {
        auto& s = self->state;
        if (epoch < s.epoch) return;
        s.epoch = epoch;
        s.parts.clear();
        s.reserved = 0;  // its arrays went back (PT5); the next look sizes it again (PS8)
        s.works_to_capacity_look = 0;
        s.over_budget = false;  // an empty index holds what the engine holds again
        for (uint32_t p = 0; p < s.parts.size(); ++p) publish(s, p);
        charge_index(self);
        // Sized again by the next work's look, not while quiet: a sleeping engine's clear gives
        // the table back for as long as it sleeps. A standby (no blocks) outlives the clear.
      },
      [=](atom::walk, uint64_t id, uint32_t partition, uint64_t key, uint32_t max) {
        on_walk(self, id, partition, key, max);
      },
      [=](atom::drain) { return true; },  // mailbox order makes this a barrier
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) { return tsan::published(status_of(self)); },
  };
}

}  // namespace

shard_actor spawn_shard(caf::local_actor* parent, const pipeline_context& ctx,
                        const shard_options& opts, debouncer_actor debouncer) {
  return parent->spawn<caf::linked>(shard_fn, ctx, opts, std::move(debouncer));
}

}  // namespace kvrelay
