// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Versions kvrelay was built with and runs with (for --version, /debug and kvrelay_build_info).

#include <string>

namespace kvrelay {

class metrics_registry;

/// "kvrelay X.Y.Z", "revision <git commit>", "build date <the commit's time>", then one
/// "name version" line per runtime dependency (CAF, libzmq, gRPC, protobuf), each read from the
/// library actually loaded where it can be.
std::string version_report();

/// What every exporter is expected to show:
/// kvrelay_build_info{version,revision,build_date,caf,grpc,zmq,protobuf} 1
/// and the process_* families (read from /proc when scraped).
void add_exporter_metrics(metrics_registry& m);

}  // namespace kvrelay
