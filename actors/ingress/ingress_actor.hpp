#pragma once
// The ingress actor: owns the ZMQ thread (zmq_source) of one engine source and forwards what it
// delivers straight to the decoder (anon_send from the ZMQ thread: no hop through this actor's
// mailbox on the hot path). The actor itself publishes the thread's counters, answers status,
// and dies with an error when the thread fails so the supervisor restarts the data path.

#include <memory>
#include <mutex>

#include "actors/ingress/zmq_source.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {


/// Lets the decoder return credits to whichever zmq_source is current (it is replaced when the
/// ingress restarts), without either actor touching the other's state.
class credit_line {
 public:
  void attach(std::shared_ptr<ingress::zmq_source> s) {
    std::lock_guard<std::mutex> lk(mu_);
    src_ = std::move(s);
  }
  void credit(uint32_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    if (src_) src_->credit(n);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<ingress::zmq_source> src_;
};

struct ingress_options {
  ingress::zmq_source_options source;
};

/// Spawns the ingress. An unusable endpoint makes it quit with an error at once (the
/// supervisor's restart backoff is the retry).
ingress_actor spawn_ingress(caf::actor_system& sys, const pipeline_context& ctx,
                            const ingress_options& opts, decoder_actor decoder,
                            std::shared_ptr<credit_line> credits);

}  // namespace kvrelay
