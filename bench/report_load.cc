// report_load: how long ReportSamples takes when several trainers of one
// model report at once (the data-parallel ranks of a job reach their
// collecting steps together), and how long a plan takes meanwhile.
//
// Each report refits the model's estimator, which for a model of hundreds
// of blocks takes about a second. The daemon fits the batches that arrive
// together in one refit (PlannerCore::AddSamples, a group commit) outside
// the model's lock, so N reports at once should cost about one refit each
// round of the worker pool rather than N in a row.
//
// Runs the real daemon (planner/service/daemon.h) in this process on a free
// loopback port with its log in a temporary directory (every report is
// synced to disk, as in production), registers bench_model.h's model with
// --blocks blocks and seeds it with 114 samples, then for each level of
// --clients: --rounds rounds in which that many clients, each on its own
// channel, send one sample each at the same moment, while one more client
// asks for plans the cache cannot have (a new budget each time, every
// 10 ms). One JSON line per level:
//   {"bench":"report_load","blocks":200,"clients":8,"worker_threads":4,
//    "rounds":3,"report_ms":{"p50":..,"max":..},
//    "get_plan_miss_ms":{"p50":..,"max":..,"calls":..},"errors":0}
// report_ms: every report's latency over the rounds (from the common start
// to its reply). A level of 1 client is the cost of one refit.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "bench/bench_model.h"
#include "planner/service/config.h"
#include "planner/service/daemon.h"
#include "planner/service/logging.h"
#include "proto/remat.grpc.pb.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<v1::Planner::Stub> NewStub(const std::string& address) {
  return v1::Planner::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

int Main(int argc, char** argv) {
  CLI::App app{"ReportSamples latency with several trainers of one model"};
  int blocks = 200;
  int rounds = 3;
  std::vector<int> levels = {1, 4, 8};
  app.add_option("--blocks", blocks, "Blocks of the model (default 200)")
      ->check(CLI::Range(2, 4096));
  app.add_option("--rounds", rounds, "Rounds per level (default 3)")
      ->check(CLI::Range(1, 100));
  app.add_option("--clients", levels, "Clients reporting at once, per level")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  InitLogging("text", "warn");
  char dir_template[] = "/tmp/report_load.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string dir = dir_template;
  v1::DaemonConfig config = DefaultDaemonConfig();
  config.set_listen("127.0.0.1:0");
  config.set_metrics_port(-1);
  config.set_state_dir(dir);
  int status = 0;
  {
    Daemon daemon(config);
    if (absl::Status s = daemon.Start(); !s.ok()) {
      std::fprintf(stderr, "report_load: cannot start the daemon: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
    const std::string address =
        absl::StrCat("127.0.0.1:", daemon.grpc_port());
    auto stub = NewStub(address);
    if (absl::Status s = RegisterAndSeed(*stub, blocks); !s.ok()) {
      std::fprintf(stderr, "report_load: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
    int next_seq = 65;  // every reported sample is new
    int64_t next_budget = int64_t{40} << 30;
    for (const int clients : levels) {
      std::vector<std::unique_ptr<v1::Planner::Stub>> stubs;
      for (int c = 0; c < clients; ++c) stubs.push_back(NewStub(address));
      auto prober = NewStub(address);
      std::vector<double> report_ms, plan_ms;
      std::atomic<int> errors{0};
      for (int round = 0; round < rounds; ++round) {
        std::vector<v1::ReportSamplesRequest> requests(clients);
        for (auto& r : requests) {
          r.set_model("bench");
          *r.add_samples() = BenchSample(blocks, 5, next_seq++);
        }
        std::vector<double> ms(clients, 0);
        std::atomic<int> pending{clients};
        const Clock::time_point start = Clock::now();
        std::vector<std::thread> threads;
        for (int c = 0; c < clients; ++c) {
          threads.emplace_back([&, c] {
            grpc::ClientContext context;
            v1::ReportSamplesResponse resp;
            if (!stubs[c]->ReportSamples(&context, requests[c], &resp).ok()) {
              ++errors;
            }
            ms[c] = MsSince(start);
            --pending;
          });
        }
        while (pending > 0) {
          grpc::ClientContext context;
          v1::GetPlanRequest r;
          r.set_model("bench");
          (*r.mutable_features())["batch"] = 4;
          (*r.mutable_features())["seq"] = 256;
          r.set_budget_bytes(next_budget += 4096);
          v1::GetPlanResponse resp;
          const Clock::time_point asked = Clock::now();
          if (!prober->GetPlan(&context, r, &resp).ok()) ++errors;
          plan_ms.push_back(MsSince(asked));
          // A trainer asks once a step, not in a spin: the prober must not
          // take the CPU the refit needs.
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        for (auto& t : threads) t.join();
        report_ms.insert(report_ms.end(), ms.begin(), ms.end());
      }
      std::printf(
          "{\"bench\":\"report_load\",\"blocks\":%d,\"clients\":%d,"
          "\"worker_threads\":%d,\"rounds\":%d,"
          "\"report_ms\":{\"p50\":%.1f,\"max\":%.1f},"
          "\"get_plan_miss_ms\":{\"p50\":%.1f,\"max\":%.1f,\"calls\":%zu},"
          "\"errors\":%d}\n",
          blocks, clients, config.worker_threads(), rounds,
          Percentile(report_ms, 0.5), Percentile(report_ms, 1.0),
          Percentile(plan_ms, 0.5), Percentile(plan_ms, 1.0), plan_ms.size(),
          errors.load());
      std::fflush(stdout);
      if (errors > 0) status = 1;
    }
    daemon.Shutdown();
  }
  std::filesystem::remove_all(dir);
  return status;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) { return remat::Main(argc, argv); }
