#include "bench/bench_model.h"

#include <grpcpp/client_context.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace remat {

v1::ModelSpec BenchModel(int blocks) {
  v1::ModelSpec m;
  m.set_name("bench");
  m.add_feature_names("batch");
  m.add_feature_names("seq");
  auto add = [&m](const std::string& name, bool checkpointable) {
    v1::Block* b = m.add_blocks();
    b->set_name(name);
    b->set_checkpointable(checkpointable);
  };
  add("embed", false);
  for (int i = 0; i < blocks - 2; ++i) add(absl::StrCat("layer", i), true);
  add("head", true);
  return m;
}

v1::Sample BenchSample(int blocks, double batch, double seq) {
  v1::Sample s;
  (*s.mutable_features())["batch"] = batch;
  (*s.mutable_features())["seq"] = seq;
  const double tokens = batch * seq;
  for (int i = 0; i < blocks; ++i) {
    v1::BlockMeasurement* b = s.add_blocks();
    b->set_act_bytes(static_cast<int64_t>(8192 * (1 + i % 3) * tokens +
                                          96 * batch * seq * 16 + 4096));
    b->set_input_bytes(static_cast<int64_t>(2048 * tokens));
    b->set_forward_ns(static_cast<int64_t>(150 * (1 + i % 2) * tokens + 8000));
  }
  s.set_base_bytes(int64_t{2} << 30);
  return s;
}

absl::Status RegisterAndSeed(v1::Planner::Stub& stub, int blocks) {
  {
    grpc::ClientContext c;
    v1::RegisterModelRequest r;
    *r.mutable_model() = BenchModel(blocks);
    v1::RegisterModelResponse resp;
    if (grpc::Status s = stub.RegisterModel(&c, r, &resp); !s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("registering the model: ", s.error_message()));
    }
  }
  grpc::ClientContext c;
  v1::ReportSamplesRequest r;
  r.set_model("bench");
  for (double batch : {1, 2, 3, 4, 6, 8}) {
    for (double seq = 64; seq <= 640; seq += 32) {
      *r.add_samples() = BenchSample(blocks, batch, seq);
    }
  }
  v1::ReportSamplesResponse resp;
  if (grpc::Status s = stub.ReportSamples(&c, r, &resp); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("seeding samples: ", s.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace remat
