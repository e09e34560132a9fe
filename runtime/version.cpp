#include "runtime/version.hpp"

#include <caf/config.hpp>
#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>
#include <zmq.h>

#include <sstream>

namespace kvrelay {

std::string version_report() {
  std::ostringstream out;
  int zmq_major = 0, zmq_minor = 0, zmq_patch = 0;
  zmq_version(&zmq_major, &zmq_minor, &zmq_patch);  // the loaded libzmq, not the header
  out << "kvrelay " << KVRELAY_VERSION << '\n'
      << "CAF " << CAF_MAJOR_VERSION << '.' << CAF_MINOR_VERSION << '.' << CAF_PATCH_VERSION << '\n'
      << "libzmq " << zmq_major << '.' << zmq_minor << '.' << zmq_patch << '\n'
      << "gRPC " << grpc::Version() << '\n'
      << "protobuf "
      << google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION) << '\n';
  return out.str();
}

}  // namespace kvrelay
