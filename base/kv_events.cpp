// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/kv_events.hpp"

#include <xxhash.h>

namespace kvrelay {

uint64_t index_key(const engine_hash& h) noexcept {
  if (!h.is_bytes()) return h.value;
  return XXH3_64bits(h.bytes.data(), h.bytes.size());
}

}  // namespace kvrelay
