// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Shared pieces of the fault tests: a model of what the engine holds (so every test can compare
// the policy server's index with the truth instead of with counters), a snapshot of what the
// server's index says about one replica, and an environment that wires a fake engine (PUB +
// replay), an in-process policy server and an in-process daemon on loopback ports.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "config/settings.hpp"
#include "base/metrics_registry.hpp"
#include "daemon/daemon.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::faults {

inline constexpr const char* tenant = "t-fault";
inline constexpr const char* model = "m-fault";
inline constexpr const char* replica = "fault-0";
inline constexpr const char* lora = "sql-lora";  // lora_id 1 when the id map is used
inline constexpr const char* topic = "kv";

/// (adapter, prefix hash as lower-case hex of BE8) → (token_count, tier).
using index_view = std::map<std::pair<std::string, std::string>, std::pair<int32_t, int32_t>>;
/// A fingerprint as index_view names it: lower-case hex of its BE8 key.
std::string hex_be8(uint64_t fingerprint);

/// What a serving engine's GPU prefix cache holds, and the events that got it there. Blocks are
/// 16 random tokens; a request either starts a new chain or extends a resident block; above
/// `capacity` the engine evicts leaf blocks (as vLLM's LRU free list does). Deterministic per seed.
class engine_model {
 public:
  struct options {
    uint64_t seed = 1;
    size_t capacity = 300;         // resident blocks before evictions start
    double lora_fraction = 0.3;    // new chains under the adapter
    bool lora_names = true;        // write lora_name (else lora_id only: needs the id map)
    int64_t lora_id = 1;
  };
  engine_model() : engine_model(options{}) {}
  explicit engine_model(options o);

  /// The events of the next engine step (stores, then evictions if over capacity).
  std::vector<fake::fake_event> step();
  /// An AllBlocksCleared event; the cache is empty afterwards.
  std::vector<fake::fake_event> clear();
  /// A restarted engine remembers nothing (no event).
  void forget();

  /// What the server should hold for this replica.
  index_view expected() const;
  size_t resident() const { return blocks_.size(); }
  /// Blocks stored plus blocks evicted so far: an upper bound on the keys that changed.
  uint64_t ops() const { return ops_; }
  options& opts() { return opt_; }

 private:
  struct block {
    std::string adapter;
    uint64_t fp = 0;
    int32_t tokens = 0;  // cumulative through this block
    std::optional<uint64_t> parent;
    int children = 0;
  };
  uint64_t new_hash();
  void store_chain(std::vector<fake::fake_event>& out);
  void evict(std::vector<fake::fake_event>& out);
  // Hashes with O(1) insert, erase and a uniform pick (the model runs at a benchmark's rate).
  struct pick_set {
    std::vector<uint64_t> items;
    std::unordered_map<uint64_t, size_t> at;
    void add(uint64_t h);
    void drop(uint64_t h);
    void clear() {
      items.clear();
      at.clear();
    }
  };

  options opt_;
  std::mt19937_64 rng_;
  uint64_t next_hash_ = 0;
  uint64_t ops_ = 0;
  std::map<uint64_t, block> blocks_;
  pick_set all_;     // every resident block (a new request's possible parent)
  pick_set leaves_;  // blocks without children: the evictable ones
};

/// The server's entries for (tenant, model, replica), from its index dump.
index_view server_view(policy::policy_server& server, const std::string& replica_id = replica);
/// A few lines naming what is missing, extra or different ("" when equal).
std::string describe_diff(const index_view& want, const index_view& got, size_t max_lines = 8);

/// Polls `pred` every 20 ms until it holds or `timeout` passes; returns its last value.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

/// A daemon config for one engine with the short timeouts the fault tests need.
config::daemon_config make_config(const std::string& server_target, const std::string& live,
                                  const std::string& replay);

/// Policy server + fake engine + daemon. Nothing starts in the constructor except the server and
/// the engine's sockets (unless told otherwise), so tests can change `cfg` first.
class fault_env {
 public:
  struct options {
    bool start_engine = true;
    std::optional<policy::tls_options> tls;
    engine_model::options model;
    size_t buffer_steps = 100000;  // the engine's replay ring (default: the whole test's history)
  };
  fault_env() : fault_env(options{}) {}
  explicit fault_env(options o);
  ~fault_env();

  /// Starts the daemon with `cfg`; false (with the reason in `error`) when it cannot start.
  /// With an engine and `sync`, returns only once the daemon is live (see sync()), so what a
  /// test publishes next arrives on a subscription known to be in effect.
  bool start_daemon(std::string* error = nullptr, bool sync = true);
  /// Binds the engine's sockets (when start_engine was false, or after stop_engine()).
  void start_engine(const std::string& live = "tcp://127.0.0.1:*",
                    const std::string& replay = "tcp://127.0.0.1:*");
  void stop_engine();
  /// Publishes `steps` engine steps (one batch each); returns the last seq.
  uint64_t publish_steps(size_t steps);
  void publish_events(const std::vector<fake::fake_event>& events);

  /// Waits until the server's view equals the model's; on timeout, returns the diff.
  std::string wait_consistent(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  /// Publishes empty batches (they index and evict nothing, so the model is unchanged) until
  /// the ingress has received a live batch and finished its catch-up: the subscription is in
  /// effect, the slow joiner is past. False after `timeout`.
  bool sync(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Publishes one step at a time until the daemon is live as sync() means it. False after
  /// `timeout`.
  bool wait_live(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// A numeric field of a child's /debug/tree entry ("ingress", "emitter", ...; -1 when absent).
  int64_t child_field(const std::string& child, const std::string& field);
  /// A boolean field of a child's /debug/tree entry (false when absent).
  bool child_flag(const std::string& child, const std::string& field);
  /// A field of the ingress' /debug/tree entry (-1 when absent).
  int64_t ingress_field(const std::string& field);
  /// A boolean field of the ingress' /debug/tree entry (false when absent).
  bool ingress_flag(const std::string& field);
  /// A numeric field of a grandchild's /debug/tree entry, e.g. the debouncer's
  /// "target[127.0.0.1:P]" ("lag_overflows", "units_failed"; -1 when absent).
  int64_t grandchild_field(const std::string& child, const std::string& grandchild,
                           const std::string& field);

  /// A counter or gauge of the daemon's registry with the replica label (-1 when absent).
  double metric(const std::string& name, label_set extra = {}) const;
  /// The sum of every series of `name` with the replica label and `match` among its labels,
  /// whatever its other labels (-1 when none exists yet, e.g. a family whose series are made on
  /// the first count, such as kvrelay_batches_dropped_total{reason}).
  double metric_sum(const std::string& name, label_set match = {}) const;

  policy::policy_server server;
  size_t buffer_steps = 100000;
  std::unique_ptr<fake::publisher> engine;
  engine_model model;
  config::daemon_config cfg;
  std::unique_ptr<kvrelay::daemon> d;

 private:
  static policy::server_options server_options_for(const options& o);
};

/// Runs `args` with stdout/stderr captured; helpers for the process-level tests.
class child_process {
 public:
  child_process(const std::vector<std::string>& args, const std::string& out_dir);
  ~child_process();  // kills (SIGKILL) if still running
  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  /// Waits up to `timeout`; the exit code (128+signal when killed by one), or nullopt.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  std::string out() const;
  std::string err() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_path_, err_path_;
};

/// A fresh temporary directory, removed with its contents on destruction.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

std::string read_file(const std::string& path);

/// HTTP on loopback (admin port); status -1 when the connection failed.
struct http_reply {
  int status = -1;
  std::string body;
};
http_reply http_get(uint16_t port, const std::string& path, const std::string& token = {});
http_reply http_post(uint16_t port, const std::string& path, const std::string& token = {});

}  // namespace kvrelay::faults
