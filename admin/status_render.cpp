// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "admin/status_render.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <map>

#include "base/build_info.hpp"

namespace kvrelay {

namespace {

nlohmann::ordered_json value_json(const actor_status::value& v) {
  return std::visit(
      [](const auto& x) -> nlohmann::ordered_json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, actor_status::string_map>) {
          auto obj = nlohmann::ordered_json::object();
          for (const auto& [k, s] : x) obj[k] = s;
          return obj;
        } else {
          return x;
        }
      },
      v);
}

nlohmann::ordered_json to_json(const actor_status& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!s.name.empty()) j["name"] = s.name;
  for (const auto& [k, v] : s.supervision) j[k] = value_json(v);
  j["state"] = s.state;
  if (!s.kind.empty()) {
    j["kind"] = s.kind;
    j["mailbox"] = s.mailbox;
  }
  for (const auto& [k, v] : s.fields) j[k] = value_json(v);
  if (!s.children.empty()) {
    auto& kids = j["children"] = nlohmann::ordered_json::array();
    for (const auto& c : s.children) kids.push_back(to_json(c));
  }
  return j;
}

bool parse_int(const std::string& s, int64_t& out) {
  auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), out);
  return err == std::errc() && end == s.data() + s.size();
}

// Replace invalid UTF-8 (an adapter name from the wire) instead of throwing.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string render_tree(const std::vector<pipeline_view>& pipelines, int64_t uptime_s,
                        const actor_status& discovery, const std::string& memory_json) {
  nlohmann::ordered_json doc;
  doc["kvrelay"] = KVRELAY_VERSION;
  doc["revision"] = build::revision();
  doc["build_date"] = build::date();
  doc["uptime_s"] = uptime_s;
  if (!discovery.kind.empty()) doc["discovery"] = to_json(discovery);
  if (!memory_json.empty())
    doc["memory"] = nlohmann::ordered_json::parse(memory_json, nullptr, /*allow_exceptions=*/false);
  auto& arr = doc["pipelines"] = nlohmann::ordered_json::array();
  for (const auto& p : pipelines) arr.push_back(to_json(p.status));
  return dump(doc);
}

std::string render_engines(const std::vector<pipeline_view>& pipelines) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& p : pipelines) {
    const auto& s = p.status;
    const actor_status* dec = s.child("decoder");
    nlohmann::ordered_json j;
    j["pipeline"] = p.name;
    j["replica_id"] = p.replica_id;
    j["endpoint"] = p.endpoint;
    j["replay_endpoint"] = p.replay_endpoint;
    j["topic"] = p.topic;
    if (!p.waiting.empty()) j["waiting"] = p.waiting;
    if (!p.origins.empty()) {
      auto& o = j["origins"] = nlohmann::ordered_json::object();
      for (const auto& [key, origin] : p.origins) o[key] = origin;
    }
    j["connected"] = s.flag("engine_connected");
    // An engine that sends no sequence numbers (ATOM #869) has no last seq: none is made up.
    const actor_status* ing = s.child("ingress");
    const bool unsequenced = ing != nullptr && ing->integer("unsequenced_batches", 0) > 0;
    j["sequence"] = unsequenced ? "none: the engine sends no sequence numbers, so lost batches "
                                  "cannot be detected or replayed"
                                : "per batch";
    if (unsequenced)
      j["last_seq"] = nullptr;
    else
      j["last_seq"] = dec ? dec->integer("last_seq", 0) : 0;
    j["batches"] = dec ? dec->integer("batches", 0) : 0;
    j["events"] = dec ? dec->integer("events", 0) : 0;
    j["ready"] = s.flag("ready");
    j["unhealthy"] = s.flag("unhealthy");
    if (const auto* v = s.find("not_ready"))
      if (const auto* l = std::get_if<actor_status::string_list>(v)) j["not_ready"] = *l;
    if (const auto* v = s.find("index_incomplete"))
      if (const auto* t = std::get_if<std::string>(v)) j["index_incomplete"] = *t;
    j["engine_asleep"] = s.flag("engine_asleep");
    // The durable index (state.dir): what the start restored, or why not, and the last write.
    if (const auto* file = s.find("state_file")) {
      auto& d = j["durable_index"] = nlohmann::ordered_json::object();
      const auto text = [&s](const char* key) -> std::string {
        const auto* v = s.find(key);
        const auto* t = v ? std::get_if<std::string>(v) : nullptr;
        return t ? *t : std::string();
      };
      if (const auto* t = std::get_if<std::string>(file)) d["file"] = *t;
      d["restore"] = text("restore");
      d["restore_reason"] = text("restore_reason");
      d["restore_detail"] = text("restore_detail");
      d["last_snapshot"] = text("last_snapshot");
      // The delta log: whether it is written, its size, what the start replayed.
      d["log"] = text("log");
      d["log_bytes"] = s.integer("log_bytes", 0);
      d["log_replayed_batches"] = s.integer("log_replayed_batches", 0);
      if (!text("log_restore_detail").empty()) d["log_restore_detail"] = text("log_restore_detail");
      d["state_bytes"] = s.integer("state_bytes", 0);
    }
    // The engine's replay ring as learnt from its replies (the ingress' ring span).
    if (ing != nullptr && !p.replay_endpoint.empty()) {
      auto& r = j["replay_ring"] = nlohmann::ordered_json::object();
      const auto* first = ing->find("ring_first_seq");
      const auto* first_i = first ? std::get_if<int64_t>(first) : nullptr;
      const int64_t batches = ing->integer("ring_batches", 0);
      const bool exact = ing->flag("ring_exact");
      r["batches"] = batches;
      r["learnt"] = batches == 0 ? "not yet (no reply)"
                    : exact      ? "exact: the ring has dropped its oldest entries"
                                 : "at least (the ring has not dropped any entry seen)";
      if (first_i != nullptr && *first_i >= 0)
        r["first_seq"] = *first_i;
      else
        r["first_seq"] = nullptr;
      const auto number = [&](const char* key) {
        const auto* v = ing->find(key);
        const auto* d = v ? std::get_if<double>(v) : nullptr;
        return d ? *d : 0.0;
      };
      r["batches_per_second"] = number("batches_per_second");
      r["seconds"] = number("ring_seconds");
    }
    // The policy server targets: each one's state, lag and last error, as the
    // debouncer's delivery machines see them.
    auto targets = nlohmann::ordered_json::array();
    if (const actor_status* deb = s.child("debouncer"))
      for (const auto& c : deb->children) {
        if (c.kind != "target") continue;
        const auto text = [&c](const char* key) -> std::string {
          const auto* v = c.find(key);
          const auto* t = v ? std::get_if<std::string>(v) : nullptr;
          return t ? *t : std::string();
        };
        nlohmann::ordered_json t;
        t["target"] = text("target");
        t["state"] = c.state;
        t["up"] = c.flag("up");
        t["lag_bytes"] = c.integer("lag_bytes", 0);
        t["resyncs"] = c.integer("resyncs", 0);
        t["last_error"] = text("last_error");
        targets.push_back(std::move(t));
      }
    j["targets"] = std::move(targets);
    // Adapters: every partition the index holds (a name from the event's lora_name, or from
    // the id map) with its resident blocks, and every name of the id map even before its first
    // block; `adapter_ids` is the id map itself (configured, or added by POST /debug/adapters).
    auto ids = nlohmann::ordered_json::object();
    std::map<std::string, nlohmann::ordered_json> adapters;
    if (const auto* v = s.find("adapters"))
      if (const auto* m = std::get_if<actor_status::string_map>(v))
        for (const auto& [id, name] : *m) {
          ids[id] = name;
          auto& a = adapters[name];
          if (a.is_null()) a = {{"lora_id", nullptr}, {"resident_blocks", 0}};
          int64_t n = 0;
          if (parse_int(id, n)) a["lora_id"] = n;
        }
    if (dec)
      for (const auto& shard : dec->children) {
        const auto* v = shard.find("resident_by_adapter");
        const auto* m = v ? std::get_if<actor_status::string_map>(v) : nullptr;
        if (!m) continue;
        for (const auto& [name, count] : *m) {
          auto& a = adapters[name];
          if (a.is_null()) a = {{"lora_id", nullptr}, {"resident_blocks", 0}};
          int64_t n = 0;
          if (parse_int(count, n)) a["resident_blocks"] = a["resident_blocks"].get<int64_t>() + n;
        }
      }
    auto out_adapters = nlohmann::ordered_json::object();
    for (auto& [name, a] : adapters) out_adapters[name] = std::move(a);
    j["adapters"] = std::move(out_adapters);
    j["adapter_ids"] = std::move(ids);
    out.push_back(std::move(j));
  }
  return dump(out);
}

std::vector<std::string> target_readiness_lines(const std::vector<pipeline_view>& pipelines) {
  std::vector<std::string> out;
  for (const auto& p : pipelines) {
    const actor_status* deb = p.status.child("debouncer");
    if (!deb) continue;
    std::vector<const actor_status*> targets;
    for (const auto& c : deb->children)
      if (c.kind == "target") targets.push_back(&c);
    if (targets.size() < 2) continue;
    size_t up = 0;
    for (const auto* t : targets) up += t->flag("up") ? 1 : 0;
    const std::string prefix = p.status.flag("ready") ? "degraded (still ready): " : "";
    for (const auto* t : targets) {
      if (t->flag("up")) continue;
      const auto* name = t->find("target");
      const auto* err = t->find("last_error");
      const auto* n = name ? std::get_if<std::string>(name) : nullptr;
      const auto* e = err ? std::get_if<std::string>(err) : nullptr;
      std::string line = prefix + p.name + ": policy target " + (n ? *n : t->name) +
                         " is down (" + std::to_string(up) + " of " +
                         std::to_string(targets.size()) + " up)";
      if (e && !e->empty()) line += ": " + *e;
      out.push_back(std::move(line));
    }
  }
  return out;
}

std::string budget_json(const memory_budget& b) {
  nlohmann::ordered_json o;
  o["budget_bytes"] = b.total_bytes();
  o["budget_source"] = to_string(b.source());
  o["queue_limit_bytes"] = b.limit_bytes();
  o["queue_limit_messages"] = b.limit_messages();
  auto queues = nlohmann::ordered_json::object();
  for (size_t i = 0; i < budget_queue_count; ++i) {
    const auto q = static_cast<budget_queue>(i);
    queues[std::string(to_string(q))] = {{"bytes", b.bytes(q)}, {"messages", b.messages(q)}};
  }
  o["queues"] = std::move(queues);
  o["overloads"] = b.overloads();
  o["paused_readers"] = b.paused_readers();
  return o.dump();
}

}  // namespace kvrelay
