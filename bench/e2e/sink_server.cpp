// kvrelay-bench-sink: a policy server for the end-to-end benchmark. It stores nothing; it counts
// what kvrelay reports and records, for every CacheStateUpdate that carries prefixes, the time
// from the update's timestamp_us (the newest engine batch time in that flush, R12) to receipt
// here, weighted by the number of prefixes. tools/policy-server answers the same RPCs but keeps
// an index and has no latency record; a benchmark wants neither cost nor a coarse histogram.
//
//   kvrelay-bench-sink --listen 127.0.0.1:0 --port-file P --stats-file S [--receipts R]
// SIGUSR1 writes the stats JSON to --stats-file (atomically); SIGUSR2 resets every counter and
// sample (start of a measured phase); SIGTERM/SIGINT write the stats and exit. With --receipts,
// every reported prefix's (fingerprint, receipt µs) is kept and written at exit (two native
// int64 per prefix) so a harness can join it with the engine's publish time of each block.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
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
  uint64_t stats_only = 0, evictions = 0, clears = 0, other_events = 0;
  int64_t first_prefix_us = 0, last_prefix_us = 0, last_any_us = 0;
  std::vector<sample> samples;
  std::vector<int64_t> receipts;  // fingerprint, receipt_us, … (with --receipts)
};

class sink final : public ic::InferenceCache::Service {
 public:
  explicit sink(bool keep_receipts) : keep_receipts_(keep_receipts) {}

  grpc::Status ReportCacheState(grpc::ServerContext*, grpc::ServerReader<ic::CacheStateUpdate>* r,
                                ic::Ack* ack) override {
    ic::CacheStateUpdate u;
    std::lock_guard<std::mutex> lk(mu_);
    ++s_.report_streams;
    // Holding the lock across Read is fine: kvrelay sends one message per stream and nobody
    // else contends for long; it keeps the record exactly ordered with receipt.
    while (r->Read(&u)) {
      const int64_t t = now_us();
      ++s_.csu;
      s_.last_any_us = t;
      const auto n = static_cast<uint32_t>(u.prefixes_size());
      if (n == 0) {
        ++s_.stats_only;
        continue;
      }
      ++s_.csu_with_prefixes;
      s_.prefixes += n;
      if (s_.first_prefix_us == 0) s_.first_prefix_us = t;
      s_.last_prefix_us = t;
      if (u.timestamp_us() > 0) s_.samples.push_back({t - u.timestamp_us(), n});
      if (keep_receipts_) {
        for (const auto& p : u.prefixes()) {
          if (p.prefix_hash().size() != 8) continue;
          uint64_t fp = 0;
          for (unsigned char c : p.prefix_hash()) fp = (fp << 8) | c;  // BE8
          s_.receipts.push_back(static_cast<int64_t>(fp));
          s_.receipts.push_back(t);
        }
      }
    }
    ack->set_accepted(true);
    return grpc::Status::OK;
  }

  grpc::Status PublishEvent(grpc::ServerContext*, const ic::CacheEvent* e, ic::Ack* ack) override {
    std::lock_guard<std::mutex> lk(mu_);
    s_.last_any_us = now_us();
    if (e->type() == ic::CacheEvent::PREFIX_EVICTED) ++s_.evictions;
    else if (e->type() == ic::CacheEvent::ALL_CLEARED) ++s_.clears;
    else ++s_.other_events;
    ack->set_accepted(true);
    return grpc::Status::OK;
  }

  void reset() {
    std::lock_guard<std::mutex> lk(mu_);
    s_ = stats{};
  }

  bool write_receipts(const std::string& path) {
    std::lock_guard<std::mutex> lk(mu_);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const size_t n = s_.receipts.size();
    const bool ok = n == 0 || std::fwrite(s_.receipts.data(), sizeof(int64_t), n, f) == n;
    return std::fclose(f) == 0 && ok;
  }

  std::string json() {
    stats s;
    {
      std::lock_guard<std::mutex> lk(mu_);
      s = s_;
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
    char buf[1024];
    std::snprintf(
        buf, sizeof buf,
        "{\"report_streams\":%llu,\"csu\":%llu,\"csu_with_prefixes\":%llu,\"prefixes\":%llu,"
        "\"stats_only\":%llu,\"evictions\":%llu,\"clears\":%llu,\"other_events\":%llu,"
        "\"first_prefix_us\":%lld,\"last_prefix_us\":%lld,\"last_any_us\":%lld,"
        "\"latency_samples\":%zu,\"lat_p50_ms\":%.3f,\"lat_p90_ms\":%.3f,\"lat_p99_ms\":%.3f,"
        "\"lat_max_ms\":%.3f}\n",
        static_cast<unsigned long long>(s.report_streams), static_cast<unsigned long long>(s.csu),
        static_cast<unsigned long long>(s.csu_with_prefixes),
        static_cast<unsigned long long>(s.prefixes), static_cast<unsigned long long>(s.stats_only),
        static_cast<unsigned long long>(s.evictions), static_cast<unsigned long long>(s.clears),
        static_cast<unsigned long long>(s.other_events), static_cast<long long>(s.first_prefix_us),
        static_cast<long long>(s.last_prefix_us), static_cast<long long>(s.last_any_us),
        s.samples.size(), pct(0.50), pct(0.90), pct(0.99), pct(1.0));
    return buf;
  }

 private:
  const bool keep_receipts_;
  std::mutex mu_;
  stats s_;
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
               "[--stats-file S] [--receipts R]\n",
               msg);
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0", port_file, stats_file, receipts_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage("kvrelay-bench-sink: a counting policy server", 0);
    if (i + 1 >= argc) usage("flag needs an argument");
    if (a == "--listen") listen = argv[++i];
    else if (a == "--port-file") port_file = argv[++i];
    else if (a == "--stats-file") stats_file = argv[++i];
    else if (a == "--receipts") receipts_file = argv[++i];
    else usage("unknown flag");
  }
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
  std::signal(SIGUSR1, on_dump);
  std::signal(SIGUSR2, on_reset);

  sink service(!receipts_file.empty());
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  b.SetMaxReceiveMessageSize(64 << 20);
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
  if (!receipts_file.empty() && !service.write_receipts(receipts_file)) {
    std::fprintf(stderr, "kvrelay-bench-sink: cannot write %s\n", receipts_file.c_str());
    return 1;
  }
  return 0;
}
