// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tests/ops/live_daemon.hpp"

#include <chrono>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "daemon/daemon.hpp"
#include "tests/support/metrics_endpoint.hpp"

namespace kvrelay::ops {

namespace {


using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t block = 16;

double now_seconds() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count()) /
         1e3;
}

// The state of `actor` (a direct child of the pipeline) in a /debug/tree document, or "".
std::string actor_state(const std::string& tree, const std::string& pipeline,
                        const std::string& actor, int64_t* restarts) {
  const auto doc = nlohmann::json::parse(tree, nullptr, false);
  if (!doc.is_object()) return {};
  for (const auto& p : doc.value("pipelines", nlohmann::json::array())) {
    if (p.value("pipeline", "") != pipeline) continue;
    for (const auto& c : p.value("children", nlohmann::json::array())) {
      if (c.value("name", "") != actor) continue;
      if (restarts) *restarts = c.value("restarts", int64_t{-1});
      return c.value("state", "");
    }
  }
  return {};
}

}  // namespace

live_daemon::live_daemon(live_options o) : opt_(std::move(o)) {
  engine_metrics_ = std::make_unique<stats_e2e::metrics_endpoint>();
  // The fixture carries load only; a current vLLM also says its cache size and sleep state,
  // which the coverage and sleep gauges (and so the dashboard's panels of them) need.
  engine_metrics_->serve(200, stats_e2e::metrics_fixture("vllm_metrics_gpu.txt") +
                                  "# TYPE vllm:cache_config_info gauge\n"
                                  "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"} 1\n"
                                  "# TYPE vllm:engine_sleep_state gauge\n"
                                  "vllm:engine_sleep_state{engine=\"0\",sleep_state=\"awake\"} 1\n");
  e2e::harness_options ho;
  ho.engine.metrics.url = engine_metrics_->url();
  ho.engine.metrics.interval = milliseconds(200);
  ho.engine.adapters = {{7, "sql-lora"}};
  const std::string token = opt_.token;
  const std::string state_dir = state_dir_.path() + "/state";
  ho.tweak = [token, state_dir](config::daemon_config& c) {
    c.state.dir = state_dir;
    c.admin.listen = "127.0.0.1:0";
    c.admin.enable_crash_endpoint = true;
    c.admin.token = token;
  };
  h_ = std::make_unique<e2e::harness>(std::move(ho));
}

live_daemon::~live_daemon() {
  h_.reset();
  engine_metrics_.reset();
}

bool live_daemon::start() {
  if (!h_->start_daemon()) {
    error_ = h_->error();
    return false;
  }
  return true;
}

bool live_daemon::drive(int rounds) {
  fake::encode_options opt;
  opt.era = fake::wire_era::d;  // lora_name on the wire, and lora_id through the id map
  std::vector<uint32_t> last;
  for (int i = 0; i < rounds; ++i) {
    opt.ts = now_seconds();
    const uint64_t base = 1000 + static_cast<uint64_t>(i) * 10;
    auto tokens = e2e::token_range(next_token_, 3 * block);
    next_token_ += 3 * block;
    auto lora_tokens = e2e::token_range(next_token_, 2 * block);
    next_token_ += 2 * block;
    auto lora = e2e::stored(e2e::u_hashes({base + 5, base + 6}), lora_tokens, block);
    lora.lora_id = 7;
    h_->publish({e2e::stored(e2e::u_hashes({base, base + 1, base + 2}), tokens, block), lora},
                opt);
    opt.ts = now_seconds();
    h_->publish({e2e::removed(e2e::u_hashes({base + 2}))}, opt);
    last = tokens;
  }
  // A batch the decoder must drop whole (kvrelay_batches_dropped_total), and the stream goes on.
  h_->publish_raw(std::string("\xff\x00\x01", 3));
  // An event it must skip alone (kvrelay_malformed_events_total): [BlockStored, [h], nil].
  auto short_store = e2e::stored(e2e::u_hashes({980'000 + next_token_}),
                                 e2e::token_range(next_token_, block), block);
  short_store.truncate_slots = 3;
  fake::encode_options tuple_era = opt;
  tuple_era.era = fake::wire_era::c;
  h_->publish({short_store}, tuple_era);
  // An event at a medium nobody knows (kvrelay_unknown_medium_events_total): never indexed.
  auto odd = e2e::stored(e2e::u_hashes({990'000 + next_token_}),
                         e2e::token_range(next_token_, block), block);
  next_token_ += block;
  odd.medium = "QUANTUM";
  opt.ts = now_seconds();
  h_->publish({odd}, opt);
  opt.ts = now_seconds();
  auto sentinel = e2e::token_range(next_token_, block);
  next_token_ += block;
  h_->publish({e2e::stored(e2e::u_hashes({999'000 + next_token_}), sentinel, block)}, opt);
  const bool delivered = e2e::harness::wait_until(
      [&] { return h_->metric_sum("kvrelay_batches_dropped_total") >= 1 &&
                   h_->metric_sum("kvrelay_malformed_events_total") >= 1 &&
                   h_->metric_sum("kvrelay_unknown_medium_events_total") >= 1 &&
                   h_->total_prefixes() > 0 &&
                   h_->metric_sum("kvrelay_event_age_seconds_count") > 0 &&
                   // The ingress publishes its counters once a second.
                   h_->metric_sum("kvrelay_received_bytes_total") > 0; },
      seconds(20));
  if (!delivered) error_ = "traffic did not get through:\n" + h_->diagnose();
  return delivered;
}

bool live_daemon::crash_and_wait(const std::string& actor) {
  const auto before = h_->metric("kvrelay_actor_restarts_total",
                                 {{"replica", pipeline()}, {"unit", actor}});
  const auto r = post("/debug/crash?pipeline=" + pipeline() + "&actor=" + actor);
  if (r.status != 200) {
    error_ = "POST /debug/crash answered " + std::to_string(r.status) + ": " + r.body;
    return false;
  }
  const bool back = e2e::harness::wait_until(
      [&] {
        if (h_->metric("kvrelay_actor_restarts_total",
                       {{"replica", pipeline()}, {"unit", actor}}) <= std::max(before, 0.0))
          return false;
        int64_t restarts = -1;
        const auto tree = get("/debug/tree");
        return actor_state(tree.body, pipeline(), actor, &restarts) == "running" && restarts >= 1;
      },
      seconds(20), milliseconds(50));
  if (!back) error_ = actor + " did not come back after its crash:\n" + h_->diagnose();
  return back;
}

faults::http_reply live_daemon::get(const std::string& path, bool with_token) const {
  return faults::http_get(admin_port(), path, with_token ? opt_.token : std::string());
}

faults::http_reply live_daemon::post(const std::string& path, bool with_token) const {
  return faults::http_post(admin_port(), path, with_token ? opt_.token : std::string());
}

uint16_t live_daemon::admin_port() const { return h_->daemon().admin_port(); }

std::string live_daemon::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(admin_port()) + path;
}

const std::string& live_daemon::pipeline() const { return h_->config().engines.front().replica_id; }

int run(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
        std::string& out, std::string* err) {
  faults::temp_dir dir;
  faults::child_process child(args, dir.path());
  const auto rc = child.wait(timeout);
  out = child.out();
  if (err) *err = child.err();
  else out += child.err();
  return rc ? *rc : -1;  // the destructor kills what did not finish
}

}  // namespace kvrelay::ops
