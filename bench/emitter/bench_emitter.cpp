// The emitter's eviction path alone: units of evictions from a stand-in debouncer, through the
// real emitter and gRPC port, to the demo policy server in count-only mode (in process, on
// loopback). Prints one JSON line per configuration: evictions/s (wall) and CPU µs per eviction
// (this process: emitter, gRPC both sides, server). `rpc` with max_in_flight 64 and one
// PublishEvent call object per eviction is what the emitter did before the eviction modes; the
// ratios between lines of one run are the figure (the machine is shared).
//
//   bench_emitter [--evictions N] [--unit N]
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "actors/emitter/emitter_actor.hpp"
#include "messages/system_setup.hpp"
#include "tools/policy-server/service.hpp"

namespace {

using namespace kvrelay;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct run_result {
  double seconds = 0, cpu = 0;
  bool ok = true;
};

run_result run(caf::actor_system& sys, const std::string& target, emitter::eviction_mode mode,
               size_t in_flight, size_t evictions, size_t per_unit) {
  pipeline_context ctx;
  ctx.name = "bench";
  ctx.identity = {"bench-0", "bench-model", "bench-tenant", "vllm"};
  emitter_options o;
  o.client.target = target;
  o.eviction_mode = mode;
  o.max_evictions_in_flight = in_flight;
  std::string err;
  auto em = spawn_emitter(sys, ctx, o, err);
  if (!em) {
    std::fprintf(stderr, "emitter: %s\n", err.c_str());
    std::exit(1);
  }
  caf::scoped_actor self{sys};
  // Warm up the connection with one clear.
  auto warm = std::make_shared<emit_unit>();
  warm->id = 0;
  warm->clear = true;
  self->send(em, emit_unit_ptr(warm));
  self->receive([](const emit_result&) {});
  std::vector<emit_unit_ptr> units;
  uint64_t fp = 1;
  for (size_t done = 0; done < evictions; done += per_unit) {
    auto u = std::make_shared<emit_unit>();
    u->id = units.size() + 1;
    for (size_t i = 0; i < per_unit && done + i < evictions; ++i)
      u->evicts.push_back({fp++ * 0x9e3779b97f4a7c15ULL, (i % 5 == 0) ? "lora-1" : "", 1});
    units.push_back(std::move(u));
  }
  run_result r;
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  // Two units in flight, as the debouncer's credit window allows.
  size_t sent = 0, answered = 0;
  while (sent < units.size() && sent < 2) self->send(em, units[sent++]);
  while (answered < units.size()) {
    self->receive([&](const emit_result& res) {
      r.ok = r.ok && res.ok;
      ++answered;
    });
    if (sent < units.size()) self->send(em, units[sent++]);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu = cpu_seconds() - c0;
  self->send_exit(em, caf::exit_reason::user_shutdown);
  self->wait_for(em);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  size_t evictions = 200'000, per_unit = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--evictions")) evictions = std::strtoul(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--unit")) per_unit = std::strtoul(argv[i + 1], nullptr, 10);
  }
  policy::server_options so;
  so.index.count_only = true;
  policy::policy_server server(so);
  if (!server.start()) return 1;
  caf::actor_system_config cfg;
  setup_actor_system(cfg);
  caf::actor_system sys{cfg};
  struct conf {
    const char* name;
    emitter::eviction_mode mode;
    size_t in_flight;
  };
  const conf confs[] = {{"rpc-64", emitter::eviction_mode::rpc, 64},
                        {"rpc-256", emitter::eviction_mode::rpc, 256},
                        {"rpc-1024", emitter::eviction_mode::rpc, 1024},
                        {"expire", emitter::eviction_mode::expire, 256}};
  for (const auto& c : confs) {
    // expire is orders of magnitude faster: give it more to measure.
    const size_t n = c.mode == emitter::eviction_mode::expire ? evictions * 10 : evictions;
    const auto r = run(sys, server.target(), c.mode, c.in_flight, n, per_unit);
    std::printf(
        "{\"case\":\"%s\",\"evictions\":%zu,\"ok\":%s,\"seconds\":%.3f,"
        "\"evictions_per_s\":%.0f,\"cpu_us_per_eviction\":%.3f}\n",
        c.name, n, r.ok ? "true" : "false", r.seconds, static_cast<double>(n) / r.seconds,
        r.cpu / static_cast<double>(n) * 1e6);
    std::fflush(stdout);
  }
  return 0;
}
