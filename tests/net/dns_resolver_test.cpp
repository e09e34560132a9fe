// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "net/dns_resolver.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dns_test_server.hpp"

namespace kvrelay::net {
namespace {

using namespace std::chrono_literals;
using bytes = std::vector<uint8_t>;
using kvrelay::testing::dns_test_server;

// -- hand-built packets ------------------------------------------------------------------------

struct packet {
  bytes b;
  packet& u8(unsigned v) {
    b.push_back(static_cast<uint8_t>(v));
    return *this;
  }
  packet& u16(unsigned v) { return u8(v >> 8).u8(v & 0xff); }
  packet& u32(unsigned v) { return u16(v >> 16).u16(v & 0xffff); }
  packet& raw(const bytes& v) {
    b.insert(b.end(), v.begin(), v.end());
    return *this;
  }
  packet& labels(std::initializer_list<std::string> ls) {  // without the final 0
    for (const auto& l : ls) {
      u8(static_cast<unsigned>(l.size()));
      b.insert(b.end(), l.begin(), l.end());
    }
    return *this;
  }
  packet& name(std::initializer_list<std::string> ls) { return labels(ls).u8(0); }
  packet& ptr(unsigned offset) { return u16(0xC000 | offset); }
  // A record's fixed part after its owner name.
  packet& rr(unsigned type, unsigned rdlength) { return u16(type).u16(1).u32(30).u16(rdlength); }
  std::size_t size() const { return b.size(); }
  dns_answer parse(uint16_t id, uint16_t qtype) const {
    return parse_dns_answer(b.data(), b.size(), id, qtype);
  }
};

// Header of an answer: QR, RD, RA, `rcode`; plus the question "svc.test" of `qtype` at offset 12
// (labels "svc" at 12, "test" at 16).
packet answer_to(uint16_t id, uint16_t qtype, unsigned ancount, unsigned rcode = 0,
                 unsigned flags = 0x8180) {
  packet p;
  p.u16(id).u16(flags | rcode).u16(1).u16(ancount).u16(0).u16(0);
  p.name({"svc", "test"}).u16(qtype).u16(1);
  return p;
}

constexpr uint16_t A = dns_type_a;
constexpr uint16_t AAAA = dns_type_aaaa;
const bytes kV6Loopback = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// -- target syntax -----------------------------------------------------------------------------

TEST(DnsTarget, RecognisesTheScheme) {
  EXPECT_TRUE(is_dns_target("dns:///a:1"));
  EXPECT_TRUE(is_dns_target("dns:a:1"));
  EXPECT_FALSE(is_dns_target("policy:9090"));
  EXPECT_FALSE(is_dns_target("DNS:///a:1"));
  EXPECT_FALSE(is_dns_target("dns"));
  EXPECT_FALSE(is_dns_target(""));
}

TEST(DnsTarget, ParsesTheForms) {
  std::string err;
  auto t = parse_dns_target("dns:///policy.ns.svc.cluster.local:9090", err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->nameserver, "");
  EXPECT_EQ(t->host, "policy.ns.svc.cluster.local");
  EXPECT_EQ(t->port, 9090);

  t = parse_dns_target("dns://10.96.0.10/policy:9090", err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->nameserver, "10.96.0.10");
  EXPECT_EQ(t->nameserver_port, 53);
  EXPECT_EQ(t->host, "policy");
  EXPECT_EQ(t->port, 9090);

  t = parse_dns_target("dns://127.0.0.1:5353/Policy.Test.:1", err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->nameserver_port, 5353);
  EXPECT_EQ(t->host, "Policy.Test.");

  t = parse_dns_target("dns://[::1]:54/_grpc.policy-0:65535", err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->nameserver, "::1");
  EXPECT_EQ(t->nameserver_port, 54);
  EXPECT_EQ(t->host, "_grpc.policy-0");
  EXPECT_EQ(t->port, 65535);

  t = parse_dns_target("dns:policy:80", err);  // gRPC's form without an authority
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->nameserver, "");
  EXPECT_EQ(t->host, "policy");

  t = parse_dns_target("dns:///[fd00::5]:9090", err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->host, "fd00::5");
  t = parse_dns_target("dns:///10.0.0.7:9090", err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->host, "10.0.0.7");
}

TEST(DnsTarget, RejectsWithAReason) {
  const std::string long_label(64, 'a');
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  const struct {
    std::string target;
    std::string why;
  } bad[] = {
      {"", "not a dns: target"},
      {"policy:9090", "not a dns: target"},
      {"dns://10.0.0.1", "no '/' after the nameserver"},
      {"dns:///", "no name to resolve"},
      {"dns:///policy", "port required"},
      {"dns:///policy:", "empty port"},
      {"dns:///policy:0", "bad port \"0\""},
      {"dns:///policy:65536", "bad port \"65536\""},
      {"dns:///policy:9x", "bad port \"9x\""},
      {"dns://ns.example/policy:1", "nameserver \"ns.example\" is not an IP address"},
      {"dns://10.0.0.1:0/policy:1", "bad nameserver port \"0\""},
      {"dns://::1/policy:1", "nameserver: an IPv6 literal needs brackets"},
      {"dns:///::1:80", "an IPv6 literal needs brackets"},
      {"dns:///[::1:80", "unterminated IPv6 literal"},
      {"dns:///[::1]x:80", "junk after IPv6 literal"},
      {"dns:///[policy]:80", "\"policy\" is not an IPv6 address"},
      {"dns:///a..b:1", "empty label"},
      {"dns:///.a:1", "empty label"},
      {"dns:///na me:1", "character ' '"},
      {"dns:////a:1", "character '/'"},
      {"dns:///" + long_label + ".x:1", "label longer than 63"},
      {"dns:///" + long_name + "x:1", "name longer than 253"},
  };
  for (const auto& c : bad) {
    std::string err;
    EXPECT_FALSE(parse_dns_target(c.target, err)) << c.target;
    EXPECT_NE(err.find(c.why), std::string::npos) << c.target << " -> " << err;
  }
}

TEST(DnsTarget, PrintsWhatItParses) {
  for (const char* s : {"dns:///policy:9090", "dns://10.0.0.1:53/policy.test:1",
                        "dns://[::1]:5353/[fd00::1]:2"}) {
    std::string err;
    auto t = parse_dns_target(s, err);
    ASSERT_TRUE(t) << err;
    EXPECT_EQ(to_string(*t), s);
  }
}

// -- the query ---------------------------------------------------------------------------------

TEST(DnsQuery, EncodesNameTypeAndEdns) {
  std::string err;
  const bytes q = build_dns_query(0xBEEF, "svc.test.", AAAA, err);
  packet want;
  want.u16(0xBEEF).u16(0x0100).u16(1).u16(0).u16(0).u16(1);
  want.name({"svc", "test"}).u16(AAAA).u16(1);
  want.u8(0).u16(41).u16(4096).u32(0).u16(0);  // OPT
  EXPECT_EQ(q, want.b);
}

TEST(DnsQuery, RefusesNamesItCannotEncode) {
  std::string err;
  EXPECT_TRUE(build_dns_query(1, "", A, err).empty());
  EXPECT_EQ(err, "empty name");
  EXPECT_TRUE(build_dns_query(1, "a..b", A, err).empty());
  EXPECT_EQ(err, "empty label in the name");
  EXPECT_TRUE(build_dns_query(1, std::string(64, 'a'), A, err).empty());
  EXPECT_EQ(err, "label longer than 63 bytes");
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  EXPECT_TRUE(build_dns_query(1, long_name, A, err).empty());
  EXPECT_EQ(err, "name longer than 255 bytes");
}

// -- the answer parser -------------------------------------------------------------------------

TEST(DnsAnswer, TwoARecords) {
  packet p = answer_to(7, A, 2);
  p.ptr(12).rr(A, 4).raw({10, 0, 0, 1});
  p.ptr(12).rr(A, 4).raw({10, 0, 0, 2});
  dns_answer a = p.parse(7, A);
  EXPECT_TRUE(a.ours);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.addresses, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_FALSE(a.truncated);
}

TEST(DnsAnswer, AaaaRecord) {
  packet p = answer_to(8, AAAA, 2);
  p.ptr(12).rr(AAAA, 16).raw(kV6Loopback);
  p.ptr(12).rr(AAAA, 16).raw({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34});
  dns_answer a = p.parse(8, AAAA);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.addresses, (std::vector<std::string>{"::1", "fd00::1234"}));
}

TEST(DnsAnswer, NoDataIsAnEmptySuccess) {
  dns_answer a = answer_to(9, AAAA, 0).parse(9, AAAA);
  EXPECT_TRUE(a.ok) << a.error;
  EXPECT_TRUE(a.addresses.empty());
}

// svc.test CNAME real.test; real.test A 10.1.1.1, with the owner names compressed in two hops
// (the A record's owner points into the CNAME's data, which points to "test" in the question).
TEST(DnsAnswer, CnameChainThroughCompressionPointers) {
  packet p = answer_to(10, A, 3);
  p.ptr(12).rr(dns_type_cname, 7);
  const unsigned real_test = static_cast<unsigned>(p.size());
  p.labels({"real"}).ptr(16);  // "real" + -> "test"
  p.ptr(real_test).rr(A, 4).raw({10, 1, 1, 1});
  p.u8(0).rr(99, 3).raw({1, 2, 3});  // an unknown type owned by the root: skipped
  dns_answer a = p.parse(10, A);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.addresses, (std::vector<std::string>{"10.1.1.1"}));
}

TEST(DnsAnswer, SkipsOtherClassesAndIgnoresTrailingSections) {
  packet p = answer_to(11, A, 2);
  p.ptr(12).u16(A).u16(3).u32(0).u16(4).raw({9, 9, 9, 9});  // class CH
  p.ptr(12).rr(A, 4).raw({10, 0, 0, 3});
  p.raw({0xff, 0xff, 0xff});  // junk where the authority section would be: never read
  dns_answer a = p.parse(11, A);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.addresses, (std::vector<std::string>{"10.0.0.3"}));
}

TEST(DnsAnswer, NotOursIsIgnoredNotAnError) {
  packet p = answer_to(12, A, 1);
  p.ptr(12).rr(A, 4).raw({10, 0, 0, 1});
  dns_answer a = p.parse(13, A);
  EXPECT_FALSE(a.ours);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.error, "answer id 12, not the query's 13");

  a = answer_to(12, A, 0, 0, 0x0100).parse(12, A);  // QR clear: a query
  EXPECT_FALSE(a.ours);
  EXPECT_EQ(a.error, "a query, not an answer");

  a = parse_dns_answer(p.b.data(), 11, 12, A);
  EXPECT_FALSE(a.ours);
  EXPECT_EQ(a.error, "malformed answer: 11 bytes, shorter than a DNS header");
  a = parse_dns_answer(nullptr, 0, 12, A);
  EXPECT_FALSE(a.ours);
}

TEST(DnsAnswer, ServerErrorsAreNamed) {
  dns_answer a = answer_to(14, A, 0, 3).parse(14, A);
  EXPECT_TRUE(a.ours);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.rcode, 3);
  EXPECT_EQ(a.error, "NXDOMAIN (no such name)");
  EXPECT_EQ(answer_to(14, A, 0, 2).parse(14, A).error, "SERVFAIL");
  EXPECT_EQ(answer_to(14, A, 0, 5).parse(14, A).error, "REFUSED");
  EXPECT_EQ(answer_to(14, A, 0, 9).parse(14, A).error, "server error (rcode 9)");
}

TEST(DnsAnswer, TruncatedByTheServer) {
  dns_answer a = answer_to(15, A, 0, 0, 0x8380).parse(15, A);  // TC, nothing in it
  EXPECT_TRUE(a.ours);
  EXPECT_FALSE(a.ok);
  EXPECT_TRUE(a.truncated);
  EXPECT_EQ(a.error, "truncated (TC) A answer with no address (no TCP fallback)");

  packet p = answer_to(15, A, 1, 0, 0x8380);  // TC, with what fitted
  p.ptr(12).rr(A, 4).raw({10, 0, 0, 1});
  a = p.parse(15, A);
  EXPECT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.addresses, (std::vector<std::string>{"10.0.0.1"}));
}

// Every prefix of a valid answer: a clean error (or "not ours" below the header), never an
// overread (run it under ASan: tests/net, see the report) and never a partial success.
TEST(DnsAnswer, EveryTruncationIsAnError) {
  packet p = answer_to(16, A, 3);
  p.ptr(12).rr(dns_type_cname, 7);
  const unsigned real_test = static_cast<unsigned>(p.size());
  p.labels({"real"}).ptr(16);
  p.ptr(real_test).rr(A, 4).raw({10, 1, 1, 1});
  p.ptr(real_test).rr(A, 4).raw({10, 1, 1, 2});
  ASSERT_TRUE(p.parse(16, A).ok);
  for (std::size_t n = 0; n < p.size(); ++n) {
    bytes prefix(p.b.begin(), p.b.begin() + static_cast<std::ptrdiff_t>(n));
    dns_answer a = parse_dns_answer(prefix.data(), prefix.size(), 16, A);
    EXPECT_FALSE(a.ok) << n;
    EXPECT_TRUE(a.addresses.empty()) << n;
    EXPECT_EQ(a.ours, n >= 12) << n;
    EXPECT_EQ(a.error.rfind("malformed answer: ", 0), 0u) << n << ": " << a.error;
  }
}

TEST(DnsAnswer, PointerLoopsAndForwardPointers) {
  {  // a pointer to itself
    packet p = answer_to(17, A, 1);
    const unsigned self = static_cast<unsigned>(p.size());
    p.ptr(self).rr(A, 4).raw({1, 2, 3, 4});
    dns_answer a = p.parse(17, A);
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.find("does not point backwards"), std::string::npos) << a.error;
  }
  {  // "a" + a pointer back to its own start: a cycle of two steps
    packet p = answer_to(18, A, 1);
    const unsigned start = static_cast<unsigned>(p.size());
    p.labels({"a"}).ptr(start).rr(A, 4).raw({1, 2, 3, 4});
    dns_answer a = p.parse(18, A);
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.find("(a loop)"), std::string::npos) << a.error;
  }
  {  // two names pointing at each other
    packet p = answer_to(19, A, 2);
    p.ptr(12).rr(dns_type_cname, 8);  // its data holds both names, never read as a name
    const unsigned x = static_cast<unsigned>(p.size());
    p.labels({"x"}).u16(0);  // patched below to point at y
    const unsigned y = static_cast<unsigned>(p.size());
    p.labels({"y"}).ptr(x);
    p.b[x + 2] = static_cast<uint8_t>(0xC0 | (y >> 8));
    p.b[x + 3] = static_cast<uint8_t>(y & 0xff);
    p.ptr(y).rr(A, 4).raw({1, 2, 3, 4});
    dns_answer a = p.parse(19, A);
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.find("does not point backwards"), std::string::npos) << a.error;
  }
  {  // a pointer into the header
    packet p = answer_to(20, A, 1);
    p.ptr(2).rr(A, 4).raw({1, 2, 3, 4});
    EXPECT_NE(p.parse(20, A).error.find("into the header"), std::string::npos);
  }
}

TEST(DnsAnswer, MalformedRecords) {
  {  // an A record of 5 bytes
    packet p = answer_to(21, A, 1);
    p.ptr(12).rr(A, 5).raw({1, 2, 3, 4, 5});
    dns_answer a = p.parse(21, A);
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.find("A record 0 of 5 bytes"), std::string::npos) << a.error;
  }
  {  // rdlength past the end
    packet p = answer_to(22, A, 1);
    p.ptr(12).rr(dns_type_cname, 200).raw({1, 2});
    EXPECT_NE(p.parse(22, A).error.find("data runs past the end"), std::string::npos);
  }
  {  // more records announced than present
    packet p = answer_to(23, A, 2);
    p.ptr(12).rr(A, 4).raw({1, 2, 3, 4});
    dns_answer a = p.parse(23, A);
    EXPECT_FALSE(a.ok);
    EXPECT_TRUE(a.addresses.empty());
    EXPECT_NE(a.error.find("record 1: name runs past the end"), std::string::npos) << a.error;
  }
  {  // the question is for another type
    dns_answer a = answer_to(24, AAAA, 0).parse(24, A);
    EXPECT_TRUE(a.ours);
    EXPECT_NE(a.error.find("question type 28, not the query's 1"), std::string::npos);
  }
  {  // extended label types (0x40, 0x80) are not names
    packet p = answer_to(25, A, 1);
    p.u8(0x41).u8(0).rr(A, 4).raw({1, 2, 3, 4});
    EXPECT_NE(p.parse(25, A).error.find("unsupported label type 1"), std::string::npos);
  }
  {  // an owner name over 255 bytes
    packet p = answer_to(26, A, 1);
    for (int i = 0; i < 5; ++i) p.labels({std::string(60, 'n')});
    p.u8(0).rr(A, 4).raw({1, 2, 3, 4});
    EXPECT_NE(p.parse(26, A).error.find("name longer than 255 bytes"), std::string::npos);
  }
  {  // not a standard query's answer
    EXPECT_NE(answer_to(27, A, 0, 0, 0x8180 | (2 << 11)).parse(27, A).error.find("opcode 2"),
              std::string::npos);
  }
}

// -- end to end against a real DNS server on loopback ------------------------------------------

dns_target at_server(const dns_test_server& dns, const std::string& name_and_port) {
  std::string err;
  auto t = parse_dns_target(dns.target(name_and_port), err);
  if (!t) ADD_FAILURE() << err;
  return t.value_or(dns_target{});
}

using list = std::vector<std::string>;

TEST(DnsResolve, TwoARecordsAndAnAaaa) {
  dns_test_server dns;
  dns.set("policy.test", {"127.0.0.2", "127.0.0.1", "::1", "127.0.0.1"});
  resolve_result r = resolve(at_server(dns, "policy.test:9090"), 2s);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.addresses, (list{"127.0.0.1:9090", "127.0.0.2:9090", "[::1]:9090"}));
  EXPECT_EQ(dns.queries(), 2);  // one A, one AAAA
}

TEST(DnsResolve, OnlyOneFamily) {
  dns_test_server dns;
  dns.set("v6.test", {"fd00::1", "fd00::2"});
  dns.set("V4.Test", {"10.0.0.9"});
  resolve_result r = resolve(at_server(dns, "v6.test:1"), 2s);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.addresses, (list{"[fd00::1]:1", "[fd00::2]:1"}));
  r = resolve(at_server(dns, "v4.test.:2"), 2s);  // case and the trailing dot do not matter
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.addresses, (list{"10.0.0.9:2"}));
}

TEST(DnsResolve, AddressesAddedAndRemovedBetweenResolves) {
  dns_test_server dns;
  const dns_target t = at_server(dns, "policy.test:9090");
  dns.set("policy.test", {"127.0.0.1"});
  EXPECT_EQ(resolve(t, 2s).addresses, (list{"127.0.0.1:9090"}));
  dns.set("policy.test", {"127.0.0.1", "127.0.0.3"});
  EXPECT_EQ(resolve(t, 2s).addresses, (list{"127.0.0.1:9090", "127.0.0.3:9090"}));
  dns.set("policy.test", {"127.0.0.3"});
  EXPECT_EQ(resolve(t, 2s).addresses, (list{"127.0.0.3:9090"}));
  dns.remove("policy.test");
  resolve_result r = resolve(t, 2s);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_NE(r.error.find("NXDOMAIN"), std::string::npos) << r.error;
}

TEST(DnsResolve, NxDomain) {
  dns_test_server dns;
  resolve_result r = resolve(at_server(dns, "nobody.test:9090"), 2s);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_EQ(r.error, "resolving nobody.test at 127.0.0.1:" + std::to_string(dns.port()) +
                         ": NXDOMAIN (no such name)");
}

TEST(DnsResolve, NameWithoutAddressesIsAFailure) {
  dns_test_server dns;
  dns.set("empty.test", {});
  resolve_result r = resolve(at_server(dns, "empty.test:9090"), 2s);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_NE(r.error.find("no A or AAAA record"), std::string::npos) << r.error;
}

TEST(DnsResolve, IpLiteralNeedsNoQuery) {
  dns_test_server dns;
  EXPECT_EQ(resolve(at_server(dns, "[::1]:7"), 2s).addresses, (list{"[::1]:7"}));
  EXPECT_EQ(resolve(at_server(dns, "10.2.3.4:7"), 2s).addresses, (list{"10.2.3.4:7"}));
  EXPECT_EQ(dns.queries(), 0);
}

// A UDP socket that reads nothing and answers nothing: the queries go unanswered.
class silent_port {
 public:
  silent_port() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      ADD_FAILURE() << "silent_port: cannot bind";
    }
    port_ = ntohs(sa.sin_port);
  }
  ~silent_port() { ::close(fd_); }
  uint16_t port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST(DnsResolve, TimeoutWhenNothingAnswers) {
  silent_port quiet;
  dns_target t;
  t.nameserver = "127.0.0.1";
  t.nameserver_port = quiet.port();
  t.host = "policy.test";
  t.port = 9090;
  resolve_result r = resolve(t, 150ms);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_EQ(r.error, "resolving policy.test at 127.0.0.1:" + std::to_string(quiet.port()) +
                         ": timed out after 150 ms");
}

// The server reads the queries and drops them: each query is sent again once, halfway, even
// when the resolver wakes up too late for it (a loaded machine): the A and AAAA queries, twice.
TEST(DnsResolve, UnansweredQueriesAreSentAgainOnce) {
  dns_test_server dns;
  dns.set("policy.test", {"127.0.0.1"});
  dns.drop(true);
  resolve_result r = resolve(at_server(dns, "policy.test:9090"), 200ms);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_NE(r.error.find("timed out after 200 ms"), std::string::npos) << r.error;
  // Every query was sent before resolve() returned; the server's thread may still be reading.
  for (int i = 0; i < 10000 && dns.queries() < 4; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(dns.queries(), 4);
  dns.drop(false);
  EXPECT_EQ(resolve(at_server(dns, "policy.test:9090"), 2s).addresses, (list{"127.0.0.1:9090"}));
}

// The wake-up for the resend can come after the deadline on a loaded machine; a timeout of 0
// makes every wake-up that late. The resend still goes before the resolver gives up.
TEST(DnsResolve, AWakeUpPastTheDeadlineStillSendsTheResend) {
  dns_test_server dns;
  dns.set("policy.test", {"127.0.0.1"});
  dns.drop(true);
  resolve_result r = resolve(at_server(dns, "policy.test:9090"), 0ms);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_NE(r.error.find("timed out after 0 ms"), std::string::npos) << r.error;
  for (int i = 0; i < 10000 && dns.queries() < 4; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(dns.queries(), 4);
}

TEST(DnsResolve, RefusedWhenNothingListens) {
  uint16_t port = 0;
  {
    silent_port gone;  // bound, then closed: the port is free and nothing listens there
    port = gone.port();
  }
  dns_target t;
  t.nameserver = "127.0.0.1";
  t.nameserver_port = port;
  t.host = "policy.test";
  t.port = 1;
  resolve_result r = resolve(t, 2s);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_NE(r.error.find("connection refused"), std::string::npos) << r.error;
}

// A server of the test's own script, for answers dns_test_server never gives: it reads each query
// and sends back whatever `reply(query)` returns (several packets, in order).
class scripted_server {
 public:
  using script = std::function<std::vector<bytes>(const bytes& query)>;
  explicit scripted_server(script reply) : reply_(std::move(reply)) {
    thread_ = std::thread([this] { run(); });
  }
  ~scripted_server() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return sock_.port(); }

 private:
  void run() {
    bytes buf(65536);
    while (!stop_) {
      pollfd pfd{sock_.fd(), POLLIN, 0};
      if (::poll(&pfd, 1, 10) <= 0) continue;
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const ssize_t n = ::recvfrom(sock_.fd(), buf.data(), buf.size(), 0,
                                   reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 12) continue;
      for (const bytes& out : reply_(bytes(buf.begin(), buf.begin() + n))) {
        ::sendto(sock_.fd(), out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
      }
    }
  }
  silent_port sock_;
  script reply_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

uint16_t id_of(const bytes& q) { return static_cast<uint16_t>((q[0] << 8) | q[1]); }
uint16_t qtype_of(const bytes& q) {  // the question of a query for "svc.test"
  return static_cast<uint16_t>((q[22] << 8) | q[23]);
}

// The answer to an A query for "svc.test" with one address.
bytes one_a(uint16_t id, const bytes& ip) {
  packet p = answer_to(id, A, 1);
  p.ptr(12).rr(A, static_cast<unsigned>(ip.size())).raw(ip);
  return p.b;
}

dns_target svc_test_at(uint16_t port) {
  dns_target t;
  t.nameserver = "127.0.0.1";
  t.nameserver_port = port;
  t.host = "svc.test";
  t.port = 80;
  return t;
}

// Packets with another id come first (late or spoofed): ignored, the real answer still counts.
TEST(DnsResolve, IgnoresAnswersWithAnotherId) {
  scripted_server srv([](const bytes& q) {
    const uint16_t id = id_of(q);
    const auto other = static_cast<uint16_t>(id + 1);
    if (qtype_of(q) == AAAA) {
      return std::vector<bytes>{answer_to(other, AAAA, 0).b, answer_to(id, AAAA, 0).b};
    }
    return std::vector<bytes>{one_a(other, {6, 6, 6, 6}), bytes{1, 2, 3}, one_a(id, {10, 0, 0, 1})};
  });
  resolve_result r = resolve(svc_test_at(srv.port()), 2s);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.addresses, (list{"10.0.0.1:80"}));
}

// One query answered well, the other with garbage: what the good one found is the result.
TEST(DnsResolve, OneQueryFailingDoesNotHideTheOther) {
  scripted_server srv([](const bytes& q) {
    const uint16_t id = id_of(q);
    if (qtype_of(q) == AAAA) {
      packet p = answer_to(id, AAAA, 1);
      p.ptr(12).rr(AAAA, 4).raw({1, 2, 3, 4});  // an AAAA of 4 bytes
      return std::vector<bytes>{p.b};
    }
    return std::vector<bytes>{one_a(id, {10, 0, 0, 5})};
  });
  resolve_result r = resolve(svc_test_at(srv.port()), 2s);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.addresses, (list{"10.0.0.5:80"}));
}

TEST(DnsResolve, BothQueriesFailingSaysWhy) {
  scripted_server srv([](const bytes& q) {
    const uint16_t id = id_of(q);
    if (qtype_of(q) == AAAA) return std::vector<bytes>{answer_to(id, AAAA, 0, 2).b};  // SERVFAIL
    packet p = answer_to(id, A, 1);
    p.ptr(12).rr(A, 4).raw({10, 0});  // cut short
    return std::vector<bytes>{p.b};
  });
  resolve_result r = resolve(svc_test_at(srv.port()), 2s);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_EQ(r.error, "resolving svc.test at 127.0.0.1:" + std::to_string(srv.port()) +
                         ": A: malformed answer: record 0 data runs past the end at offset 38; "
                         "AAAA: SERVFAIL");
}

// -- the system resolver -----------------------------------------------------------------------

TEST(DnsResolve, SystemResolverFindsLocalhost) {
  std::string err;
  auto t = parse_dns_target("dns:///localhost:9090", err);
  ASSERT_TRUE(t) << err;
  resolve_result r = resolve(*t, 5s);
  EXPECT_EQ(r.error, "");
  EXPECT_NE(std::find(r.addresses.begin(), r.addresses.end(), "127.0.0.1:9090"), r.addresses.end())
      << ::testing::PrintToString(r.addresses);
  EXPECT_TRUE(std::is_sorted(r.addresses.begin(), r.addresses.end()));
}

TEST(DnsResolve, SystemResolverFailsOnAnUnknownName) {
  std::string err;
  auto t = parse_dns_target("dns:///nobody.invalid:9090", err);  // RFC 6761: never resolves
  ASSERT_TRUE(t) << err;
  resolve_result r = resolve(*t, 3s);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_EQ(r.error.rfind("resolving nobody.invalid (system resolver): ", 0), 0u) << r.error;
}

}  // namespace
}  // namespace kvrelay::net
