// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay as the reference controller's injector runs it (cachebox-project/inference-cache,
// internal/adapters/builtin/runtime/subscriber.go, renderSubscriberSidecar): the Go sidecar's
// arguments and nothing else, POD_NAME/POD_NAMESPACE from the downward API, UID 65532, no
// capabilities, no privilege escalation, a read-only root file system, no volumes. The engine is
// the fake vLLM: its PUB and replay ROUTER on loopback, its HTTP server (GET /kv_event_sources,
// /v1/models, /metrics) at the --engine-metrics-url's host and port.
//
// The test moves its process into a network namespace of its own (a pod's): a loopback, and a
// veth whose address stands for the pod IP. The daemon is the real binary, run as a child that
// enters a mount namespace of its own, remounts every file system but /proc, /sys and /dev
// read-only, drops to 65532 and execs. It must, with no flag beyond the injector's:
//   - learn the replay endpoint from the engine (the injector passes none) and catch up from it
//     at start (the engine published before kvrelay came up);
//   - repair a sequence gap from the ring;
//   - after a SIGKILL (an OOM kill, a crash), catch up again from the ring;
//   - answer /metrics, /healthz, /readyz and /readyz/self on the pod address, and /debug/* only
//     on loopback.
// Needs root (namespaces, setuid) and iproute2's `ip`; without them it skips, saying why.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/wire_encoder.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

const std::string binary = KVRELAY_BINARY_DIR "/kvrelay";
constexpr uid_t nonroot = 65532;
constexpr const char* pod_ip = "10.250.0.2";
constexpr uint16_t admin_port = 9464;  // the default: the injector passes no --admin-listen
const std::string pod_name = "vllm-llama-7c9d5b8f6-x2k8q";

#define INJECTED_SKIP(why)                      \
  do {                                          \
    std::cout << "SKIP: " << why << std::endl;  \
    GTEST_SKIP() << why;                        \
  } while (0)

size_t threads_of_this_process() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// Every mount point but the kernel's own file systems, parents first: what a read-only root
// file system leaves writable in a container is /proc, /sys, /dev and what is mounted there.
std::vector<std::string> mounts_to_make_read_only() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, devno, root, point;
    f >> id >> parent >> devno >> root >> point;
    const auto under = [&](const std::string& p) {
      return point == p || point.rfind(p + "/", 0) == 0;
    };
    if (under("/proc") || under("/sys") || under("/dev")) continue;
    out.push_back(point);
  }
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') < std::count(b.begin(), b.end(), '/');
  });
  return out;
}

// The daemon as the injected container: its own mount namespace with every file system
// read-only, UID/GID 65532 with no supplementary groups and no capabilities, no_new_privs,
// `env` only. Between fork and exec only system calls run (the test process has threads).
class pod_process {
 public:
  pod_process(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const std::string& dir) {
    static int counter = 0;
    const std::string stem = dir + "/kvrelay" + std::to_string(++counter);
    err_path_ = stem + ".err";
    const int out = ::open((stem + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const auto mounts = mounts_to_make_read_only();
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    // The sanitizers' options are the test build's, not the pod's: a sanitized kvrelay without
    // them (its suppressions for the uninstrumented libraries) fails on what is not ours.
    std::vector<std::string> pass = env;
    for (const char* name : {"TSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
      if (const char* v = std::getenv(name)) pass.push_back(std::string(name) + "=" + v);
    for (const auto& e : pass) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ != 0) {
      ::close(out);
      ::close(err);
      return;
    }
    // The child.
    ::dup2(out, 1);
    ::dup2(err, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::unshare(CLONE_NEWNS) != 0) ::_exit(120);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(121);
    for (const auto& m : mounts) {
      // A bind remount sets the flags it is given: read-only, then with the restrictive flags a
      // mount may insist on keeping.
      if (::mount(nullptr, m.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0 &&
          ::mount(nullptr, m.c_str(), nullptr,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0 &&
          ::mount(nullptr, m.c_str(), nullptr,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  nullptr) != 0)
        ::_exit(122);
    }
    if (::chdir("/") != 0) ::_exit(123);
    if (::setgroups(0, nullptr) != 0 || ::setgid(nonroot) != 0 || ::setuid(nonroot) != 0)
      ::_exit(124);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(125);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ~pod_process() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void kill(int sig) const { ::kill(pid_, sig); }
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    int st = 0;
    const bool exited = wait_until(
        [&] { return ::waitpid(pid_, &st, WNOHANG) == pid_; }, timeout);
    if (!exited) return std::nullopt;
    done_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  std::string err() const { return read_file(err_path_); }
  /// A line of /proc/<pid>/status ("Uid:", "CapEff:", "NoNewPrivs:"), "" when gone.
  std::string status(const std::string& key) const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key, 0) == 0) return line;
    return {};
  }

 private:
  pid_t pid_ = -1;
  bool done_ = false;
  std::string err_path_;
};

// GET http://host:port/path over one plain socket (the pod address is not what the fixture's
// loopback helper dials).
http_reply get(const std::string& host, uint16_t port, const std::string& path) {
  http_reply r;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return r;
  }
  std::string in;
  char buf[8192];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) in.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (in.rfind("HTTP/1.1 ", 0) != 0) return r;
  r.status = std::atoi(in.c_str() + 9);
  const auto body = in.find("\r\n\r\n");
  if (body != std::string::npos) r.body = in.substr(body + 4);
  return r;
}

// One value of a /metrics text, summed over the series whose labels contain `match` ("" = any).
double metric(const std::string& text, const std::string& family, const std::string& match = "") {
  double sum = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family, 0) != 0) continue;
    const char next = line.size() > family.size() ? line[family.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    if (!match.empty() && line.find(match) == std::string::npos) continue;
    sum += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return sum;
}

int sh(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(InjectedSidecar, RepairsFromTheRingCatchesUpAfterACrashAndIsScrapedOnThePodAddress) {
  if (::geteuid() != 0)
    INJECTED_SKIP("needs root: namespaces of its own, and a child that drops to UID 65532");
  if (threads_of_this_process() != 1)
    INJECTED_SKIP("moves its process into a network namespace of its own, so it must run alone "
                  "in it (ctest runs each test so; --gtest_filter=InjectedSidecar.* does too)");
  if (sh("command -v ip >/dev/null 2>&1") != 0)
    INJECTED_SKIP("iproute2's `ip` is not installed (Debian package iproute2)");
  if (::unshare(CLONE_NEWNET) != 0)
    INJECTED_SKIP("cannot make a network namespace: " << std::strerror(errno));
  // The pod's network: loopback, and an interface holding the pod's address.
  ASSERT_EQ(sh(std::string("ip link set lo up && ip link add kvr0 type veth peer name kvr1 && "
                           "ip addr add ") +
               pod_ip + "/24 dev kvr0 && ip link set kvr0 up && ip link set kvr1 up"),
            0);

  temp_dir dir;
  ::chmod(dir.path().c_str(), 0777);  // 65532 writes nothing here; the test reads its logs
  fault_env::options o;
  o.model.capacity = 100000;  // no evictions: --ignore-block-removed=true changes nothing here
  o.buffer_steps = 100000;    // the ring holds the whole test
  fault_env env(o);
  // The engine's HTTP server: what vLLM (#55844) says about its publishers.
  fake::engine_description d;
  d.model = model;
  d.topic = topic;
  d.ranks = {{env.engine->live_endpoint(), env.engine->replay_endpoint()}};
  fake::engine_http http{d, "127.0.0.1", 0, nullptr};

  // The injector's Args (subscriber.go, in its order), with the kubelet's $(VAR) expansion.
  const std::vector<std::string> args = {
      binary,
      "--engine-endpoint=" + env.engine->live_endpoint(),
      "--server=" + env.server.target(),
      "--replica-id=" + pod_name,
      std::string("--tenant-id=") + tenant,
      std::string("--model-id=") + model,
      "--hash-scheme=vllm",
      "--engine-metrics-url=http://127.0.0.1:" + std::to_string(http.port()) + "/metrics",
      "--ignore-block-removed=true",
  };
  const std::vector<std::string> environment = {
      "PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
      "POD_NAME=" + pod_name, std::string("POD_NAMESPACE=") + tenant,
      // What the kubelet puts in every container: how kvrelay knows it runs in a pod.
      "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "HOSTNAME=" + pod_name};

  const auto consistent = [&](std::chrono::milliseconds timeout) {
    std::string diff;
    wait_until(
        [&] {
          diff = describe_diff(env.model.expected(), server_view(env.server, pod_name));
          return diff.empty();
        },
        timeout);
    return diff;
  };
  const auto scrape = [&] { return get(pod_ip, admin_port, "/metrics"); };

  // The engine served before kvrelay came up: its ring holds that history.
  env.publish_steps(40);

  auto kv = std::make_unique<pod_process>(args, environment, dir.path());
  ASSERT_GT(kv->pid(), 0);
  ASSERT_TRUE(wait_until([&] { return scrape().status == 200; }, 20s))
      << "no /metrics on " << pod_ip << ":" << admin_port << "\n" << kv->err();
  // How it runs: the injector's security context.
  EXPECT_NE(kv->status("Uid:").find("\t65532\t65532\t65532\t65532"), std::string::npos)
      << kv->status("Uid:");
  EXPECT_EQ(kv->status("CapEff:"), "CapEff:\t0000000000000000");
  EXPECT_EQ(kv->status("NoNewPrivs:"), "NoNewPrivs:\t1");
  {
    std::ifstream mi("/proc/" + std::to_string(kv->pid()) + "/mountinfo");
    bool root_ro = false;
    for (std::string line; std::getline(mi, line);) {
      std::istringstream f(line);
      std::string id, parent, devno, root, point, opts;
      f >> id >> parent >> devno >> root >> point >> opts;
      if (point == "/") root_ro = opts.rfind("ro", 0) == 0;
    }
    EXPECT_TRUE(root_ro) << "the daemon's root file system is read-only";
  }

  // 1. Cold start: the replay endpoint came from the engine, and the ring's history with it.
  EXPECT_EQ(consistent(20s), "") << kv->err();
  {
    const auto engines = get("127.0.0.1", admin_port, "/debug/engines");
    ASSERT_EQ(engines.status, 200) << engines.body;
    const auto doc = nlohmann::json::parse(engines.body);
    ASSERT_EQ(doc.size(), 1u) << doc;
    EXPECT_EQ(doc[0]["replay_endpoint"], env.engine->replay_endpoint()) << doc;
    EXPECT_EQ(doc[0]["origins"]["replay_endpoint"], "discovered: GET /kv_event_sources [\"0\"]")
        << doc;
    EXPECT_EQ(doc[0]["origins"]["endpoint"], "flag/config (--engine-endpoint)") << doc;
    EXPECT_EQ(doc[0]["origins"]["model_id"], "flag/config (--model-id)") << doc;
    EXPECT_EQ(doc[0]["topic"], topic) << "learnt from the engine (the injector passes none)";
  }

  // 2. A gap: one batch the SUB never sees, which the ring still holds. First live traffic, so
  // the gap is one in a live stream (a hole below the first live batch is the late
  // subscription's, repaired without counting a gap).
  const auto live = [&] {
    const auto tree = get("127.0.0.1", admin_port, "/debug/tree");
    if (tree.status != 200) return false;
    const auto doc = nlohmann::json::parse(tree.body, nullptr, false);
    if (doc.is_discarded() || doc["pipelines"].empty()) return false;
    for (const auto& c : doc["pipelines"][0].value("children", nlohmann::json::array()))
      if (c.value("name", "") == "ingress") return c.value("live", false);
    return false;
  };
  ASSERT_TRUE(wait_until(
      [&] {
        env.publish_steps(1);
        return live();
      },
      20s))
      << kv->err();
  ASSERT_EQ(consistent(20s), "") << kv->err();
  const auto gaps_before = metric(scrape().body, "kvrelay_seq_gaps_total");
  {
    fake::encode_options eo;
    eo.era = fake::wire_era::d;
    eo.ts = 1.0;
    const uint64_t lost = env.engine->next_seq();
    env.engine->retain(lost, fake::encode_batch(env.model.step(), eo));
    env.engine->skip(1);
  }
  env.publish_steps(5);
  EXPECT_EQ(consistent(20s), "") << kv->err();
  {
    // The ingress publishes its counters within a second of a change.
    std::string m;
    EXPECT_TRUE(wait_until(
        [&] {
          m = scrape().body;
          return metric(m, "kvrelay_seq_gaps_total") > gaps_before &&
                 metric(m, "kvrelay_batches_recovered_total") > 0;
        },
        10s))
        << m;
    EXPECT_EQ(metric(m, "kvrelay_history_lost_total"), 0) << m;
  }

  // 3. The read-only endpoints on the pod address; the rest only on loopback.
  for (const char* path : {"/healthz", "/readyz/self", "/metrics"}) {
    const auto r = get(pod_ip, admin_port, path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  }
  EXPECT_NE(get(pod_ip, admin_port, "/readyz").status, -1) << "answers, ready or not";
  for (const char* path : {"/debug/tree", "/debug/engines", "/", "/help"}) {
    const auto r = get(pod_ip, admin_port, path);
    EXPECT_EQ(r.status, 403) << path << ": " << r.body;
    EXPECT_EQ(r.body.find("\"pipelines\""), std::string::npos) << path << ": " << r.body;
  }
  EXPECT_EQ(get("127.0.0.1", admin_port, "/debug/tree").status, 200);

  // 4. A crash (an OOM kill): the next start catches up from the ring, history the server
  // never got while kvrelay was down included.
  kv->kill(SIGKILL);
  ASSERT_TRUE(kv->wait(5s).has_value());
  env.publish_steps(20);
  kv = std::make_unique<pod_process>(args, environment, dir.path());
  EXPECT_EQ(consistent(20s), "") << kv->err();
  ASSERT_TRUE(wait_until([&] { return scrape().status == 200; }, 20s)) << kv->err();
  EXPECT_EQ(metric(scrape().body, "kvrelay_history_lost_total"), 0);
  // And it stops as a container does, on SIGTERM, with exit 0.
  kv->kill(SIGTERM);
  EXPECT_EQ(kv->wait(15s), 0) << kv->err();
}

}  // namespace
}  // namespace kvrelay::faults
