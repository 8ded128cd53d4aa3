#include "tests/raw_client.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "client/remote_planner.h"
#include "planner/service/convert.h"

namespace remat {
namespace testing {
namespace {

// Generous: under ThreadSanitizer, beside other tests on two cores, the
// hard chain's ReportSamples once failed with a 20 s deadline (status not
// recorded; most likely the deadline).
void Deadline(grpc::ClientContext* c) {
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

}  // namespace

RawClient::RawClient(const std::string& address)
    : stub_(v1::Planner::NewStub(MakeDaemonChannel(address))) {}

grpc::Status RawClient::Register(const v1::ModelSpec& model) {
  grpc::ClientContext c;
  Deadline(&c);
  v1::RegisterModelRequest r;
  *r.mutable_model() = model;
  v1::RegisterModelResponse resp;
  return stub_->RegisterModel(&c, r, &resp);
}

grpc::Status RawClient::Register(const ModelSpec& spec) {
  return Register(ToProto(spec));
}

grpc::Status RawClient::Samples(const v1::ReportSamplesRequest& request,
                                v1::ReportSamplesResponse* response) {
  grpc::ClientContext c;
  Deadline(&c);
  v1::ReportSamplesResponse ignored;
  return stub_->ReportSamples(&c, request,
                              response != nullptr ? response : &ignored);
}

grpc::Status RawClient::Samples(const ModelSpec& spec,
                                const std::vector<Sample>& samples,
                                v1::ReportSamplesResponse* response) {
  return Samples(SamplesRequest(spec, samples), response);
}

grpc::Status RawClient::Outcome(const v1::ReportOutcomeRequest& request) {
  grpc::ClientContext c;
  Deadline(&c);
  v1::ReportOutcomeResponse resp;
  return stub_->ReportOutcome(&c, request, &resp);
}

grpc::Status RawClient::Plan(const std::string& model, double batch,
                             double seq, int64_t budget_bytes,
                             v1::GetPlanResponse* response,
                             std::chrono::milliseconds deadline) {
  grpc::ClientContext c;
  if (deadline.count() > 0) {
    c.set_deadline(std::chrono::system_clock::now() + deadline);
  } else {
    Deadline(&c);
  }
  return Plan(&c, model, batch, seq, budget_bytes, response);
}

grpc::Status RawClient::Plan(grpc::ClientContext* context,
                             const std::string& model, double batch,
                             double seq, int64_t budget_bytes,
                             v1::GetPlanResponse* response) {
  v1::GetPlanRequest r;
  r.set_model(model);
  (*r.mutable_features())["batch"] = batch;
  (*r.mutable_features())["seq"] = seq;
  r.set_budget_bytes(budget_bytes);
  return stub_->GetPlan(context, r, response);
}

v1::GetModelStateResponse RawClient::State(const std::string& model) {
  grpc::ClientContext c;
  Deadline(&c);
  v1::GetModelStateRequest r;
  r.set_model(model);
  v1::GetModelStateResponse resp;
  const grpc::Status s = stub_->GetModelState(&c, r, &resp);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return resp;
}

size_t RawClient::NumModels() {
  grpc::ClientContext c;
  Deadline(&c);
  v1::ListModelsResponse resp;
  REQUIRE(stub_->ListModels(&c, v1::ListModelsRequest(), &resp).ok());
  return static_cast<size_t>(resp.models_size());
}

v1::ModelSpec ToProto(const ModelSpec& spec) {
  v1::ModelSpec p;
  ModelSpecToProto(spec, &p);
  return p;
}

v1::ReportSamplesRequest SamplesRequest(const ModelSpec& spec,
                                        const std::vector<Sample>& samples) {
  v1::ReportSamplesRequest r;
  r.set_model(spec.name);
  for (const Sample& s : samples) SampleToProto(spec, s, r.add_samples());
  return r;
}

}  // namespace testing
}  // namespace remat
