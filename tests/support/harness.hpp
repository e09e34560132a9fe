// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// End-to-end harness: a policy server, one fake engine per DP rank and an in-process kvrelay
// daemon, all on loopback, plus the helpers a pipeline test needs (publish a batch in any wire
// era, force sequence faults, wait with a bounded timeout, read the server's index and metrics,
// route a prompt through LookupRoute). Fault tests reuse it: every part is reachable for fault
// injection (server().set_black_hole(), daemon().crash(), restart_engine() ...).
//
// Each engine rank is two fake-engine publishers kept in lock step: `live` carries the PUB socket
// the daemon subscribes to, `ring` serves the daemon's replay requests from its own ring. Every
// batch goes to both unless a fault says otherwise, which is how a batch can be missing from the
// live stream yet present in the replay ring (a repairable gap) - the publisher alone cannot.
//
// Waiting: never sleep as an assertion. wait_until() polls every 10 ms up to a bound; the daemon's
// PUB/SUB slow joiner is handled by start_daemon(), which republishes a harmless empty batch until
// every pipeline has decoded one AND its ingress is live: a live batch arrived (a batch the
// cold-start replay delivered proves nothing about the SUB subscription) and no replay or tail
// probe is pending, so whatever a test publishes next arrives live, in order. The ingress publishes
// its kvrelay_* sequence counters when they change, then at most once a second while they keep
// changing: wait for them, never read them once.
//
// Not thread-safe: drive it from the test thread. Heavy headers (gRPC, CAF, ZMQ) stay in the .cpp.

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/settings.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/policy-server/policy_index.hpp"

namespace kvrelay {
class daemon;
namespace fake {
class publisher;
}
namespace policy {
class policy_server;
}
}  // namespace kvrelay

namespace kvrelay::e2e {

using std::chrono::milliseconds;
using label_list = std::vector<std::pair<std::string, std::string>>;

/// replica "vllm-0", model "e2e-model", scheme "vllm", topic "kv-events", window 10 ms, reconnect
/// backoff 50 ms, metrics scraping off.
config::engine_settings default_engine();

struct harness_options {
  /// The engine as the daemon's configuration describes it (engines[0]). endpoint and
  /// replay_endpoint are filled in by the harness; everything else is used as given.
  config::engine_settings engine = default_engine();
  bool replay = true;                   // give the daemon a replay endpoint
  size_t ring_size = 10000;             // replay ring, in batches
  bool replay_topic_frames = false;     // 3-frame replay replies (vLLM >= v0.26)
  /// The engines publish without a sequence frame (ROCm ATOM #869: [payload], or [topic,
  /// payload] with a topic); use with replay = false.
  bool unsequenced = false;
  /// Every rank binds its own ephemeral ports (a vLLM at port 0) instead of base port + rank;
  /// only a daemon that discovers the endpoints (engine.url) can then find ranks > 0.
  bool any_ports = false;
  /// The engines bind on [::1] instead of 127.0.0.1 (IPv6 endpoints).
  bool ipv6 = false;
  std::string tenant_id = "tenant-e2e";
  /// The live PUB's send high-water mark (vLLM's 100 000). A small one makes an engine that
  /// outruns kvrelay drop what does not fit: a sequence gap, as in production.
  int live_sndhwm = 100000;
  /// The policy server reads CacheEvent.adapter_scoped (PR #164); off, it sweeps every adapter
  /// partition on a PREFIX_EVICTED without adapter_id, as the reference does.
  bool server_adapter_scoped = false;
  /// Last word on the configuration before the daemon is built (server/admin/engine keys).
  std::function<void(config::daemon_config&)> tweak;
};

/// One replica's score in a LookupRoute answer.
struct route_score {
  std::string replica_id;
  int64_t matched_tokens = 0;
};
struct route {
  std::string reason;  // PREFIX_MATCH, AFFINITY_HINT, NO_HINT, ...
  std::vector<route_score> scores;
  bool ok = false;     // the RPC itself succeeded
  /// matched_tokens of `replica`, or -1 when it has no score.
  int64_t matched(const std::string& replica) const;
};

class harness {
 public:
  /// Starts the policy server and the engines (no daemon yet). Throws std::runtime_error when a
  /// socket cannot be bound.
  explicit harness(harness_options opt = {});
  ~harness();  // stop()
  harness(const harness&) = delete;
  harness& operator=(const harness&) = delete;

  /// Builds and starts the daemon, then (unless `sync` is false) waits until every pipeline has
  /// decoded a batch published after it subscribed. False with `error()` set otherwise.
  bool start_daemon(bool sync = true);
  /// Publishes harmless empty batches until every pipeline's kvrelay_batches_total moves.
  bool sync(milliseconds timeout = std::chrono::seconds(10));
  /// Drains (bounded) and stops the daemon; the server and engines stay up.
  void stop_daemon(milliseconds drain = std::chrono::seconds(3));
  /// stop_daemon(), then the engines, then the server. Idempotent.
  void stop();
  const std::string& error() const noexcept;

  // ---- the parts -------------------------------------------------------------------------------
  kvrelay::daemon& daemon();  // requires start_daemon()
  policy::policy_server& server();
  fake::publisher& live(int rank = 0);
  fake::publisher& ring(int rank = 0);  // requires opt.replay
  const config::daemon_config& config() const;
  const harness_options& options() const noexcept;
  int ranks() const noexcept;
  /// The replica id the server sees for a rank ("<id>-dp<rank>" in DP separate mode).
  std::string replica(int rank = 0) const;

  // ---- the engine side -------------------------------------------------------------------------
  /// Encodes `events` (opt.dp_rank is set to `rank`) and publishes them; returns the seq.
  uint64_t publish(const std::vector<fake::fake_event>& events, fake::encode_options opt = {},
                   int rank = 0);
  /// Publishes a ready payload (possibly malformed) with the next seq on both sockets.
  uint64_t publish_raw(const std::string& payload, int rank = 0);
  /// The live socket drops this batch (its seq is skipped) but the replay ring keeps it: the
  /// daemon sees a gap that a replay can repair.
  uint64_t publish_replay_only(const std::string& payload, int rank = 0);
  /// `n` seqs nobody will ever have (skipped live and in the ring): unrecoverable history.
  void lose(uint64_t n = 1, int rank = 0);
  /// A new engine incarnation: seqs restart at 0 and the ring forgets everything.
  void restart_engine(int rank = 0);
  /// The engine restarted on new ports (a vLLM at port 0): the rank's sockets close, new ones
  /// bind on fresh ephemeral ports, seqs restart at 0 with an empty ring.
  void rebind_engine(int rank = 0);

  // ---- the server side -------------------------------------------------------------------------
  /// What the server holds for (adapter, BE8(prefix)) and this replica; nullopt when absent.
  std::optional<policy::replica_entry> entry(uint64_t prefix, const std::string& adapter = "",
                                             int rank = 0) const;
  std::optional<policy::replica_entry> entry_of(const std::string& replica, uint64_t prefix,
                                                const std::string& adapter = "") const;
  /// Distinct prefixes of (tenant, model) any replica holds.
  size_t total_prefixes() const;
  /// GetCacheState over gRPC: summary.total_prefixes (-1 when the RPC fails).
  int64_t cache_state_prefixes();
  /// LookupRoute over gRPC with the router-side chain of `tokens` (fingerprint::query).
  route lookup(const std::vector<uint32_t>& tokens, int64_t block_size,
               const std::string& adapter = "");
  /// LookupRoute with explicit block hashes (BE8 or raw) and per-block token counts.
  route lookup_hashes(const std::vector<std::string>& block_hashes,
                      const std::vector<int32_t>& block_token_counts,
                      const std::string& adapter = "");
  /// The server's whole index as JSON (for failure messages).
  std::string dump() const;
  /// For failure messages: the daemon's /debug/tree and /metrics (when it runs), then dump().
  std::string diagnose();

  // ---- the daemon's metrics ------------------------------------------------------------------
  /// One series (exact label set), -1 when absent.
  double metric(const std::string& name, const label_list& labels = {}) const;
  /// Sum of every series of `name` whose labels include all of `match` (0 when none).
  double metric_sum(const std::string& name, const label_list& match = {}) const;

  /// Polls `cond` every `every` until it holds or `timeout` passes; returns its last value.
  static bool wait_until(const std::function<bool()>& cond,
                         milliseconds timeout = std::chrono::seconds(10),
                         milliseconds every = milliseconds(10));

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// first, first+1, ..., first+n-1.
std::vector<uint32_t> token_range(uint32_t first, uint32_t n);
/// A BlockStored of full blocks: `hashes.size()` blocks of `block_size` tokens from `tokens`.
fake::fake_event stored(std::vector<fake::fake_hash> hashes, std::vector<uint32_t> tokens,
                        int64_t block_size, std::optional<fake::fake_hash> parent = std::nullopt);
fake::fake_event removed(std::vector<fake::fake_hash> hashes);
fake::fake_event cleared();
/// Engine hashes as unsigned wire ints.
std::vector<fake::fake_hash> u_hashes(std::initializer_list<uint64_t> v);

}  // namespace kvrelay::e2e
