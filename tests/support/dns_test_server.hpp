// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A real UDP DNS server on 127.0.0.1 (ephemeral port) for DNS fan-out tests: point a target at it
// with "dns://127.0.0.1:<port()>/name:9090". It answers A and AAAA queries from a map that the
// test changes while it runs; it is written apart from net/dns_resolver (its own encoder and
// query reader), so the two check each other.
//
//   dns_test_server dns;
//   dns.set("policy.test", {"127.0.0.1", "127.0.0.2", "::1"});
//   ... resolve "dns://127.0.0.1:" + std::to_string(dns.port()) + "/policy.test:9090"
//   dns.remove("policy.test");   // from now on: NXDOMAIN
//
// Answers: NOERROR with every address of the asked family (none: NODATA, an empty NOERROR),
// NXDOMAIN for a name not in the map (compared case-insensitively, trailing dot ignored), NOTIMP
// for other query types, FORMERR for a query it cannot read. Records carry a compressed owner name
// and TTL 5. `drop(true)` makes it swallow queries (counted, never answered): a server that is
// down without the port being closed. One thread; the destructor stops and joins it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvrelay::testing {

class dns_test_server {
 public:
  /// Binds 127.0.0.1:0 and starts answering. Throws std::runtime_error if it cannot.
  dns_test_server();
  ~dns_test_server();
  dns_test_server(const dns_test_server&) = delete;
  dns_test_server& operator=(const dns_test_server&) = delete;

  uint16_t port() const { return port_; }
  /// "dns://127.0.0.1:PORT/" + name_and_port: a target that asks this server.
  std::string target(const std::string& name_and_port) const;

  /// Replaces the addresses of `name` (IPv4 and IPv6 literals; throws std::invalid_argument on
  /// anything else). An empty list keeps the name, with no address (NODATA).
  void set(const std::string& name, const std::vector<std::string>& addresses);
  /// Forgets `name`: NXDOMAIN from now on.
  void remove(const std::string& name);
  /// While true, queries are read and counted but never answered.
  void drop(bool on) { drop_.store(on); }

  /// Queries received (answered, dropped or unreadable).
  int queries() const { return queries_.load(); }

 private:
  struct records {
    std::vector<std::vector<uint8_t>> v4;  // 4 bytes each
    std::vector<std::vector<uint8_t>> v6;  // 16 bytes each
  };
  void run();
  std::vector<uint8_t> answer(const uint8_t* q, std::size_t n);

  int fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor writes, the thread wakes and leaves
  uint16_t port_ = 0;
  std::mutex mu_;
  std::map<std::string, records> names_;  // lower case, no trailing dot
  std::atomic<bool> drop_{false};
  std::atomic<int> queries_{0};
  std::thread thread_;
};

}  // namespace kvrelay::testing
