#pragma once
// What the admin port needs to know about one pipeline without asking its actors: a few atomics
// the actors set and the HTTP threads read. (Per-actor detail goes through `status` requests.)

#include <atomic>
#include <cstdint>
#include <string>

namespace kvrelay {

struct pipeline_health {
  std::string name;  // pipeline name, e.g. "vllm-0" or "vllm-0-dp1"
  std::atomic<bool> first_batch_decoded{false};
  std::atomic<bool> catchup_done{false};
  std::atomic<bool> server_ok{false};       // the last unit or stats RPC succeeded
  std::atomic<bool> engine_connected{false};
  std::atomic<uint64_t> last_seq{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> events{0};
  std::atomic<bool> unhealthy{false};       // the pipeline kept failing; retried slowly

  bool ready() const {
    return (first_batch_decoded.load() || catchup_done.load()) && server_ok.load() &&
           !unhealthy.load();
  }
};

}  // namespace kvrelay
