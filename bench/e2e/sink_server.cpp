// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-bench-sink: a policy server for the end-to-end benchmark. It stores nothing; it counts
// what kvrelay reports and records, for every CacheStateUpdate that carries added prefixes, the
// time from the update's timestamp_us (the newest engine batch time in that flush, R12) to
// receipt here, weighted by the number of prefixes. tools/policy-server answers the same RPCs but
// keeps an index and has no latency record; a benchmark wants neither cost nor a coarse histogram.
//
//   kvrelay-bench-sink --listen 127.0.0.1:0 --port-file P --stats-file S [--receipts R]
//                      [--eviction-receipts E] [--ttl-seconds T] [--resident-set]
// SIGUSR1 writes the stats JSON to --stats-file (atomically); SIGUSR2 resets every counter and
// sample (start of a measured phase); SIGTERM/SIGINT write the stats and exit.
//
// Evictions come in two forms, counted apart and together: a PublishEvent(PREFIX_EVICTED) (rpc
// mode), or an entry of a CacheStateUpdate whose timestamp_us is already older than the TTL at
// receipt (expire mode; the reference server's lookups skip such an entry at once). The TTL is
// the reference's 30 min unless --ttl-seconds says otherwise; timestamp_us 0 means "now" (never
// expired) and a negative one is taken literally (expired). Expired entries are not adds: they
// count in neither "prefixes" nor the add latency.
//
// Stats JSON (one object): report_streams, csu, csu_with_prefixes (updates with added prefixes),
// prefixes (added), stats_only, evictions (= evictions_rpc + evictions_expired), evictions_rpc
// (PREFIX_EVICTED events), evictions_expired (expired entries), csu_expired (updates carrying
// them), clears, other_events, first_prefix_us / last_prefix_us (receipt of the first/last add),
// first_eviction_us / last_eviction_us, last_any_us (any RPC), latency_samples and lat_p50/p90/
// p99/max_ms (add updates, timestamp → receipt, weighted by prefixes), resident and
// resident_xor (-1 and 0 without --resident-set).
//
// --resident-set keeps the set of (fingerprint, adapter) entries the server would hold: an add
// inserts (the entry's adapter_id, else the update's), an expired entry or a PREFIX_EVICTED
// erases (one with an empty adapter_id and no adapter_scoped erases the prefix from every
// adapter), ALL_CLEARED empties it, SIGUSR2 leaves it alone (it is the server's state, not a
// counter). "resident" is its size and "resident_xor" an XOR of one 64-bit hash per entry, so a
// harness can tell that two servers fed by one kvrelay hold the same set (the fanout case).
// Off by default: a hash-set insert per prefix is a cost the other cases do not want.
//
// Receipt files, written at exit. Both hold records of two native-endian int64, (fingerprint as
// the BE8 prefix hash read as u64, receipt µs since the epoch), in receipt order:
//   --receipts R           one record per added prefix (unchanged format and meaning);
//   --eviction-receipts E  one record per evicted prefix, from either form, so a harness can join
//                          it with the engine's publish time of each BlockRemoved
//                          (kvrelay-bench-loadgen --eviction-times writes the same records).
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace {

namespace ic = inferencecache::v1alpha1;

std::atomic<bool> g_stop{false}, g_dump{false}, g_reset{false};
void on_stop(int) { g_stop.store(true); }
void on_dump(int) { g_dump.store(true); }
void on_reset(int) { g_reset.store(true); }

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct sample {
  int64_t latency_us;
  uint32_t weight;  // prefixes in the update
};

struct stats {
  uint64_t report_streams = 0, csu = 0, csu_with_prefixes = 0, prefixes = 0;
  uint64_t stats_only = 0, evictions_rpc = 0, evictions_expired = 0, csu_expired = 0;
  uint64_t clears = 0, other_events = 0;
  int64_t first_prefix_us = 0, last_prefix_us = 0, last_any_us = 0;
  int64_t first_eviction_us = 0, last_eviction_us = 0;
  std::vector<sample> samples;
  std::vector<int64_t> receipts;          // fingerprint, receipt_us, … (with --receipts)
  std::vector<int64_t> eviction_receipts;  // the same for evictions (with --eviction-receipts)
};

// BE8 prefix hash → the u64 fingerprint; false for any other length.
bool fingerprint_of(const std::string& key, int64_t* fp) {
  if (key.size() != 8) return false;
  uint64_t v = 0;
  for (unsigned char c : key) v = (v << 8) | c;
  *fp = static_cast<int64_t>(v);
  return true;
}

struct sink_options {
  bool keep_receipts = false;
  bool keep_eviction_receipts = false;
  bool resident_set = false;
  int64_t ttl_us = 30LL * 60 * 1000 * 1000;  // the reference's default TTL
};

// The service runs on gRPC's callback API: a call's handler runs on gRPC's own completion
// threads with no hand-off to a pool thread, which the sync server paid on every PublishEvent
// (it capped the benchmark's rpc mode, not kvrelay). The record stays exactly ordered with
// receipt: each message is counted under mu_ with the receipt time taken inside the lock, and
// no lock is held while a stream waits for its next message.
class sink final : public ic::InferenceCache::CallbackService {
 public:
  explicit sink(sink_options o) : opt_(o) {}

  grpc::ServerReadReactor<ic::CacheStateUpdate>* ReportCacheState(grpc::CallbackServerContext*,
                                                                  ic::Ack* ack) override {
    return new report_reactor(*this, ack);
  }

  grpc::ServerUnaryReactor* PublishEvent(grpc::CallbackServerContext* ctx, const ic::CacheEvent* e,
                                         ic::Ack* ack) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      const int64_t t = now_us();
      s_.last_any_us = t;
      if (e->type() == ic::CacheEvent::PREFIX_EVICTED) {
        ++s_.evictions_rpc;
        evicted(e->prefix_hash(), e->adapter_id(), e->adapter_id().empty() && !e->adapter_scoped(),
                t);
      } else if (e->type() == ic::CacheEvent::ALL_CLEARED) {
        ++s_.clears;
        resident_.clear();
        resident_count_ = 0;
        resident_xor_ = 0;
      } else ++s_.other_events;
    }
    ack->set_accepted(true);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

  void reset() {
    std::lock_guard<std::mutex> lk(mu_);
    s_ = stats{};
  }

  bool write_receipts(const std::string& path, bool evictions) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto& r = evictions ? s_.eviction_receipts : s_.receipts;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const size_t n = r.size();
    const bool ok = n == 0 || std::fwrite(r.data(), sizeof(int64_t), n, f) == n;
    return std::fclose(f) == 0 && ok;
  }

  std::string json() {
    stats s;
    long long resident = -1, resident_xor = 0;
    {
      // Counters and samples only: the receipt vectors (16 B per prefix) are not in the JSON,
      // and copying them under the lock would stall receipt on every SIGUSR1 of a drain poll.
      std::lock_guard<std::mutex> lk(mu_);
      auto receipts = std::move(s_.receipts);
      auto eviction_receipts = std::move(s_.eviction_receipts);
      s = s_;
      if (opt_.resident_set) {
        resident = static_cast<long long>(resident_count_);
        resident_xor = static_cast<long long>(resident_xor_);
      }
      s_.receipts = std::move(receipts);
      s_.eviction_receipts = std::move(eviction_receipts);
    }
    std::sort(s.samples.begin(), s.samples.end(),
              [](const sample& a, const sample& b) { return a.latency_us < b.latency_us; });
    uint64_t total = 0;
    for (const auto& x : s.samples) total += x.weight;
    // Weighted percentiles: the latency of the q-th prefix, not of the q-th update.
    const auto pct = [&](double q) -> double {
      if (total == 0) return -1;
      const double target = q * static_cast<double>(total);
      uint64_t acc = 0;
      for (const auto& x : s.samples) {
        acc += x.weight;
        if (static_cast<double>(acc) >= target) return static_cast<double>(x.latency_us) / 1e3;
      }
      return static_cast<double>(s.samples.back().latency_us) / 1e3;
    };
    using ull = unsigned long long;
    using ll = long long;
    char buf[2048];
    std::snprintf(
        buf, sizeof buf,
        "{\"report_streams\":%llu,\"csu\":%llu,\"csu_with_prefixes\":%llu,\"prefixes\":%llu,"
        "\"stats_only\":%llu,\"evictions\":%llu,\"evictions_rpc\":%llu,"
        "\"evictions_expired\":%llu,\"csu_expired\":%llu,\"clears\":%llu,"
        "\"other_events\":%llu,\"first_prefix_us\":%lld,\"last_prefix_us\":%lld,"
        "\"first_eviction_us\":%lld,\"last_eviction_us\":%lld,\"last_any_us\":%lld,"
        "\"latency_samples\":%zu,\"lat_p50_ms\":%.3f,\"lat_p90_ms\":%.3f,\"lat_p99_ms\":%.3f,"
        "\"lat_max_ms\":%.3f,\"resident\":%lld,\"resident_xor\":%lld}\n",
        static_cast<ull>(s.report_streams), static_cast<ull>(s.csu),
        static_cast<ull>(s.csu_with_prefixes), static_cast<ull>(s.prefixes),
        static_cast<ull>(s.stats_only), static_cast<ull>(s.evictions_rpc + s.evictions_expired),
        static_cast<ull>(s.evictions_rpc), static_cast<ull>(s.evictions_expired),
        static_cast<ull>(s.csu_expired), static_cast<ull>(s.clears),
        static_cast<ull>(s.other_events), static_cast<ll>(s.first_prefix_us),
        static_cast<ll>(s.last_prefix_us), static_cast<ll>(s.first_eviction_us),
        static_cast<ll>(s.last_eviction_us), static_cast<ll>(s.last_any_us), s.samples.size(),
        pct(0.50), pct(0.90), pct(0.99), pct(1.0), resident, resident_xor);
    return buf;
  }

 private:
  // One ReportCacheState stream. It reads into one message for its whole life (protobuf keeps
  // the repeated entries' storage across parses), counts each message as it arrives, and answers
  // accepted when the client half-closes (or the call is cancelled: nothing to answer then).
  class report_reactor final : public grpc::ServerReadReactor<ic::CacheStateUpdate> {
   public:
    report_reactor(sink& owner, ic::Ack* ack) : owner_(owner), ack_(ack) {
      {
        std::lock_guard<std::mutex> lk(owner_.mu_);
        ++owner_.s_.report_streams;
      }
      StartRead(&u_);
    }

    void OnReadDone(bool ok) override {
      if (!ok) {
        ack_->set_accepted(true);
        Finish(grpc::Status::OK);
        return;
      }
      owner_.received(u_);
      StartRead(&u_);
    }

    void OnDone() override { delete this; }

   private:
    sink& owner_;
    ic::Ack* ack_;
    ic::CacheStateUpdate u_;
  };

  // One CacheStateUpdate of a ReportCacheState stream.
  void received(const ic::CacheStateUpdate& u) {
    std::lock_guard<std::mutex> lk(mu_);
    const int64_t t = now_us();
    ++s_.csu;
    s_.last_any_us = t;
    const auto n = static_cast<uint32_t>(u.prefixes_size());
    if (n == 0) {
      ++s_.stats_only;
      return;
    }
    // One timestamp for the whole update: all its entries are expired, or none. The comparison
    // is the reference's (age >= TTL), written so a negative timestamp cannot overflow.
    const int64_t ts = u.timestamp_us();
    if (ts != 0 && (ts < 0 || t - ts >= opt_.ttl_us)) {
      ++s_.csu_expired;
      for (const auto& p : u.prefixes()) evicted(p.prefix_hash(), adapter_of(u, p), false, t);
      s_.evictions_expired += n;
      return;
    }
    ++s_.csu_with_prefixes;
    s_.prefixes += n;
    if (s_.first_prefix_us == 0) s_.first_prefix_us = t;
    s_.last_prefix_us = t;
    if (ts > 0) s_.samples.push_back({t - ts, n});
    if (!opt_.keep_receipts && !opt_.resident_set) return;
    for (const auto& p : u.prefixes()) {
      int64_t fp = 0;
      if (!fingerprint_of(p.prefix_hash(), &fp)) continue;
      if (opt_.resident_set) insert_resident(fp, adapter_of(u, p));
      if (!opt_.keep_receipts) continue;
      s_.receipts.push_back(fp);
      s_.receipts.push_back(t);
    }
  }

  static const std::string& adapter_of(const ic::CacheStateUpdate& u, const ic::PrefixEntry& p) {
    return p.adapter_id().empty() ? u.adapter_id() : p.adapter_id();
  }

  // The --resident-set's hash of one entry: FNV-1a over the adapter, mixed with the fingerprint.
  static uint64_t entry_hash(int64_t fp, const std::string& adapter) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : adapter) h = (h ^ c) * 1099511628211ULL;
    return (h ^ static_cast<uint64_t>(fp)) * 0x9E3779B97F4A7C15ULL;
  }

  void insert_resident(int64_t fp, const std::string& adapter) {  // caller holds mu_
    auto& adapters = resident_[fp];
    if (std::find(adapters.begin(), adapters.end(), adapter) != adapters.end()) return;
    adapters.push_back(adapter);
    ++resident_count_;
    resident_xor_ ^= entry_hash(fp, adapter);
  }

  // Erases (fp, adapter), or fp under every adapter with `all` (caller holds mu_).
  void erase_resident(int64_t fp, const std::string& adapter, bool all) {
    const auto it = resident_.find(fp);
    if (it == resident_.end()) return;
    auto& adapters = it->second;
    for (size_t i = adapters.size(); i-- > 0;) {
      if (!all && adapters[i] != adapter) continue;
      resident_xor_ ^= entry_hash(fp, adapters[i]);
      --resident_count_;
      adapters.erase(adapters.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (adapters.empty()) resident_.erase(it);
  }

  // One evicted prefix received at `t` (caller holds mu_); `all`: from every adapter.
  void evicted(const std::string& key, const std::string& adapter, bool all, int64_t t) {
    if (s_.first_eviction_us == 0) s_.first_eviction_us = t;
    s_.last_eviction_us = t;
    int64_t fp = 0;
    if (!fingerprint_of(key, &fp)) return;
    if (opt_.resident_set) erase_resident(fp, adapter, all);
    if (!opt_.keep_eviction_receipts) return;
    s_.eviction_receipts.push_back(fp);
    s_.eviction_receipts.push_back(t);
  }

  const sink_options opt_;
  std::mutex mu_;
  stats s_;
  // With --resident-set (under mu_): fingerprint → the adapters holding it ("" = base model).
  std::unordered_map<int64_t, std::vector<std::string>> resident_;
  uint64_t resident_count_ = 0, resident_xor_ = 0;
};

bool write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

[[noreturn]] void usage(const char* msg, int code = 2) {
  std::fprintf(code == 0 ? stdout : stderr,
               "%s\nUsage: kvrelay-bench-sink [--listen 127.0.0.1:0] [--port-file P] "
               "[--stats-file S] [--receipts R] [--eviction-receipts E] [--ttl-seconds T] "
               "[--resident-set]\n",
               msg);
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0", port_file, stats_file, receipts_file, eviction_file;
  sink_options so;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage("kvrelay-bench-sink: a counting policy server", 0);
    if (a == "--resident-set") {
      so.resident_set = true;
      continue;
    }
    if (i + 1 >= argc) usage("flag needs an argument");
    if (a == "--listen") listen = argv[++i];
    else if (a == "--port-file") port_file = argv[++i];
    else if (a == "--stats-file") stats_file = argv[++i];
    else if (a == "--receipts") receipts_file = argv[++i];
    else if (a == "--eviction-receipts") eviction_file = argv[++i];
    else if (a == "--ttl-seconds") {
      char* end = nullptr;
      const double ttl = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(ttl > 0 && ttl < 9e12)) usage("--ttl-seconds needs a positive number");
      so.ttl_us = static_cast<int64_t>(ttl * 1e6);
    } else usage("unknown flag");
  }
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
  std::signal(SIGUSR1, on_dump);
  std::signal(SIGUSR2, on_reset);

  // Debian's Abseil keeps a lock-order graph for every absl::Mutex gRPC takes (deadlock
  // detection, on in its build): ~7 % of the sink's CPU per call, for a check nobody reads here.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  so.keep_receipts = !receipts_file.empty();
  so.keep_eviction_receipts = !eviction_file.empty();
  sink service(so);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  b.SetMaxReceiveMessageSize(64 << 20);
  // kvrelay's keepalive pings (server.keepalive_time) must not get it dropped as too_many_pings.
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  auto server = b.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "kvrelay-bench-sink: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::fprintf(stderr, "kvrelay-bench-sink: listening on port %d\n", port);
  if (!port_file.empty() && !write_atomic(port_file, std::to_string(port) + "\n")) {
    std::fprintf(stderr, "kvrelay-bench-sink: cannot write %s\n", port_file.c_str());
    return 1;
  }
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (g_reset.exchange(false)) service.reset();
    if (g_dump.exchange(false) && !stats_file.empty()) write_atomic(stats_file, service.json());
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (!stats_file.empty()) write_atomic(stats_file, service.json());
  int rc = 0;
  for (const auto& [path, evictions] : {std::pair{receipts_file, false}, {eviction_file, true}}) {
    if (path.empty() || service.write_receipts(path, evictions)) continue;
    std::fprintf(stderr, "kvrelay-bench-sink: cannot write %s\n", path.c_str());
    rc = 1;
  }
  return rc;
}
