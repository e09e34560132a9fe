// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The fault fixture (fault_fixture.hpp): a daemon, an engine model and a server under faults,
// and child processes for the signal tests. ~480 lines: one fixture every fault test shares.
#include "tests/support/fault_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/fingerprint.hpp"
#include "base/metrics_registry.hpp"

extern char** environ;

namespace kvrelay::faults {

namespace {

constexpr int64_t block_size = 16;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string hex_be8(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) {
    const auto b = static_cast<unsigned>((v >> shift) & 0xff);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

// -- engine_model --------------------------------------------------------------------------------

engine_model::engine_model(options o) : opt_(o), rng_(o.seed) {}

uint64_t engine_model::new_hash() {
  // splitmix64 of a counter: unique, and spread over the whole range like real block hashes.
  uint64_t z = (++next_hash_ + (opt_.seed << 32)) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void engine_model::store_chain(std::vector<fake::fake_event>& out) {
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::optional<uint64_t> parent;
  if (!blocks_.empty() && coin(rng_) < 0.4) parent = all_.items.at(rng_() % all_.items.size());
  std::string adapter;
  uint64_t parent_fp = 0;
  int32_t tokens_before = 0;
  if (parent) {
    const auto& p = blocks_.at(*parent);
    adapter = p.adapter;
    parent_fp = p.fp;
    tokens_before = p.tokens;
  } else if (coin(rng_) < opt_.lora_fraction) {
    adapter = lora;
  }
  const size_t n = 1 + rng_() % (parent ? 3 : 4);
  fake::fake_event ev;
  ev.t = fake::fake_event::type::stored;
  ev.block_size = block_size;
  if (parent) ev.parent = fake::fake_hash::u(*parent);
  for (size_t i = 0; i < n * static_cast<size_t>(block_size); ++i)
    ev.token_ids.push_back(static_cast<uint32_t>(rng_() % 32000));
  if (!adapter.empty()) {
    ev.lora_id = opt_.lora_id;
    if (opt_.lora_names) ev.lora_name = adapter;
  }
  const auto fps = fingerprint::prefixes(ev.token_ids, block_size, parent.has_value(), parent_fp);
  std::optional<uint64_t> prev = parent;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = new_hash();
    ev.block_hashes.push_back(fake::fake_hash::u(h));
    block b;
    b.adapter = adapter;
    b.fp = fps.at(i);
    b.tokens = tokens_before + static_cast<int32_t>((i + 1) * block_size);
    b.parent = prev;
    if (prev && blocks_.at(*prev).children++ == 0) leaves_.drop(*prev);
    blocks_.emplace(h, b);
    all_.add(h);
    leaves_.add(h);
    ++ops_;
    prev = h;
  }
  out.push_back(std::move(ev));
}

void engine_model::evict(std::vector<fake::fake_event>& out) {
  if (blocks_.size() <= opt_.capacity) return;
  fake::fake_event ev;
  ev.t = fake::fake_event::type::removed;
  // Leaves only, like an LRU over blocks whose children went first; never a dangling child.
  while (blocks_.size() > opt_.capacity) {
    const uint64_t victim = leaves_.items.at(rng_() % leaves_.items.size());
    leaves_.drop(victim);
    all_.drop(victim);
    const auto parent = blocks_.at(victim).parent;
    if (parent && --blocks_.at(*parent).children == 0) leaves_.add(*parent);
    blocks_.erase(victim);
    ++ops_;
    ev.block_hashes.push_back(fake::fake_hash::u(victim));
  }
  out.push_back(std::move(ev));
}

std::vector<fake::fake_event> engine_model::step() {
  std::vector<fake::fake_event> out;
  const size_t requests = 1 + rng_() % 3;
  for (size_t i = 0; i < requests; ++i) store_chain(out);
  evict(out);
  return out;
}

void engine_model::pick_set::add(uint64_t h) {
  at[h] = items.size();
  items.push_back(h);
}

void engine_model::pick_set::drop(uint64_t h) {
  auto it = at.find(h);
  if (it == at.end()) return;
  const size_t i = it->second;
  at.erase(it);
  if (i + 1 != items.size()) {
    items[i] = items.back();
    at[items[i]] = i;
  }
  items.pop_back();
}

std::vector<fake::fake_event> engine_model::clear() {
  blocks_.clear();
  all_.clear();
  leaves_.clear();
  fake::fake_event ev;
  ev.t = fake::fake_event::type::cleared;
  return {ev};
}

void engine_model::forget() {
  blocks_.clear();
  all_.clear();
  leaves_.clear();
}

index_view engine_model::expected() const {
  index_view v;
  for (const auto& [h, b] : blocks_) v[{b.adapter, hex_be8(b.fp)}] = {b.tokens, 1};
  return v;
}

// -- server side -----------------------------------------------------------------------------------

index_view server_view(policy::policy_server& server, const std::string& replica_id) {
  // Fresh entries only, as a router's lookup sees them: in expire mode an eviction is a stale
  // entry that stays stored until the server's TTL sweep.
  index_view v;
  for (const auto& e : server.index().entries_of(tenant, model, replica_id, policy::view::fresh)) {
    const std::string key = e.prefix_hash.size() == 8
                                ? hex_be8(fingerprint::from_be8(e.prefix_hash))
                                : "bad-length:" + std::to_string(e.prefix_hash.size());
    v[{e.adapter_id, key}] = {e.entry.token_count, e.entry.tier};
  }
  return v;
}

std::string describe_diff(const index_view& want, const index_view& got, size_t max_lines) {
  std::ostringstream out;
  size_t missing = 0, extra = 0, wrong = 0, lines = 0;
  const auto line = [&](const char* what, const index_view::value_type& e, const char* more) {
    if (lines++ < max_lines)
      out << "  " << what << " [" << e.first.first << "] " << e.first.second << " tokens "
          << e.second.first << " tier " << e.second.second << more << "\n";
  };
  for (const auto& e : want) {
    auto it = got.find(e.first);
    if (it == got.end()) {
      ++missing;
      line("missing", e, "");
    } else if (it->second != e.second) {
      ++wrong;
      line("wrong (want)", e, "");
      line("wrong (got) ", *it, "");
    }
  }
  for (const auto& e : got)
    if (!want.count(e.first)) {
      ++extra;
      line("extra", e, " (the engine does not hold it)");
    }
  if (missing + extra + wrong == 0) return {};
  std::ostringstream head;
  head << "server index differs from the engine: want " << want.size() << ", got " << got.size()
       << "; missing " << missing << ", extra " << extra << ", wrong " << wrong << "\n";
  return head.str() + out.str();
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

config::daemon_config make_config(const std::string& server_target, const std::string& live,
                                  const std::string& replay) {
  config::daemon_config c;
  c.server.address = server_target;
  c.server.rpc_timeout = std::chrono::milliseconds(400);
  c.server.refresh_interval = std::chrono::milliseconds(0);
  // These tests look at the server after the drain; the default (clear) has its own tests.
  c.server.on_shutdown = config::shutdown_action::keep;
  c.admin.listen = "127.0.0.1:0";
  c.log.format = config::log_format::text;
  c.log.level = config::log_level::warn;
  config::engine_settings e;
  e.replica_id = replica;
  e.model_id = model;
  e.tenant_id = tenant;
  e.hash_scheme = "vllm";
  e.endpoint = live;
  e.replay_endpoint = replay;
  e.topic = topic;
  e.window = std::chrono::milliseconds(10);
  e.reconnect_backoff = std::chrono::milliseconds(100);
  e.metrics.url = "";
  c.engines.push_back(e);
  return c;
}

// -- fault_env -------------------------------------------------------------------------------------

policy::server_options fault_env::server_options_for(const options& o) {
  policy::server_options s;
  s.tls = o.tls;
  return s;
}

fault_env::fault_env(options o)
    : server(server_options_for(o)), buffer_steps(o.buffer_steps), model(o.model) {
  if (!server.start()) throw std::runtime_error("policy server did not start");
  if (o.start_engine) start_engine();
  cfg = make_config(server.target(), engine ? engine->live_endpoint() : "tcp://127.0.0.1:1",
                    engine ? engine->replay_endpoint() : "");
}

fault_env::~fault_env() {
  if (d) d->stop();
  d.reset();
  if (engine) engine->stop();
  server.stop();
}

bool fault_env::start_daemon(std::string* error, bool sync_first) {
  d = std::make_unique<kvrelay::daemon>(cfg);
  std::string err;
  bool ok = d->start(err);
  if (ok && sync_first && engine && !sync()) {
    ok = false;
    err = "the daemon never became live (no live batch, or its catch-up never ended, in 10 s)";
  }
  if (error) *error = err;
  return ok;
}

void fault_env::start_engine(const std::string& live, const std::string& replay) {
  fake::publisher_options p;
  p.bind = live;
  p.replay_bind = replay;
  p.topic = topic;
  p.buffer_steps = buffer_steps;  // default: the whole test's history, a replay can rebuild
  p.linger_ms = 0;
  engine = std::make_unique<fake::publisher>(p);
}

void fault_env::stop_engine() {
  if (engine) engine->stop();
  engine.reset();
}

void fault_env::publish_events(const std::vector<fake::fake_event>& events) {
  fake::encode_options eo;
  eo.era = fake::wire_era::d;
  eo.ts = now_seconds();
  engine->publish(fake::encode_batch(events, eo));
}

uint64_t fault_env::publish_steps(size_t steps) {
  uint64_t seq = 0;
  for (size_t i = 0; i < steps; ++i) {
    publish_events(model.step());
    seq = engine->next_seq() - 1;
  }
  return seq;
}

std::string fault_env::wait_consistent(std::chrono::milliseconds timeout) {
  const auto want = model.expected();
  std::string diff;
  wait_until(
      [&] {
        diff = describe_diff(want, server_view(server));
        return diff.empty();
      },
      timeout);
  if (!diff.empty() && d) diff += "daemon tree: " + d->tree_json() + "\n";
  return diff;
}

namespace {

// A child's entry of the daemon's /debug/tree (null when absent), first pipeline's first.
nlohmann::json child_entry(kvrelay::daemon* d, const std::string& name) {
  if (!d) return nullptr;
  const auto doc = nlohmann::json::parse(d->tree_json(), nullptr, false);
  if (doc.is_discarded()) return nullptr;
  for (const auto& p : doc.value("pipelines", nlohmann::json::array()))
    for (const auto& c : p.value("children", nlohmann::json::array()))
      if (c.value("name", "") == name) return c;
  return nullptr;
}

}  // namespace

int64_t fault_env::child_field(const std::string& child, const std::string& field) {
  const auto c = child_entry(d.get(), child);
  if (!c.is_object() || !c.contains(field) || !c.at(field).is_number()) return -1;
  return c.at(field).get<int64_t>();
}

int64_t fault_env::ingress_field(const std::string& field) { return child_field("ingress", field); }

bool fault_env::ingress_flag(const std::string& field) { return child_flag("ingress", field); }

int64_t fault_env::grandchild_field(const std::string& child, const std::string& grandchild,
                                    const std::string& field) {
  const auto c = child_entry(d.get(), child);
  if (!c.is_object()) return -1;
  for (const auto& g : c.value("children", nlohmann::json::array()))
    if (g.value("name", "") == grandchild && g.contains(field) && g.at(field).is_number())
      return g.at(field).get<int64_t>();
  return -1;
}

bool fault_env::child_flag(const std::string& child, const std::string& field) {
  const auto c = child_entry(d.get(), child);
  return c.is_object() && c.contains(field) && c.at(field).is_boolean() && c.at(field).get<bool>();
}

// Live means a live batch arrived (nothing else proves the subscription is in effect) and no
// replay or tail probe is pending, so a batch published from now on arrives live, in order.
bool fault_env::sync(std::chrono::milliseconds timeout) {
  const auto live = [&] { return ingress_flag("live") && !ingress_flag("catching_up"); };
  return wait_until(
      [&] {
        if (live()) return true;
        publish_events({});
        return false;
      },
      timeout);
}

bool fault_env::wait_live(std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        if (ingress_flag("live") && !ingress_flag("catching_up")) return true;
        publish_steps(1);
        return false;
      },
      timeout);
}

double fault_env::metric(const std::string& name, label_set extra) const {
  label_set l{{"replica", replica}};
  for (auto& kv : extra) l.push_back(kv);
  return d ? d->metrics().value(name, l) : -1;
}

double fault_env::metric_sum(const std::string& name, label_set match) const {
  label_set l{{"replica", replica}};
  for (auto& kv : match) l.push_back(kv);
  return d ? d->metrics().sum(name, l) : -1;
}

// -- processes, files, HTTP ---------------------------------------------------------------------

child_process::child_process(const std::vector<std::string>& args, const std::string& out_dir) {
  static int counter = 0;
  const std::string stem = out_dir + "/child" + std::to_string(++counter);
  out_path_ = stem + ".out";
  err_path_ = stem + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The test process may block signals in its threads; the child must start with a clean mask.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t dfl;
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGTERM);
  sigaddset(&dfl, SIGINT);
  sigaddset(&dfl, SIGHUP);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // Debugging aid: KVRELAY_FAULT_CHILD_PREFIX="valgrind -q" runs the child under a tool that
  // keeps its pid (signals still reach the daemon).
  std::vector<std::string> full;
  if (const char* prefix = std::getenv("KVRELAY_FAULT_CHILD_PREFIX")) {
    std::istringstream words(prefix);
    for (std::string w; words >> w;) full.push_back(w);
  }
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (const auto& a : full) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (posix_spawnp(&pid_, argv[0], &fa, &attr, argv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

void child_process::signal(int sig) const {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> child_process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string child_process::out() const { return read_file(out_path_); }
std::string child_process::err() const { return read_file(err_path_); }

temp_dir::temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kvrelay-fault-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void temp_dir::write(const std::string& name, const std::string& text) const {
  std::ofstream(file(name)) << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {

http_reply http_call(bool post, uint16_t port, const std::string& path, const std::string& token) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(5, 0);
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  auto r = post ? c.Post(path.c_str(), h, "", "text/plain") : c.Get(path.c_str(), h);
  if (!r) return {};
  return {r->status, r->body};
}

}  // namespace

http_reply http_get(uint16_t port, const std::string& path, const std::string& token) {
  return http_call(false, port, path, token);
}

http_reply http_post(uint16_t port, const std::string& path, const std::string& token) {
  return http_call(true, port, path, token);
}

}  // namespace kvrelay::faults
