// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "net/http_fetch.hpp"

#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <utility>

namespace kvrelay {

namespace {

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

std::string host_port(const http_url& t) { return t.host + ":" + std::to_string(t.port); }

// httplib says Connection for a name that does not resolve, a refused connection and an
// unreachable host alike, and keeps the socket's error to itself. On that (rare) path, ask
// again ourselves: resolve, then one non-blocking connect (at most 1 s), for its errno.
std::string why_no_connection(const http_url& t, std::chrono::milliseconds timeout) {
  timeout = std::min(timeout, std::chrono::milliseconds(1000));
  const std::string where = host_port(t);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(t.port);
  if (const int rc = ::getaddrinfo(t.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return "could not resolve host " + t.host + " (" + ::gai_strerror(rc) + ")";
  int err = 0;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                            a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
      socklen_t len = sizeof err;
      if (n == 0)
        err = ETIMEDOUT;
      else if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    }
    ::close(fd);
    if (err == 0) break;
  }
  ::freeaddrinfo(res);
  switch (err) {
    case 0:
      return "could not connect to " + where + " (a second attempt got through: it may have "
             "just started)";
    case ECONNREFUSED:
      return "connection refused by " + where + " (nothing listens there)";
    case ETIMEDOUT:
      return "timed out connecting to " + where + " after " + duration_text(timeout);
    default:
      return "could not connect to " + where + ": " + std::strerror(err);
  }
}

// The one place an httplib error becomes words an operator reads (httplib::to_string gives
// its enumerator names: "Connection", "Read").
std::string describe(httplib::Error e, const http_url& t, std::chrono::milliseconds timeout) {
  using E = httplib::Error;
  switch (e) {
    case E::Connection:
      return why_no_connection(t, timeout);
    case E::ConnectionTimeout:
      return "timed out connecting to " + host_port(t) + " after " + duration_text(timeout);
    case E::Read:
      return "no answer within " + duration_text(timeout) + ", or the connection closed";
    case E::Write:
      return "could not send the request (the connection closed)";
    case E::BindIPAddress:
      return "could not bind the local address";
    case E::ExceedRedirectCount:
      return "too many redirects";
    case E::Canceled:
      return "cancelled";
    case E::SSLConnection:
      return "TLS handshake failed";
    case E::SSLLoadingCerts:
      return "could not load TLS certificates";
    case E::SSLServerVerification:
      return "the server's TLS certificate did not verify";
    case E::UnsupportedMultipartBoundaryChars:
      return "unsupported multipart boundary";
    case E::Compression:
      return "could not decompress the answer";
    default:
      return "failed (" + httplib::to_string(e) + ")";
  }
}

fetch_result used_after_move() {
  fetch_result r;
  r.error = r.why = "http_fetcher used after move";
  return r;
}

}  // namespace

struct http_fetcher::impl {
  std::string url;
  http_fetch_options opts;
  std::string url_error;
  http_url target;
  std::unique_ptr<httplib::Client> client;  // holds the kept-alive connection

  void make_client() {
    client = std::make_unique<httplib::Client>(target.host, target.port);
    client->set_keep_alive(true);
    client->set_connection_timeout(opts.timeout);
    client->set_read_timeout(opts.timeout);
    client->set_write_timeout(opts.timeout);
    // No proxy, no redirects: /metrics is a local engine endpoint, and following a redirect
    // elsewhere would scrape something that is not this engine.
    client->set_follow_location(false);
  }

  fetch_result get(const std::string& path, const std::string& shown) {
    fetch_result r;
    if (!url_error.empty()) {
      r.error = r.why = url_error;
      return r;
    }
    if (!client) make_client();
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + opts.timeout;
    bool too_big = false;
    bool too_slow = false;
    std::string body;
    auto on_response = [&](const httplib::Response& res) {
      // Refuse early when the server announces a body over the cap.
      if (res.has_header("Content-Length")) {
        const std::string& cl = res.get_header_value("Content-Length");
        unsigned long long n = 0;
        auto [p, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
        if (ec == std::errc() && p == cl.data() + cl.size() && n > opts.max_body) {
          too_big = true;
          return false;
        }
      }
      return true;
    };
    // The read timeout bounds each recv; this bounds the whole body against a slow drip.
    auto on_data = [&](const char* data, std::size_t len) {
      if (len > opts.max_body - body.size()) {
        too_big = true;
        return false;
      }
      if (clock::now() > deadline) {
        too_slow = true;
        return false;
      }
      body.append(data, len);
      return true;
    };
    r.url = shown;
    try {
      httplib::Result res = client->Get(path, on_response, on_data);
      if (too_big) {
        r.why = "body exceeds " + std::to_string(opts.max_body) + " bytes";
      } else if (too_slow) {
        r.why = "timed out reading the body";
      } else if (!res) {
        r.why = describe(res.error(), target, opts.timeout);
      } else {
        r.ok = true;
        r.status = res->status;
        r.body = std::move(body);
      }
    } catch (const std::exception& e) {
      r.why = e.what();
    } catch (...) {
      r.why = "unknown failure";
    }
    if (!r.ok) {
      r.error = "GET " + shown + ": " + r.why;
      // After an aborted transfer the connection state is unknown: start clean next time.
      client.reset();
    }
    return r;
  }
};

http_fetcher::http_fetcher(std::string url, http_fetch_options opts) : impl_(new impl) {
  impl_->url = std::move(url);
  impl_->opts = opts;
  if (impl_->opts.timeout.count() <= 0) impl_->opts.timeout = std::chrono::milliseconds(5000);
  if (auto t = parse_http_url(impl_->url, &impl_->url_error)) impl_->target = std::move(*t);
}

http_fetcher::~http_fetcher() = default;
http_fetcher::http_fetcher(http_fetcher&&) noexcept = default;
http_fetcher& http_fetcher::operator=(http_fetcher&&) noexcept = default;

const std::string& http_fetcher::url_error() const { return impl_->url_error; }
const std::string& http_fetcher::url() const { return impl_->url; }

fetch_result http_fetcher::get() {
  if (!impl_) return used_after_move();
  return impl_->get(impl_->target.path, impl_->url);
}

fetch_result http_fetcher::get(std::string_view path) {
  if (!impl_) return used_after_move();
  std::string p(path);
  if (p.empty() || p.front() != '/') p.insert(p.begin(), '/');
  // The shown URL is the origin plus this path, so errors name what was actually asked.
  std::string shown = impl_->url;
  const std::size_t scheme_end = shown.find("://");
  const std::size_t path_start = scheme_end == std::string::npos
                                     ? std::string::npos
                                     : shown.find_first_of("/?#", scheme_end + 3);
  if (path_start != std::string::npos) shown.resize(path_start);
  return impl_->get(p, shown + p);
}

}  // namespace kvrelay
