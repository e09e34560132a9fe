#pragma once
// The edge where typed status becomes JSON (the admin port and the tests' view of it).

#include <string>

#include "base/status.hpp"

namespace kvrelay {

/// One actor's status as a JSON object: name, supervision fields, state, kind, mailbox, its own
/// fields, then "children" (only when it has any).
std::string render_json(const actor_status& s);

}  // namespace kvrelay
