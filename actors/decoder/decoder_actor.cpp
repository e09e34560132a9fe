// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/decoder/decoder_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <array>
#include <chrono>
#include <optional>

#include "actors/decoder/batch_router.hpp"
#include "actors/shard/shard_actor.hpp"
#include "base/counter_table.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/rate_limiter.hpp"
#include "base/tsan.hpp"
#include "messages/fan_out.hpp"

namespace kvrelay {

namespace {

// The router's counters with a fixed series each, declared once: one row per series
// (base/counter_table.hpp), resolved at spawn.
constexpr const char* events_help = "Decoded events by type (and medium)";

constexpr counter_row<router_stats> router_rows[] = {
    {"kvrelay_batches_total", "Batches decoded", nullptr, nullptr, &router_stats::decoded},
    {"kvrelay_events_total", events_help, "type", "AllBlocksCleared", &router_stats::cleared},
    {"kvrelay_events_total", events_help, "type", "unknown", &router_stats::unknown_tags},
    {"kvrelay_unmapped_adapter_events_total",
     "BlockStored dropped: LoRA id without a name (fail-closed)", nullptr, nullptr,
     &router_stats::unmapped},
    {"kvrelay_partition_limit_events_total", "BlockStored dropped: too many adapter partitions",
     nullptr, nullptr, &router_stats::partition_limited},
    {"kvrelay_group_filtered_events_total", "Events of non-main KV-cache groups (never indexed)",
     nullptr, nullptr, &router_stats::group_filtered},
    {"kvrelay_wrong_dp_rank_batches_total", "Batches whose DP rank is not the subscribed one",
     nullptr, nullptr, &router_stats::wrong_rank},
};

// The families whose label values are computed (medium, drop reason, unknown medium value,
// event kind and decode error): resolved on first use, once each.
struct decoder_series {
  std::array<std::array<counter_series*, medium_count>, 2> events{};
  std::array<std::array<counter_series*, medium_count>, 2> blocks{};
  std::array<counter_series*, 64> dropped{};  // by decode_error; the last one: wrong_dp_rank
  std::map<std::string, counter_series*> unknown_media;
  // BR7: by event kind and decode_error, resolved on first use.
  std::array<std::array<counter_series*, decode_error_count>, event_kind_count> malformed{};
};

struct decoder_state {
  static inline constexpr const char* name = "decoder";

  pipeline_context ctx;
  batch_router router;
  router_output out;
  uint64_t last_seq = 0;
  // Durable index (the snapshot's position and history). Every batch moves the
  // position, decodable or not: it was applied, as nothing.
  std::optional<uint64_t> next_seq;          // unset: nothing decoded or restored yet
  bool awaiting_first = true;                // the incarnation's first batch says its history
  std::optional<uint64_t> history_from;      // 0: the index holds the engine's whole history
  uint64_t incarnations = 0;                 // engine incarnation resets seen by this data path
  std::function<void(size_t)> credit;
  debouncer_actor debouncer;
  shard_actor shard;

  rate_limiter bad_batch_log{5, 10'000};
  rate_limiter bad_event_log{5, 10'000};
  std::optional<counter_table<router_stats>> counters;
  decoder_series series;
  router_stats published;  // what /metrics already has of the computed families

  decoder_state() = default;
};

using decoder_self = decoder_actor::stateful_pointer<decoder_state>;

constexpr size_t wrong_rank_slot = 63;

counter_series& drop_series(decoder_state& st, size_t slot, const char* reason) {
  auto*& s = st.series.dropped[slot];
  if (s == nullptr)
    s = &st.ctx.counter("kvrelay_batches_dropped_total",
                        "Batches dropped whole, by reason (never half-applied)",
                        {{"reason", reason}});
  return *s;
}

// Adds what the protocol counted since last time (a few dozen compares per batch).
void publish(decoder_state& st) {
  const router_stats& now = st.router.stats();
  router_stats& was = st.published;
  auto& se = st.series;
  st.counters->publish(now);
  static const char* const event_type_label[2] = {"BlockStored", "BlockRemoved"};
  static const char* const block_type_label[2] = {"stored", "removed"};
  const auto by_medium = [&](counter_series*& s, const char* metric, const char* help,
                             const char* type, size_t m, uint64_t now_v, uint64_t& was_v) {
    if (now_v == was_v) return;
    if (s == nullptr)
      s = &st.ctx.counter(metric, help,
                          {{"type", type}, {"medium", medium_label(static_cast<medium_id>(m))}});
    s->advance(now_v, was_v);
  };
  for (size_t t = 0; t < 2; ++t) {
    for (size_t m = 0; m < medium_count; ++m) {
      by_medium(se.events[t][m], "kvrelay_events_total", events_help,
                event_type_label[t], m, now.events_by_medium[t][m], was.events_by_medium[t][m]);
      by_medium(se.blocks[t][m], "kvrelay_blocks_total", "Block hashes in decoded events",
                block_type_label[t], m, now.blocks_by_medium[t][m], was.blocks_by_medium[t][m]);
    }
  }
  if (now.unknown_medium != was.unknown_medium) {
    for (const auto& [value, n] : now.unknown_media) {
      uint64_t& before = was.unknown_media[value];
      if (n == before) continue;
      auto*& s = se.unknown_media[value];
      if (s == nullptr)
        s = &st.ctx.counter("kvrelay_unknown_medium_events_total",
                            "Events at a medium kvrelay does not know: never indexed",
                            {{"medium", value}});
      s->advance(n, before);
    }
    was.unknown_medium = now.unknown_medium;
  }
  if (now.malformed_total != was.malformed_total) {
    for (size_t k = 0; k < event_kind_count; ++k) {
      for (size_t r = 0; r < decode_error_count; ++r) {
        if (now.malformed[k][r] == was.malformed[k][r]) continue;
        auto*& s = se.malformed[k][r];
        if (s == nullptr)
          s = &st.ctx.counter(
              "kvrelay_malformed_events_total",
              "Events skipped as undecodable, by type and reason (the rest of the batch applies)",
              {{"type", to_string(static_cast<event_kind>(k))},
               {"reason", to_string(static_cast<decode_error>(r))}});
        s->advance(now.malformed[k][r], was.malformed[k][r]);
      }
    }
    was.malformed_total = now.malformed_total;
  }
}

// BR7: one line per skipped event (rate limited); a lost removal says what it costs.
void log_malformed(decoder_state& st, uint64_t seq) {
  for (const event_fault& f : st.out.malformed) {
    uint64_t suppressed = 0;
    if (!st.bad_event_log.allow(suppressed)) continue;
    const bool removal = f.kind == event_kind::removed || f.kind == event_kind::cleared;
    log::warn(removal ? "skipping an undecodable removal: the index may hold blocks the engine "
                        "dropped until it clears its cache (index incomplete)"
                      : "skipping an undecodable event; the rest of its batch applies",
              {{"replica", st.ctx.name}, {"seq", seq}, {"event", f.index},
               {"type", to_string(f.kind)}, {"reason", to_string(f.reason)}, {"err", f.what},
               {"suppressed", suppressed}});
  }
}

// What a unit of decoded work holds on the heap, for its charge to the memory budget.
uint64_t work_bytes(const shard_work& w) {
  uint64_t n = sizeof(shard_work) + w.events.capacity() * sizeof(kv_event) +
               w.partitions.capacity() * sizeof(uint32_t);
  for (const auto& e : w.events) {
    n += e.stored.block_hashes.capacity() * sizeof(engine_hash) +
         e.stored.token_ids.capacity() * sizeof(uint32_t) +
         e.removed.block_hashes.capacity() * sizeof(engine_hash) +
         e.removed.remaining_copies.capacity() * sizeof(uint32_t);
  }
  for (const auto& p : w.new_partitions) n += sizeof(std::string) + p.capacity();
  return n;
}

// Executes what the protocol decided, in its order.
void execute(decoder_self self, uint64_t seq) {
  auto& st = self->state;
  router_output& out = st.out;
  if (out.error != decode_error::none) {
    drop_series(st, static_cast<size_t>(out.error), to_string(out.error)).inc();
    uint64_t suppressed = 0;
    if (st.bad_batch_log.allow(suppressed))
      log::warn("dropping undecodable event batch",
                {{"replica", st.ctx.name}, {"seq", seq}, {"reason", to_string(out.error)},
                 {"err", out.detail}, {"suppressed", suppressed}});
  }
  if (out.wrong_rank) drop_series(st, wrong_rank_slot, "wrong_dp_rank").inc();
  log_malformed(st, seq);
  if (out.first_batch && st.ctx.health) self->send(st.ctx.health, health_fact::batch_decoded);
  for (const auto& name : out.new_partitions)
    log::info("adapter partition created", {{"replica", st.ctx.name}, {"adapter", name}});
  for (int64_t id : out.unmapped_ids)
    log::warn(
        "dropping BlockStored for an unmapped LoRA id; add it to --lora-adapter-names "
        "(or POST /debug/adapters) to index it",
        {{"replica", st.ctx.name}, {"lora_id", id}});
  for (const auto& medium : out.unknown_media)
    log::warn("not indexing events at an unknown medium (kvrelay_unknown_medium_events_total)",
              {{"replica", st.ctx.name}, {"medium", medium}});
  if (out.partition_limit_hit)
    log::warn("too many adapter partitions; stores for new adapters are dropped",
              {{"replica", st.ctx.name}, {"partitions", st.router.partitions()}});
  // An AllBlocksCleared: the engine's cache is empty like the index (health: known again).
  const bool engine_cleared = st.router.stats().cleared != st.counters->published().cleared;
  for (auto& step : out.steps) {
    if (step.what == router_step::kind::work) {
      // Charged until the shard is done with it (messages/pipeline.hpp).
      if (st.ctx.budget && step.work)
        step.work->ticket = st.ctx.budget->charge(budget_queue::shard, work_bytes(*step.work));
      self->send(st.shard, std::move(step.work));
      continue;
    }
    self->send(st.shard, atom::clear_v, step.epoch);
    self->send(st.debouncer, atom::clear_v, step.epoch, step.ts_us);
    log::info("pipeline cleared",
              {{"replica", st.ctx.name}, {"reason", step.reason}, {"epoch", step.epoch}});
  }
  out.steps.clear();
  if (engine_cleared && st.ctx.health) self->send(st.ctx.health, health_fact::engine_cleared);
  // After engine_cleared: the router said it only for a loss after the batch's last clear.
  if (out.removal_lost && st.ctx.health) self->send(st.ctx.health, health_fact::removal_lost);
  publish(st);
}

decoder_actor::behavior_type decoder_fn(decoder_self self, pipeline_context ctx,
                                        decoder_options opts, debouncer_actor debouncer,
                                        std::function<void(size_t)> credit) {
  auto& st = self->state;
  st.router = batch_router(opts.router);
  st.debouncer = std::move(debouncer);
  st.ctx = std::move(ctx);
  st.credit = std::move(credit);
  shard_options so{opts.index, opts.restore};
  if (opts.restore) {
    tsan::handoff_consume();  // read by the pipeline's thread before this spawn (base/tsan.hpp)
    st.router.import_state(*opts.restore);
    st.next_seq = opts.restore->next_seq;
    st.history_from = opts.restore->history_from;
    st.awaiting_first = false;
  }
  st.shard = spawn_shard(self, st.ctx, so, st.debouncer);
  const auto& m = st.ctx;
  st.counters.emplace(router_rows, m.metrics, m.labels());
  self->send(st.debouncer, atom::update_v, caf::actor_cast<decoder_actor>(self));
  return {
      [=](raw_batch_ptr rb) {
        auto& s = self->state;
        s.router.on_batch(rb->data, rb->size, s.out, rb->replayed);
        if (s.out.error == decode_error::none && !s.out.wrong_rank) s.last_seq = rb->seq;
        s.next_seq = rb->seq + 1;
        if (s.awaiting_first) {
          s.awaiting_first = false;
          s.history_from = rb->seq;
        }
        const uint64_t cleared = s.router.stats().cleared;
        execute(self, rb->seq);
        if (s.router.stats().cleared != cleared) s.history_from = 0;  // the engine's cache is empty
        if (s.credit) s.credit(1);
      },
      [=](ingress_notice_ptr n) {
        auto& s = self->state;
        if (n->what == ingress_notice::kind::incarnation_reset) {
          s.router.on_incarnation_reset(s.out);
          ++s.incarnations;
          s.awaiting_first = true;
          s.history_from.reset();
          s.next_seq.reset();
        } else if (n->what == ingress_notice::kind::engine_asleep) {
          s.router.on_engine_asleep(s.out);
          s.history_from = 0;
        } else {
          s.router.on_history_lost(s.out);
          s.history_from.reset();
        }
        execute(self, 0);
      },
      [=](atom::walk, uint64_t id, uint32_t partition, uint64_t key, uint32_t max) {
        self->send(self->state.shard, atom::walk_v, id, partition, key, max);
      },
      [=](atom::adapter, int64_t id, std::string& name) {
        auto& s = self->state;
        log::info("adapter mapping added",
                  {{"replica", s.ctx.name}, {"lora_id", id}, {"adapter", name}});
        s.router.add_adapter(id, std::move(name));
        return true;
      },
      [=](atom::crash, const std::string&) -> bool {
        self->send(self->state.shard, atom::crash_v);
        return true;
      },
      [=](atom::drain) -> caf::result<bool> {
        // The shard answers after everything it was sent before: then all of it is ops.
        auto p = self->make_response_promise<bool>();
        self->request(self->state.shard, caf::infinite, atom::drain_v)
            .then([p](bool ok) mutable { p.deliver(ok); },
                  [p](caf::error&) mutable { p.deliver(false); });
        return p;
      },
      [=](atom::snapshot) -> caf::result<snapshot_ptr> {
        // The cut: every batch before this message is decoded and sent to the shard, which
        // adds its partitions after applying them (mailbox order). Nothing decoded yet: no
        // position to resume from, no snapshot (null).
        auto& s = self->state;
        if (!s.next_seq) return snapshot_ptr{};
        auto snap = std::make_shared<snapshot::pipeline_snapshot>();
        s.router.export_state(*snap);
        snap->next_seq = *s.next_seq;
        snap->history_from = s.history_from;
        snap->incarnation = s.incarnations;
        snap->taken_at_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        auto p = self->make_response_promise<snapshot_ptr>();
        tsan::handoff_publish();  // the snapshot crosses threads through CAF (base/tsan.hpp)
        self->request(s.shard, caf::infinite, atom::snapshot_v, std::move(snap))
            .then([p](snapshot_ptr done) mutable { p.deliver(std::move(done)); },
                  [p](caf::error& e) mutable { p.deliver(std::move(e)); });
        return p;
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) -> caf::result<actor_status> {
        auto& s = self->state;
        const auto& rs = s.router.stats();
        actor_status j("decoder", self->mailbox().size());
        j.add("batches", rs.batches);
        j.add("events", rs.events);
        j.add("last_seq", s.last_seq);
        j.add("dropped", rs.dropped);
        j.add("malformed_events", rs.malformed_total);
        j.add("removals_lost", rs.removals_lost);
        j.add("epoch", s.router.epoch());
        j.add("partitions", s.router.partitions());
        j.add("groups_learned", s.router.groups_learned());
        j.add("unknown_medium_events", rs.unknown_medium);
        j.add("last_error", s.router.last_error());
        auto p = self->make_response_promise<actor_status>();
        fan_out_status(self, std::move(j), {{"shard", s.shard, {}}}, p);
        return p;
      },
  };
}

}  // namespace

decoder_actor spawn_decoder(caf::actor_system& sys, const pipeline_context& ctx,
                            const decoder_options& opts, debouncer_actor debouncer,
                            std::function<void(size_t)> credit) {
  return sys.spawn(decoder_fn, ctx, opts, std::move(debouncer), std::move(credit));
}

}  // namespace kvrelay
