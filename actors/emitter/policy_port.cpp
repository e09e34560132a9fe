// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/emitter/policy_port.hpp"

#include <iterator>
#include <utility>

namespace kvrelay::emitter {

void port_inbox::push(port_event e, size_t min_batch) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    items_.push_back(std::move(e));
    if (woken_ || !wake_ || items_.size() < min_batch) return;
    woken_ = true;
    wake = wake_;
  }
  wake();  // outside the lock: it sends a message, which may take locks of its own
}

void port_inbox::take(std::vector<port_event>& out) {
  out.clear();
  std::lock_guard<std::mutex> lk(mu_);
  // Moved, not swapped: each buffer stays with one side (items_ is only touched under the lock,
  // `out` only by the actor), so no buffer the actor read goes back to the RPC threads. Swapping
  // them handed the actor's last-read buffer to a pushing thread, ordered only through CAF's
  // scheduling, which ThreadSanitizer cannot see (it reported a race on a port_event).
  out.insert(out.end(), std::make_move_iterator(items_.begin()),
             std::make_move_iterator(items_.end()));
  items_.clear();
  woken_ = false;
}

void port_inbox::flush() {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (woken_ || !wake_ || items_.empty()) return;
    woken_ = true;
    wake = wake_;
  }
  wake();
}

void deferred_completions::arrive(port_event e) {
  const size_t batch = e.code != 0 ? 1 : batch_;
  inbox_->push(std::move(e), batch);
}

void deferred_completions::depart() {
  // acq_rel: the last one to count down sees every push that was counted down before it.
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inbox_->flush();
}

void port_inbox::bind(std::function<void()> wake) {
  std::function<void()> now;
  {
    std::lock_guard<std::mutex> lk(mu_);
    wake_ = std::move(wake);
    woken_ = false;
    if (wake_ && !items_.empty()) {
      woken_ = true;
      now = wake_;
    }
  }
  if (now) now();
}

}  // namespace kvrelay::emitter
