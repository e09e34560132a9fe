#pragma once
// Versions kvrelay was built with and runs with (for --version and /debug).

#include <string>

namespace kvrelay {

/// "kvrelay X.Y.Z" followed by one "name version" line per runtime dependency
/// (CAF, libzmq, gRPC, protobuf), each read from the library actually loaded where it can be.
std::string version_report();

}  // namespace kvrelay
