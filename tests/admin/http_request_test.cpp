// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The admin port's request parser and response writer, as pure logic (admin/http_request.hpp).

#include <gtest/gtest.h>

#include "admin/http_request.hpp"

namespace kvrelay {
namespace {

TEST(HttpHead, ParsesTheRequestLineQueryAndHeaders) {
  http_request r;
  bool keep = false;
  ASSERT_TRUE(parse_http_head(
      "POST /debug/adapters?id=7&name=a%20b+c&flag HTTP/1.1\r\nHost: x\r\nX-Thing:  v  ", r, keep));
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/debug/adapters");
  EXPECT_EQ(r.param("id"), "7");
  EXPECT_EQ(r.param("name"), "a b c");
  EXPECT_TRUE(r.has_param("flag"));
  EXPECT_FALSE(r.has_param("nope"));
  ASSERT_NE(r.header("x-thing"), nullptr);
  EXPECT_EQ(*r.header("X-THING"), "v");
  EXPECT_TRUE(keep) << "HTTP/1.1 keeps the connection by default";
  ASSERT_TRUE(parse_http_head("GET / HTTP/1.0", r, keep));
  EXPECT_FALSE(keep);
  ASSERT_TRUE(parse_http_head("GET / HTTP/1.1\r\nConnection: close", r, keep));
  EXPECT_FALSE(keep);
}

TEST(HttpHead, RejectsMalformedHeads) {
  http_request r;
  bool keep = false;
  for (const char* bad : {"", "GET", "GET /", "GET / HTTP/2.0", "GET x HTTP/1.1",
                          "G(T / HTTP/1.1", "GET / HTTP/1.1\r\nno colon",
                          "GET / HTTP/1.1\r\n folded: x", "GET / HTTP/1.1\r\n: empty name"}) {
    http_request fresh;
    EXPECT_FALSE(parse_http_head(bad, fresh, keep)) << bad;
  }
}

TEST(HttpHead, KeepsAMalformedEscapeAsItIs) {
  http_request r;
  bool keep = false;
  ASSERT_TRUE(parse_http_head("GET /x?a=%zz&b=%4&c=%41 HTTP/1.1", r, keep));
  EXPECT_EQ(r.param("a"), "%zz");
  EXPECT_EQ(r.param("b"), "%4");
  EXPECT_EQ(r.param("c"), "A");
}

TEST(HttpResponse, SaysHowLongItIsAndWhetherTheConnectionStays) {
  http_response r;
  r.status = 404;
  r.body = "nope\n";
  EXPECT_EQ(serialize_http_response(r, true),
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
            "Connection: close\r\n\r\nnope\n");
  EXPECT_NE(serialize_http_response(r, false).find("Connection: keep-alive"), std::string::npos);
}

}  // namespace
}  // namespace kvrelay
