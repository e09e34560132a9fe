// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-route-probe: asks a policy server what a router would get for a prompt, the way a
// gateway does it: fingerprint the prompt's tokens block by block (actors/shard/fingerprint.hpp)
// and send the chain in LookupRouteRequest.block_hashes. Used by the demo and by operators to
// check that hints land.
//   kvrelay-route-probe --server 127.0.0.1:9090 --model m [--tenant t] [--adapter a]
//                       --block-size 128 --tokens 5000-5255[,7,8,...]
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace ic = inferencecache::v1alpha1;

namespace {

// "5000-5255,7,8" → 5000..5255, 7, 8
bool parse_tokens(const std::string& s, std::vector<uint32_t>& out) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? s.size() : comma + 1;
    if (part.empty()) continue;
    char* end = nullptr;
    unsigned long a = std::strtoul(part.c_str(), &end, 10);
    unsigned long b = a;
    if (*end == '-') b = std::strtoul(end + 1, &end, 10);
    if (*end != '\0' || b < a || b > 0xffffffffUL) return false;
    for (unsigned long t = a; t <= b; ++t) out.push_back(static_cast<uint32_t>(t));
  }
  return true;
}

int usage() {
  std::cerr << "usage: kvrelay-route-probe --server HOST:PORT --model ID [--tenant ID] "
               "[--adapter NAME] [--scheme vllm] --block-size N --tokens A-B[,C,...]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = "127.0.0.1:9090", model, tenant, adapter, scheme = "vllm", tokens_arg;
  int64_t block_size = 16;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string bs;
    if (a == "--server" && value(server)) continue;
    if (a == "--model" && value(model)) continue;
    if (a == "--tenant" && value(tenant)) continue;
    if (a == "--adapter" && value(adapter)) continue;
    if (a == "--scheme" && value(scheme)) continue;
    if (a == "--tokens" && value(tokens_arg)) continue;
    if (a == "--block-size" && value(bs)) {
      block_size = std::atoll(bs.c_str());
      continue;
    }
    return usage();
  }
  std::vector<uint32_t> tokens;
  if (model.empty() || block_size <= 0 || !parse_tokens(tokens_arg, tokens)) return usage();

  auto q = kvrelay::fingerprint::query(tokens, block_size);
  ic::LookupRouteRequest req;
  req.set_model_id(model);
  req.set_tenant_id(tenant);
  req.set_hash_scheme(scheme);
  req.set_adapter_id(adapter);
  for (auto& h : q.block_hashes) req.add_block_hashes(h);
  for (auto c : q.block_token_counts) req.add_block_token_counts(c);

  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  auto stub = ic::InferenceCache::NewStub(
      grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ic::LookupRouteResponse resp;
  auto status = stub->LookupRoute(&ctx, req, &resp);
  if (!status.ok()) {
    std::cerr << "LookupRoute failed: " << status.error_code() << " " << status.error_message()
              << "\n";
    return 1;
  }
  std::cout << "prompt: " << tokens.size() << " tokens, " << q.block_hashes.size()
            << " full blocks of " << block_size << " -> " << resp.reason_code() << "\n";
  for (const auto& s : resp.replica_scores())
    std::cout << "  replica " << s.replica_id() << ": matched_tokens=" << s.matched_tokens()
              << " score=" << s.score() << " tier=" << ic::CacheTier_Name(s.tier()) << "\n";
  return 0;
}
