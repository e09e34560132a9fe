// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-fake-engine: publishes engine KV-cache events over ZMQ like vLLM/SGLang do.
// Default mode is the reference fake engine (docs/spec/reference-behaviour.md §6): one
// pre-built payload republished every -interval. `--workload random` publishes a seeded random
// workload at --rate batches/s in any wire era, with an optional replay ROUTER. `--http-port`
// adds the engine's HTTP server in vLLM's or SGLang's dialect (discovery, /v1/models, /metrics).
// Over 400 lines on purpose: the whole command line, from flag table to publish loop, reads in
// one place.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/values.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/fake-engine/workload.hpp"

namespace {

using namespace kvrelay::fake;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

void log_line(const std::string& msg) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y/%m/%d %H:%M:%S", &tm);
  std::fprintf(stderr, "%s %s\n", ts, msg.c_str());
  std::fflush(stderr);
}

[[noreturn]] void fatal(const std::string& msg) {
  log_line(msg);
  std::exit(1);
}

const char* k_usage =
    "Usage: kvrelay-fake-engine [flags]\n"
    "Reference flags (-x and --x, --x=v and --x v are equivalent):\n"
    "  -bind ENDPOINT        ZMQ PUB bind endpoint (default tcp://0.0.0.0:5557)\n"
    "  -topic STR            topic frame (default kv-events)\n"
    "  -block-size N         tokens per block (default 128)\n"
    "  -num-blocks N         blocks in the scripted payload (default 1)\n"
    "  -events N             BlockStored events the blocks are split over (default 1)\n"
    "  -start-token N        first token id (default 0)\n"
    "  -interval DUR         republish interval, e.g. 500ms, 1s (default 500ms)\n"
    "  -omit-token-ids       send token_ids nil (the subscriber cannot fingerprint)\n"
    "kvrelay extensions:\n"
    "  --replay-bind EP      ROUTER replay endpoint (off by default)\n"
    "  --buffer-steps N      replay ring size in batches (default 10000)\n"
    "  --replay-topic        reply in the v0.26+ [topic, seq, payload] form\n"
    "  --era ERA             A..I, S1..S4, TRT (TensorRT-LLM), ATOM0 (ATOM #869: one frame,\n"
    "                        no seq), ATOM (#1316) (default A scripted, C random)\n"
    "  --hash MODE           int | u64 | i64 | bytes (default int: signed for A/B/SGLang)\n"
    "  --workload MODE       scripted (default) | random\n"
    "  --rate R              random workload batches per second (default 10)\n"
    "  --count N             stop after N batches per rank (default 0 = forever)\n"
    "  --seed N              random workload seed (default 1)\n"
    "  --dp-size N           publish N DP ranks on port+rank (default 1)\n"
    "  --lora-adapters N     random workload: adapters in use (default 0)\n"
    "  --capacity N          random workload: GPU blocks before LRU eviction (default 4096)\n"
    "  --clear-prob P        random workload: AllBlocksCleared probability per batch (default 0)\n"
    "  --cpu-offload         random workload: also store blocks on a CPU tier\n"
    "  --cpu-capacity N      random workload: CPU blocks before LRU eviction (default 16384)\n"
    "  --cpu-store-only      random workload: CPU evictions are silent (LMCache MP)\n"
    "  --hybrid              random workload: full_attention group 0 + sliding_window group 1\n"
    "Engine HTTP server (docs/development.md, docs/discovery.md):\n"
    "  --http-port N         serve HTTP on N (0 = ephemeral; default off)\n"
    "  --http-host HOST      HTTP listen address (default 127.0.0.1)\n"
    "  --dialect D           vllm | sglang (default: sglang for S eras, else vllm)\n"
    "  --vllm-shape S        /kv_event_sources body: keyed | sources | list (default keyed)\n"
    "  --events-disabled     bind no publisher and report KV events as off\n"
    "  --model NAME          served model id in /v1/models and /metrics (default fake-model)\n"
    "  --metrics-file PATH   serve this file at /metrics (default: synthetic, per dialect)\n"
    "  -h, --help            this text\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "%s\n%s", msg.c_str(), k_usage);
  std::exit(2);
}

// Go's duration syntax, as the reference tool's flags take it (config::parse_duration).
bool parse_duration(const std::string& text, std::chrono::nanoseconds& out) {
  return kvrelay::config::parse_duration(text, out).empty() && out.count() >= 0;
}

bool parse_int(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

bool parse_bool(const std::string& text, bool& out) {
  if (text == "true" || text == "1" || text == "t" || text == "TRUE" || text == "True") {
    out = true;
    return true;
  }
  if (text == "false" || text == "0" || text == "f" || text == "FALSE" || text == "False") {
    out = false;
    return true;
  }
  return false;
}

struct flags {
  std::string bind = "tcp://0.0.0.0:5557";
  std::string topic = "kv-events";
  int64_t block_size = 128, num_blocks = 1, events = 1, start_token = 0;
  std::string interval = "500ms";
  bool omit_token_ids = false;
  std::string replay_bind;
  int64_t buffer_steps = 10000;
  bool replay_topic = false;
  std::string era;
  std::string hash = "int";
  std::string workload = "scripted";
  double rate = 10;
  int64_t count = 0, seed = 1, dp_size = 1, lora_adapters = 0, capacity = 4096;
  int64_t cpu_capacity = 16384;
  double clear_prob = 0;
  bool cpu_offload = false, hybrid = false, cpu_store_only = false;
  int64_t http_port = -1;
  std::string http_host = "127.0.0.1", dialect, vllm_shape = "keyed", model = "fake-model";
  std::string metrics_file;
  bool events_disabled = false;
  std::set<std::string> given;  // flags set on the command line
};

flags parse(int argc, char** argv) {
  flags f;
  const std::map<std::string, std::string*> strings = {
      {"bind", &f.bind},       {"topic", &f.topic},   {"interval", &f.interval},
      {"replay-bind", &f.replay_bind}, {"era", &f.era}, {"hash", &f.hash},
      {"workload", &f.workload}, {"http-host", &f.http_host}, {"dialect", &f.dialect},
      {"vllm-shape", &f.vllm_shape}, {"model", &f.model}, {"metrics-file", &f.metrics_file}};
  const std::map<std::string, int64_t*> ints = {
      {"block-size", &f.block_size}, {"num-blocks", &f.num_blocks}, {"events", &f.events},
      {"start-token", &f.start_token}, {"buffer-steps", &f.buffer_steps}, {"count", &f.count},
      {"seed", &f.seed}, {"dp-size", &f.dp_size}, {"lora-adapters", &f.lora_adapters},
      {"capacity", &f.capacity}, {"http-port", &f.http_port}, {"cpu-capacity", &f.cpu_capacity}};
  const std::map<std::string, double*> doubles = {{"rate", &f.rate}, {"clear-prob", &f.clear_prob}};
  const std::map<std::string, bool*> bools = {{"omit-token-ids", &f.omit_token_ids},
                                              {"replay-topic", &f.replay_topic},
                                              {"cpu-offload", &f.cpu_offload},
                                              {"cpu-store-only", &f.cpu_store_only},
                                              {"hybrid", &f.hybrid},
                                              {"events-disabled", &f.events_disabled}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') usage_error("unexpected argument: " + arg);
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    if (name == "h" || name == "help") {
      std::fputs(k_usage, stdout);
      std::exit(0);
    }
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    f.given.insert(name);
    if (auto b = bools.find(name); b != bools.end()) {
      bool v = true;
      if (value && !parse_bool(*value, v)) usage_error("invalid boolean for -" + name);
      *b->second = v;
      continue;
    }
    if (!strings.count(name) && !ints.count(name) && !doubles.count(name)) {
      usage_error("flag provided but not defined: -" + name);
    }
    if (!value) {
      if (i + 1 >= argc) usage_error("flag needs an argument: -" + name);
      value = argv[++i];
    }
    if (auto s = strings.find(name); s != strings.end()) {
      *s->second = *value;
    } else if (auto n = ints.find(name); n != ints.end()) {
      if (!parse_int(*value, *n->second)) usage_error("invalid value \"" + *value + "\" for -" + name);
    } else if (auto d = doubles.find(name); d != doubles.end()) {
      char* end = nullptr;
      *d->second = std::strtod(value->c_str(), &end);
      if (value->empty() || *end != '\0') usage_error("invalid value \"" + *value + "\" for -" + name);
    } else {
      usage_error("flag provided but not defined: -" + name);
    }
  }
  return f;
}

// Hashes in the era's customary integer signedness unless --hash forces a mode.
fake_hash to_mode(const fake_hash& h, const std::string& mode, wire_era era) {
  const bool signed_default =
      era == wire_era::a || era == wire_era::b || is_sglang(era) || era == wire_era::trt;
  if (mode == "bytes") {
    std::string digest(24, '\0');
    for (int i = 7; i >= 0; --i) digest.push_back(static_cast<char>((h.value >> (8 * i)) & 0xff));
    return fake_hash::bin(digest);
  }
  if (mode == "u64" || (mode == "int" && !signed_default)) return fake_hash::u(h.value);
  return fake_hash::i(static_cast<int64_t>(h.value));
}

void sleep_until(std::chrono::steady_clock::time_point t) {
  while (!g_stop.load() && std::chrono::steady_clock::now() < t) {
    const auto left = t - std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        left, std::chrono::milliseconds(50)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const flags f = parse(argc, argv);
  const bool random = f.workload == "random";
  if (!random && f.workload != "scripted") usage_error("--workload must be scripted or random");
  if (f.hash != "int" && f.hash != "u64" && f.hash != "i64" && f.hash != "bytes") {
    usage_error("--hash must be int, u64, i64 or bytes");
  }
  wire_era era = random ? wire_era::c : wire_era::a;
  if (!f.era.empty()) {
    const auto e = parse_era(f.era);
    if (!e) usage_error("unknown --era " + f.era);
    era = *e;
  }
  std::chrono::nanoseconds interval{};
  if (!parse_duration(f.interval, interval)) usage_error("invalid value \"" + f.interval + "\" for -interval");
  if (f.dp_size < 1 || f.dp_size > 1024) fatal("--dp-size must be in [1, 1024]");
  if (f.count < 0) fatal("--count must be >= 0");
  if (f.buffer_steps < 1) fatal("--buffer-steps must be >= 1");
  if (f.given.count("http-port") && (f.http_port < 0 || f.http_port > 65535)) {
    fatal("--http-port must be in [0, 65535]");
  }
  const bool sglang_http = f.given.count("dialect") ? f.dialect == "sglang" : is_sglang(era);
  if (f.given.count("dialect") && f.dialect != "vllm" && f.dialect != "sglang") {
    usage_error("--dialect must be vllm or sglang");
  }
  vllm_shape shape = vllm_shape::keyed;
  if (f.vllm_shape == "sources") shape = vllm_shape::sources;
  else if (f.vllm_shape == "list") shape = vllm_shape::list;
  else if (f.vllm_shape != "keyed") usage_error("--vllm-shape must be keyed, sources or list");

  scripted_options sopt;
  sopt.block_size = f.block_size;
  sopt.num_blocks = f.num_blocks;
  sopt.events = f.events;
  sopt.start_token = f.start_token;
  sopt.omit_token_ids = f.omit_token_ids;
  std::string scripted_payload;
  if (!random) {
    if (const auto err = validate(sopt); !err.empty()) fatal(err);
    if (interval.count() <= 0) fatal("-interval must be > 0");
    auto events = scripted_events(sopt);
    for (auto& ev : events) {
      for (auto& h : ev.block_hashes) h = to_mode(h, f.hash, era);
      if (ev.parent) ev.parent = to_mode(*ev.parent, f.hash, era);
    }
    encode_options eo;
    eo.era = era;
    eo.ts = 0.0;  // 0 tells the server "now" (the reference does the same)
    scripted_payload = encode_batch(events, eo);
    for (const auto& line : expect_lines(sopt)) log_line(line);
  } else if (!(f.rate > 0)) {
    fatal("--rate must be > 0");
  } else if (f.given.count("block-size") && f.block_size <= 0) {
    fatal("-block-size must be > 0");
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::vector<std::unique_ptr<publisher>> pubs;
  std::vector<std::unique_ptr<workload>> loads;
  // A real engine with events off binds no publisher; its HTTP server says so.
  for (int64_t rank = 0; rank < (f.events_disabled ? 0 : f.dp_size); ++rank) {
    publisher_options po;
    po.bind = f.bind;
    po.replay_bind = f.replay_bind;
    po.topic = f.topic;
    po.buffer_steps = static_cast<size_t>(f.buffer_steps);
    po.dp_rank = static_cast<int>(rank);
    // TensorRT-LLM replies with the topic like vLLM >= 0.26; ATOM #869 has no seq to send.
    po.replay_topic_frames = f.replay_topic || era == wire_era::trt;
    po.unsequenced = is_unsequenced(era);
    try {
      pubs.push_back(std::make_unique<publisher>(po));
    } catch (const std::exception& e) {
      fatal(e.what());
    }
    log_line("fake engine publishing rank=" + std::to_string(rank) + " endpoint=" +
             pubs.back()->live_endpoint() +
             (pubs.back()->replay_endpoint().empty()
                  ? std::string()
                  : " replay=" + pubs.back()->replay_endpoint()) +
             " topic=" + f.topic + " era=" + era_name(era));
    if (random) {
      workload_options wo;
      wo.seed = static_cast<uint64_t>(f.seed) + static_cast<uint64_t>(rank);
      // The reference's 128 suits its e2e test; a real engine's default block is 16 tokens.
      wo.block_size = f.given.count("block-size") ? f.block_size : 16;
      wo.hashes = f.hash == "bytes" ? hash_mode::bytes
                  : f.hash == "u64" ? hash_mode::u64
                  : f.hash == "i64" ? hash_mode::i64
                  : (era == wire_era::a || era == wire_era::b || is_sglang(era) ||
                     era == wire_era::trt)
                      ? hash_mode::i64
                      : hash_mode::u64;
      wo.lora_adapters = static_cast<size_t>(std::max<int64_t>(0, f.lora_adapters));
      wo.capacity_blocks = static_cast<size_t>(std::max<int64_t>(1, f.capacity));
      wo.clear_probability = f.clear_prob;
      wo.cpu_offload = f.cpu_offload;
      wo.cpu_capacity_blocks = static_cast<size_t>(std::max<int64_t>(1, f.cpu_capacity));
      wo.cpu_removals = !f.cpu_store_only;
      wo.hybrid = f.hybrid;
      loads.push_back(std::make_unique<workload>(wo));
    }
  }

  std::unique_ptr<engine_http> http;  // declared after pubs: stops before they go
  if (f.given.count("http-port")) {
    engine_description d;
    d.dialect = sglang_http ? http_dialect::sglang : http_dialect::vllm;
    d.shape = shape;
    d.events_disabled = f.events_disabled;
    d.model = f.model;
    d.topic = f.topic;
    d.block_size = random && !f.given.count("block-size") ? 16 : f.block_size;
    d.buffer_steps = f.buffer_steps;
    d.bind = f.bind;
    for (const auto& p : pubs) d.ranks.push_back({p->live_endpoint(), p->replay_endpoint()});
    if (!f.metrics_file.empty()) {
      std::ifstream in(f.metrics_file);
      if (!in) fatal("cannot open --metrics-file " + f.metrics_file);
      d.metrics_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (d.metrics_text.empty()) fatal("--metrics-file " + f.metrics_file + " is empty");
    }
    try {
      http = std::make_unique<engine_http>(d, f.http_host, static_cast<int>(f.http_port), [&pubs] {
        metrics_sample s;
        for (const auto& p : pubs) s.batches += p->stats().published;
        return s;
      });
    } catch (const std::exception& e) {
      fatal(e.what());
    }
    log_line("fake engine http listening url=" + http->url() + " dialect=" +
             (sglang_http ? "sglang" : "vllm") + (f.events_disabled ? " events=disabled" : ""));
  }

  const auto period = random ? std::chrono::nanoseconds(static_cast<int64_t>(1e9 / f.rate))
                             : interval;
  auto next = std::chrono::steady_clock::now();
  int64_t sent = 0;
  while (!g_stop.load() && (f.count == 0 || sent < f.count)) {
    for (size_t r = 0; r < pubs.size(); ++r) {
      if (random) {
        encode_options eo;
        eo.era = era;
        eo.ts = std::chrono::duration<double>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
        eo.dp_rank = static_cast<int64_t>(r);
        pubs[r]->publish(encode_batch(loads[r]->next_batch(), eo));
      } else {
        pubs[r]->publish(scripted_payload);
      }
    }
    ++sent;
    next += period;
    sleep_until(next);
  }
  if (http) http->stop();
  for (size_t r = 0; r < pubs.size(); ++r) {
    const auto st = pubs[r]->stats();
    std::string extra;
    if (random) {
      const auto ws = loads[r]->stats();
      extra = " requests=" + std::to_string(ws.requests) + " stored=" +
              std::to_string(ws.blocks_stored) + " evicted=" + std::to_string(ws.blocks_evicted) +
              " resident=" + std::to_string(ws.gpu_resident);
    }
    log_line("fake engine stopped rank=" + std::to_string(r) + " published=" +
             std::to_string(st.published) + " replay_requests=" +
             std::to_string(st.replay_requests) + extra);
    pubs[r]->stop();
  }
  return 0;
}
