// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The memory budget where it counts: the real kvrelay binary in a real memory cgroup (v1 at
// /sys/fs/cgroup/memory, else v2), with no budget configured, so the budget must come from the
// cgroup's limit through the daemon's own /proc/self/cgroup (MS2/MS3 less MS4's margin). A burst
// several times the limit, at the engine's full speed, into an engine socket that drops past
// 200 batches: kvrelay pauses, is never OOM-killed, stays under the limit, and indexes again
// exactly once the engine clears. The engine and the policy server run in the test process,
// outside the cgroup.
//
// Making a cgroup needs root; without it the test skips (with CI=true it fails: CI runs it).
#include <algorithm>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/fingerprint.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/skip.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string binary = KVRELAY_BINARY_DIR "/kvrelay";
constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t limit = 96 * MiB;
// MS4: the limit less a quarter of it (at least 24 MiB).
constexpr uint64_t derived_budget = limit - std::max(limit / 4, 24 * MiB);  // MS4

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// "key value" lines (memory.events, memory.oom_control): the value of `key`, or nullopt.
std::optional<uint64_t> keyed(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return std::nullopt;
}

// A memory cgroup of the test's own with a limit: v1 where the host has the v1 memory
// controller (as this project's machines do), else v2 (memory enabled for children of the root).
class memory_cgroup {
 public:
  explicit memory_cgroup(uint64_t bytes) {
    const std::string name = "kvrelay-test-" + std::to_string(::getpid());
    if (fs::exists("/sys/fs/cgroup/memory/cgroup.procs")) {
      v2_ = false;
      dir_ = "/sys/fs/cgroup/memory/" + name;
    } else if (const auto c = read_text("/sys/fs/cgroup/cgroup.controllers");
               c && c->find("memory") != std::string::npos) {
      v2_ = true;
      dir_ = "/sys/fs/cgroup/" + name;
      write_text("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
    } else {
      why_ = "no memory cgroup controller (neither v1 nor v2) on this machine";
      return;
    }
    std::error_code ec;
    if (!fs::create_directory(dir_, ec)) {
      why_ = "cannot make " + dir_ + ": " + (ec ? ec.message() : "it exists");
      dir_.clear();
      return;
    }
    if (!write_text(file(v2_ ? "memory.max" : "memory.limit_in_bytes"), std::to_string(bytes))) {
      why_ = "cannot set the limit in " + dir_;
      return;
    }
    // No swap: past the limit is the OOM killer, as in a pod without swap.
    if (v2_) write_text(file("memory.swap.max"), "0");
    else write_text(file("memory.swappiness"), "0");
    ok_ = true;
  }
  ~memory_cgroup() {
    if (!dir_.empty()) ::rmdir(dir_.c_str());  // empty once the child exited
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  bool v2() const { return v2_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  /// The shell words that move the shell into the cgroup and exec the command after them.
  std::vector<std::string> wrap(const std::vector<std::string>& args) const {
    std::vector<std::string> out{"/bin/sh", "-c",
                                 "echo $$ > '" + file("cgroup.procs") + "' && exec \"$0\" \"$@\""};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }
  uint64_t oom_kills() const {
    const auto t = read_text(file(v2_ ? "memory.events" : "memory.oom_control"));
    return t ? keyed(*t, "oom_kill").value_or(0) : 0;
  }
  /// The most the cgroup ever used (v1 max_usage_in_bytes, v2 memory.peak); nullopt if the
  /// kernel does not say (v2 before 5.19).
  std::optional<uint64_t> peak() const {
    const auto t = read_text(file(v2_ ? "memory.peak" : "memory.max_usage_in_bytes"));
    if (!t) return std::nullopt;
    return std::stoull(*t);
  }
  std::string procs() const { return read_text(file("cgroup.procs")).value_or(""); }

 private:
  std::string dir_, why_;
  bool v2_ = false;
  bool ok_ = false;
};

// -- the workload: every batch different (the overload test's, tests/memory/overload_e2e_test) --

constexpr int64_t bs = 16;
constexpr uint32_t blocks_per_batch = 256;
constexpr uint32_t residue = 8;

uint64_t block_hash(uint32_t batch, uint32_t i) {
  return 0x6100000000ull + uint64_t{batch} * blocks_per_batch + i + 1;
}
std::vector<uint32_t> batch_tokens(uint32_t k) {
  std::vector<uint32_t> t = e2e::token_range(1000, blocks_per_batch * bs);
  t[0] = k % 30000;
  t[1] = 30000 + k / 30000;
  return t;
}
std::string batch_payload(uint32_t k, bool clear_first = false) {
  std::vector<fake::fake_hash> stores;
  for (uint32_t i = 0; i < blocks_per_batch; ++i)
    stores.push_back(fake::fake_hash::u(block_hash(k, i)));
  std::vector<fake::fake_event> ev;
  if (clear_first) ev.push_back(e2e::cleared());
  ev.push_back(e2e::stored(std::move(stores), batch_tokens(k), bs));
  if (k > 0 && !clear_first) {
    std::vector<fake::fake_hash> gone;
    for (uint32_t i = residue; i < blocks_per_batch; ++i)
      gone.push_back(fake::fake_hash::u(block_hash(k - 1, i)));
    ev.push_back(e2e::removed(std::move(gone)));
  }
  return fake::encode_batch(ev, fake::encode_options{});
}

// -- the daemon as a process ------------------------------------------------------------------

uint16_t admin_port(const child_process& p) {
  static const std::regex listening(R"(admin port listening listen=127\.0\.0\.1:([0-9]+))");
  const std::string err = p.err();
  std::smatch m;
  return std::regex_search(err, m, listening) ? static_cast<uint16_t>(std::stoi(m[1].str())) : 0;
}

// Every series of `family` summed from a /metrics page (-1 when none).
double family_sum(const std::string& page, const std::string& family,
                  const std::string& with = "") {
  std::istringstream in(page);
  std::string line;
  double sum = -1;
  while (std::getline(in, line)) {
    if (line.rfind(family, 0) != 0) continue;
    const char next = line.size() > family.size() ? line[family.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    if (!with.empty() && line.find(with) == std::string::npos) continue;
    sum = std::max(sum, 0.0) + std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST(MemoryCgroup, BurstSeveralTimesTheLimitIsBoundedByTheBudgetTheDaemonDerivedFromIt) {
  if (::geteuid() != 0) KVRELAY_SKIP("making a memory cgroup needs root");
  memory_cgroup cg(limit);
  if (!cg.ok()) KVRELAY_SKIP(cg.why());

  policy::policy_server server;
  ASSERT_TRUE(server.start());
  fake::publisher_options po;
  po.replay_bind = "tcp://127.0.0.1:*";
  po.topic = "kv";
  po.buffer_steps = 2000;  // far less than the burst: what it cannot replay is declared lost
  po.sndhwm = 200;
  po.linger_ms = 0;
  fake::publisher engine(po);

  temp_dir dir;
  dir.write("kvrelay.toml",
            "[server]\naddress = \"" + server.target() +
                "\"\non_shutdown = \"keep\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[log]\n"
                "format = \"text\"\nlevel = \"info\"\n\n[[engine]]\nreplica_id = \"" +
                replica + "\"\nmodel_id = \"" + model + "\"\ntenant_id = \"" + tenant +
                "\"\nendpoint = \"" + engine.live_endpoint() + "\"\nreplay_endpoint = \"" +
                engine.replay_endpoint() + "\"\ntopic = \"kv\"\nwindow = \"10ms\"\n\n"
                "[engine.metrics]\nurl = \"\"\n");
  child_process p(cg.wrap({binary, "--config", dir.file("kvrelay.toml")}), dir.path());
  ASSERT_GT(p.pid(), 0);
  uint16_t port = 0;
  ASSERT_TRUE(wait_until([&] { return (port = admin_port(p)) != 0 || p.wait(0ms).has_value(); },
                         20s) &&
              port != 0)
      << p.err();
  EXPECT_NE(cg.procs().find(std::to_string(p.pid())), std::string::npos)
      << "kvrelay is not in the test's cgroup";
  const auto page = [&] { return http_get(port, "/metrics").body; };

  // The budget came from the cgroup, through /proc/self/cgroup (no [memory] in the config).
  const std::string source = cg.v2() ? "cgroup-v2" : "cgroup-v1";
  const std::string budget_series =
      "kvrelay_memory_budget_bytes{source=\"" + source + "\"} " + std::to_string(derived_budget);
  EXPECT_NE(page().find(budget_series), std::string::npos) << page();
  EXPECT_NE(p.err().find("limit " + std::to_string(limit / MiB) + " MiB"), std::string::npos)
      << p.err();

  // Live: an empty batch reaches the decoder (the subscription is in effect).
  ASSERT_TRUE(wait_until(
      [&] {
        if (family_sum(page(), "kvrelay_batches_total") >= 1) return true;
        engine.publish(fake::encode_batch({}, fake::encode_options{}));
        return false;
      },
      20s));

  // The burst: 4x the cgroup's limit in bytes, as fast as the engine can.
  uint32_t k = 0;
  uint64_t bytes = 0;
  while (bytes < 4 * limit) {
    const auto payload = batch_payload(k++);
    bytes += payload.size();
    engine.publish(payload);
  }
  // A real engine goes on publishing: the next batches reveal any tail its socket dropped. Until
  // kvrelay decoded the last one, or declared what it could not replay lost.
  const auto caught_up = [&] {
    const auto m = page();
    return family_sum(m, "kvrelay_queue_bytes") == 0 &&
           family_sum(m, "kvrelay_batches_total") + family_sum(m, "kvrelay_batches_lost_total") +
                   family_sum(m, "kvrelay_history_skipped_batches_total") >=
               static_cast<double>(engine.next_seq());
  };
  ASSERT_TRUE(wait_until(
      [&] {
        if (p.wait(0ms).has_value()) return true;
        if (caught_up()) return true;
        engine.publish(fake::encode_batch({}, fake::encode_options{}));
        return false;
      },
      120s))
      << page();
  ASSERT_FALSE(p.wait(0ms).has_value()) << "kvrelay died: exit " << *p.wait(0ms) << "\n"
                                         << p.err();
  EXPECT_EQ(cg.oom_kills(), 0u);
  if (const auto peak = cg.peak()) {
    EXPECT_LT(*peak, limit) << "the cgroup hit its limit";
    std::printf("[ measure  ] cgroup peak %.1f MiB of %llu MiB, burst %.0f MiB in %u batches\n",
                static_cast<double>(*peak) / MiB, static_cast<unsigned long long>(limit / MiB),
                static_cast<double>(bytes) / MiB, k);
  }
  const auto m = page();
  EXPECT_GE(family_sum(m, "kvrelay_overloads_total"), 1) << "the budget never paused the ingress";
  EXPECT_GT(family_sum(m, "kvrelay_ingress_paused_seconds_total"), 0);

  // The engine clears and stores one more batch: the index is exact again.
  engine.publish(batch_payload(k, /*clear_first=*/true));
  std::set<std::string> want;
  for (uint64_t fp : fingerprint::prefixes(batch_tokens(k), bs)) want.insert(hex_be8(fp));
  std::set<std::string> got;
  EXPECT_TRUE(wait_until(
      [&] {
        got.clear();
        for (const auto& [key, v] : server_view(server)) got.insert(key.second);
        return got == want;
      },
      60s))
      << "want " << want.size() << " prefixes, got " << got.size() << "\n" << page();
  p.signal(SIGTERM);
  const auto code = p.wait(20s);
  ASSERT_TRUE(code.has_value()) << p.err();
  EXPECT_EQ(*code, 0) << p.err();
}

}  // namespace
}  // namespace kvrelay::faults
