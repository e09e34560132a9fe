#include "actors/decoder/decoder_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <set>

#include "actors/decoder/group_filter.hpp"
#include "actors/decoder/wire_decoder.hpp"
#include "actors/shard/shard_actor.hpp"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/rate_limiter.hpp"
#include "base/metrics_registry.hpp"
#include "messages/status_fanout.hpp"

namespace kvrelay {

namespace {


struct decoder_state {
  static inline constexpr const char* name = "decoder";

  pipeline_context ctx;
  decoder_options opts;
  bool told_first_batch = false;
  uint64_t events = 0;
  uint64_t last_seq = 0;
  std::function<void(size_t)> credit;
  debouncer_actor debouncer;

  wire_decoder decoder;
  group_filter groups;
  kv_event_batch batch;
  uint64_t epoch = 1;
  std::map<std::string, shard_actor> shards;
  std::set<int64_t> warned_unmapped;

  rate_limiter bad_batch_log{5, 10'000};
  uint64_t batches = 0, dropped = 0;
  std::string last_error;

  counter_series* batches_ok = nullptr;
  counter_series* stored_events = nullptr;
  counter_series* removed_events = nullptr;
  counter_series* cleared_events = nullptr;
  counter_series* unknown_events = nullptr;
  counter_series* unmapped = nullptr;
  counter_series* group_filtered = nullptr;
  counter_series* wrong_rank = nullptr;
  counter_series* stored_blocks = nullptr;
  counter_series* removed_blocks = nullptr;
};

using decoder_self = decoder_actor::stateful_pointer<decoder_state>;

counter_series& drop_counter(decoder_state& st, const char* reason) {
  return st.ctx.counter("kvrelay_batches_dropped_total",
                        "Batches dropped whole, by reason (never half-applied)",
                        {{"reason", reason}});
}

shard_actor& shard_for(decoder_self self, const std::string& adapter) {
  auto& st = self->state;
  auto it = st.shards.find(adapter);
  if (it == st.shards.end()) {
    auto hdl = spawn_shard(self, st.ctx, shard_options{adapter, st.opts.index}, st.debouncer);
    it = st.shards.emplace(adapter, hdl).first;
    log::info("adapter partition created",
              {{"replica", st.ctx.name}, {"adapter", adapter}});
  }
  return it->second;
}

// lora_name is the identity when present; else the configured id → name map; else fail-closed.
bool resolve_adapter(decoder_state& st, const block_stored& ev, std::string& out) {
  if (ev.lora_name && !ev.lora_name->empty()) {
    out = *ev.lora_name;
    return true;
  }
  if (!ev.lora_id) {
    out.clear();
    return true;
  }
  auto it = st.opts.adapters.find(*ev.lora_id);
  if (it != st.opts.adapters.end() && !it->second.empty()) {
    out = it->second;
    return true;
  }
  if (st.warned_unmapped.insert(*ev.lora_id).second)  // once per id for the process (A10)
    log::warn(
        "dropping BlockStored for an unmapped LoRA id; add it to --lora-adapter-names "
        "(or POST /debug/adapters) to index it",
        {{"replica", st.ctx.name}, {"lora_id", *ev.lora_id}});
  return false;
}

void clear_pipeline(decoder_self self, int64_t ts_us, const char* why) {
  auto& st = self->state;
  ++st.epoch;
  for (auto& [name, shard] : st.shards) self->send(shard, atom::clear_v, st.epoch);
  self->send(st.debouncer, atom::clear_v, st.epoch, ts_us);
  log::info("pipeline cleared", {{"replica", st.ctx.name}, {"reason", why},
                                  {"epoch", st.epoch}});
}

void on_batch(decoder_self self, const raw_batch& rb) {
  auto& st = self->state;
  ++st.batches;
  std::string detail;
  auto err = st.decoder.decode(rb.data, rb.size, st.batch, &detail);
  if (err != decode_error::none) {
    ++st.dropped;
    drop_counter(st, to_string(err)).inc();
    st.last_error = detail;
    uint64_t suppressed = 0;
    if (st.bad_batch_log.allow(suppressed))
      log::warn("dropping undecodable event batch",
                {{"replica", st.ctx.name}, {"seq", rb.seq}, {"reason", to_string(err)},
                 {"err", detail}, {"suppressed", suppressed}});
    return;
  }
  if (st.opts.expected_dp_rank && st.batch.dp_rank && *st.batch.dp_rank != *st.opts.expected_dp_rank) {
    st.wrong_rank->inc();
    drop_counter(st, "wrong_dp_rank").inc();
    return;
  }
  st.batches_ok->inc();
  st.unknown_events->inc(st.batch.skipped_unknown);
  st.events += st.batch.events.size();
  st.last_seq = rb.seq;
  if (!st.told_first_batch) {
    st.told_first_batch = true;
    if (st.ctx.health) self->send(st.ctx.health, health_fact::batch_decoded);
  }

  // Group events per shard, keeping batch order within each; a clear cuts the batch in two so
  // that nothing before it can land after it.
  std::map<std::string, std::shared_ptr<shard_work>> work;
  const auto flush_work = [&] {
    for (auto& [adapter, w] : work) self->send(shard_for(self, adapter), shard_work_ptr{w});
    work.clear();
  };
  const auto work_for = [&](const std::string& adapter) -> shard_work& {
    auto& w = work[adapter];
    if (!w) {
      w = std::make_shared<shard_work>();
      w->epoch = st.epoch;
      w->ts = st.batch.ts;
    }
    return *w;
  };
  std::string adapter;
  for (auto& ev : st.batch.events) {
    switch (ev.type) {
      case event_type::stored:
        st.stored_events->inc();
        st.stored_blocks->inc(ev.stored.block_hashes.size());
        if (!st.groups.admit(ev.stored)) {
          st.group_filtered->inc();
          break;
        }
        if (!resolve_adapter(st, ev.stored, adapter)) {
          st.unmapped->inc();
          break;
        }
        work_for(adapter).events.push_back(std::move(ev));
        break;
      case event_type::removed:
        st.removed_events->inc();
        st.removed_blocks->inc(ev.removed.block_hashes.size());
        if (!st.groups.admit(ev.removed)) {
          st.group_filtered->inc();
          break;
        }
        // A removal names no adapter: every partition checks its own map (unknown hashes are
        // skipped there). Copies are rare: most pipelines have one partition.
        if (st.shards.size() == 1) {
          work_for(st.shards.begin()->first).events.push_back(std::move(ev));
        } else {
          for (auto& [name, shard] : st.shards) work_for(name).events.push_back(ev);
        }
        break;
      case event_type::cleared:
        st.cleared_events->inc();
        flush_work();
        clear_pipeline(self, engine_ts_to_us(st.batch.ts), "AllBlocksCleared");
        break;
    }
  }
  flush_work();
}

void on_notice(decoder_self self, const ingress_notice& n) {
  auto& st = self->state;
  using k = ingress_notice::kind;
  switch (n.what) {
    case k::history_lost:
      // Events we will never see may have evicted what we reported: no wrong hint may survive.
      clear_pipeline(self, 0, "history lost");
      break;
    case k::incarnation_reset:
      st.groups.reset();
      clear_pipeline(self, 0, "engine restarted (sequence reset)");
      break;
  }
}

decoder_actor::behavior_type decoder_fn(decoder_self self, pipeline_context ctx,
                                        decoder_options opts, debouncer_actor debouncer,
                                        std::function<void(size_t)> credit) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.debouncer = std::move(debouncer);
  st.ctx = std::move(ctx);
  st.credit = std::move(credit);
  const auto& m = st.ctx;
  const auto events = [&](const char* type) -> counter_series& {
    return m.counter("kvrelay_events_total", "Decoded events by type", {{"type", type}});
  };
  st.batches_ok = &m.counter("kvrelay_batches_total", "Batches decoded");
  st.stored_events = &events("BlockStored");
  st.removed_events = &events("BlockRemoved");
  st.cleared_events = &events("AllBlocksCleared");
  st.unknown_events = &events("unknown");
  st.unmapped = &m.counter("kvrelay_unmapped_adapter_events_total",
                           "BlockStored dropped: LoRA id without a name (fail-closed)");
  st.group_filtered = &m.counter("kvrelay_group_filtered_events_total",
                                 "Events of non-main KV-cache groups (never indexed)");
  st.wrong_rank = &m.counter("kvrelay_wrong_dp_rank_batches_total",
                             "Batches whose DP rank is not the subscribed one");
  st.stored_blocks = &m.counter("kvrelay_blocks_total", "Block hashes in decoded events",
                                {{"type", "stored"}});
  st.removed_blocks = &m.counter("kvrelay_blocks_total", "Block hashes in decoded events",
                                 {{"type", "removed"}});
  self->send(st.debouncer, atom::update_v, caf::actor_cast<decoder_actor>(self));
  return {
      [=](raw_batch_ptr rb) {
        on_batch(self, *rb);
        if (self->state.credit) self->state.credit(1);
      },
      [=](ingress_notice_ptr n) { on_notice(self, *n); },
      [=](atom::resync) {
        auto& s = self->state;
        for (auto& [name, shard] : s.shards) self->send(shard, atom::resync_v, s.epoch);
      },
      [=](atom::adapter, int64_t id, std::string& name) {
        auto& s = self->state;
        s.opts.adapters[id] = name;
        s.warned_unmapped.erase(id);
        log::info("adapter mapping added", {{"replica", s.ctx.name}, {"lora_id", id},
                                             {"adapter", name}});
      },
      [=](atom::crash, const std::string&) -> bool {
        auto& s = self->state;
        if (s.shards.empty()) return false;
        self->send(s.shards.begin()->second, atom::crash_v);
        return true;
      },
      [=](atom::drain) -> caf::result<bool> {
        // Every shard answers after what it was sent before: then all of it reached the debouncer.
        auto& s = self->state;
        if (s.shards.empty()) return true;
        auto p = self->make_response_promise<bool>();
        auto left = std::make_shared<size_t>(s.shards.size());
        for (auto& [name, shard] : s.shards)
          self->request(shard, caf::infinite, atom::drain_v)
              .then([p, left](bool) mutable { if (--*left == 0) p.deliver(true); },
                    [p, left](caf::error&) mutable { if (--*left == 0) p.deliver(false); });
        return p;
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) -> caf::result<actor_status> {
        auto& s = self->state;
        actor_status j("decoder", self->mailbox().size());
        j.add("batches", s.batches);
        j.add("events", s.events);
        j.add("last_seq", s.last_seq);
        j.add("dropped", s.dropped);
        j.add("epoch", s.epoch);
        j.add("partitions", s.shards.size());
        j.add("groups_learned", s.groups.learned());
        j.add("last_error", s.last_error);
        std::vector<status_child> kids;
        for (auto& [adapter, shard] : s.shards) kids.push_back({"shard[" + adapter + "]", shard, {}});
        auto p = self->make_response_promise<actor_status>();
        fan_out_status(self, std::move(j), std::move(kids), p);
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
