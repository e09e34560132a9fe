#pragma once
// Hash and equality for the shard's packed hash-set slots: structs whose `key` is a u64 engine
// hash and whose payload is mutable, so a flat_hash_set serves as a map without the padding a
// std::pair<const uint64_t, V> would add. Transparent: look-ups take the bare key.

#include <absl/hash/hash.h>

#include <cstddef>
#include <cstdint>

namespace kvrelay::detail {

template <class Slot>
struct u64_slot_hash {
  using is_transparent = void;
  size_t operator()(uint64_t k) const noexcept { return absl::Hash<uint64_t>{}(k); }
  size_t operator()(const Slot& s) const noexcept { return (*this)(uint64_t{s.key}); }
};

template <class Slot>
struct u64_slot_eq {
  using is_transparent = void;
  static uint64_t key(uint64_t k) noexcept { return k; }
  static uint64_t key(const Slot& s) noexcept { return s.key; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    return key(a) == key(b);
  }
};

}  // namespace kvrelay::detail
