// rematd as a library: the planning core, the gRPC server (Planner, health,
// optional reflection), the health-only gRPC server (health_listen), the
// metrics endpoint and the write-ahead log, with the start and shutdown
// sequences. rematd_main.cc adds flags and signals;
// benchmarks embed it directly.
//
// Start: bind every endpoint (TCP over TLS when tls_cert is set; the unix
// socket after its directory is checked and a stale socket removed, with
// unix_socket_mode from the start: see unix_socket.h; the health listener,
// plaintext, with the Health service only), health NOT_SERVING -> replay
// the log into the core (refits; a torn or corrupt tail is cut off with a
// warning) -> health SERVING -> write the port file.
// Shutdown: health NOT_SERVING (on every endpoint at once) -> stop
// accepting, give in-flight calls up to grace_seconds -> stop the health
// listener (it answers NOT_SERVING until then) -> stop metrics. Every acknowledged write is already synced,
// so there is nothing left to flush.
//
// Thread safety: Start once; Shutdown and Wait may be called from any
// thread; Shutdown is idempotent.
#ifndef REMAT_PLANNER_SERVICE_DAEMON_H_
#define REMAT_PLANNER_SERVICE_DAEMON_H_

#include <grpcpp/server.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "planner/core.h"
#include "planner/service/async_server.h"
#include "planner/service/health_service.h"
#include "planner/service/http_server.h"
#include "planner/service/metrics.h"
#include "planner/service/service.h"
#include "planner/service/wal.h"
#include "proto/config.pb.h"
#include "proto/remat.grpc.pb.h"

namespace remat {

class Daemon {
 public:
  // `config` must have passed ValidateDaemonConfig.
  explicit Daemon(v1::DaemonConfig config);
  ~Daemon();  // Shuts down.

  // Replays the log, imports `import_files` (profiles `remat export`
  // wrote, or directories of *.profile files; rematd --import), then
  // serves. A file that cannot be imported is an error naming it.
  absl::Status Start(const std::vector<std::string>& import_files = {});
  // Bound ports (after Start); 0 when that endpoint is off.
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  int health_port() const { return health_port_; }
  // What the log replay found (after Start).
  const WalRecovery& recovery() const { return recovery_; }

  void Shutdown();
  // Blocks until the server has shut down.
  void Wait();

  PlannerCore& core() { return *core_; }
  Metrics& metrics() { return metrics_; }

 private:
  // Starts answering every Planner method: GetPlan's cache hits on the I/O
  // thread, ReportSamples on the report workers, the rest on the workers.
  void ServePlanner();
  // Counts a call answered without its handler as one of `method`'s.
  std::function<void(const grpc::Status&)> CountAs(const char* method);
  HttpResponse HandleHttp(const std::string& path);
  absl::Status WritePortFile() const;
  // Imports one profile file (rematd --import) through the service.
  absl::Status ImportFile(const std::string& path);
  // Binds health_listen: a server of its own with only health_listener_.
  absl::Status StartHealthListener();
  void StopHealthListener();

  const v1::DaemonConfig config_;
  std::unique_ptr<PlannerCore> core_;
  Metrics metrics_;
  std::unique_ptr<Wal> wal_;
  std::unique_ptr<PlannerService> service_;
  // Declared before server_: the services and the queue must outlive it.
  v1::Planner::AsyncService planner_async_;
  HealthService health_;
  std::unique_ptr<ServingQueue> queue_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerPool> workers_;
  // ReportSamples only. A report returns once its batch is fitted, and the
  // reports of one model share a refit (PlannerCore::AddSamples), so all
  // but one of them wait, holding their thread, while it runs (half a
  // second for a few hundred blocks). On a pool of their own they never
  // hold a thread a plan miss or any other call needs.
  std::unique_ptr<WorkerPool> report_workers_;
  std::thread io_thread_;
  // The health listener (health_listen): health_'s statuses, served by a
  // server that has no other service. Declared in the same order.
  std::unique_ptr<HealthService> health_listener_;
  std::unique_ptr<ServingQueue> health_queue_;
  std::unique_ptr<grpc::Server> health_server_;
  std::thread health_io_thread_;
  std::unique_ptr<HttpServer> http_;
  WalRecovery recovery_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int health_port_ = 0;
  std::atomic<bool> serving_{false};
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_DAEMON_H_
