// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The admin port's server (what it bounds and why: http_server.hpp). ~480 lines on purpose: one
// connection state machine (idle → head → body → handling → writing → linger), its deadlines and
// the I/O loop read best in one place; parsing lives in http_request.cpp.
#include "admin/http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace kvrelay {

namespace {

using clock = std::chrono::steady_clock;

http_response text(int status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string peer_of(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  return buf;
}

}  // namespace

bool is_loopback_address(const sockaddr* a) {
  if (!a) return false;
  if (a->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    const auto& b = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr.s6_addr;
    static constexpr unsigned char loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(b, loop6, 16) == 0) return true;
    return std::memcmp(b, mapped, 12) == 0 && b[12] == 127;
  }
  return false;
}

// -- server -----------------------------------------------------------------------------------

struct http_server::impl {
  struct route_entry {
    std::string method, path;
    handler h;
    runs_on where;
  };
  // idle → head → body → handling → writing → idle (keep-alive) or closed; a refused request
  // lingers after its response: the write side is shut and what the client still sends is
  // discarded for a moment, so it reads the refusal instead of a reset.
  enum class phase : uint8_t { idle, head, body, handling, writing, linger };
  struct conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    bool local_loopback = true;  // it arrived at a loopback address (not the pod's or host's)
    phase st = phase::idle;
    clock::time_point since{};     // last activity (idle) / request start / write start
    clock::time_point deadline{};  // none while handling
    std::string in;
    size_t head_end = 0;  // bytes of the header including the empty line
    size_t body_len = 0;
    http_request req;
    const route_entry* rt = nullptr;
    bool keep_alive = true;
    bool linger = false;
    bool closed = false;  // fd closed; erased before the next poll
    size_t discarded = 0;
    std::string out;
    size_t out_off = 0;
  };
  struct job {
    uint64_t conn;
    const route_entry* rt;
    http_request req;
  };

  http_limits limits;
  std::vector<route_entry> routes;
  gate admit;
  int listen_fd = -1;
  int wake_fd = -1;
  uint16_t bound_port = 0;
  std::atomic<bool> stopping{false};
  std::thread io;
  std::vector<std::thread> workers;

  std::mutex mu;  // jobs, done, the counters
  std::condition_variable cv;
  std::deque<job> jobs;
  std::vector<std::pair<uint64_t, http_response>> done;
  counters stats;

  std::map<uint64_t, conn> conns;  // I/O thread only
  size_t open = 0;                 // conns not closed
  uint64_t next_id = 1;

  explicit impl(http_limits l) : limits(l) {}

  void bump(uint64_t counters::*field) {
    std::lock_guard<std::mutex> lk(mu);
    ++(stats.*field);
  }

  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
  }

  // Closes at once; the entry goes before the next poll, so references stay valid until then.
  void close_conn(conn& c) {
    if (c.closed) return;
    ::close(c.fd);
    c.closed = true;
    --open;
  }

  // A response the handler never saw: refused before the body, so the connection closes.
  void reject(conn& c, http_response r) {
    bump(&counters::rejected);
    c.keep_alive = false;
    c.linger = true;
    respond(c, std::move(r));
  }

  void respond(conn& c, const http_response& r) {
    c.out = serialize_http_response(r, !c.keep_alive);
    c.out_off = 0;
    c.st = phase::writing;
    c.since = clock::now();
    c.deadline = c.since + limits.write_timeout;
    flush(c);
  }

  // Discards what a refused client still sends, up to a bound, until it closes or time is up.
  void discard(conn& c) {
    char buf[4096];
    for (;;) {
      const auto n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.discarded += n > 0 ? static_cast<size_t>(n) : 0;
      if (n <= 0 || c.discarded > (size_t{1} << 20)) return close_conn(c);
    }
  }

  // Writes what the socket takes; at the end, closes or waits for the next request.
  void flush(conn& c) {
    while (c.out_off < c.out.size()) {
      const auto n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                            MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // wait for POLLOUT
      if (n <= 0) return close_conn(c);
      c.out_off += static_cast<size_t>(n);
    }
    if (!c.keep_alive && c.linger) {
      ::shutdown(c.fd, SHUT_WR);
      c.in.clear();
      c.st = phase::linger;
      c.deadline = clock::now() + std::min(limits.read_timeout, std::chrono::milliseconds(1000));
      return discard(c);
    }
    if (!c.keep_alive) return close_conn(c);
    c.out.clear();
    c.req = http_request{};
    c.rt = nullptr;
    c.head_end = c.body_len = 0;
    c.st = phase::idle;
    c.since = clock::now();
    c.deadline = c.since + limits.idle_timeout;
    if (!c.in.empty()) advance(c);  // a pipelined request
  }

  const route_entry* find_route(const http_request& r, bool& path_known) const {
    path_known = false;
    for (const auto& e : routes) {
      if (e.path != r.path) continue;
      path_known = true;
      if (e.method == r.method) return &e;
    }
    return nullptr;
  }

  // The header is in: everything that can refuse the request does so before its body is read.
  void on_head(conn& c) {
    const auto head = std::string_view(c.in).substr(0, c.head_end - 4);
    c.req = http_request{};
    c.req.peer = c.peer;
    c.req.local_loopback = c.local_loopback;
    if (!parse_http_head(head, c.req, c.keep_alive))
      return reject(c, text(400, "malformed request\n"));
    bool path_known = false;
    c.rt = find_route(c.req, path_known);
    if (!c.rt) return reject(c, path_known ? text(405, "method not allowed\n") : text(404, "not found\n"));
    if (admit)
      if (auto refusal = admit(c.req)) return reject(c, std::move(*refusal));
    if (const auto* enc = c.req.header("content-encoding"); enc && !http_iequals(*enc, "identity"))
      return reject(c, text(415, "compressed request bodies are not accepted\n"));
    if (c.req.header("transfer-encoding"))
      return reject(c, text(501, "send a Content-Length body; transfer codings are not accepted\n"));
    size_t len = 0;
    for (const auto& [k, v] : c.req.headers) {
      if (k != "content-length") continue;
      if (v.empty() || v.size() > 12 ||
          !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        return reject(c, text(400, "bad Content-Length\n"));
      const auto n = std::stoull(v);
      if (len != 0 && n != len) return reject(c, text(400, "conflicting Content-Length\n"));
      len = n;
    }
    if (len > limits.max_body_bytes)
      return reject(c, text(413, "request body over " + std::to_string(limits.max_body_bytes) +
                                     " bytes\n"));
    if (const auto* ex = c.req.header("expect"); ex && http_iequals(*ex, "100-continue") && len > 0) {
      static constexpr char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] auto n = ::send(c.fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    c.body_len = len;
    c.st = phase::body;
  }

  void dispatch(conn& c) {
    c.req.body = c.in.substr(c.head_end, c.body_len);
    c.in.erase(0, c.head_end + c.body_len);
    c.head_end = 0;
    c.st = phase::handling;
    if (c.rt->where == runs_on::io_thread) {
      http_response r;
      run_handler(*c.rt, c.req, r);
      return respond(c, r);
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      jobs.push_back(job{c.id, c.rt, std::move(c.req)});
    }
    cv.notify_one();
  }

  static void run_handler(const route_entry& rt, const http_request& req, http_response& res) {
    try {
      rt.h(req, res);
    } catch (const std::exception& e) {
      res = text(500, std::string("internal error: ") + e.what() + "\n");
    }
  }

  // Moves a connection's request forward with what has been read so far.
  void advance(conn& c) {
    if (c.st == phase::idle && !c.in.empty()) {
      c.st = phase::head;
      c.since = clock::now();
      c.deadline = c.since + limits.read_timeout;
    }
    if (c.st == phase::head) {
      const auto end = c.in.find("\r\n\r\n");
      const bool too_big = end == std::string::npos ? c.in.size() > limits.max_header_bytes
                                                    : end + 4 > limits.max_header_bytes;
      if (too_big)
        return reject(c, text(431, "request header over " +
                                       std::to_string(limits.max_header_bytes) + " bytes\n"));
      if (end == std::string::npos) return;  // wait for more
      c.head_end = end + 4;
      on_head(c);
      if (c.closed || c.st != phase::body) return;
    }
    if (c.st == phase::body && c.in.size() >= c.head_end + c.body_len) dispatch(c);
  }

  void on_readable(conn& c) {
    char buf[4096];
    for (;;) {
      const auto n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return close_conn(c);
      c.in.append(buf, static_cast<size_t>(n));
      // Never hold more than one request's worth: the header bound, then the announced body.
      const size_t cap = c.st == phase::body ? c.head_end + c.body_len : limits.max_header_bytes + 4;
      if (c.in.size() >= cap) break;
    }
    advance(c);
  }

  // At the limit, make room: the longest-idle connection first, then the oldest unfinished
  // request; never one whose handler runs or whose response is being written.
  bool make_room() {
    conn* victim = nullptr;
    for (auto want : {phase::linger, phase::idle, phase::head, phase::body}) {
      for (auto& [id, c] : conns)
        if (!c.closed && c.st == want && (!victim || c.since < victim->since)) victim = &c;
      if (victim) break;
    }
    if (!victim) return false;
    if (victim->st != phase::linger) bump(&counters::evicted);
    close_conn(*victim);
    return true;
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or an error the next poll reports again
      if (open >= limits.max_connections && !make_room()) {
        bump(&counters::refused);
        static constexpr char busy[] =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        [[maybe_unused]] auto n = ::send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      bump(&counters::accepted);
      conn c;
      c.id = next_id++;
      c.fd = fd;
      c.peer = peer_of(ss);
      // Martian filtering drops packets for 127/8 arriving from outside, so a connection to a
      // loopback address came from this host (or pod).
      sockaddr_storage local{};
      socklen_t local_len = sizeof local;
      c.local_loopback =
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
          is_loopback_address(reinterpret_cast<const sockaddr*>(&local));
      c.since = clock::now();
      c.deadline = c.since + limits.idle_timeout;
      ++open;
      conns.emplace(c.id, std::move(c));
    }
  }

  void take_done() {
    uint64_t n = 0;
    [[maybe_unused]] auto r = ::read(wake_fd, &n, sizeof n);
    std::vector<std::pair<uint64_t, http_response>> ready;
    {
      std::lock_guard<std::mutex> lk(mu);
      ready.swap(done);
    }
    for (auto& [id, res] : ready) {
      auto it = conns.find(id);
      if (it != conns.end() && !it->second.closed && it->second.st == phase::handling)
        respond(it->second, res);
    }
  }

  void expire(clock::time_point now) {
    for (auto& [id, c] : conns) {
      if (c.closed || c.st == phase::handling || c.deadline > now) continue;
      if (c.st == phase::linger) {
        close_conn(c);
        continue;
      }
      bump(&counters::timed_out);
      if (c.st == phase::head || c.st == phase::body) {
        static constexpr char slow[] =
            "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        [[maybe_unused]] auto n = ::send(c.fd, slow, sizeof slow - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      close_conn(c);
    }
  }

  void io_loop() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    while (!stopping.load()) {
      for (auto it = conns.begin(); it != conns.end();)
        it = it->second.closed ? conns.erase(it) : std::next(it);
      fds.clear();
      ids.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      // Without connections the loop sleeps until a client or a completion wakes it: an idle
      // daemon's admin port costs no wake-ups.
      std::optional<clock::time_point> next;
      for (auto& [id, c] : conns) {
        short ev = 0;
        if (c.st == phase::idle || c.st == phase::head || c.st == phase::body ||
            c.st == phase::linger)
          ev = POLLIN;
        if (c.st == phase::writing) ev = POLLOUT;
        fds.push_back({c.fd, ev, 0});
        ids.push_back(id);
        if (c.st != phase::handling) next = next ? std::min(*next, c.deadline) : c.deadline;
      }
      int timeout = -1;
      if (next) {
        const auto wait =
            std::chrono::duration_cast<std::chrono::milliseconds>(*next - clock::now());
        timeout = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 60'000));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) take_done();
      for (size_t i = 0; i < ids.size(); ++i) {
        const auto rev = fds[i + 2].revents;
        if (!rev) continue;
        auto& c = conns.at(ids[i]);
        if (c.closed) continue;  // evicted or answered meanwhile
        if (rev & POLLIN) c.st == phase::linger ? discard(c) : on_readable(c);
        else if (rev & POLLOUT) flush(c);
        else if (rev & (POLLERR | POLLHUP | POLLNVAL)) close_conn(c);
      }
      if (fds[1].revents & POLLIN) accept_all();
      expire(clock::now());
      std::lock_guard<std::mutex> lk(mu);
      stats.open = open;
    }
    for (auto& [id, c] : conns) close_conn(c);
    conns.clear();
  }

  void worker_loop() {
    for (;;) {
      job j;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return stopping.load() || !jobs.empty(); });
        if (stopping.load()) return;
        j = std::move(jobs.front());
        jobs.pop_front();
      }
      http_response res;
      run_handler(*j.rt, j.req, res);
      {
        std::lock_guard<std::mutex> lk(mu);
        done.emplace_back(j.conn, std::move(res));
      }
      wake();
    }
  }
};

http_server::http_server(http_limits limits) : impl_(std::make_unique<impl>(limits)) {}

http_server::~http_server() { stop(); }

void http_server::route(std::string method, std::string path, handler h, runs_on where) {
  impl_->routes.push_back({std::move(method), std::move(path), std::move(h), where});
}

void http_server::set_gate(gate g) { impl_->admit = std::move(g); }

bool http_server::listen(const sockaddr* addr, unsigned addr_len, std::string& error) {
  auto& s = *impl_;
  s.listen_fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listen_fd < 0) {
    error = std::strerror(errno);
    return false;
  }
  int one = 1;
  ::setsockopt(s.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr->sa_family == AF_INET6) {
    // The wildcard takes IPv4 as well, whatever net.ipv6.bindv6only says.
    int zero = 0;
    ::setsockopt(s.listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (::bind(s.listen_fd, addr, addr_len) != 0 || ::listen(s.listen_fd, SOMAXCONN) != 0) {
    error = std::strerror(errno);
    ::close(s.listen_fd);
    s.listen_fd = -1;
    return false;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  s.bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                                : reinterpret_cast<sockaddr_in&>(ss).sin_port);
  s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  s.io = std::thread([&s] { s.io_loop(); });
  for (size_t i = 0; i < std::max<size_t>(1, s.limits.worker_threads); ++i)
    s.workers.emplace_back([&s] { s.worker_loop(); });
  return true;
}

uint16_t http_server::port() const { return impl_->bound_port; }

void http_server::stop() {
  auto& s = *impl_;
  if (!s.io.joinable()) return;
  s.stopping = true;
  s.wake();
  s.cv.notify_all();
  s.io.join();
  for (auto& w : s.workers) w.join();
  s.workers.clear();
  ::close(s.listen_fd);
  ::close(s.wake_fd);
  s.listen_fd = s.wake_fd = -1;
}

http_server::counters http_server::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

}  // namespace kvrelay
