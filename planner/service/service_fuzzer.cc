// Fuzzes rematd's RPC handlers (PlannerService, planner/service/service.h):
// each request's conversion (convert.h) and the PlannerCore call behind it,
// through the public handlers, with a real core, a write-ahead log in a
// temporary directory and metrics.
//
// Input: a sequence of calls, each one selector byte, a 2-byte
// little-endian length and that many bytes of the request message in
// protobuf's binary encoding. The selector picks the RPC (selector % 7):
// RegisterModel, ReportSamples, GetPlan, ReportOutcome, ExplainPlan,
// GetModelState, ListModels. make_service_fuzzer_seeds.py writes the seeds.
//
// At most kMaxCalls calls and kMaxSamples samples per input. After each
// call: a rejected call left every model's state unchanged, and
// so did every read; an accepted write changed it as documented (a new
// model, N more samples, one more outcome); a plan has one action per block
// of the model, in its order, keeps the non-checkpointable blocks and, for
// COLLECT, recomputes every other one; no call ends INTERNAL or UNKNOWN (an
// exception or a broken invariant inside). At the end, the log replayed into
// a fresh core rebuilds the same states.
#include <grpc/grpc.h>
#include <grpcpp/server_context.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "planner/core.h"
#include "planner/service/config.h"
#include "planner/service/convert.h"
#include "planner/service/logging.h"
#include "planner/service/metrics.h"
#include "planner/service/service.h"
#include "planner/service/wal.h"
#include "proto/remat.pb.h"
#include "proto/wal.pb.h"
#include "third_party/fuzz/fuzz_util.h"

namespace {

using remat::v1::Action;

constexpr int kMaxCalls = 24;
// Samples per input, across its ReportSamples calls (the rest are dropped):
// every accepted batch refits the estimator, the bulk of a run's time.
constexpr int kMaxSamples = 48;

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    REMAT_FUZZ_CHECK(m.SerializeToCodedStream(&coded));
  }
  return out;
}

struct ModelSnapshot {
  std::string name;
  std::string state;  // GetModelStateResponse without the cache
  uint64_t num_samples = 0;
  uint64_t outcomes = 0;
  uint64_t out_of_memory = 0;
};

std::vector<ModelSnapshot> Snapshot(const remat::PlannerCore& core) {
  std::vector<ModelSnapshot> out;
  std::vector<std::string> names = core.ListModels();
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto state = core.GetModelState(name);
    REMAT_FUZZ_CHECK(state.ok());
    remat::v1::GetModelStateResponse proto;
    remat::ModelStateToProto(*state, remat::PlanCacheStats{}, &proto);
    proto.clear_cache();
    out.push_back({name, Deterministic(proto), proto.num_samples(),
                   proto.outcomes(), proto.out_of_memory()});
  }
  return out;
}

bool Same(const std::vector<ModelSnapshot>& a,
          const std::vector<ModelSnapshot>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].state != b[i].state) return false;
  }
  return true;
}

const ModelSnapshot* Find(const std::vector<ModelSnapshot>& s,
                          const std::string& name) {
  for (const ModelSnapshot& m : s) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

void CheckStatus(const grpc::Status& s) {
  REMAT_FUZZ_CHECK(s.error_code() != grpc::StatusCode::INTERNAL);
  REMAT_FUZZ_CHECK(s.error_code() != grpc::StatusCode::UNKNOWN);
}

// A plan for `spec`: one block per model block, named and ordered alike.
void CheckPlan(const remat::ModelSpec& spec, const remat::v1::Plan& plan,
               bool collect) {
  REMAT_FUZZ_CHECK(plan.blocks_size() == static_cast<int>(spec.blocks.size()));
  for (int i = 0; i < plan.blocks_size(); ++i) {
    const remat::v1::BlockPlan& b = plan.blocks(i);
    REMAT_FUZZ_CHECK(b.block() == spec.blocks[i].name);
    REMAT_FUZZ_CHECK(b.action() == remat::v1::KEEP ||
                     b.action() == remat::v1::RECOMPUTE ||
                     b.action() == remat::v1::OFFLOAD);
    if (!spec.blocks[i].checkpointable) {
      REMAT_FUZZ_CHECK(b.action() == remat::v1::KEEP);
    } else if (collect) {
      REMAT_FUZZ_CHECK(b.action() == remat::v1::RECOMPUTE);
    }
  }
  REMAT_FUZZ_CHECK(plan.recompute_ns() >= 0);
}

std::shared_ptr<const remat::ModelSpec> SpecOf(const remat::PlannerCore& core,
                                               const std::string& model) {
  auto spec = core.GetModelSpec(model);
  REMAT_FUZZ_CHECK(spec.ok());
  return *spec;
}

// The daemon's defaults with a short solve: the fuzzer checks what a
// request does to the daemon's state, not how good a plan is, and inputs
// whose samples carry a host link would otherwise spend the whole 40 ms
// deadline in the search with OFFLOAD, run after run.
remat::CoreOptions FuzzCoreOptions() {
  remat::CoreOptions options = remat::ToCoreOptions(remat::DefaultDaemonConfig());
  options.solve_time_limit_ms = 2;
  return options;
}

class Harness {
 public:
  Harness()
      : path_(remat::fuzz::TempDir::Path() + "/rematd.wal"),
        core_(std::make_unique<remat::PlannerCore>(
            FuzzCoreOptions())) {
    ::unlink(path_.c_str());
    remat::WalRecovery recovery;
    auto wal = remat::Wal::Open(
        path_, [](absl::string_view) {}, &recovery);
    REMAT_FUZZ_CHECK(wal.ok());
    wal_ = *std::move(wal);
    remat::ServiceLimits limits;
    // Small, so that one input stays fast; the checks are the daemon's.
    limits.max_models = 8;
    limits.max_blocks_per_model = 64;
    limits.max_samples_per_request = 64;
    limits.wal_compact_bytes = 64 << 10;
    service_ = std::make_unique<remat::PlannerService>(
        core_.get(), wal_.get(), &metrics_, limits);
    service_->SetReady(true);
  }

  ~Harness() {
    service_.reset();
    wal_.reset();
    ::unlink(path_.c_str());
  }

  void Call(uint8_t selector, const uint8_t* data, size_t size) {
    const std::vector<ModelSnapshot> before = Snapshot(*core_);
    grpc::ServerContext context;
    switch (selector % 7) {
      case 0: {
        remat::v1::RegisterModelRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        remat::v1::RegisterModelResponse response;
        const grpc::Status s =
            service_->RegisterModel(&context, &request, &response);
        CheckStatus(s);
        const auto after = Snapshot(*core_);
        if (!s.ok() || !response.created()) {
          REMAT_FUZZ_CHECK(Same(before, after));
          return;
        }
        REMAT_FUZZ_CHECK(after.size() == before.size() + 1);
        REMAT_FUZZ_CHECK(Find(before, request.model().name()) == nullptr);
        auto spec = SpecOf(*core_, request.model().name());
        const remat::ModelSpec want =
            remat::ModelSpecFromProto(request.model());
        REMAT_FUZZ_CHECK(spec->feature_names == want.feature_names);
        REMAT_FUZZ_CHECK(spec->blocks.size() == want.blocks.size());
        for (size_t i = 0; i < want.blocks.size(); ++i) {
          REMAT_FUZZ_CHECK(spec->blocks[i].name == want.blocks[i].name);
          REMAT_FUZZ_CHECK(spec->blocks[i].checkpointable ==
                           want.blocks[i].checkpointable);
        }
        return;
      }
      case 1: {
        remat::v1::ReportSamplesRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        const int room = std::max(0, kMaxSamples - samples_sent_);
        if (request.samples_size() > room) {
          request.mutable_samples()->DeleteSubrange(
              room, request.samples_size() - room);
        }
        samples_sent_ += request.samples_size();
        remat::v1::ReportSamplesResponse response;
        const grpc::Status s =
            service_->ReportSamples(&context, &request, &response);
        CheckStatus(s);
        const auto after = Snapshot(*core_);
        if (!s.ok()) {
          REMAT_FUZZ_CHECK(Same(before, after));
          return;
        }
        REMAT_FUZZ_CHECK(response.accepted() ==
                         static_cast<uint32_t>(request.samples_size()));
        const ModelSnapshot* was = Find(before, request.model());
        const ModelSnapshot* now = Find(after, request.model());
        REMAT_FUZZ_CHECK(was != nullptr && now != nullptr);
        REMAT_FUZZ_CHECK(now->num_samples ==
                         std::min<uint64_t>(was->num_samples +
                                                response.accepted(),
                                            100000));
        return;
      }
      case 2: {
        remat::v1::GetPlanRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        remat::v1::GetPlanResponse response;
        grpc::Status s;
        auto cached = service_->GetPlanIfCached(&context, &request, &response);
        if (cached) {
          s = *cached;
        } else {
          s = service_->GetPlanUncached(&context, &request, &response);
        }
        CheckStatus(s);
        REMAT_FUZZ_CHECK(Same(before, Snapshot(*core_)));
        if (!s.ok()) return;
        const bool collect = response.decision() == remat::v1::COLLECT;
        REMAT_FUZZ_CHECK(collect || response.decision() == remat::v1::PLAN);
        auto spec = SpecOf(*core_, request.model());
        CheckPlan(*spec, response.plan(), collect);
        REMAT_FUZZ_CHECK(response.bucket_size() ==
                         static_cast<int>(spec->feature_names.size()));
        REMAT_FUZZ_CHECK(response.bucket_features_size() ==
                         static_cast<int>(spec->feature_names.size()));
        // Asked again (now from the cache, when it was cached): the same.
        remat::v1::GetPlanResponse second;
        grpc::ServerContext context2;
        auto again = service_->GetPlanIfCached(&context2, &request, &second);
        grpc::Status s2 =
            again ? *again
                  : service_->GetPlanUncached(&context2, &request, &second);
        REMAT_FUZZ_CHECK(s2.ok());
        REMAT_FUZZ_CHECK(second.decision() == response.decision());
        REMAT_FUZZ_CHECK(second.plan().blocks_size() ==
                         response.plan().blocks_size());
        for (int i = 0; i < second.plan().blocks_size(); ++i) {
          REMAT_FUZZ_CHECK(second.plan().blocks(i).action() ==
                           response.plan().blocks(i).action());
        }
        return;
      }
      case 3: {
        remat::v1::ReportOutcomeRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        remat::v1::ReportOutcomeResponse response;
        const grpc::Status s =
            service_->ReportOutcome(&context, &request, &response);
        CheckStatus(s);
        const auto after = Snapshot(*core_);
        if (!s.ok()) {
          REMAT_FUZZ_CHECK(Same(before, after));
          return;
        }
        const ModelSnapshot* was = Find(before, request.model());
        const ModelSnapshot* now = Find(after, request.model());
        REMAT_FUZZ_CHECK(was != nullptr && now != nullptr);
        REMAT_FUZZ_CHECK(now->outcomes == was->outcomes + 1);
        REMAT_FUZZ_CHECK(now->out_of_memory ==
                         was->out_of_memory + (request.out_of_memory() ? 1 : 0));
        REMAT_FUZZ_CHECK(now->num_samples == was->num_samples);
        return;
      }
      case 4: {
        remat::v1::ExplainPlanRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        remat::v1::ExplainPlanResponse response;
        const grpc::Status s =
            service_->ExplainPlan(&context, &request, &response);
        CheckStatus(s);
        REMAT_FUZZ_CHECK(Same(before, Snapshot(*core_)));
        if (!s.ok()) return;
        auto spec = SpecOf(*core_, request.model());
        CheckPlan(*spec, response.plan(), /*collect=*/false);
        REMAT_FUZZ_CHECK(response.budget_bytes() == request.budget_bytes());
        REMAT_FUZZ_CHECK(response.headroom_bytes() ==
                         response.budget_bytes() -
                             response.plan().predicted_peak_bytes());
        return;
      }
      case 5: {
        remat::v1::GetModelStateRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        remat::v1::GetModelStateResponse response;
        const grpc::Status s =
            service_->GetModelState(&context, &request, &response);
        CheckStatus(s);
        REMAT_FUZZ_CHECK(Same(before, Snapshot(*core_)));
        if (!s.ok()) return;
        REMAT_FUZZ_CHECK(response.model().name() == request.model());
        const ModelSnapshot* m = Find(before, request.model());
        REMAT_FUZZ_CHECK(m != nullptr);
        REMAT_FUZZ_CHECK(response.num_samples() == m->num_samples);
        return;
      }
      default: {
        remat::v1::ListModelsRequest request;
        remat::v1::ListModelsResponse response;
        const grpc::Status s =
            service_->ListModels(&context, &request, &response);
        REMAT_FUZZ_CHECK(s.ok());
        REMAT_FUZZ_CHECK(response.models_size() ==
                         static_cast<int>(before.size()));
        for (int i = 0; i < response.models_size(); ++i) {
          REMAT_FUZZ_CHECK(response.models(i).name() == before[i].name);
          REMAT_FUZZ_CHECK(response.models(i).num_samples() ==
                           before[i].num_samples);
        }
        return;
      }
    }
  }

  // The log replayed into a fresh core gives the same states.
  void CheckReplay() {
    service_.reset();
    wal_.reset();
    remat::PlannerCore replayed(
        FuzzCoreOptions());
    remat::WalRecovery recovery;
    auto wal = remat::Wal::Open(
        path_,
        [&](absl::string_view payload) {
          remat::v1::WalRecord record;
          REMAT_FUZZ_CHECK(record.ParseFromArray(
              payload.data(), static_cast<int>(payload.size())));
          REMAT_FUZZ_CHECK(remat::ApplyWalRecord(&replayed, record).ok());
        },
        &recovery);
    REMAT_FUZZ_CHECK(wal.ok());
    REMAT_FUZZ_CHECK(recovery.dropped_bytes == 0);
    REMAT_FUZZ_CHECK(Same(Snapshot(*core_), Snapshot(replayed)));
  }

 private:
  const std::string path_;
  std::unique_ptr<remat::PlannerCore> core_;
  std::unique_ptr<remat::Wal> wal_;
  remat::Metrics metrics_;
  std::unique_ptr<remat::PlannerService> service_;
  int samples_sent_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  remat::InitLogging("text", "error");
  grpc_init();  // once: ServerContext would otherwise init gRPC per call
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness harness;
  size_t pos = 0;
  for (int calls = 0; calls < kMaxCalls && pos + 3 <= size; ++calls) {
    const uint8_t selector = data[pos];
    const size_t length = data[pos + 1] | (size_t{data[pos + 2]} << 8);
    pos += 3;
    const size_t n = std::min(length, size - pos);
    harness.Call(selector, data + pos, n);
    pos += n;
  }
  harness.CheckReplay();
  return 0;
}
