// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/holder_set.hpp"

#include <absl/container/flat_hash_map.h>

#include <utility>
#include <vector>

namespace kvrelay {

struct holder_set::impl {
  // Adapter names are interned: a name per key would cost more than the key itself.
  absl::flat_hash_map<std::string, uint32_t> adapter_ids;
  std::vector<std::string> adapter_names;
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, uint64_t> masks;

  uint32_t intern(const std::string& adapter) {
    auto [it, inserted] =
        adapter_ids.try_emplace(adapter, static_cast<uint32_t>(adapter_names.size()));
    if (inserted) adapter_names.push_back(adapter);
    return it->second;
  }

  // Lookups must not intern: an unknown adapter simply has no holders.
  const uint32_t* id_of(const std::string& adapter) const {
    auto it = adapter_ids.find(adapter);
    return it == adapter_ids.end() ? nullptr : &it->second;
  }
};

holder_set::holder_set() : impl_(std::make_unique<impl>()) {}
holder_set::~holder_set() = default;
holder_set::holder_set(holder_set&&) noexcept = default;
holder_set& holder_set::operator=(holder_set&&) noexcept = default;

bool holder_set::add(const std::string& adapter, uint64_t fingerprint, unsigned rank) {
  if (rank >= max_ranks) return false;
  uint64_t& mask = impl_->masks[{impl_->intern(adapter), fingerprint}];
  const bool first = mask == 0;
  mask |= uint64_t{1} << rank;
  return first;
}

bool holder_set::remove(const std::string& adapter, uint64_t fingerprint, unsigned rank) {
  if (rank >= max_ranks) return false;
  const uint32_t* id = impl_->id_of(adapter);
  if (id == nullptr) return false;
  auto it = impl_->masks.find(std::make_pair(*id, fingerprint));
  const uint64_t bit = uint64_t{1} << rank;
  if (it == impl_->masks.end() || (it->second & bit) == 0) return false;
  it->second &= ~bit;
  if (it->second != 0) return false;
  impl_->masks.erase(it);
  return true;
}

uint64_t holder_set::holders(const std::string& adapter, uint64_t fingerprint) const {
  const uint32_t* id = impl_->id_of(adapter);
  if (id == nullptr) return 0;
  auto it = impl_->masks.find(std::make_pair(*id, fingerprint));
  return it == impl_->masks.end() ? 0 : it->second;
}

size_t holder_set::clear_rank(
    unsigned rank, const std::function<void(const std::string&, uint64_t)>& fn) {
  if (rank >= max_ranks) return 0;
  const uint64_t bit = uint64_t{1} << rank;
  size_t released = 0;
  for (auto it = impl_->masks.begin(); it != impl_->masks.end();) {
    if ((it->second & bit) == 0) {
      ++it;
      continue;
    }
    it->second &= ~bit;
    if (it->second != 0) {
      ++it;
      continue;
    }
    if (fn) fn(impl_->adapter_names[it->first.first], it->first.second);
    ++released;
    impl_->masks.erase(it++);  // absl: erase(iterator) returns void; post-increment stays valid
  }
  return released;
}

void holder_set::clear() {
  impl_->masks.clear();
  impl_->adapter_ids.clear();
  impl_->adapter_names.clear();
}

size_t holder_set::size() const noexcept { return impl_->masks.size(); }

}  // namespace kvrelay
