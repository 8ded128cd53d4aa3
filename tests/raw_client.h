// Test support: the remat.v1.Planner API through the raw generated stub,
// one call at a time with a generous deadline. For requests the real
// client (RemotePlanner) would refuse to send, and for reading the exact
// status a daemon answers.
#ifndef REMAT_TESTS_RAW_CLIENT_H_
#define REMAT_TESTS_RAW_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "planner/model.h"
#include "proto/remat.grpc.pb.h"

namespace remat {
namespace testing {

class RawClient {
 public:
  explicit RawClient(const std::string& address);

  grpc::Status Register(const v1::ModelSpec& model);
  grpc::Status Register(const ModelSpec& spec);
  grpc::Status Samples(const v1::ReportSamplesRequest& request,
                       v1::ReportSamplesResponse* response = nullptr);
  grpc::Status Samples(const ModelSpec& spec, const std::vector<Sample>& samples,
                       v1::ReportSamplesResponse* response = nullptr);
  grpc::Status Outcome(const v1::ReportOutcomeRequest& request);
  // GetPlan for features {batch, seq}, with the generous deadline unless
  // `deadline` is given.
  grpc::Status Plan(const std::string& model, double batch, double seq,
                    int64_t budget_bytes, v1::GetPlanResponse* response,
                    std::chrono::milliseconds deadline = {});
  // The same in the caller's context (to cancel it, or set its deadline).
  grpc::Status Plan(grpc::ClientContext* context, const std::string& model,
                    double batch, double seq, int64_t budget_bytes,
                    v1::GetPlanResponse* response);
  // GetModelState; fails the test when the call fails.
  v1::GetModelStateResponse State(const std::string& model);
  size_t NumModels();

 private:
  std::unique_ptr<v1::Planner::Stub> stub_;
};

v1::ModelSpec ToProto(const ModelSpec& spec);
v1::ReportSamplesRequest SamplesRequest(const ModelSpec& spec,
                                        const std::vector<Sample>& samples);

}  // namespace testing
}  // namespace remat

#endif  // REMAT_TESTS_RAW_CLIENT_H_
