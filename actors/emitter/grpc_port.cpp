// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The gRPC policy_port: builds the protobuf messages of each action and runs them through
// policy_client; completions and channel changes go to the port_inbox.
//
// Per-unit cost: a unit's stream is written in wire form straight from the unit, one message at
// a time, each into its own gRPC buffer (unit_wire.hpp): no protobuf message is built for it.
// The serialized stream is shared (unit_encodings): with several targets, building and
// serializing were half of what each extra target cost.
#include "actors/emitter/policy_port.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "actors/emitter/unit_wire.hpp"
#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic = inferencecache::v1alpha1;

namespace kvrelay::emitter {

namespace {

void set_identity(ic::CacheStateUpdate& u, const replica_identity& id) {
  u.set_replica_id(id.replica_id);
  u.set_model_id(id.model_id);
  u.set_tenant_id(id.tenant_id);
  u.set_hash_scheme(id.hash_scheme);
}

// A unit's stream (unit_wire.hpp): its messages written straight from the unit.
class unit_wire_source final : public wire_source {
 public:
  unit_wire_source(const port_config& cfg, emit_unit_ptr unit, bool with_expirations)
      : wire_(cfg.identity, cfg.max_entries_per_message, cfg.max_bytes_per_message,
              std::move(unit), with_expirations) {}
  size_t next_size() override { return wire_.next_size(); }
  void write(uint8_t* out) override { wire_.write(out); }

 private:
  unit_wire wire_;
};

}  // namespace

// The encodings of the last few units streamed, each kept while its unit lives: the debouncer
// offers a unit to every target at once, so the other ports find it here; a target that lags
// behind by more than `keep` units encodes its own.
class unit_encodings {
 public:
  using source_maker = std::function<std::unique_ptr<wire_source>()>;
  std::shared_ptr<const encoded_stream> get(const emit_unit_ptr& unit, bool with_expirations,
                                            const source_maker& make) {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->unit.expired()) {
        it = entries_.erase(it);
        continue;
      }
      // The address alone could be a new unit's where an old one died; an unexpired weak
      // reference rules that out.
      if (it->key == unit.get() && it->with_expirations == with_expirations) return it->stream;
      ++it;
    }
    auto src = make();
    auto stream = policy_client::encode(*src);
    if (entries_.size() >= keep) entries_.erase(entries_.begin());
    entries_.push_back({unit.get(), unit, with_expirations, stream});
    return stream;
  }

 private:
  static constexpr size_t keep = 4;
  struct entry {
    const emit_unit* key;
    std::weak_ptr<const emit_unit> unit;
    bool with_expirations;
    std::shared_ptr<const encoded_stream> stream;
  };
  std::mutex mu_;
  std::vector<entry> entries_;  // oldest first
};

std::shared_ptr<unit_encodings> make_unit_encodings() { return std::make_shared<unit_encodings>(); }

namespace {

class grpc_port final : public policy_port {
 public:
  grpc_port(const port_config& cfg, std::shared_ptr<port_inbox> inbox,
            std::unique_ptr<policy_client> client)
      : cfg_(cfg),
        inbox_(std::move(inbox)),
        encodings_(cfg.encodings ? cfg.encodings : make_unit_encodings()),
        client_(std::move(client)) {}

  void clear(uint64_t call, int64_t ts_us) override {
    client_->publish(event(ic::CacheEvent::ALL_CLEARED, ts_us), done(call));
  }

  void stream(uint64_t call, emit_unit_ptr unit, bool with_expirations) override {
    auto encoded = encodings_->get(unit, with_expirations, [&] {
      return std::make_unique<unit_wire_source>(cfg_, unit, with_expirations);
    });
    client_->report_encoded(std::move(encoded), done(call));
  }

  void evict(uint64_t call, const prefix_evict& ev) override {
    // One message for every eviction: publish serializes it before returning, and only the
    // actor's thread calls evict.
    ic::CacheEvent& e = evict_msg_;
    if (e.type() != ic::CacheEvent::PREFIX_EVICTED) {
      set_event(e, ic::CacheEvent::PREFIX_EVICTED);
      // The adapter named is the only partition meant, "" included (PR #164); a server that
      // does not read the field sweeps every partition for "", which the debouncer repairs (DB18).
      e.set_adapter_scoped(true);
    }
    e.set_timestamp_us(wire_timestamp_us(ev.ts_us));
    char key[8];
    fingerprint::write_be8(ev.fingerprint, key);
    e.set_prefix_hash(key, sizeof key);
    e.set_adapter_id(ev.adapter);  // "" (the proto3 default) is not written
    // Eviction completions wake the actor a batch at a time, not one by one: waking it (and a
    // CAF worker) per completion cost more than the rest of the emitter's share of an RPC. The
    // end of a burst, and any failure, wake it at once (deferred_completions).
    // [this, call] fits std::function's inline storage: no allocation per call. The port
    // outlives every callback (client_ is its last member: destroyed, and drained, first).
    evicts_.issued();
    client_->publish(e, [this, call](rpc_result r) {
      evicts_.completed(to_event(call, std::move(r)));
    });
  }

  void stats(uint64_t call, const stats_sample& s, int64_t ts_us) override {
    auto u = std::make_shared<ic::CacheStateUpdate>();
    set_identity(*u, cfg_.identity);
    u->set_timestamp_us(wire_timestamp_us(ts_us));
    auto* out = u->mutable_stats();
    out->set_replica_id(cfg_.identity.replica_id);
    out->set_cache_memory_bytes(s.cache_memory_bytes);
    out->set_hit_rate(s.hit_rate);
    out->set_pressure(s.pressure);
    out->set_t2_hit_tokens(s.t2_hit_tokens);
    out->set_t2_query_tokens(s.t2_query_tokens);
    client_->report(std::move(u), done(call));
  }

  void set_deadline(int64_t ms) override {
    client_->set_rpc_timeout(std::chrono::milliseconds(ms));
  }

  void start() override {
    client_->try_connect();
    client_->watch_connectivity([inbox = inbox_](channel_state s) {
      port_event e;
      e.what = port_event::kind::channel;
      e.state = s;
      inbox->push(std::move(e));
    });
  }

  size_t in_flight() const override { return client_->in_flight(); }

 private:
  void set_event(ic::CacheEvent& e, ic::CacheEvent::Type type) const {
    e.set_type(type);
    e.set_replica_id(cfg_.identity.replica_id);
    e.set_model_id(cfg_.identity.model_id);
    e.set_tenant_id(cfg_.identity.tenant_id);
  }

  std::shared_ptr<ic::CacheEvent> event(ic::CacheEvent::Type type, int64_t ts_us) const {
    auto e = std::make_shared<ic::CacheEvent>();
    set_event(*e, type);
    e->set_timestamp_us(wire_timestamp_us(ts_us));
    return e;
  }

  static port_event to_event(uint64_t call, rpc_result r) {
    port_event e;
    e.call = call;
    e.code = static_cast<int32_t>(r.code);
    e.accepted = r.accepted;
    e.latency_us = static_cast<int64_t>(r.latency.count());
    e.message = std::move(r.message);
    return e;
  }

  // The callback runs on a gRPC thread: it only touches the inbox.
  policy_client::callback done(uint64_t call) const {
    return [inbox = inbox_.get(), call](rpc_result r) {
      inbox->push(to_event(call, std::move(r)));
    };
  }

  port_config cfg_;
  std::shared_ptr<port_inbox> inbox_;  // declared before client_: outlives its callbacks
  deferred_completions evicts_{inbox_, cfg_.evict_wake_batch};  // before client_ as well
  std::shared_ptr<unit_encodings> encodings_;
  ic::CacheEvent evict_msg_;  // reused by every evict (identity set by the first)
  std::unique_ptr<policy_client> client_;
};

}  // namespace

std::unique_ptr<policy_port> make_grpc_port(const port_config& cfg,
                                            std::shared_ptr<port_inbox> inbox,
                                            std::string& error) {
  auto client = policy_client::make(cfg.client, error);
  if (!client) return nullptr;
  return std::make_unique<grpc_port>(cfg, std::move(inbox), std::move(client));
}

}  // namespace kvrelay::emitter
