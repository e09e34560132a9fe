// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Raw TCP clients for the admin port tests: what a misbehaving client does (a header one byte at
// a time, a connection that never speaks, a body the server should never read), which no HTTP
// client library lets a test do on purpose. Header-only; IPv4 (loopback unless told).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace kvrelay::testing {

/// A connected socket, closed on destruction.
class raw_conn {
 public:
  explicit raw_conn(uint16_t port, const char* ipv4 = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, ipv4, &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~raw_conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  raw_conn(raw_conn&& o) noexcept : fd_(o.fd_), pending_(std::move(o.pending_)) { o.fd_ = -1; }
  raw_conn(const raw_conn&) = delete;
  raw_conn& operator=(const raw_conn&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  /// Sends everything; false when the peer is gone.
  bool send(const std::string& data) const {
    size_t off = 0;
    while (off < data.size()) {
      const auto n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  /// Reads until the peer closes or `timeout` passes; what arrived.
  std::string read_all(std::chrono::milliseconds timeout) const {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  /// Reads one response (until its headers and Content-Length body are in); "" on timeout.
  /// Bytes of a following response stay for the next call.
  std::string read_response(std::chrono::milliseconds timeout) const {
    std::string out = std::move(pending_);
    pending_.clear();
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto head = out.find("\r\n\r\n");
      if (head != std::string::npos) {
        const auto cl = out.find("Content-Length: ");
        const size_t len = cl == std::string::npos || cl > head ? 0 : std::stoul(out.substr(cl + 16));
        if (out.size() >= head + 4 + len) {
          pending_ = out.substr(head + 4 + len);
          out.resize(head + 4 + len);
          return out;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return {};
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

  /// The peer closed the connection within `timeout` (whatever it sent first is discarded).
  bool closed_by_peer(std::chrono::milliseconds timeout) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
  }

 private:
  int fd_ = -1;
  mutable std::string pending_;
};

/// The status code of an HTTP response text (-1 when there is none).
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

}  // namespace kvrelay::testing
