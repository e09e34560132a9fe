// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-capture: records an engine's KV-event stream (live, and its replay ring if given) to
// a capture file (docs/capture-format.md) for bug reports and for kvrelay-replay.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>

#include "tools/capture/capturer.hpp"
#include "tools/capture/cli.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

const char* k_usage =
    "Usage: kvrelay-capture --endpoint EP --out FILE [flags]   (--x v and --x=v are equivalent)\n"
    "  --endpoint EP          the engine's live PUB, e.g. tcp://127.0.0.1:5557 (tcp://*:P binds)\n"
    "  --replay-endpoint EP   its replay ROUTER: the ring's contents are recorded too\n"
    "  --topic T              SUB prefix (default \"\": every topic)\n"
    "  --out FILE             the capture file (created or truncated)\n"
    "  --max-bytes SIZE       stop before the file passes SIZE (default 256MiB; e.g. 16MiB)\n"
    "  --max-duration DUR     stop after DUR (e.g. 10m; default: until SIGINT/SIGTERM)\n"
    "  --max-messages N       stop after N live messages (default: no bound)\n"
    "  -h, --help             this text\n"
    "The file holds the engine's token ids (the prompts, tokenized): treat it like request logs.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace kvrelay::capture;
  capture_options o;
  o.max_bytes = 256ull << 20;
  cli::parse(argc, argv, k_usage,
             {{"endpoint", [&](const std::string& v) { o.endpoint = v; }},
              {"replay-endpoint", [&](const std::string& v) { o.replay_endpoint = v; }},
              {"topic", [&](const std::string& v) { o.topic = v; }},
              {"out", [&](const std::string& v) { o.out = v; }},
              {"max-bytes",
               [&](const std::string& v) { o.max_bytes = cli::size("max-bytes", v, k_usage); }},
              {"max-duration",
               [&](const std::string& v) {
                 o.max_duration = cli::duration("max-duration", v, k_usage);
               }},
              {"max-messages", [&](const std::string& v) {
                 o.max_messages = cli::count("max-messages", v, k_usage);
               }}});
  if (o.endpoint.empty() || o.out.empty()) cli::usage_error("--endpoint and --out are required", k_usage);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  capturer c(o);
  auto r = c.run(g_stop);
  const auto& s = c.stats();
  std::fprintf(stderr,
               "kvrelay-capture: %s: %llu live messages, %llu replay replies%s, %llu bytes "
               "(stopped by %s)\n",
               o.out.c_str(), static_cast<unsigned long long>(s.live),
               static_cast<unsigned long long>(s.replay_replies),
               s.replay_asked ? (s.replay_ended ? " (ring complete)" : " (ring incomplete)") : "",
               static_cast<unsigned long long>(s.bytes),
               s.stopped_by.empty() ? "an error" : s.stopped_by.c_str());
  if (!r) {
    std::fprintf(stderr, "kvrelay-capture: %s\n", r.error().render().c_str());
    return 1;
  }
  return 0;
}
