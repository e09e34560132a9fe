// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// TLS and mTLS to the policy server end to end (certificates made with the openssl command line),
// and the admin port as an operator uses it.

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "tests/support/fault_fixture.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

// A CA, a server certificate for "policy.test" (and 127.0.0.1) and a client certificate, all
// P-256, valid for a day.
struct test_pki {
  temp_dir dir;
  bool ok = false;

  test_pki() {
    dir.write("server.ext", "subjectAltName=DNS:policy.test,IP:127.0.0.1\n"
                            "extendedKeyUsage=serverAuth\n");
    dir.write("client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string d = dir.path();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string quiet = " >>" + d + "/openssl.log 2>&1";
    const std::string cmds[] = {
        "openssl req -x509" + key + " -keyout " + d + "/ca.key -out " + d +
            "/ca.crt -days 1 -subj /CN=kvrelay-fault-ca" + quiet,
        "openssl req" + key + " -keyout " + d + "/server.key -out " + d +
            "/server.csr -subj /CN=policy.test" + quiet,
        "openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.crt -CAkey " + d +
            "/ca.key -CAcreateserial -days 1 -extfile " + d + "/server.ext -out " + d +
            "/server.crt" + quiet,
        "openssl req" + key + " -keyout " + d + "/client.key -out " + d +
            "/client.csr -subj /CN=kvrelay-fault-client" + quiet,
        "openssl x509 -req -in " + d + "/client.csr -CA " + d + "/ca.crt -CAkey " + d +
            "/ca.key -CAcreateserial -days 1 -extfile " + d + "/client.ext -out " + d +
            "/client.crt" + quiet,
    };
    for (const auto& c : cmds)
      if (std::system(c.c_str()) != 0) return;
    ok = true;
  }
  std::string pem(const std::string& name) const { return read_file(dir.file(name)); }
  std::string log() const { return read_file(dir.file("openssl.log")); }
};

fault_env::options tls_env(const test_pki& pki, bool mutual) {
  fault_env::options o;
  policy::tls_options t;
  t.cert_pem = pki.pem("server.crt");
  t.key_pem = pki.pem("server.key");
  if (mutual) {
    t.client_ca_pem = pki.pem("ca.crt");
    t.require_client_cert = true;
  }
  o.tls = t;
  return o;
}

void use_tls(fault_env& env, const test_pki& pki, bool client_cert) {
  auto& s = env.cfg.server;
  s.tls = true;
  s.ca_file = pki.dir.file("ca.crt");
  s.server_name = "policy.test";
  if (client_cert) {
    s.cert_file = pki.dir.file("client.crt");
    s.key_file = pki.dir.file("client.key");
  }
}

TEST(Tls, DaemonDeliversOverTls) {
  test_pki pki;
  ASSERT_TRUE(pki.ok) << pki.log();
  fault_env env(tls_env(pki, false));
  use_tls(env, pki, false);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_LE(env.metric("kvrelay_units_failed_total"), 0);
}

TEST(Tls, MutualTlsDelivers) {
  test_pki pki;
  ASSERT_TRUE(pki.ok) << pki.log();
  fault_env env(tls_env(pki, true));
  use_tls(env, pki, true);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  EXPECT_EQ(env.wait_consistent(), "");
}

TEST(Tls, MutualTlsServerRefusesADaemonWithoutClientCertificate) {
  test_pki pki;
  ASSERT_TRUE(pki.ok) << pki.log();
  fault_env env(tls_env(pki, true));
  use_tls(env, pki, false);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(20);
  EXPECT_TRUE(wait_until([&] { return env.metric("kvrelay_units_failed_total") > 0; }, 5s));
  EXPECT_EQ(env.server.index().entries(), 0u);
  EXPECT_FALSE(env.d->ready());
}

TEST(Tls, WrongServerNameIsRefused) {
  test_pki pki;
  ASSERT_TRUE(pki.ok) << pki.log();
  fault_env env(tls_env(pki, false));
  use_tls(env, pki, false);
  env.cfg.server.server_name = "someone-else.test";
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(20);
  EXPECT_TRUE(wait_until([&] { return env.metric("kvrelay_units_failed_total") > 0; }, 5s));
  EXPECT_EQ(env.server.index().entries(), 0u);
}

TEST(AdminPort, ReadyzFlipsWhenTheServerAnswers) {
  fault_env env;
  env.server.set_black_hole(true);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  env.publish_steps(10);
  // Fail open: the probe a pod's readiness hangs on stays 200 while the policy server
  // is away; one outage must not empty a fleet's Service. kvrelay_ready keeps the full picture.
  ASSERT_TRUE(wait_until([&] { return env.metric("kvrelay_batches_total") > 0; }, 8s));
  const auto self = http_get(port, "/readyz/self");
  EXPECT_EQ(self.status, 200) << self.body;
  EXPECT_EQ(self.body.rfind("working: 1 pipeline(s) answering", 0), 0u) << self.body;
  EXPECT_EQ(http_get(port, "/readyz").status, 503);
  EXPECT_NE(http_get(port, "/metrics").body.find("kvrelay_ready 0"), std::string::npos);
  env.server.set_black_hole(false);
  // Publishing right after start races the cold-start replay; a failure here with thousands of
  // replays_requested and 0 batches is the tracker wedge SequenceTrackerFaults.ColdReplay...
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 8s))
      << "ingress replays_requested " << env.ingress_field("replays_requested") << ", batches "
      << env.ingress_field("batches");
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_NE(http_get(port, "/metrics").body.find("kvrelay_ready 1"), std::string::npos);
  EXPECT_EQ(http_get(port, "/readyz/self").status, 200);
}

TEST(AdminPort, MetricsHasTheDocumentedFamilies) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  ASSERT_EQ(env.wait_consistent(), "");
  // The ingress publishes its counters on change, at most once a second: wait for them.
  http_reply r;
  EXPECT_TRUE(wait_until(
      [&] {
        r = http_get(env.d->admin_port(), "/metrics");
        return r.body.find("kvrelay_engine_connected{") != std::string::npos;
      },
      5s));
  ASSERT_EQ(r.status, 200);
  // docs/spec/design-rules.md DR23: events, blocks, drops, gaps, replays, RPC latency and errors,
  // resident blocks per adapter, event age, readiness.
  for (const char* family :
       {"kvrelay_events_total counter", "kvrelay_blocks_total counter",
        "kvrelay_batches_total counter", "kvrelay_seq_gaps_total counter",
        "kvrelay_replays_total counter", "kvrelay_rpc_total counter",
        "kvrelay_rpc_duration_seconds histogram",
        "kvrelay_resident_blocks gauge",
        "kvrelay_event_age_seconds histogram", "kvrelay_pending_entries gauge",
        "kvrelay_engine_connected gauge", "kvrelay_ready gauge"}) {
    EXPECT_NE(r.body.find(std::string("# TYPE ") + family), std::string::npos)
        << family << " missing";
  }
  EXPECT_NE(r.body.find("kvrelay_resident_blocks{"), std::string::npos);
}

TEST(AdminPort, AddedAdapterMappingIndexesAPreviouslyUnmappedLoraId) {
  fault_env::options o;
  o.model.lora_names = false;  // lora_id only: the daemon needs the id → name map
  o.model.lora_id = 7;
  o.model.lora_fraction = 0.5;
  fault_env env(o);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  // Fail-closed: adapter blocks are dropped, base blocks indexed.
  auto base_only = env.model.expected();
  size_t adapter_blocks = 0;
  for (auto it = base_only.begin(); it != base_only.end();)
    if (it->first.first == lora) {
      ++adapter_blocks;
      it = base_only.erase(it);
    } else {
      ++it;
    }
  ASSERT_GT(adapter_blocks, 0u);
  std::string diff;
  EXPECT_TRUE(wait_until(
      [&] { return (diff = describe_diff(base_only, server_view(env.server))).empty(); }, 10s))
      << diff;
  EXPECT_GT(env.metric("kvrelay_unmapped_adapter_events_total"), 0);

  const auto port = env.d->admin_port();
  EXPECT_EQ(http_post(port, "/debug/adapters?id=7").status, 400);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=7&name=sql-lora&replica=nobody").status, 404);
  ASSERT_EQ(http_post(port, "/debug/adapters?id=7&name=sql-lora").status, 200);
  // Start from an empty engine cache so every adapter block has a known parent, then compare.
  env.publish_events(env.model.clear());
  env.publish_steps(40);
  EXPECT_EQ(env.wait_consistent(), "");
  bool any_adapter = false;
  for (const auto& [key, v] : server_view(env.server)) any_adapter |= key.first == lora;
  EXPECT_TRUE(any_adapter);
  EXPECT_NE(http_get(port, "/debug/engines").body.find("\"7\":\"sql-lora\""), std::string::npos);
}

TEST(AdminPort, NonLoopbackListenWithoutTokenFailsToStart) {
  fault_env env;
  env.cfg.admin.listen = "0.0.0.0:0";
  std::string err;
  EXPECT_FALSE(env.start_daemon(&err));
  EXPECT_NE(err.find("token_file"), std::string::npos) << err;
}

TEST(AdminPort, TokenGuardsMutatingEndpoints) {
  temp_dir dir;
  dir.write("token", "s3cret-token\n");
  fault_env env;
  env.cfg.admin.token_file = dir.file("token");
  env.cfg.admin.enable_crash_endpoint = true;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  EXPECT_EQ(http_post(port, "/debug/adapters?id=9&name=x").status, 401);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=9&name=x", "wrong").status, 401);
  EXPECT_EQ(http_post(port, "/debug/crash?pipeline=fault-0&actor=emitter").status, 401);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=9&name=x", "s3cret-token").status, 200);
  // Probes and read-only pages stay open: the token guards what changes the daemon
  // (docs/configuration.md, admin.token_file).
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  EXPECT_NE(http_get(port, "/readyz").status, 401);
  EXPECT_EQ(http_get(port, "/readyz/self").status, 200);
  EXPECT_EQ(http_get(port, "/metrics").status, 200);
}

}  // namespace
}  // namespace kvrelay::faults
