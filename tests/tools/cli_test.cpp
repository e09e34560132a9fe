// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The two executables' command lines: the reference fake engine's flags, validation and EXPECT
// lines (docs/spec/reference-behaviour.md §6, C05 flag forms), and the policy server's flags.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct run_result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

run_result run(const std::string& command) {
  run_result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string engine = KVRELAY_FAKE_ENGINE_BIN;
const std::string server = KVRELAY_POLICY_SERVER_BIN;

TEST(FakeEngineCli, PrintsExpectLinesAndPublishesCountBatches) {
  const auto r = run(engine + " -bind 'tcp://127.0.0.1:*' -num-blocks=2 --events 2"
                              " --start-token=5000 -interval 1ms --count 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("EXPECT prefix_hash[0]=3da0ff8dcd1d4e46 token_count=128"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("EXPECT prefix_hash[1]=4c9d2e3832e383a5 token_count=256"),
            std::string::npos);
  EXPECT_NE(r.output.find("published=3"), std::string::npos) << r.output;
}

TEST(FakeEngineCli, OmitTokenIdsExpectsNoEntries) {
  const auto r = run(engine + " --bind=tcp://127.0.0.1:* -omit-token-ids --count 1 -interval 1ms");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("EXPECT no index entries"), std::string::npos) << r.output;
}

TEST(FakeEngineCli, ValidationIsFatalAndBadFlagsAreUsageErrors) {
  EXPECT_EQ(run(engine + " -num-blocks 0").exit_code, 1);
  EXPECT_EQ(run(engine + " -block-size 0").exit_code, 1);
  EXPECT_EQ(run(engine + " -events 3 -num-blocks 2").exit_code, 1);
  EXPECT_EQ(run(engine + " -start-token -1").exit_code, 1);
  EXPECT_EQ(run(engine + " -interval 0s").exit_code, 1);
  const auto unknown = run(engine + " --no-such-flag");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("flag provided but not defined"), std::string::npos);
  EXPECT_EQ(run(engine + " -num-blocks abc").exit_code, 2);
  EXPECT_EQ(run(engine + " -interval 5parsecs").exit_code, 2);
  EXPECT_EQ(run(engine + " --era Z").exit_code, 2);
  EXPECT_EQ(run(engine + " -h").exit_code, 0);
  EXPECT_EQ(run(engine + " --help").exit_code, 0);
}

TEST(FakeEngineCli, HttpFlagsAreValidated) {
  EXPECT_EQ(run(engine + " --http-port 0 --dialect tgi").exit_code, 2);
  EXPECT_EQ(run(engine + " --http-port 0 --vllm-shape nested").exit_code, 2);
  EXPECT_EQ(run(engine + " --http-port 70000").exit_code, 1);
  EXPECT_EQ(run(engine + " --http-port -1").exit_code, 1);
  EXPECT_EQ(run(engine + " --http-port 0 --metrics-file /nonexistent/metrics").exit_code, 1);
  EXPECT_EQ(run(engine + " --http-port 0 --http-host 256.0.0.1").exit_code, 1);
  const auto help = run(engine + " --help");
  for (const char* flag : {"--http-port", "--http-host", "--dialect", "--vllm-shape",
                           "--events-disabled", "--model", "--metrics-file"}) {
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
  }
  // With events off nothing is published, and the run still ends after --count.
  const auto off = run(engine + " --http-port 0 --events-disabled --count 2 -interval 1ms");
  EXPECT_EQ(off.exit_code, 0) << off.output;
  EXPECT_NE(off.output.find("events=disabled"), std::string::npos) << off.output;
  EXPECT_EQ(off.output.find("fake engine publishing"), std::string::npos) << off.output;
}

TEST(FakeEngineCli, RandomWorkloadInEveryEra) {
  for (const char* era : {"A", "B", "C", "D", "E", "F", "G", "H", "I", "S1", "S2", "S3", "S4"}) {
    const auto r = run(engine + " --bind tcp://127.0.0.1:* --workload random --rate 10000"
                                " --count 20 --lora-adapters 2 --hybrid --cpu-offload --era " +
                       era);
    EXPECT_EQ(r.exit_code, 0) << era << ": " << r.output;
    EXPECT_NE(r.output.find("published=20"), std::string::npos) << era;
  }
}

TEST(PolicyServerCli, FlagsAndUsage) {
  EXPECT_EQ(run(server + " --help").exit_code, 0);
  EXPECT_EQ(run(server + " --no-such-flag").exit_code, 2);
  EXPECT_EQ(run(server + " --min-matched-tokens x").exit_code, 2);
  EXPECT_EQ(run(server + " --tls-cert /nonexistent --tls-key /nonexistent").exit_code, 2);
  EXPECT_EQ(run(server + " --listen 256.1.1.1:1").exit_code, 1);
}

}  // namespace
