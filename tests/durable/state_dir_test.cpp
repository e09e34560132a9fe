// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// A state dir that stays small: an engine known by its URL restarts ten times on new
// ports (a vLLM at port 0); each time kvrelay follows it, and once the new endpoint's snapshot
// is written the old endpoint's snapshot and delta log are removed. The directory then holds one
// snapshot per endpoint served, and its size is said (kvrelay_state_dir_bytes).

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "durable/format/snapshot_format.hpp"
#include "durable/format/state_dir.hpp"
#include "daemon/daemon.hpp"
#include "tests/durable/durable_fixture.hpp"
#include "tests/support/harness.hpp"

namespace kvrelay::durable_e2e {
namespace {

namespace fs = std::filesystem;
constexpr int64_t bs = 16;

TEST(DurableStateDir, OneSnapshotPerServedEndpointAfterTenEngineRestartsOnNewPorts) {
  faults::temp_dir dir;
  const std::string state = dir.path() + "/state";
  std::unique_ptr<fake::engine_http> http;
  std::string url;
  e2e::harness_options o;
  o.any_ports = true;
  o.tweak = [&](config::daemon_config& c) {
    auto& e = c.engines.front();
    e.url = url;
    e.discovery_retry_max = 300ms;
    // The engine's /metrics proves its process (the start time stays: the same process
    // rebinding, as a vLLM whose sockets come back on other ports).
    e.metrics.url = url + "/metrics";
    e.given.metrics_url = true;
    c.state.dir = state;
    c.state.interval = 100ms;
  };
  e2e::harness h(o);
  fake::engine_description d;
  d.model = h.options().engine.model_id;
  d.topic = h.options().engine.topic;
  d.bind = "tcp://127.0.0.1:0";
  d.block_size = bs;
  http = std::make_unique<fake::engine_http>(d, "127.0.0.1", 0, nullptr);
  url = http->url();
  const auto describe = [&] {
    http->update([&](fake::engine_description& x) {
      x.ranks = {{h.live(0).live_endpoint(), h.ring(0).replay_endpoint()}};
    });
  };
  describe();
  ASSERT_TRUE(h.start_daemon(false)) << h.error();
  ASSERT_TRUE(e2e::harness::wait_until([&] { return h.daemon().pipeline_names().size() == 1; }))
      << h.diagnose();
  ASSERT_TRUE(h.sync()) << h.diagnose();

  // One snapshot, of the served endpoint, and only its log's segments.
  const auto only = [&](const std::string& live) {
    const auto snaps = files_with(state, ".kvsnap");
    if (snaps.size() != 1) return false;
    const auto d = snapshot::decode(faults::read_file(snaps[0]));
    if (!d.snapshot || d.snapshot->who.endpoint != live) return false;
    const std::string stem = fs::path(snaps[0]).stem().string();
    for (const auto& seg : files_with(state, ".kvlog"))
      if (fs::path(seg).filename().string().rfind(stem + ".", 0) != 0) return false;
    return true;
  };
  for (int restart = 0; restart <= 10; ++restart) {
    SCOPED_TRACE("restart " + std::to_string(restart));
    if (restart > 0) {
      const auto old = h.live(0).live_endpoint();
      h.rebind_engine(0);
      describe();
      ASSERT_NE(h.live(0).live_endpoint(), old);
      ASSERT_TRUE(e2e::harness::wait_until([&] {
        const auto e = nlohmann::json::parse(h.daemon().engines_json());
        return e.size() == 1 && e[0]["endpoint"] == h.live(0).live_endpoint();
      })) << h.diagnose();
      ASSERT_TRUE(h.sync()) << h.diagnose();
    }
    const auto t = e2e::token_range(1000 * restart + 7, 32);
    h.publish({e2e::stored(e2e::u_hashes({uint64_t(10 + 2 * restart), uint64_t(11 + 2 * restart)}),
                           t, bs)});
    EXPECT_TRUE(e2e::harness::wait_until([&] { return only(h.live(0).live_endpoint()); }))
        << h.diagnose();
  }
  // The size is said, and it is the one snapshot and its log.
  EXPECT_TRUE(e2e::harness::wait_until([&] {
    return h.metric("kvrelay_state_dir_bytes") > 0 &&
           h.metric("kvrelay_state_dir_bytes") == static_cast<double>(state_dir_usage(state).bytes);
  })) << h.metric("kvrelay_state_dir_bytes");
}

}  // namespace
}  // namespace kvrelay::durable_e2e
