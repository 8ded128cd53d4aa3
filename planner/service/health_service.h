// grpc.health.v1.Health on rematd's async server (async_server.h).
//
// gRPC's built-in health service (grpc::EnableDefaultHealthCheckService) is
// a callback service, which in the gRPC of Debian 12 (1.51) brings a
// polling thread of its own into every call's I/O: measured with
// bench:grpc_load, it halved GetPlan throughput. This one runs on the
// server's completion queue: Check answers on the I/O thread, Watch is
// event driven (no thread per watcher).
//
// Statuses are per service name; "" is the server as a whole. A name never
// set is unknown: Check answers NOT_FOUND, Watch sends SERVICE_UNKNOWN.
// Watch sends the current status, then every change, until the client
// cancels or the service shuts down (then it ends with UNAVAILABLE).
//
// Thread safety: every method may be called from any thread.
#ifndef REMAT_PLANNER_SERVICE_HEALTH_SERVICE_H_
#define REMAT_PLANNER_SERVICE_HEALTH_SERVICE_H_

#include <memory>
#include <string>

#include "proto/health.grpc.pb.h"

namespace remat {

class ServingQueue;  // async_server.h

class HealthService final {
 public:
  // At most `max_watchers` Watch calls at once; more get
  // RESOURCE_EXHAUSTED.
  explicit HealthService(int max_watchers = 256);
  ~HealthService();

  // The async service to register with the server builder.
  grpc::health::v1::Health::AsyncService* async_service() {
    return &async_service_;
  }
  // Starts answering Check and Watch on `queue` (after the server started).
  void Serve(ServingQueue* queue);

  // Another service with its own async service (to register with a second
  // server) that answers from these statuses: a status set through either
  // is answered by both at once, and Shutdown of either shuts both down.
  // Watchers of both count against one max_watchers.
  std::unique_ptr<HealthService> Share();

  void SetServingStatus(const std::string& service, bool serving);
  // Sets every known service NOT_SERVING for good and ends every Watch once
  // it has been told, so the server's shutdown need not wait for watchers.
  void Shutdown();

  grpc::Status Check(const grpc::health::v1::HealthCheckRequest& request,
                     grpc::health::v1::HealthCheckResponse* response) const;

  struct State;  // shared with the calls in flight and with Share()

 private:
  explicit HealthService(std::shared_ptr<State> state);

  grpc::health::v1::Health::AsyncService async_service_;
  std::shared_ptr<State> state_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_HEALTH_SERVICE_H_
