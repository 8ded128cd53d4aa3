#include "planner/service/status_convert.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

TEST_CASE("every canonical code and its message survive both directions") {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status a(static_cast<absl::StatusCode>(code),
                         code == 0 ? "" : "field: what went wrong");
    const grpc::Status g = ToGrpcStatus(a);
    REQUIRE(static_cast<int>(g.error_code()) == code);
    if (code != 0) REQUIRE(g.error_message() == "field: what went wrong");
    const absl::Status back = FromGrpcStatus(g);
    REQUIRE(back == a);
  }
}

TEST_CASE("the codes the daemon uses map by name") {
  REQUIRE(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(ToGrpcStatus(absl::NotFoundError("x")).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  REQUIRE(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code() ==
          grpc::StatusCode::FAILED_PRECONDITION);
  REQUIRE(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code() ==
          grpc::StatusCode::RESOURCE_EXHAUSTED);
  REQUIRE(ToGrpcStatus(absl::AlreadyExistsError("x")).error_code() ==
          grpc::StatusCode::ALREADY_EXISTS);
  REQUIRE(absl::IsUnavailable(
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone"))));
}

TEST_CASE("an out-of-range code becomes UNKNOWN") {
  const absl::Status odd(static_cast<absl::StatusCode>(99), "odd");
  REQUIRE(ToGrpcStatus(odd).error_code() == grpc::StatusCode::UNKNOWN);
  // 20: past the canonical codes, yet a value grpc::StatusCode can hold (its
  // enumerators span -1..16, so its values -32..31; 42 would be undefined).
  const grpc::Status g(static_cast<grpc::StatusCode>(20), "odd");
  REQUIRE(absl::IsUnknown(FromGrpcStatus(g)));
}

}  // namespace
}  // namespace remat
