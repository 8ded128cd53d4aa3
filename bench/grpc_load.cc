// grpc_load: GetPlan throughput and latency of rematd's gRPC service under
// concurrent clients.
//
// Runs the real daemon (planner/service/daemon.h: the real PlannerService
// and PlannerCore) in process on a free loopback port, registers a
// 26-block model, seeds it with samples, and drives GetPlan from 1, 4, 16
// and 64 client threads (one channel each, like separate trainers) with
// three mixes:
//   hit    every request hits the plan cache (32 warm keys, cycled);
//   miss   every request has a new budget, so the estimator and the exact
//          solver run (misses of one model serialise on its lock);
//   mixed  9 hits to 1 miss.
// Prints one JSON line per (clients, mix):
//   {"bench":"grpc_load","clients":N,"mix":"hit","plans_per_s":...,
//    "p50_us":...,"p99_us":...,"errors":0}
// Plan-decision log lines are off (log level warn) so stderr is not timed.
//
// Flags: --seconds S per run (default 1.5).
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "planner/service/config.h"
#include "planner/service/daemon.h"
#include "planner/service/logging.h"
#include "proto/remat.grpc.pb.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kLayers = 24;
constexpr int64_t kGiB = int64_t{1} << 30;

v1::ModelSpec BenchModel() {
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
  for (int i = 0; i < kLayers; ++i) add(absl::StrCat("layer", i), true);
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
  s.set_base_bytes(2 * kGiB);
  return s;
}

v1::GetPlanRequest Request(double batch, double seq, int64_t budget) {
  v1::GetPlanRequest r;
  r.set_model("bench");
  (*r.mutable_features())["batch"] = batch;
  (*r.mutable_features())["seq"] = seq;
  r.set_budget_bytes(budget);
  return r;
}

struct RunResult {
  double plans_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  uint64_t errors = 0;
};

RunResult Run(const std::string& address, int clients, const std::string& mix,
              double seconds, std::atomic<int64_t>* unique_budget) {
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<uint64_t> errors{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      // A distinct channel per client (separate connections, like trainers).
      args.SetInt("remat.bench.client", c);
      auto stub = v1::Planner::NewStub(grpc::CreateCustomChannel(
          address, grpc::InsecureChannelCredentials(), args));
      std::vector<v1::GetPlanRequest> warm;
      for (int k = 0; k < 32; ++k) {
        warm.push_back(Request(1 + k % 8, 128 + 8 * (k / 8) * 16, 12 * kGiB));
      }
      std::vector<double>& mine = latencies[c];
      mine.reserve(100000);
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const bool miss =
            mix == "miss" || (mix == "mixed" && (i + c) % 10 == 0);
        v1::GetPlanRequest request =
            miss ? Request(1 + (i + c) % 8, 128 + 8 * ((i * 7 + c) % 48),
                           8 * kGiB + 4096 * unique_budget->fetch_add(1))
                 : warm[(i + c) % warm.size()];
        v1::GetPlanResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(5));
        const auto start = Clock::now();
        const grpc::Status s = stub->GetPlan(&context, request, &response);
        const double us =
            std::chrono::duration<double, std::micro>(Clock::now() - start)
                .count();
        if (!s.ok() || response.decision() != v1::PLAN ||
            (!miss && !response.from_cache())) {
          ++errors;
        }
        mine.push_back(us);
      }
    });
  }
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  RunResult r;
  r.errors = errors;
  if (!all.empty()) {
    r.plans_per_s = all.size() / elapsed;
    r.p50_us = all[all.size() / 2];
    r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return r;
}

int Main(int argc, char** argv) {
  double seconds = 1.5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0)
      seconds = std::atof(argv[i + 1]);
  }
  // Debian's abseil checks every Mutex acquisition for lock-order cycles
  // (a debug aid that showed up as ~5% of GetPlan's CPU); the service's
  // lock order is fixed and tested, so skip the bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  InitLogging("text", "warn");
  v1::DaemonConfig config = DefaultDaemonConfig();
  config.set_listen("127.0.0.1:0");
  config.set_metrics_port(-1);
  Daemon daemon(config);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "grpc_load: cannot start the daemon: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  const std::string address = absl::StrCat("127.0.0.1:", daemon.grpc_port());
  auto stub = v1::Planner::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext c;
    v1::RegisterModelRequest r;
    *r.mutable_model() = BenchModel();
    v1::RegisterModelResponse resp;
    if (!stub->RegisterModel(&c, r, &resp).ok()) return 1;
  }
  {
    grpc::ClientContext c;
    v1::ReportSamplesRequest r;
    r.set_model("bench");
    for (double batch : {1, 2, 3, 4, 6, 8}) {
      for (double seq = 64; seq <= 640; seq += 32) {
        *r.add_samples() = BenchSample(kLayers + 2, batch, seq);
      }
    }
    v1::ReportSamplesResponse resp;
    grpc::Status s = stub->ReportSamples(&c, r, &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "grpc_load: seeding failed: %s\n",
                   s.error_message().c_str());
      return 1;
    }
  }
  // Warm the cache keys the "hit" mix cycles through.
  for (int k = 0; k < 32; ++k) {
    grpc::ClientContext c;
    v1::GetPlanResponse resp;
    grpc::Status s = stub->GetPlan(
        &c, Request(1 + k % 8, 128 + 8 * (k / 8) * 16, 12 * kGiB), &resp);
    if (!s.ok() || resp.decision() != v1::PLAN) {
      std::fprintf(stderr, "grpc_load: warm-up plan failed: %s %s\n",
                   s.error_message().c_str(), resp.collect_reason().c_str());
      return 1;
    }
  }
  std::atomic<int64_t> unique_budget{0};
  uint64_t total_errors = 0;
  for (const char* mix : {"hit", "mixed", "miss"}) {
    for (int clients : {1, 4, 16, 64}) {
      const RunResult r = Run(address, clients, mix, seconds, &unique_budget);
      total_errors += r.errors;
      std::printf(
          "{\"bench\":\"grpc_load\",\"clients\":%d,\"mix\":\"%s\","
          "\"plans_per_s\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
          "\"errors\":%llu}\n",
          clients, mix, r.plans_per_s, r.p50_us, r.p99_us,
          static_cast<unsigned long long>(r.errors));
      std::fflush(stdout);
    }
  }
  daemon.Shutdown();
  daemon.Wait();
  return total_errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) { return remat::Main(argc, argv); }
