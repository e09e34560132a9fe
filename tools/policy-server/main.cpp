// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-policy-server: a small inferencecache.v1alpha1.InferenceCache server for demos and
// end-to-end tests. SIGUSR1 writes the JSON index dump to --dump-file (also written at exit).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "tools/policy-server/service.hpp"

namespace {

using namespace kvrelay::policy;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_dump{false};
void on_stop(int) { g_stop.store(true); }
void on_dump(int) { g_dump.store(true); }

const char* k_usage =
    "Usage: kvrelay-policy-server [flags]   (--x v and --x=v are equivalent)\n"
    "  --listen ADDR              listen address (default 127.0.0.1:9090)\n"
    "  --min-matched-tokens N     PREFIX_MATCH threshold (default 64)\n"
    "  --ttl-seconds S            freshness TTL: an entry whose lastSeen (the update's\n"
    "                             timestamp_us, 0 = now) is S or more old is skipped by lookups\n"
    "                             and removed by the next sweep (default 1800; fractions allowed;\n"
    "                             <= 0 means the default, as in the reference)\n"
    "  --sweep-seconds S          TTL sweep period (default 60; <= 0 means the default)\n"
    "  --dump-file PATH           JSON index dump on SIGUSR1 and at exit\n"
    "  --tls-cert PATH            server certificate (PEM); enables TLS\n"
    "  --tls-key PATH             server private key (PEM)\n"
    "  --tls-client-ca PATH       CA for client certificates (mTLS)\n"
    "  --require-client-cert      reject clients without a valid certificate\n"
    "  --count-only               count reported prefixes without storing them (benches)\n"
    "  --adapter-scoped           read CacheEvent.adapter_scoped (inference-cache PR #164): a\n"
    "                             scoped PREFIX_EVICTED drops only the partition it names\n"
    "  -h, --help                 this text\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "%s\n%s", msg.c_str(), k_usage);
  std::exit(2);
}

void log_line(const std::string& msg) {
  std::fprintf(stderr, "policy-server: %s\n", msg.c_str());
  std::fflush(stderr);
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool write_dump(policy_server& server, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << server.index().dump_json();
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see half a dump
}

int64_t to_int(const std::string& name, const std::string& v) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') usage_error("invalid value \"" + v + "\" for --" + name);
  return n;
}

// Seconds (fractions allowed) → µs; a non-positive value means the reference's default.
int64_t to_us(const std::string& name, const std::string& v, int64_t fallback_us) {
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(s < 9e12)) {
    usage_error("invalid value \"" + v + "\" for --" + name);
  }
  const auto us = static_cast<int64_t>(s * 1e6);
  return us > 0 ? us : fallback_us;
}

std::string seconds(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(us) / 1e6);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  server_options opt;
  opt.listen = "127.0.0.1:9090";
  std::string dump_file, cert, key, client_ca;
  bool require_client = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') usage_error("unexpected argument: " + arg);
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    if (name == "h" || name == "help") {
      std::fputs(k_usage, stdout);
      return 0;
    }
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name == "require-client-cert") {
      require_client = !value || *value == "true" || *value == "1";
      continue;
    }
    if (name == "adapter-scoped") {
      opt.index.adapter_scoped = !value || *value == "true" || *value == "1";
      continue;
    }
    if (name == "count-only") {
      opt.index.count_only = !value || *value == "true" || *value == "1";
      continue;
    }
    static const char* const valued[] = {"listen",   "min-matched-tokens", "ttl-seconds",
                                         "sweep-seconds", "dump-file",     "tls-cert",
                                         "tls-key",  "tls-client-ca"};
    bool known = false;
    for (const char* v : valued) known = known || name == v;
    if (!known) usage_error("flag provided but not defined: --" + name);
    if (!value) {
      if (i + 1 >= argc) usage_error("flag needs an argument: --" + name);
      value = argv[++i];
    }
    if (name == "listen") opt.listen = *value;
    else if (name == "min-matched-tokens") {
      opt.index.min_matched_tokens = static_cast<int32_t>(to_int(name, *value));
    } else if (name == "ttl-seconds") opt.index.ttl_us = to_us(name, *value, default_ttl_us);
    else if (name == "sweep-seconds") {
      opt.sweep_interval_us = to_us(name, *value, default_sweep_interval_us);
    }
    else if (name == "dump-file") dump_file = *value;
    else if (name == "tls-cert") cert = *value;
    else if (name == "tls-key") key = *value;
    else if (name == "tls-client-ca") client_ca = *value;
  }
  if (!cert.empty() || !key.empty()) {
    tls_options tls;
    const auto c = read_file(cert), k = read_file(key);
    if (!c || !k) usage_error("cannot read --tls-cert / --tls-key");
    tls.cert_pem = *c;
    tls.key_pem = *k;
    if (!client_ca.empty()) {
      const auto ca = read_file(client_ca);
      if (!ca) usage_error("cannot read --tls-client-ca");
      tls.client_ca_pem = *ca;
    }
    tls.require_client_cert = require_client;
    opt.tls = tls;
  }

  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
  std::signal(SIGUSR1, on_dump);

  policy_server server(opt);
  if (!server.start()) {
    log_line("cannot listen on " + opt.listen);
    return 1;
  }
  log_line("listening on " + server.target() + (opt.tls ? " (TLS)" : " (plaintext)") +
           " min_matched_tokens=" + std::to_string(opt.index.min_matched_tokens) +
           " ttl_s=" + seconds(opt.index.ttl_us) + " sweep_s=" + seconds(opt.sweep_interval_us));

  uint64_t swept = 0;  // the server sweeps on its own thread; say when it removed something
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (g_dump.exchange(false) && !dump_file.empty()) {
      log_line(write_dump(server, dump_file) ? "dumped index to " + dump_file
                                             : "cannot write " + dump_file);
    }
    if (const uint64_t now_swept = server.index().counters().swept; now_swept != swept) {
      log_line("TTL sweep removed " + std::to_string(now_swept - swept) + " entries");
      swept = now_swept;
    }
  }
  server.stop();
  if (!dump_file.empty()) write_dump(server, dump_file);
  const auto c = server.calls();
  log_line("stopped: report_streams=" + std::to_string(c.report_streams) +
           " report_messages=" + std::to_string(c.report_messages) +
           " publish=" + std::to_string(c.publish) + " lookup=" + std::to_string(c.lookup));
  return 0;
}
