#include "planner/service/status_convert.h"

#include <string>

namespace remat {
namespace {

// Both enums list the 17 canonical codes with the same numbers; anything
// else (a future code) is UNKNOWN rather than undefined behaviour.
constexpr int kMaxCanonicalCode = 16;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > kMaxCanonicalCode) code = grpc::StatusCode::UNKNOWN;
  return grpc::Status(static_cast<grpc::StatusCode>(code),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kMaxCanonicalCode) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      status.error_message());
}

}  // namespace remat
