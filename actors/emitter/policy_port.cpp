#include "actors/emitter/policy_port.hpp"

#include <utility>

namespace kvrelay::emitter {

void port_inbox::push(port_event e) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    items_.push_back(std::move(e));
    if (items_.size() != 1 || !wake_) return;
    wake = wake_;
  }
  wake();  // outside the lock: it sends a message, which may take locks of its own
}

void port_inbox::take(std::vector<port_event>& out) {
  out.clear();
  std::lock_guard<std::mutex> lk(mu_);
  out.swap(items_);
}

void port_inbox::bind(std::function<void()> wake) {
  std::function<void()> now;
  {
    std::lock_guard<std::mutex> lk(mu_);
    wake_ = std::move(wake);
    if (wake_ && !items_.empty()) now = wake_;
  }
  if (now) now();
}

}  // namespace kvrelay::emitter
