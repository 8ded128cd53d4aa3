// Daemon::Shutdown with calls in flight: the I/O thread may still hand an
// accepted call to the workers after the server's shutdown has returned, so
// the worker pool must outlive the I/O thread (a pool destroyed first is a
// use after free; a task posted to a stopped pool leaks its call). The
// window is narrow: this exercises the shutdown path under ASan and TSan
// with calls on both the workers and the I/O thread, it does not reliably
// hit that window.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/service/config.h"
#include "planner/service/daemon.h"
#include "planner/service/logging.h"
#include "proto/remat.grpc.pb.h"

namespace remat {
namespace {

TEST_CASE("shutdown while many calls are in flight on the workers") {
  InitLogging("text", "error");
  for (int round = 0; round < 20; ++round) {
    v1::DaemonConfig config = DefaultDaemonConfig();
    config.set_listen("127.0.0.1:0");
    config.set_metrics_port(-1);
    config.set_grace_seconds(0);
    config.set_worker_threads(1);
    auto daemon = std::make_unique<Daemon>(config);
    REQUIRE(daemon->Start().ok());
    const std::string address =
        absl::StrCat("127.0.0.1:", daemon->grpc_port());
    std::atomic<bool> stop{false};
    std::atomic<int> answered{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 8; ++t) {
      clients.emplace_back([&, t] {
        auto stub = v1::Planner::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
        while (!stop) {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(10));
          grpc::Status s;
          if (t % 2 == 0) {  // answered on the workers
            v1::ListModelsResponse response;
            s = stub->ListModels(&context, v1::ListModelsRequest(), &response);
          } else {  // an unknown model: answered on the I/O thread
            v1::GetPlanRequest request;
            request.set_model("absent");
            v1::GetPlanResponse response;
            s = stub->GetPlan(&context, request, &response);
          }
          if (s.error_code() != grpc::StatusCode::UNAVAILABLE) ++answered;
        }
      });
    }
    while (answered < 40) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    daemon->Shutdown();
    daemon.reset();
    stop = true;
    for (std::thread& c : clients) c.join();
  }
}

}  // namespace
}  // namespace remat
