// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "net/dns_resolver.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <utility>

#include "base/worker_bridge.hpp"

namespace kvrelay::net {

namespace {

constexpr std::size_t kHeaderSize = 12;
constexpr std::size_t kMaxName = 255;  // wire bytes of a name, RFC 1035 §2.3.4
constexpr std::size_t kMaxLabel = 63;
constexpr uint16_t kClassIn = 1;
constexpr uint16_t kTypeOpt = 41;
constexpr uint16_t kEdnsPayload = 4096;

// -- wire format helpers ---------------------------------------------------------------------

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v & 0xff));
}

std::string at(std::size_t offset) { return " at offset " + std::to_string(offset); }

// Skips the name at `pos`, leaving `pos` after it (after the first pointer, if it has one).
// Returns an error text, empty on success.
std::string skip_name(const uint8_t* data, std::size_t size, std::size_t& pos) {
  std::size_t p = pos;
  std::size_t limit = size;  // every pointer must point below the previous one: no loop
  std::size_t wire = 0;
  bool jumped = false;
  for (;;) {
    if (p >= size) return "name runs past the end" + at(p);
    const uint8_t b = data[p];
    if ((b & 0xC0) == 0xC0) {
      if (p + 1 >= size) return "compression pointer cut short" + at(p);
      const std::size_t target = static_cast<std::size_t>(((b & 0x3F) << 8) | data[p + 1]);
      if (target >= p || target >= limit) {
        return "compression pointer" + at(p) + " to " + std::to_string(target) +
               " does not point backwards (a loop)";
      }
      if (target < kHeaderSize) return "compression pointer" + at(p) + " into the header";
      if (!jumped) pos = p + 2;
      jumped = true;
      limit = target;
      p = target;
      continue;
    }
    if (b & 0xC0) return "unsupported label type " + std::to_string(b >> 6) + at(p);
    wire += 1u + b;
    if (wire > kMaxName) return "name longer than 255 bytes" + at(p);
    if (b == 0) {
      if (!jumped) pos = p + 1;
      return {};
    }
    if (b > size - p - 1) return "label runs past the end" + at(p);
    p += 1u + b;
  }
}

const char* rcode_text(uint8_t rcode) {
  switch (rcode) {
    case 1: return "FORMERR (the server could not read the query)";
    case 2: return "SERVFAIL";
    case 3: return "NXDOMAIN (no such name)";
    case 4: return "NOTIMP";
    case 5: return "REFUSED";
    default: return nullptr;
  }
}

const char* type_text(uint16_t qtype) {
  return qtype == dns_type_a ? "A" : qtype == dns_type_aaaa ? "AAAA" : "query";
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// -- the system resolver -----------------------------------------------------------------------

// What getaddrinfo answered, as text.
struct gai_answer {
  int rc = 0;
  int sys_errno = 0;
  std::vector<std::string> ips;
};

gai_answer run_getaddrinfo(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  gai_answer a;
  a.rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  a.sys_errno = errno;
  if (a.rc == 0) {
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {};
      if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(sockaddr_in)) {
        const auto* sa = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
        if (inet_ntop(AF_INET, &sa->sin_addr, buf, sizeof buf)) a.ips.emplace_back(buf);
      } else if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(sockaddr_in6)) {
        const auto* sa = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
        if (inet_ntop(AF_INET6, &sa->sin6_addr, buf, sizeof buf)) a.ips.emplace_back(buf);
      }
    }
    freeaddrinfo(res);
  }
  return a;
}

// getaddrinfo has no timeout: it runs on a thread of its own (base/worker_bridge.hpp, per_job,
// detached), and the caller waits at most `timeout` for its answer. A late answer is dropped
// when the bridge closes (WB1); the thread finishes alone.
std::optional<gai_answer> getaddrinfo_within(const std::string& host,
                                             std::chrono::milliseconds timeout, bool& started) {
  struct box {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<gai_answer> answer;
  };
  auto b = std::make_shared<box>();
  worker_bridge<gai_answer> bridge(
      worker_options{"kvr.getaddrinfo", worker_options::threads::per_job,
                     worker_options::on_close::detach, false},
      [b](gai_answer a) {
        std::lock_guard<std::mutex> lk(b->mu);
        b->answer = std::move(a);
        b->cv.notify_all();
      });
  started = bridge.submit([host] { return run_getaddrinfo(host); });
  if (!started) return std::nullopt;
  std::unique_lock<std::mutex> lk(b->mu);
  b->cv.wait_for(lk, timeout, [&] { return b->answer.has_value(); });
  return std::move(b->answer);
}

resolve_result resolve_system(const dns_target& t, std::chrono::milliseconds timeout) {
  resolve_result r;
  const std::string what = "resolving " + t.host + " (system resolver): ";
  bool started = false;
  const auto job = getaddrinfo_within(t.host, timeout, started);
  if (!started) {
    r.error = what + "cannot start the resolver thread";
    return r;
  }
  if (!job) {
    r.error = what + "timed out after " + std::to_string(timeout.count()) + " ms";
    return r;
  }
  if (job->rc != 0) {
    if (job->rc == EAI_NONAME) {
      r.error = what + "not found (NXDOMAIN): " + gai_strerror(job->rc);
    } else if (job->rc == EAI_SYSTEM) {
      r.error = what + std::strerror(job->sys_errno);
    } else {
      r.error = what + gai_strerror(job->rc);
    }
    return r;
  }
  for (const auto& ip : job->ips) r.addresses.push_back(host_port_text(ip, t.port));
  sort_unique(r.addresses);
  if (r.addresses.empty()) r.error = what + "no A or AAAA record";
  return r;
}

// -- our UDP client ----------------------------------------------------------------------------

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

struct query_state {
  uint16_t qtype = 0;
  uint16_t id = 0;
  std::vector<uint8_t> packet;
  bool done = false;
  dns_answer answer;
  std::string error;  // set when done without a readable answer (send failure, refused)
};

// ECONNREFUSED on a connected UDP socket: an ICMP port unreachable came back for one of our
// queries (reported on the next send or recv, whichever comes first).
std::string socket_error(const char* op, int e) {
  if (e == ECONNREFUSED) return "connection refused (nothing listens on the nameserver's port)";
  return std::string(op) + ": " + std::strerror(e);
}

uint16_t random_id() {
  thread_local std::mt19937 gen{std::random_device{}()};
  return static_cast<uint16_t>(std::uniform_int_distribution<unsigned>(0, 65535)(gen));
}

resolve_result resolve_with_server(const dns_target& t, std::chrono::milliseconds timeout) {
  resolve_result r;
  const std::string server = host_port_text(t.nameserver, t.nameserver_port);
  const std::string what = "resolving " + t.host + " at " + server + ": ";
  if (is_ip_literal(t.host)) {  // nothing to ask
    r.addresses.push_back(host_port_text(t.host, t.port));
    return r;
  }

  sockaddr_storage ss{};
  socklen_t ss_len = 0;
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
      inet_pton(AF_INET, t.nameserver.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(t.nameserver_port);
    ss_len = sizeof(sockaddr_in);
  } else if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
             inet_pton(AF_INET6, t.nameserver.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(t.nameserver_port);
    ss_len = sizeof(sockaddr_in6);
  } else {
    r.error = what + "the nameserver is not an IP address";
    return r;
  }

  query_state q[2];
  q[0].qtype = dns_type_a;
  q[1].qtype = dns_type_aaaa;
  q[0].id = random_id();
  do q[1].id = random_id(); while (q[1].id == q[0].id);
  for (auto& x : q) {
    std::string err;
    x.packet = build_dns_query(x.id, t.host, x.qtype, err);
    if (x.packet.empty()) {
      r.error = what + err;
      return r;
    }
  }

  fd_guard sock;
  sock.fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock.fd < 0) {
    r.error = what + "socket: " + std::strerror(errno);
    return r;
  }
  // Connected: the kernel drops datagrams from anyone else, and a closed port is reported.
  if (::connect(sock.fd, reinterpret_cast<const sockaddr*>(&ss), ss_len) != 0) {
    r.error = what + "connect: " + std::strerror(errno);
    return r;
  }
  auto fail_pending = [&](const std::string& err) {
    for (auto& x : q) {
      if (x.done) continue;
      x.done = true;
      x.error = err;
    }
  };
  auto send_pending = [&] {
    for (auto& x : q) {
      if (x.done) continue;
      if (::send(sock.fd, x.packet.data(), x.packet.size(), MSG_NOSIGNAL) >= 0 ||
          errno == EAGAIN || errno == EWOULDBLOCK) {
        continue;
      }
      if (errno == ECONNREFUSED) {  // the port is closed: for every query, not only this one
        fail_pending(socket_error("send", errno));
        return;
      }
      x.done = true;
      x.error = socket_error("send", errno);
    }
  };
  auto pending = [&] { return !q[0].done || !q[1].done; };

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + timeout;
  const auto resend_at = start + timeout / 2;
  bool resent = false;
  std::size_t foreign = 0;  // packets that answer neither query (another id, not an answer)
  std::vector<uint8_t> buf(65536);
  send_pending();
  while (pending()) {
    const auto now = clock::now();
    // The resend before the deadline check: a wake-up that comes late (a loaded machine) still
    // sends it, so an unanswered query is always sent twice, never once or three times.
    if (!resent && now >= resend_at) {
      send_pending();
      resent = true;
      continue;
    }
    if (now >= deadline) break;
    const auto until = resent ? deadline : resend_at;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd pfd{sock.fd, POLLIN, 0};
    const int n = ::poll(&pfd, 1, static_cast<int>(std::max<long long>(1, wait)));
    if (n < 0 && errno != EINTR) {
      r.error = what + "poll: " + std::strerror(errno);
      return r;
    }
    if (n <= 0) continue;
    for (;;) {
      const ssize_t got = ::recv(sock.fd, buf.data(), buf.size(), 0);
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
        fail_pending(socket_error("recv", errno));
        break;
      }
      bool matched = false;
      for (auto& x : q) {
        if (x.done) continue;
        dns_answer a = parse_dns_answer(buf.data(), static_cast<std::size_t>(got), x.id, x.qtype);
        if (!a.ours) continue;
        x.done = true;
        x.answer = std::move(a);
        matched = true;
        break;
      }
      if (!matched) ++foreign;
    }
  }

  std::vector<std::string> errors;
  bool any_ok = false;
  for (auto& x : q) {
    std::string err;
    if (!x.done) {
      err = "timed out after " + std::to_string(timeout.count()) + " ms";
      if (foreign > 0) err += " (" + std::to_string(foreign) + " packet(s) not ours ignored)";
    } else if (!x.error.empty()) {
      err = x.error;
    } else if (!x.answer.ok) {
      err = x.answer.error;
    } else {
      any_ok = true;
      for (const auto& ip : x.answer.addresses) r.addresses.push_back(host_port_text(ip, t.port));
      continue;
    }
    errors.push_back(std::move(err));
  }
  sort_unique(r.addresses);
  if (!r.addresses.empty()) return r;
  if (any_ok && errors.empty()) {
    r.error = what + "no A or AAAA record";
  } else if (errors.size() == 2 && errors[0] == errors[1]) {
    r.error = what + errors[0];
  } else if (errors.size() == 2) {
    r.error = what + "A: " + errors[0] + "; AAAA: " + errors[1];
  } else {
    r.error = what + std::string(q[0].done && q[0].answer.ok ? "AAAA: " : "A: ") + errors[0] +
              " (and no record of the other type)";
  }
  return r;
}

}  // namespace

resolve_result resolve(const dns_target& t, std::chrono::milliseconds timeout) {
  return t.nameserver.empty() ? resolve_system(t, timeout) : resolve_with_server(t, timeout);
}

std::vector<uint8_t> build_dns_query(uint16_t id, std::string_view name, uint16_t qtype,
                                     std::string& error) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty()) {
    error = "empty name";
    return {};
  }
  std::vector<uint8_t> out;
  out.reserve(kHeaderSize + name.size() + 2 + 4 + 11);
  put16(out, id);
  put16(out, 0x0100);  // a standard query, recursion desired
  put16(out, 1);       // QDCOUNT
  put16(out, 0);       // ANCOUNT
  put16(out, 0);       // NSCOUNT
  put16(out, 1);       // ARCOUNT: the OPT record
  std::size_t wire = 1;
  while (true) {
    const std::size_t dot = name.find('.');
    const std::string_view label = name.substr(0, dot);
    if (label.empty() || label.size() > kMaxLabel) {
      error = label.empty() ? "empty label in the name" : "label longer than 63 bytes";
      return {};
    }
    wire += 1 + label.size();
    if (wire > kMaxName) {
      error = "name longer than 255 bytes";
      return {};
    }
    out.push_back(static_cast<uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  out.push_back(0);
  put16(out, qtype);
  put16(out, kClassIn);
  // OPT: root name, type 41, CLASS = the UDP payload we accept, TTL 0 (no flags), no options.
  out.push_back(0);
  put16(out, kTypeOpt);
  put16(out, kEdnsPayload);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0);
  return out;
}

dns_answer parse_dns_answer(const uint8_t* data, std::size_t size, uint16_t expected_id,
                            uint16_t expected_qtype) {
  dns_answer a;
  if (data == nullptr || size < kHeaderSize) {
    a.error = "malformed answer: " + std::to_string(size) + " bytes, shorter than a DNS header";
    return a;
  }
  const uint16_t id = get16(data);
  if (id != expected_id) {
    a.error =
        "answer id " + std::to_string(id) + ", not the query's " + std::to_string(expected_id);
    return a;
  }
  const uint8_t flags = data[2];
  if (!(flags & 0x80)) {
    a.error = "a query, not an answer";
    return a;
  }
  a.ours = true;
  auto malformed = [&](const std::string& why) {
    a.ok = false;
    a.addresses.clear();
    a.error = "malformed answer: " + why;
    return a;
  };
  const uint8_t opcode = (flags >> 3) & 0x0F;
  if (opcode != 0) return malformed("opcode " + std::to_string(opcode) + ", not a standard query");
  a.truncated = (flags & 0x02) != 0;
  a.rcode = data[3] & 0x0F;
  if (a.rcode != 0) {
    const char* text = rcode_text(a.rcode);
    a.error = text ? text : "server error (rcode " + std::to_string(a.rcode) + ")";
    return a;
  }
  const uint16_t qdcount = get16(data + 4);
  const uint16_t ancount = get16(data + 6);
  std::size_t pos = kHeaderSize;
  for (uint16_t i = 0; i < qdcount; ++i) {
    std::string err = skip_name(data, size, pos);
    if (!err.empty()) return malformed("question: " + err);
    if (size - pos < 4) return malformed("question cut short" + at(pos));
    const uint16_t qtype = get16(data + pos);
    if (qtype != expected_qtype) {
      return malformed("question type " + std::to_string(qtype) + ", not the query's " +
                       std::to_string(expected_qtype));
    }
    pos += 4;
  }
  for (uint16_t i = 0; i < ancount; ++i) {
    std::string err = skip_name(data, size, pos);
    if (!err.empty()) return malformed("record " + std::to_string(i) + ": " + err);
    if (size - pos < 10) return malformed("record " + std::to_string(i) + " cut short" + at(pos));
    const uint16_t type = get16(data + pos);
    const uint16_t klass = get16(data + pos + 2);
    const uint16_t rdlength = get16(data + pos + 8);
    pos += 10;
    if (rdlength > size - pos) {
      return malformed("record " + std::to_string(i) + " data runs past the end" + at(pos));
    }
    if (klass == kClassIn && (type == dns_type_a || type == dns_type_aaaa)) {
      const bool v4 = type == dns_type_a;
      if (rdlength != (v4 ? 4 : 16)) {
        return malformed(std::string(type_text(type)) + " record " + std::to_string(i) + " of " +
                         std::to_string(rdlength) + " bytes" + at(pos));
      }
      char buf[INET6_ADDRSTRLEN] = {};
      if (!inet_ntop(v4 ? AF_INET : AF_INET6, data + pos, buf, sizeof buf)) {
        return malformed("unprintable address" + at(pos));
      }
      a.addresses.emplace_back(buf);
    }
    pos += rdlength;  // CNAME and anything else: skipped
  }
  if (a.truncated && a.addresses.empty()) {
    a.error = std::string("truncated (TC) ") + type_text(expected_qtype) +
              " answer with no address (no TCP fallback)";
    return a;
  }
  a.ok = true;
  return a;
}

}  // namespace kvrelay::net
