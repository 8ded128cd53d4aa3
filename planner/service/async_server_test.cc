#include "planner/service/async_server.h"

#include <grpcpp/alarm.h>
#include <grpcpp/server_builder.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>

namespace remat {
namespace {

// Counts its completions.
struct CountingTag final : CompletionTag {
  void Complete(bool) override { ++completions; }
  std::atomic<int> completions{0};
};

TEST_CASE("a serving queue starts no operation once it is shut down") {
  grpc::ServerBuilder builder;  // a server completion queue needs a builder
  ServingQueue queue(builder.AddCompletionQueue());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  std::thread io([&] { queue.Run(); });

  CountingTag tag;
  grpc::Alarm before;
  CHECK(queue.StartOp([&] {
    before.Set(queue.cq(), std::chrono::system_clock::now(), &tag);
  }));
  server->Shutdown();
  queue.Shutdown();
  // gRPC would abort the process on an operation started now.
  bool ran = false;
  grpc::Alarm after;
  CHECK_FALSE(queue.StartOp([&] {
    ran = true;
    after.Set(queue.cq(), std::chrono::system_clock::now(), &tag);
  }));
  CHECK_FALSE(ran);
  io.join();  // Run returns once what was queued has completed
  CHECK(tag.completions == 1);
}

}  // namespace
}  // namespace remat
