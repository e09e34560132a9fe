// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tests/support/dns_test_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kvrelay::testing {

namespace {

constexpr uint16_t kTypeA = 1;
constexpr uint16_t kTypeAaaa = 28;
constexpr uint8_t kFormErr = 1;
constexpr uint8_t kNxDomain = 3;
constexpr uint8_t kNotImp = 4;

std::string normal(std::string name) {
  if (!name.empty() && name.back() == '.') name.pop_back();
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

void push16(std::vector<uint8_t>& out, unsigned v) {
  out.push_back(static_cast<uint8_t>((v >> 8) & 0xff));
  out.push_back(static_cast<uint8_t>(v & 0xff));
}

// The answer's header: the query's id and RD bit, QR and RA set, `rcode`.
std::vector<uint8_t> header(const uint8_t* q, uint8_t rcode, unsigned qd, unsigned an) {
  std::vector<uint8_t> out = {q[0], q[1], static_cast<uint8_t>(0x80 | (q[2] & 0x01)),
                              static_cast<uint8_t>(0x80 | rcode)};
  push16(out, qd);
  push16(out, an);
  push16(out, 0);
  push16(out, 0);
  return out;
}

}  // namespace

dns_test_server::dns_test_server() {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("dns_test_server: socket: ") + strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  socklen_t len = sizeof sa;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
      ::pipe2(wake_, O_CLOEXEC) != 0) {
    const std::string err = strerror(errno);
    ::close(fd_);
    throw std::runtime_error("dns_test_server: bind: " + err);
  }
  port_ = ntohs(sa.sin_port);
  thread_ = std::thread([this] { run(); });
}

dns_test_server::~dns_test_server() {
  const char stop = 'x';
  while (::write(wake_[1], &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::string dns_test_server::target(const std::string& name_and_port) const {
  return "dns://127.0.0.1:" + std::to_string(port_) + "/" + name_and_port;
}

void dns_test_server::set(const std::string& name, const std::vector<std::string>& addresses) {
  records r;
  for (const auto& a : addresses) {
    std::vector<uint8_t> v4(4), v6(16);
    if (inet_pton(AF_INET, a.c_str(), v4.data()) == 1) {
      r.v4.push_back(std::move(v4));
    } else if (inet_pton(AF_INET6, a.c_str(), v6.data()) == 1) {
      r.v6.push_back(std::move(v6));
    } else {
      throw std::invalid_argument("dns_test_server: \"" + a + "\" is not an IP address");
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  names_[normal(name)] = std::move(r);
}

void dns_test_server::remove(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  names_.erase(normal(name));
}

void dns_test_server::run() {
  std::vector<uint8_t> buf(65536);
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const ssize_t n = ::recvfrom(fd_, buf.data(), buf.size(), 0,
                                 reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) continue;
    ++queries_;
    if (drop_.load()) continue;
    const std::vector<uint8_t> out = answer(buf.data(), static_cast<std::size_t>(n));
    if (out.empty()) continue;
    ::sendto(fd_, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), from_len);
  }
}

// Reads one question of plain labels (queries never compress); anything else is FORMERR.
std::vector<uint8_t> dns_test_server::answer(const uint8_t* q, std::size_t n) {
  if (n < 12) return {};                  // not even an id to answer to
  if (q[2] & 0x80) return {};             // an answer, not a query
  if (q[4] != 0 || q[5] != 1) return header(q, kFormErr, 0, 0);
  std::size_t pos = 12;
  std::string name;
  for (;;) {
    if (pos >= n) return header(q, kFormErr, 0, 0);
    const uint8_t len = q[pos];
    if (len == 0) break;
    if (len > 63 || pos + 1 + len > n) return header(q, kFormErr, 0, 0);
    if (!name.empty()) name += '.';
    name.append(reinterpret_cast<const char*>(q + pos + 1), len);
    pos += 1u + len;
  }
  ++pos;
  if (pos + 4 > n) return header(q, kFormErr, 0, 0);
  const unsigned qtype = (q[pos] << 8) | q[pos + 1];
  const std::size_t question_end = pos + 4;

  std::vector<std::vector<uint8_t>> rdata;
  uint8_t rcode = 0;
  if (qtype != kTypeA && qtype != kTypeAaaa) {
    rcode = kNotImp;
  } else {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = names_.find(normal(name));
    if (it == names_.end()) {
      rcode = kNxDomain;
    } else {
      rdata = qtype == kTypeA ? it->second.v4 : it->second.v6;
    }
  }
  std::vector<uint8_t> out = header(q, rcode, 1, static_cast<unsigned>(rdata.size()));
  out.insert(out.end(), q + 12, q + question_end);
  for (const auto& d : rdata) {
    push16(out, 0xC00C);  // the owner is the question's name
    push16(out, qtype);
    push16(out, 1);       // IN
    push16(out, 0);       // TTL, high half
    push16(out, 5);       // TTL 5 s
    push16(out, static_cast<unsigned>(d.size()));
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

}  // namespace kvrelay::testing
