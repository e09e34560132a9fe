// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "daemon/version.hpp"

#include <caf/config.hpp>
#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>
#include <zmq.h>

#include <sstream>

#include "base/build_info.hpp"
#include "base/metrics_registry.hpp"
#include "base/process_metrics.hpp"

namespace kvrelay {

namespace {

struct versions {
  std::string caf, zmq, grpc, protobuf;
};

versions current() {
  int zmq_major = 0, zmq_minor = 0, zmq_patch = 0;
  zmq_version(&zmq_major, &zmq_minor, &zmq_patch);  // the loaded libzmq, not the header
  versions v;
  v.caf = std::to_string(CAF_MAJOR_VERSION) + '.' + std::to_string(CAF_MINOR_VERSION) + '.' +
          std::to_string(CAF_PATCH_VERSION);
  v.zmq = std::to_string(zmq_major) + '.' + std::to_string(zmq_minor) + '.' +
          std::to_string(zmq_patch);
  v.grpc = grpc::Version();
  v.protobuf = google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
  return v;
}

}  // namespace

std::string version_report() {
  const auto v = current();
  std::ostringstream out;
  out << "kvrelay " << KVRELAY_VERSION << '\n'
      << "revision " << build::revision() << '\n'
      << "build date " << build::date() << " (the commit's time)\n"
      << "CAF " << v.caf << '\n'
      << "libzmq " << v.zmq << '\n'
      << "gRPC " << v.grpc << '\n'
      << "protobuf " << v.protobuf << '\n';
  return out.str();
}

void add_exporter_metrics(metrics_registry& m) {
  const auto v = current();
  m.gauge("kvrelay_build_info", "Always 1; the labels say which kvrelay and libraries run",
          {{"version", KVRELAY_VERSION},
           {"revision", build::revision()},
           {"build_date", build::date()},
           {"caf", v.caf},
           {"grpc", v.grpc},
           {"zmq", v.zmq},
           {"protobuf", v.protobuf}})
      .set(1);
  add_process_collector(m);
}

}  // namespace kvrelay
