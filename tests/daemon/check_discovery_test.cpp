// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// `kvrelay --check` with an engine URL asks the engine once and prints what it answers, or why
// it cannot be asked now, in words an operator reads (not httplib's enumerator names).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "config/flags.hpp"
#include "daemon/discovered_engines.hpp"

namespace kvrelay {
namespace {

// A loopback port nothing listens on: bound by us, then closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(CheckWithDiscovery, AnEngineUrlNobodyListensOnIsConnectionRefused) {
  const std::string where = "127.0.0.1:" + std::to_string(closed_port());
  auto parsed = config::parse_flags({"--engine-url=http://" + where, "--replica-id=pod-0",
                                     "--server=127.0.0.1:9090", "--check"});
  ASSERT_EQ(parsed.status, config::flag_parse_result::outcome::ok) << parsed.error;
  std::ostringstream out, err;
  EXPECT_EQ(check_with_discovery(parsed.values, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("# engine \"pod-0\" (http://" + where + "): not usable now: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("connection refused by " + where + " (nothing listens there)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(": Connection\n"), std::string::npos) << "httplib's bare name: " << text;
}

// --check prints the memory budget, where it came from, and the bounds derived from it.
TEST(CheckWithDiscovery, PrintsTheMemoryBudgetAndItsBounds) {
  auto parsed = config::parse_flags({"--replica-id=pod-0", "--model-id=m", "--memory-budget=96MiB",
                                     "--engine-metrics-url=", "--check"});
  ASSERT_EQ(parsed.status, config::flag_parse_result::outcome::ok) << parsed.error;
  std::ostringstream out, err;
  EXPECT_EQ(check_with_discovery(parsed.values, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("[memory]\nbudget = 100663296\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# memory budget: 96 MiB (config)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("#   index up to 75497472 bytes; queues pause the ingress at up to 16777216 "
                      "bytes or 16384 messages (less as the index grows, at least 2516582 bytes); "
                      "per pipeline: ZMQ rcvhwm 192 messages, pending keys 196608\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace kvrelay
