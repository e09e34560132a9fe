// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay: engine KV-cache events → cache-policy server. The only translation unit outside the
// library: parse flags, load and validate the configuration and read the files it names (every
// configuration error exits 2 before anything starts, exactly as `--check` would), run the
// daemon, and turn signals into an orderly shutdown or a reload.
//   SIGTERM / SIGINT: stop ingress, drain, final flush within 5 s, exit 0; a second one exits now.
//   SIGHUP: reload adapter maps and the log level from the config file.

#include <absl/synchronization/mutex.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>

#include <pthread.h>

#include "config/flags.hpp"
#include "config/loader.hpp"
#include "daemon/cpu_setup.hpp"
#include "daemon/daemon.hpp"
#include "daemon/discovered_engines.hpp"
#include "base/log.hpp"
#include "daemon/version.hpp"

namespace {

constexpr auto drain_deadline = std::chrono::seconds(5);

// The log's format and level as the configuration says, before the first line is written: the
// daemon applies them again when it starts, but "kvevent-subscriber starting" (and a
// configuration error) come first.
void apply_log_settings(kvrelay::config::log_format format, kvrelay::config::log_level level) {
  using namespace kvrelay;
  log::set_json(format == config::log_format::json);
  log::level l = log::level::info;
  if (log::parse_level(config::to_string(level), l)) log::set_level(l);
}

int wait_signal(const sigset_t& set) {
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvrelay;
  // Debian's Abseil keeps a lock-order graph for every absl::Mutex gRPC takes (deadlock
  // detection is on in its build): ~6 % of the daemon's CPU per RPC in rpc mode, for a check
  // whose report nobody would read in production.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto parsed = config::parse_flags(argc, argv);
  if (parsed.status == config::flag_parse_result::outcome::help) {
    std::cout << config::usage(argv[0]);
    return 0;
  }
  if (parsed.status == config::flag_parse_result::outcome::error) {
    // One line that names the fix, not the whole usage: in a crash-looping sidecar's log the
    // error must not scroll away behind sixty lines of flags.
    std::cerr << parsed.error << "\n" << "Run '" << argv[0] << " --help' to list every flag.\n";
    return 2;
  }
  const auto& flags = parsed.values;
  // --log-format / --log-level rule from the first line on, even for a configuration error.
  // (The flags' overlay holds the defaults where no flag was given.)
  apply_log_settings(flags.overlay.log.format, flags.overlay.log.level);
  if (flags.version) {
    std::cout << version_report();
    return 0;
  }
  if (flags.check) return check_with_discovery(flags, std::cout, std::cerr);

  std::vector<std::string> notes;
  auto cfg = config::resolve(flags, &notes);
  if (!cfg) {
    log::error(cfg.error().headline, {{"err", cfg.error().context}});
    return 2;
  }
  apply_log_settings(cfg.value().log.format, cfg.value().log.level);
  for (const auto& n : notes) log::warn(n);

  // Signals go to this thread only: block them before any other thread exists.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  const auto& c = cfg.value();
  // Likewise the scheduling policy, which every thread inherits (daemon/cpu_setup.hpp); said
  // after the start lines, which stay the first.
  const log::record scheduling = apply_cpu_scheduling(c.cpu.scheduling);

  // The reference's start line (C08), once per engine: each names its own endpoint and model
  // (a node daemon's second engine is not the first one's).
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const auto& e = c.engines[i];
    // What the engine will tell is not known yet: say so rather than log a placeholder.
    const auto shown = [&e](const char* key, const std::string& value) {
      return config::discovered(e, key) ? std::string("(discovered at start)") : value;
    };
    log::info("kvevent-subscriber starting",
              {{"engine_endpoint", shown("endpoint", e.endpoint)}, {"server", config::policy_targets_text(c.server)},
               {"replica_id", e.replica_id}, {"model_id", shown("model_id", e.model_id)},
               {"engine_url", e.url},
               {"eviction_mode", config::to_string(config::effective(c.server.eviction_mode))},
               {"engine_metrics_url", e.metrics.url},
               {"stats_interval", std::to_string(e.metrics.interval.count()) + "ms"},
               {"cache_tier", config::to_string(e.metrics.tier)},
               {"engine_model_name", e.metrics.model_label},
               {"ignore_block_removed", e.l2_tier},
               {"engine", std::to_string(i + 1) + "/" + std::to_string(c.engines.size())},
               {"engines", c.engines.size()}});
  }
  log::write(scheduling);
  kvrelay::daemon d(cfg.value());
  std::string error;
  if (!d.start(error)) {
    log::error("cannot start", {{"err", error}});
    d.stop();
    return 1;
  }

  for (;;) {
    int sig = wait_signal(set);
    if (sig == SIGHUP) {
      if (!flags.config_path) {
        log::warn("SIGHUP ignored: no --config file to reload");
        continue;
      }
      auto next = config::resolve(flags);
      if (!next) {
        log::error("reload failed; keeping the running configuration",
                   {{"err", next.error().context}});
        continue;
      }
      for (const auto& key : d.reload(next.value()))
        log::warn("configuration change needs a restart to take effect", {{"key", key}});
      log::info("configuration reloaded");
      continue;
    }
    log::info("shutting down: draining", {{"signal", sig}});
    break;
  }

  // Drain on a helper thread so a second signal can still cut it short.
  std::atomic<bool> drained{false};
  // Each pipeline's outcome is logged by the daemon; this line sums up what the server is left
  // with (docs/operations.md, "What shutdown leaves behind").
  std::thread drainer([&] {
    const auto reports = d.drain(drain_deadline);
    int64_t left = 0;
    size_t incomplete = 0, unknown = 0;
    for (const auto& r : reports) {
      const auto n = r.left_on_server();
      left += std::max<int64_t>(0, n);
      unknown += n < 0 ? 1 : 0;
      incomplete += r.complete ? 0 : 1;
    }
    if (incomplete == 0)
      log::info("shutdown drain finished", {{"pipelines", reports.size()}, {"left_on_server", left}});
    else
      log::warn("shutdown drain timed out or failed",
                {{"pipelines", reports.size()}, {"incomplete", incomplete},
                 {"deadline_ms", static_cast<int64_t>(drain_deadline.count() * 1000)},
                 {"left_on_server", left}, {"pipelines_left_unknown", unknown}});
    drained = true;
  });
  timespec poll{0, 100'000'000};
  while (!drained.load()) {
    siginfo_t info;
    if (sigtimedwait(&set, &info, &poll) > 0 && info.si_signo != SIGHUP) {
      log::warn("second signal: exiting now");
      std::_Exit(1);
    }
  }
  drainer.join();
  d.stop();
  log::info("kvevent-subscriber stopped");
  return 0;
}
