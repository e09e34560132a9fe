// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The daemon's configuration as plain data. The member initialisers below are the ONE place a
// default lives: the TOML loader, the flag parser's usage text, `to_toml` and docs/configuration.md
// all derive from (or are checked against) a default-constructed struct. Reference defaults are
// those of the Go kvevent-subscriber (docs/spec/reference-behaviour.md §4).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvrelay::config {

using std::chrono::milliseconds;

/// How a data-parallel engine (dp_size > 1) is reported.
enum class dp_mode : uint8_t {
  separate,  // each rank is its own replica "<replica_id>-dp<rank>" with its own state
  merged,    // every rank reports as the engine's one replica_id
};

/// What a BlockStored whose parent was never seen does.
enum class unknown_parent : uint8_t {
  drop,  // not indexed (a re-rooted suffix could give a false prefix match); counted
  root,  // the reference's behaviour: treated as a sequence root
};

/// Which usage gauge the scraper reads (reference --cache-tier, M18). Case-sensitive names.
enum class cache_tier : uint8_t { auto_, kv, gpu, cpu };

/// How evictions reach the policy server (docs/configuration.md explains the choice).
enum class eviction_mode : uint8_t {
  auto_,   // kvrelay's choice: today `expire` (see effective())
  expire,  // entries of the unit's ReportCacheState stream, stamped far in the past
  rpc,     // one PublishEvent(PREFIX_EVICTED) per prefix, for servers that do not age entries
};
/// What `auto` stands for; every other mode is itself.
constexpr eviction_mode effective(eviction_mode m) {
  return m == eviction_mode::auto_ ? eviction_mode::expire : m;
}

/// kvrelay's last act towards the server on SIGTERM.
enum class shutdown_action : uint8_t {
  clear,  // ALL_CLEARED for every replica: nothing stale stays behind (every start clears anyway)
  keep,   // leave the entries; they age out at the server's TTL
};

/// When /readyz calls kvrelay ready, counting the policy targets that are healthy.
enum class readiness_policy : uint8_t {
  any,     // at least one target
  all,     // every target
  quorum,  // more than half of them
};

/// Whether the admin port's read-only endpoints (/healthz, /readyz, /readyz/self, /metrics) also
/// answer on the host's (the pod's) other addresses, not only on admin.listen's loopback one.
enum class admin_public : uint8_t {
  auto_,  // on inside a Kubernetes pod (KUBERNETES_SERVICE_HOST is set), else off
  on,
  off,
};

/// The scheduling policy of kvrelay's threads.
enum class cpu_scheduling : uint8_t {
  batch,    // SCHED_BATCH: a thread that wakes does not preempt the one running (the engine's)
  inherit,  // the policy kvrelay was started with, untouched
};

enum class log_format : uint8_t { json, text };
enum class log_level : uint8_t { debug, info, warn, error };

const char* to_string(dp_mode v);
const char* to_string(unknown_parent v);
const char* to_string(cache_tier v);
const char* to_string(eviction_mode v);
const char* to_string(shutdown_action v);
const char* to_string(readiness_policy v);
const char* to_string(admin_public v);
const char* to_string(cpu_scheduling v);
const char* to_string(log_format v);
const char* to_string(log_level v);
/// Exact, case-sensitive parses; false (and `out` untouched) for anything else.
bool parse(std::string_view s, dp_mode& out);
bool parse(std::string_view s, unknown_parent& out);
bool parse(std::string_view s, cache_tier& out);
bool parse(std::string_view s, eviction_mode& out);
bool parse(std::string_view s, shutdown_action& out);
bool parse(std::string_view s, readiness_policy& out);
bool parse(std::string_view s, admin_public& out);
bool parse(std::string_view s, cpu_scheduling& out);
bool parse(std::string_view s, log_format& out);
bool parse(std::string_view s, log_level& out);
/// The accepted names, comma separated, in the order messages and docs list them.
const char* allowed_dp_modes();        // "separate, merged"
const char* allowed_unknown_parents(); // "drop, root"
const char* allowed_cache_tiers();     // "auto, kv, gpu, cpu" (the fallback order)
const char* allowed_eviction_modes();  // "auto, expire, rpc"
const char* allowed_shutdown_actions(); // "clear, keep"
const char* allowed_readiness_policies(); // "any, all, quorum"
const char* allowed_admin_public();       // "auto, on, off"
const char* allowed_cpu_schedulings(); // "batch, inherit"
const char* allowed_log_formats();     // "json, text"
const char* allowed_log_levels();      // "debug, info, warn, error"

/// Connection to the cache-policy servers (gRPC).
struct server_settings {
  std::string address = "127.0.0.1:9090";  // gRPC target (--server)
  /// Several policy servers (HA; excludes `address`): each entry a target of its own,
  /// "host:port", any gRPC target, or a DNS fan-out name "dns:///name:port" (system resolver) or
  /// "dns://NS_IP:NS_PORT/name:port" whose every address is a target. A repeated --server.
  std::vector<std::string> targets;
  readiness_policy readiness = readiness_policy::any;  // --server-readiness
  /// Bytes a target may fall behind before it stops queueing and is re-reported in full.
  int64_t max_target_lag = int64_t{16} << 20;
  milliseconds resolve_interval{30000};    // DNS fan-out re-resolution; also when a target is lost
  bool tls = false;                        // TLS on; the file keys below require it
  std::string ca_file;                     // PEM roots; "" = the system roots
  std::string cert_file;                   // client certificate (mTLS), with key_file
  std::string key_file;
  std::string server_name;                 // TLS name override; "" = host of `address`
  milliseconds rpc_timeout{5000};          // per-call deadline; <= 0 becomes 5 s (R04, S10)
  milliseconds refresh_interval{600000};   // re-report resident blocks, paced; 0 = never
  /// Blocks a walk of the index (a resync, a refresh, a restore) reads and sends at a time, per
  /// target: its memory and its messages to the server.
  int64_t walk_chunk = 16384;
  /// Distinct pending updates per pipeline before its adds are shed (a walk re-reports them);
  /// 0 = derived from the memory budget.
  int64_t max_pending = 0;
  /// While a pipeline replays history, its changes wait up to this many windows (debouncer
  /// DB19); 0 = they go as live ones do.
  int64_t replay_wait_windows = 10;
  config::eviction_mode eviction_mode = eviction_mode::auto_;  // --eviction-mode
  /// The server narrows a PREFIX_EVICTED with adapter_scoped set to the partition it names
  /// (inference-cache PR #164): rpc mode then skips re-reporting the LoRA entries a base-model
  /// eviction would otherwise sweep (--scoped-evictions).
  bool scoped_evictions = false;
  milliseconds keepalive_time{20000};      // gRPC keepalive ping period; 0 = no pings
  milliseconds keepalive_timeout{10000};   // ping unanswered this long = transport dead; > 0
  shutdown_action on_shutdown = shutdown_action::clear;
};

/// The admin HTTP port (health, metrics, debug tree).
struct admin_settings {
  std::string listen = "127.0.0.1:9464";  // host:port; "" disables the admin port
  std::string token_file;                 // bearer token for mutating endpoints; "" = none
  /// The read-only endpoints on every address of the host or pod at listen's port as well (a
  /// loopback `listen` only): Prometheus and probes reach an injected sidecar without a token,
  /// while /debug/*, POSTs and the page answer only on loopback unless token_file is set.
  admin_public public_endpoints = admin_public::auto_;  // --admin-public
  bool enable_crash_endpoint = false;     // /debug/crash, for supervision drills only
  int64_t max_connections = 64;           // open client connections at once; 1-4096
  milliseconds read_timeout{5000};        // a request's header and body must arrive within it
  milliseconds idle_timeout{30000};       // a keep-alive connection idle this long is closed
  int64_t max_body_bytes = 65536;         // larger request bodies are refused unread; 0-16 MiB
  /// Not a TOML key: the contents of token_file, trimmed, read by resolve() (read_files()) so
  /// a bad file is a configuration error before anything starts. Never printed.
  std::string token;
};

/// The durable index (docs/operations.md "What survives a restart"): where each pipeline
/// keeps a snapshot of its index, so a kvrelay restart forgets nothing the engine still holds.
/// Off by default: the reference controller's sidecar has a read-only root and no volume.
struct state_settings {
  std::string dir;            // "" = off (--state-dir); created at start when missing
  milliseconds interval{0};   // between snapshots; 0 = derived: a quarter of the replay ring's
                              // span at the observed batch rate, 1 s to 60 s
  int64_t ring_batches = 10000;  // the engine's replay ring (vLLM/SGLang buffer_steps)
};

/// The memory budget: what kvrelay may hold, from which every queue bound derives.
struct memory_settings {
  int64_t budget = 0;  // bytes; 0 = the cgroup's memory limit less half (≥ 16 MiB), else 512 MiB
};

/// How kvrelay's threads share the CPU with the engine's.
struct cpu_settings {
  cpu_scheduling scheduling = cpu_scheduling::batch;
};

struct log_settings {
  log_format format = log_format::json;  // JSON lines on stderr, like the reference (C08)
  log_level level = log_level::info;
};

/// The engine's Prometheus endpoint and how load statistics are derived from it.
struct metrics_settings {
  std::string url = "http://127.0.0.1:8000/metrics";  // "" disables scraping
  milliseconds interval{10000};                        // <= 0 becomes 10 s (S10)
  milliseconds timeout{5000};                          // one scrape's HTTP deadline
  cache_tier tier = cache_tier::auto_;
  std::string model_label;       // model_name label filter; "" = every series (M16)
  int64_t cache_size_bytes = 0;  // capacity multiplied by the usage ratio; 0 reports 0 bytes
  int64_t max_concurrency = 256; // pressure denominator; <= 0 disables pressure
};

/// Which of an engine's discoverable settings were set by the file or a flag (loader and
/// apply_flags mark them; code that builds a configuration sets them itself). With `url`, a
/// setting not given is learnt from the engine at start; a given one wins over what it says.
struct engine_given {
  bool endpoint = false;
  bool replay_endpoint = false;
  bool topic = false;
  bool dp_size = false;
  bool model_id = false;
  bool hash_scheme = false;
  bool metrics_url = false;
};

/// One engine source: a replica (or, with dp_size > 1, one pipeline per rank).
struct engine_settings {
  std::string replica_id;  // required
  /// The engine's own HTTP server (--engine-url), e.g. "http://127.0.0.1:8000"; "" = no
  /// discovery. With it, endpoint, replay_endpoint, topic, dp_size, model_id and hash_scheme
  /// are learnt from the engine unless given, and metrics.url defaults to url + "/metrics".
  std::string url;
  /// Without `url`: learn what `url` would from the engine's HTTP server at metrics.url's scheme,
  /// host and port (metrics.url ending in /metrics), every setting given staying as given;
  /// while the engine says nothing usable (an older vLLM answers 404) the engine runs on the
  /// configured settings, exactly as without it. On for an engine described by flags alone (no
  /// --config): the Go sidecar's arguments, as the reference controller's injector passes them.
  bool discover_via_metrics = false;  // --discover-via-metrics
  /// Not a TOML key: `url` was derived from metrics.url by validate() (discover_via_metrics).
  bool url_derived = false;
  milliseconds discovery_retry_max{30000};  // cap of the discovery retry backoff; > 0
  engine_given given;
  std::string model_id;    // required unless discovered
  std::string tenant_id;
  std::string hash_scheme = "vllm";  // required non-empty; "sglang" selects that metric profile
  std::string endpoint = "tcp://127.0.0.1:5557";  // engine PUB endpoint; rank r adds r to the port
  std::string replay_endpoint;                     // engine ROUTER for replay; "" = no replay
  std::string topic = "kv-events";                 // SUB prefix; "" = every topic
  int64_t dp_size = 1;
  config::dp_mode dp_mode = dp_mode::separate;
  milliseconds window{100};                 // debounce window; <= 0 becomes 100 ms (R04)
  milliseconds reconnect_backoff{1000};     // constant ZMQ re-dial delay; <= 0 becomes 1 s (N02)
  bool l2_tier = false;                     // = --ignore-block-removed: BlockRemoved → T2
  config::unknown_parent unknown_parent = unknown_parent::drop;
  bool index_salted = false;                // index cache-salted / multimodal blocks anyway
  /// Reverse-map bound per adapter partition (oldest stored evicted first); 0 = none: the memory
  /// budget bounds the index (memory_budget IB1-IB4), and a bound here costs 8 bytes a block.
  int64_t max_blocks_per_adapter = 0;
  /// Blocks with a copy at T2 / T3 per adapter partition, least recently stored dropped first
  /// (positional_index IX8: for store-only sources such as LMCache's multi-process mode); 0 = none.
  int64_t max_t2_blocks_per_adapter = 1048576;
  int64_t max_t3_blocks_per_adapter = 1048576;
  std::map<int64_t, std::string> adapters;  // LoRA id → name (--lora-adapter-names)
  metrics_settings metrics;
};

struct daemon_config {
  server_settings server;
  admin_settings admin;
  state_settings state;
  memory_settings memory;
  cpu_settings cpu;
  log_settings log;
  std::vector<engine_settings> engines;
  /// Where each key's value came from ("file:line:col" or "--flag"), by key path such as
  /// "engine[0].window". Only for error messages; never compared.
  std::map<std::string, std::string> origin;
};

}  // namespace kvrelay::config
