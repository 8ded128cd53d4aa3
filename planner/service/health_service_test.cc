#include "planner/service/health_service.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "planner/service/async_server.h"

namespace remat {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// A server with only the health service, on a free loopback port, drained
// by one I/O thread, like rematd's.
class HealthServer {
 public:
  explicit HealthServer(HealthService* health) {
    grpc::ServerBuilder builder;
    builder.RegisterService(health->async_service());
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    queue_ = std::make_unique<ServingQueue>(builder.AddCompletionQueue());
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    health->Serve(queue_.get());
    io_ = std::thread([this] { queue_->Run(); });
  }
  ~HealthServer() {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    queue_->Shutdown();
    io_.join();
  }
  std::unique_ptr<Health::Stub> Stub() const {
    return Health::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port_),
        grpc::InsecureChannelCredentials()));
  }

 private:
  int port_ = 0;
  std::unique_ptr<ServingQueue> queue_;
  std::unique_ptr<grpc::Server> server_;
  std::thread io_;
};

TEST_CASE("watchers see every change; cancelled watchers leave cleanly") {
  HealthService health;
  health.SetServingStatus("svc", false);
  HealthServer server(&health);
  auto stub = server.Stub();

  // Watchers that read a few updates and cancel, racing status flips.
  // Catch2's assertions are not thread-safe: the watchers count what they
  // saw, checked after the join.
  std::atomic<int> saw_serving{0};
  std::atomic<int> unknown_not_told{0};
  std::vector<std::thread> watchers;
  for (int w = 0; w < 24; ++w) {
    watchers.emplace_back([&, w] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(20));
      HealthCheckRequest request;
      request.set_service(w % 4 == 0 ? "unknown" : "svc");
      auto reader = stub->Watch(&context, request);
      HealthCheckResponse response;
      for (int i = 0; i < 3 && reader->Read(&response); ++i) {
        if (response.status() == HealthCheckResponse::SERVING) ++saw_serving;
        if (w % 4 == 0) {
          if (response.status() != HealthCheckResponse::SERVICE_UNKNOWN) {
            ++unknown_not_told;
          }
          break;
        }
      }
      context.TryCancel();
      reader->Finish();
    });
  }
  for (int flip = 0; flip < 200; ++flip) {
    health.SetServingStatus("svc", flip % 2 == 0);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  health.SetServingStatus("svc", true);
  for (std::thread& t : watchers) t.join();
  CHECK(unknown_not_told == 0);
  CHECK(saw_serving > 0);

  // Check agrees.
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("svc");
  HealthCheckResponse response;
  REQUIRE(stub->Check(&context, request, &response).ok());
  CHECK(response.status() == HealthCheckResponse::SERVING);
}

TEST_CASE("Shutdown tells every watcher NOT_SERVING, then ends the watch") {
  HealthService health;
  health.SetServingStatus("", true);
  HealthServer server(&health);
  auto stub = server.Stub();
  std::vector<std::thread> watchers;
  // Catch2's assertions are not thread-safe: the watchers count what they
  // saw, checked after the join.
  std::atomic<int> told{0};
  std::atomic<int> ready{0};
  std::atomic<int> first_serving{0};
  std::atomic<int> unavailable{0};
  for (int w = 0; w < 8; ++w) {
    watchers.emplace_back([&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(20));
      auto reader = stub->Watch(&context, HealthCheckRequest());
      HealthCheckResponse response;
      const bool first = reader->Read(&response);
      if (first && response.status() == HealthCheckResponse::SERVING) {
        ++first_serving;
      }
      ++ready;
      while (first && reader->Read(&response)) {
        if (response.status() == HealthCheckResponse::NOT_SERVING) ++told;
      }
      const grpc::Status s = reader->Finish();
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) ++unavailable;
    });
  }
  while (ready < 8) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  health.Shutdown();
  for (std::thread& t : watchers) t.join();
  CHECK(first_serving == 8);
  CHECK(unavailable == 8);
  CHECK(told == 8);
  // Nothing turns SERVING after Shutdown.
  health.SetServingStatus("", true);
  grpc::ClientContext context;
  HealthCheckResponse response;
  REQUIRE(stub->Check(&context, HealthCheckRequest(), &response).ok());
  CHECK(response.status() == HealthCheckResponse::NOT_SERVING);
}

TEST_CASE("watchers cancelled while the server shuts down") {
  // The cancellations' events reach the watchers around the queue's
  // shutdown; a watcher that then started its finish aborted the process
  // (gRPC refuses operations on a shut-down queue).
  for (int round = 0; round < 20; ++round) {
    HealthService health;
    health.SetServingStatus("", true);
    auto server = std::make_unique<HealthServer>(&health);
    auto stub = server->Stub();
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>>
        open;
    for (int w = 0; w < 4; ++w) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      open.push_back(stub->Watch(contexts.back().get(), HealthCheckRequest()));
      HealthCheckResponse response;
      REQUIRE(open.back()->Read(&response));
    }
    for (auto& context : contexts) context->TryCancel();
    if (round % 2 == 0) health.SetServingStatus("", false);
    server.reset();  // must neither abort nor hang
    for (auto& reader : open) {
      CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
    }
  }
}

TEST_CASE("watchers beyond the limit get RESOURCE_EXHAUSTED") {
  HealthService health(/*max_watchers=*/2);
  health.SetServingStatus("", true);
  HealthServer server(&health);
  auto stub = server.Stub();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>> open;
  for (int w = 0; w < 2; ++w) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    open.push_back(stub->Watch(contexts.back().get(), HealthCheckRequest()));
    HealthCheckResponse response;
    REQUIRE(open.back()->Read(&response));
  }
  grpc::ClientContext context;
  auto third = stub->Watch(&context, HealthCheckRequest());
  HealthCheckResponse response;
  CHECK_FALSE(third->Read(&response));
  CHECK(third->Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (size_t w = 0; w < open.size(); ++w) {
    contexts[w]->TryCancel();
    open[w]->Finish();
  }
}

}  // namespace
}  // namespace remat
