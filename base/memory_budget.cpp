// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The process' memory budget (rules: memory_budget.hpp).
#include "base/memory_budget.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace kvrelay {

const char* to_string(budget_queue q) noexcept {
  switch (q) {
    case budget_queue::ingress: return "ingress";
    case budget_queue::shard: return "shard";
    case budget_queue::debouncer: return "debouncer";
  }
  return "unknown";
}

const char* to_string(budget_source s) noexcept {
  switch (s) {
    case budget_source::config: return "config";
    case budget_source::cgroup_v1: return "cgroup-v1";
    case budget_source::cgroup_v2: return "cgroup-v2";
    case budget_source::fallback: return "default";
  }
  return "default";
}

// -- ticket -----------------------------------------------------------------------------------

budget_ticket& budget_ticket::operator=(budget_ticket&& o) noexcept {
  if (this == &o) return *this;
  release();
  budget_ = std::move(o.budget_);
  bytes_ = o.bytes_;
  queue_ = o.queue_;
  o.budget_.reset();
  o.bytes_ = 0;
  return *this;
}

void budget_ticket::release() noexcept {
  if (!budget_) return;
  budget_->release(queue_, bytes_);
  budget_.reset();
  bytes_ = 0;
}

// -- budget -----------------------------------------------------------------------------------

memory_budget::memory_budget(uint64_t total, budget_source source)
    : total_(total), source_(source) {
  const auto b = derive_bounds(total, 1);
  limit_bytes_ = b.queue_bytes;
  limit_messages_ = b.queue_messages;
  index_limit_ = b.index_bytes;
}

uint64_t memory_budget::limit_bytes() const noexcept {  // MD1
  const uint64_t index = std::min(index_bytes(), total_);
  return std::clamp<uint64_t>((total_ - index) / 5, total_ / 40, limit_bytes_);
}

uint64_t memory_budget::limit_messages() const noexcept {
  return std::max<uint64_t>(64, limit_messages_ * limit_bytes() / std::max<uint64_t>(limit_bytes_, 1));
}

bool memory_budget::index_room(unsigned t) const noexcept {  // IB3
  const uint64_t used = index_bytes();
  if (used < index_limit_ / 8 * 7) return true;
  if (used < index_limit_ / 16 * 15) return t <= 2;
  if (used < index_limit_) return t <= 1;
  return false;
}

standing_charge& standing_charge::operator=(standing_charge&& o) noexcept {
  if (this == &o) return *this;
  set(0);
  budget_ = std::move(o.budget_);
  what_ = o.what_;
  bytes_ = std::exchange(o.bytes_, 0);
  o.budget_.reset();
  return *this;
}

void standing_charge::set(uint64_t bytes) noexcept {
  if (!budget_ || bytes == bytes_) return;
  auto& counter = what_ == on::index
                      ? budget_->index_bytes_
                      : budget_->bytes_[static_cast<size_t>(budget_queue::debouncer)];
  counter.fetch_add(bytes - bytes_, std::memory_order_relaxed);  // modulo 2^64: less subtracts
  bytes_ = bytes;
}

std::shared_ptr<memory_budget> memory_budget::make(uint64_t total_bytes, budget_source source) {
  return std::make_shared<memory_budget>(total_bytes, source);
}

budget_ticket memory_budget::charge(budget_queue q, uint64_t bytes) {
  budget_ticket t;
  const auto i = static_cast<size_t>(q);
  t.bytes_ = bytes + message_overhead;
  t.queue_ = q;
  bytes_[i].fetch_add(t.bytes_, std::memory_order_relaxed);
  messages_[i].fetch_add(1, std::memory_order_relaxed);
  t.budget_ = shared_from_this();
  return t;
}

void memory_budget::release(budget_queue q, uint64_t bytes) noexcept {
  const auto i = static_cast<size_t>(q);
  bytes_[i].fetch_sub(bytes, std::memory_order_relaxed);
  messages_[i].fetch_sub(1, std::memory_order_relaxed);
}

uint64_t memory_budget::bytes(budget_queue q) const noexcept {
  return bytes_[static_cast<size_t>(q)].load(std::memory_order_relaxed);
}
uint64_t memory_budget::messages(budget_queue q) const noexcept {
  return messages_[static_cast<size_t>(q)].load(std::memory_order_relaxed);
}
uint64_t memory_budget::used_bytes() const noexcept {
  uint64_t n = 0;
  for (const auto& b : bytes_) n += b.load(std::memory_order_relaxed);
  if (holds() > 0 || (n > 0 && pressed())) n += limit_bytes();  // MG6, MG7
  return n;
}

memory_budget::~memory_budget() {
  if (usage_fd_ >= 0) ::close(usage_fd_);
  if (stat_fd_ >= 0) ::close(stat_fd_);
}

void memory_budget::set_process_limit(uint64_t bytes, const std::string& cgroup_dir,
                                      bool v2) noexcept {
  process_limit_.store(bytes, std::memory_order_relaxed);
  if (bytes == 0 || cgroup_dir.empty() || usage_fd_ >= 0) return;
  const std::string usage = cgroup_dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes");
  const std::string stat = cgroup_dir + "/memory.stat";
  const int u = ::open(usage.c_str(), O_RDONLY | O_CLOEXEC);
  const int st = u < 0 ? -1 : ::open(stat.c_str(), O_RDONLY | O_CLOEXEC);
  if (st < 0) {
    if (u >= 0) ::close(u);
    return;  // the process' resident memory instead
  }
  usage_fd_ = u;
  stat_fd_ = st;
  cgroup_v2_ = v2;
}

namespace {
// One read of a small file from its start (procfs and cgroupfs make it whole each time).
std::string_view pread_all(int fd, char* buf, size_t cap) noexcept {
  const ssize_t n = ::pread(fd, buf, cap, 0);
  return n > 0 ? std::string_view(buf, static_cast<size_t>(n)) : std::string_view{};
}

// The decimal number after any spaces at the start of `s`; nullopt when there is none.
std::optional<uint64_t> leading_number(std::string_view s) noexcept {
  s.remove_prefix(std::min(s.size(), s.find_first_not_of(' ')));
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{}) return std::nullopt;
  return v;
}
}  // namespace

std::optional<uint64_t> working_set(std::string_view usage, std::string_view stat, bool v2) {
  const auto used = leading_number(usage);
  if (!used) return std::nullopt;  // v2's "max", or nothing read
  // The key at the start of a line: the first one, or after a newline.
  const std::string_view nl_key = v2 ? "\ninactive_file " : "\ntotal_inactive_file ";
  const std::string_view key = nl_key.substr(1);
  size_t at = std::string_view::npos;
  if (stat.substr(0, key.size()) == key)
    at = key.size();
  else if (const size_t nl = stat.find(nl_key); nl != std::string_view::npos)
    at = nl + nl_key.size();
  const uint64_t inactive =
      at == std::string_view::npos ? 0 : leading_number(stat.substr(at)).value_or(0);
  return *used - std::min(*used, inactive);
}

void memory_budget::sample_rss(uint64_t now_ns) noexcept {  // MG7
  if (process_limit() == 0) return;
  uint64_t last = rss_sampled_ns_.load(std::memory_order_relaxed);
  if (last != 0 && now_ns - std::min(now_ns, last) < 5'000'000) return;
  if (!rss_sampled_ns_.compare_exchange_strong(last, now_ns, std::memory_order_relaxed)) return;
  if (usage_fd_ >= 0) {
    char ubuf[64], sbuf[4096];
    const auto usage = pread_all(usage_fd_, ubuf, sizeof ubuf);
    const auto stat = pread_all(stat_fd_, sbuf, sizeof sbuf);
    if (const auto ws = working_set(usage, stat, cgroup_v2_)) note_rss(*ws);
    return;
  }
  // statm: size resident shared text lib data dt, in pages. Resident counts the libraries'
  // pages too: in a container they are charged to its cgroup like the heap.
  static const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[128];
  const auto text = pread_all(fd, buf, sizeof buf);
  const size_t sp = text.find(' ');
  if (sp == std::string_view::npos) return;
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  note_rss(leading_number(text.substr(sp + 1)).value_or(0) * page);
}
uint64_t memory_budget::used_messages() const noexcept {
  uint64_t n = 0;
  for (const auto& m : messages_) n += m.load(std::memory_order_relaxed);
  return n;
}

void memory_budget::note_pause() noexcept {
  overloads_.fetch_add(1, std::memory_order_relaxed);
  paused_.fetch_add(1, std::memory_order_relaxed);
}

void memory_budget::note_resume(uint64_t paused_ns) noexcept {
  paused_ns_.fetch_add(paused_ns, std::memory_order_relaxed);
  paused_.fetch_sub(1, std::memory_order_relaxed);
}

// -- gate -------------------------------------------------------------------------------------

gate_decision budget_gate::observe(uint64_t used_bytes, uint64_t used_messages,
                                   uint64_t limit_bytes, uint64_t limit_messages,
                                   uint64_t now_ns) noexcept {
  gate_decision d;
  if (!paused_) {
    if (used_bytes >= limit_bytes || used_messages >= limit_messages) {  // MG2
      paused_ = true;
      overload_since_trim_ = true;
      ++overloads_;
      paused_since_ = now_ns;
      d.paused = true;
    }
  } else if (used_bytes <= limit_bytes / 2 && used_messages <= limit_messages / 2) {  // MG3
    paused_ = false;
    paused_total_ += now_ns - std::min(now_ns, paused_since_);
    d.resumed = true;
  }
  d.read = !paused_;  // MG1
  // MG5
  if (used_bytes >= limit_bytes / 4 || used_messages >= limit_messages / 4) trim_due_ = true;
  constexpr uint64_t trim_interval_ns = 1'000'000'000, quiet_ns = 200'000'000;
  const bool drained = used_bytes <= limit_bytes / 8 && used_messages <= limit_messages / 8;
  if (!drained) {
    drained_since_ns_.reset();
  } else if (!drained_since_ns_) {
    drained_since_ns_ = now_ns;
  }
  if (trim_due_ && drained && now_ns - std::min(now_ns, *drained_since_ns_) >= quiet_ns &&
      (!last_trim_ns_ || now_ns - std::min(now_ns, *last_trim_ns_) >= trim_interval_ns)) {
    trim_due_ = false;
    last_trim_ns_ = now_ns;
    d.trim = true;
    d.after_overload = overload_since_trim_;
    overload_since_trim_ = false;
  }
  d.trim_due = trim_due_;
  return d;
}

uint64_t budget_gate::paused_ns(uint64_t now_ns) const noexcept {
  return paused_total_ + (paused_ ? now_ns - std::min(now_ns, paused_since_) : 0);
}

// -- sizing -----------------------------------------------------------------------------------

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// A limit file's value; nullopt for "max", an unlimited value or anything unreadable.
std::optional<uint64_t> limit_of(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::string v = trim(*text);
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
  if (errno != 0 || n == 0 || n >= cgroup_unlimited) return std::nullopt;
  return static_cast<uint64_t>(n);
}

std::string join(const std::string& root, const std::string& path, const char* file) {
  std::string p = root;
  if (!path.empty() && path != "/") p += (path.front() == '/' ? "" : "/") + path;
  return p + "/" + file;
}

bool lists_memory(const std::string& controllers) {
  std::stringstream ss(controllers);
  std::string c;
  while (std::getline(ss, c, ','))
    if (c == "memory") return true;
  return false;
}

std::string mib(uint64_t b) {
  std::ostringstream o;
  if (b % (uint64_t{1} << 20) == 0) o << (b >> 20) << " MiB";
  else o << b << " bytes";
  return o.str();
}

}  // namespace

budget_choice resolve_budget(uint64_t configured, const read_text_fn& read,
                             const std::string& cgroup_root) {
  budget_choice c;
  if (configured > 0) {  // MS1
    c.bytes = configured;
    c.source = budget_source::config;
    return c;
  }
  std::optional<std::string> v1_path, v2_path;
  if (auto text = read("/proc/self/cgroup")) {
    std::stringstream ss(*text);
    std::string line;
    while (std::getline(ss, line)) {
      const auto a = line.find(':');
      const auto b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b == std::string::npos) continue;
      const std::string ctrl = line.substr(a + 1, b - a - 1);
      const std::string path = trim(line.substr(b + 1));
      if (line.compare(0, a, "0") == 0 && ctrl.empty()) v2_path = path;
      else if (lists_memory(ctrl)) v1_path = path;
    }
  }
  const auto found = [&](const std::string& file, budget_source s) {
    const auto lim = limit_of(read(file));
    if (!lim) return false;
    c.cgroup_limit = *lim;
    c.cgroup_file = file;
    c.source = s;
    return true;
  };
  // The path as /proc/self/cgroup names it, then without its leading components: a container
  // whose cgroup namespace is not private sees the host's path there, but its own cgroup
  // mounted at the root, possibly with a child cgroup below.
  const auto first_limit = [&](const std::string& base, std::string path, const char* file,
                               budget_source s) {
    for (;;) {
      if (found(join(base, path, file), s)) return true;
      if (path.empty() || path == "/") return false;
      const auto slash = path.find('/', 1);
      path = slash == std::string::npos ? std::string() : path.substr(slash);
    }
  };
  bool have = false;
  if (v1_path)  // MS2 (a hybrid host's v2 line names no memory controller)
    have = first_limit(cgroup_root + "/memory", *v1_path, "memory.limit_in_bytes",
                       budget_source::cgroup_v1);
  if (!have && v2_path && !v1_path)  // MS3: a pure v2 host
    have = first_limit(cgroup_root, *v2_path, "memory.max", budget_source::cgroup_v2);
  if (!have) {
    c.bytes = default_budget_bytes;
    c.source = budget_source::fallback;
    return c;
  }
  // MS4
  const uint64_t margin = std::max<uint64_t>(c.cgroup_limit / 4, uint64_t{24} << 20);
  c.bytes = std::max<uint64_t>(c.cgroup_limit > margin ? c.cgroup_limit - margin : 0,
                               uint64_t{8} << 20);
  return c;
}

budget_bounds derive_bounds(uint64_t budget_bytes, size_t pipelines) {
  const uint64_t n = std::max<size_t>(pipelines, 1);  // MD4
  budget_bounds b;
  b.queue_bytes = budget_bytes / 6;  // MD1
  b.queue_messages = std::max<uint64_t>(64, b.queue_bytes / 1024);
  b.rcvhwm = static_cast<int>(std::clamp<uint64_t>(budget_bytes / 16 / n / (32 * 1024), 64, 100000));
  b.max_pending =
      static_cast<size_t>(std::clamp<uint64_t>(budget_bytes / 4 / n / 128, 16384, 2000000));
  b.index_bytes = budget_bytes / 4 * 3;  // MD5
  return b;
}

std::string describe(const budget_choice& c) {
  std::string s = mib(c.bytes) + " (" + to_string(c.source);
  if (c.source == budget_source::cgroup_v1 || c.source == budget_source::cgroup_v2)
    s += ": limit " + mib(c.cgroup_limit) + " in " + c.cgroup_file + ", less a margin";
  else if (c.source == budget_source::fallback)
    s += ": no memory.budget and no cgroup memory limit";
  return s + ")";
}

}  // namespace kvrelay
