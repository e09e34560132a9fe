// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-replay: plays a capture (kvrelay-capture, docs/capture-format.md) as the engine did:
// a PUB with the recorded messages and, if asked, a replay ROUTER, so kvrelay (or anything that
// subscribes to engines) can be pointed at it.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/capture/cli.hpp"
#include "tools/replay/replayer.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

const char* k_usage =
    "Usage: kvrelay-replay --in FILE [flags]   (--x v and --x=v are equivalent)\n"
    "  --in FILE              the capture to play\n"
    "  --bind EP              live PUB endpoint (default tcp://127.0.0.1:5557; port 0 = any)\n"
    "  --replay-bind EP       replay ROUTER endpoint (default: none)\n"
    "  --speed X              1 = as recorded (default), 4 = four times faster, max = no pauses\n"
    "  --replay-topic B       true|false: reply [topic, seq, payload] (v0.26+); default: as captured\n"
    "  --wait-subscriber DUR  wait up to DUR for a subscriber before playing (default 10s; 0 = no)\n"
    "  --linger DUR           keep answering replay requests after the end (default 2s)\n"
    "  --go-file FILE         send nothing until FILE exists (the ring answers meanwhile)\n"
    "  --shift-timestamps     move the batches' engine timestamps to now (old captures)\n"
    "  --endpoint-file FILE   write the bound live and replay endpoints there, one a line\n"
    "  -h, --help             this text\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace kvrelay::capture;
  replay_options o;
  std::string endpoint_file;
  const auto speed = [&](const std::string& v) {
    char* end = nullptr;
    o.speed = v == "max" ? 0.0 : std::strtod(v.c_str(), &end);
    if (v != "max" && (v.empty() || *end != '\0' || !(o.speed > 0)))
      cli::usage_error("--speed: a positive number or max, not " + v, k_usage);
  };
  const auto replay_topic = [&](const std::string& v) {
    bool b = false;
    if (auto err = kvrelay::config::parse_go_bool(v, b); !err.empty())
      cli::usage_error("--replay-topic: " + err, k_usage);
    o.replay_topic_frames = b;
  };
  cli::parse(argc, argv, k_usage,
             {{"in", [&](const std::string& v) { o.in = v; }},
              {"bind", [&](const std::string& v) { o.bind = v; }},
              {"replay-bind", [&](const std::string& v) { o.replay_bind = v; }},
              {"speed", speed},
              {"replay-topic", replay_topic},
              {"wait-subscriber",
               [&](const std::string& v) {
                 o.wait_subscriber = cli::duration("wait-subscriber", v, k_usage);
               }},
              {"linger",
               [&](const std::string& v) { o.linger = cli::duration("linger", v, k_usage); }},
              {"go-file", [&](const std::string& v) { o.go_file = v; }},
              {"endpoint-file", [&](const std::string& v) { endpoint_file = v; }}},
             {{"shift-timestamps", [&] { o.shift_timestamps = true; }}});
  if (o.in.empty()) cli::usage_error("--in is required", k_usage);
  auto r = replayer::create(o);
  if (!r) {
    std::fprintf(stderr, "kvrelay-replay: %s\n", r.error().render().c_str());
    return 1;
  }
  auto& rep = *r.value();
  if (!endpoint_file.empty()) {
    const std::string tmp = endpoint_file + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%s\n%s\n", rep.live_endpoint().c_str(), rep.replay_endpoint().c_str());
      std::fclose(f);
      std::rename(tmp.c_str(), endpoint_file.c_str());  // readers never see half a file
    }
  }
  std::fprintf(stderr, "kvrelay-replay: %s: %llu live messages on %s%s%s%s\n", o.in.c_str(),
               static_cast<unsigned long long>(rep.live_records()), rep.live_endpoint().c_str(),
               rep.replay_endpoint().empty() ? "" : ", replay on ",
               rep.replay_endpoint().c_str(),
               rep.stats().truncated_capture ? " (the capture's last record was cut short)" : "");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  rep.run(g_stop);
  std::fprintf(stderr, "kvrelay-replay: sent %llu live messages (%llu history batches in the ring)\n",
               static_cast<unsigned long long>(rep.stats().live_sent),
               static_cast<unsigned long long>(rep.stats().history));
  return 0;
}
