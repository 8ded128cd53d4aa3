#include "planner/service/daemon.h"

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/server_builder.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/service/config.h"
#include "planner/service/convert.h"
#include "planner/service/logging.h"
#include "planner/service/status_convert.h"
#include "planner/service/unix_socket.h"
#include "proto/wal.pb.h"

namespace remat {
namespace {

constexpr char kPlannerServiceName[] = "remat.v1.Planner";
// Consecutive sample records of one model are replayed as one AddSamples
// (one refit) up to this many samples.
constexpr size_t kReplayBatchSamples = 20000;

// The device type a samples record's batch was measured on (its samples
// all name one): batches of different device types never merge.
const std::string& SamplesDevice(const v1::WalRecord& record) {
  static const std::string kNone;
  const auto& samples = record.samples().samples();
  return samples.empty() ? kNone : samples[0].device();
}
// Largest request the health listener reads: a HealthCheckRequest is a
// service name.
constexpr int kHealthMaxMessageBytes = 4096;

// Linking gRPC's reflection library registers its plugin with every server
// builder (a static initializer), so reflection would always be on; this
// option takes it out again unless the config asks for it.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(
      std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins)
      override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == "proto_server_reflection";
                       }),
        plugins->end());
  }
};

// The contents of a PEM file named by a config field.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* field,
                                    const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, " (", flag, "): cannot read \"", path, "\""));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN ") == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, " (", flag, "): \"", path, "\" holds no PEM block"));
  }
  return ss.str();
}

// TLS for the TCP listen address; plaintext when tls_cert is not set.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const v1::DaemonConfig& c) {
  if (c.tls_cert().empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadPem(c.tls_cert(), "tls_cert", "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(c.tls_key(), "tls_key", "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(
      c.tls_client_ca().empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!c.tls_client_ca().empty()) {
    auto ca = ReadPem(c.tls_client_ca(), "tls_client_ca", "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  options.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  return grpc::SslServerCredentials(options);
}

ServiceLimits ToLimits(const v1::DaemonConfig& c) {
  ServiceLimits l;
  l.max_models = c.limits().max_models();
  l.max_blocks_per_model = c.limits().max_blocks_per_model();
  l.max_samples_per_request = c.limits().max_samples_per_request();
  l.wal_compact_bytes = c.wal_compact_bytes();
  return l;
}

}  // namespace

Daemon::Daemon(v1::DaemonConfig config) : config_(std::move(config)) {}

Daemon::~Daemon() { Shutdown(); }

absl::Status Daemon::Start(const std::vector<std::string>& import_files) {
  core_ = std::make_unique<PlannerCore>(ToCoreOptions(config_));

  // The log must be open before the service exists (the service appends to
  // it), but replaying it needs the core only; records are collected here
  // and applied once every endpoint is bound.
  std::vector<v1::WalRecord> records;
  if (!config_.state_dir().empty()) {
    ::mkdir(config_.state_dir().c_str(), 0700);
    const std::string path = config_.state_dir() + "/wal.log";
    uint64_t unparsable = 0;
    auto wal = Wal::Open(
        path,
        [&](absl::string_view payload) {
          v1::WalRecord r;
          if (r.ParseFromArray(payload.data(),
                               static_cast<int>(payload.size()))) {
            records.push_back(std::move(r));
          } else {
            ++unparsable;
          }
        },
        &recovery_);
    if (!wal.ok()) return wal.status();
    wal_ = *std::move(wal);
    if (recovery_.dropped_bytes > 0) {
      LogEvent(spdlog::level::warn, "wal_tail_truncated",
               {{"path", path},
                {"reason", recovery_.dropped_reason},
                {"dropped_bytes", recovery_.dropped_bytes},
                {"kept_records", recovery_.records}});
    }
    if (unparsable > 0) {
      LogEvent(spdlog::level::warn, "wal_records_unparsable",
               {{"path", path}, {"count", unparsable}});
    }
  }

  service_ = std::make_unique<PlannerService>(core_.get(), wal_.get(),
                                              &metrics_, ToLimits(config_));
  // Our health service replaces gRPC's (see health_service.h).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  if (config_.reflection()) {
    // A synchronous service: with it on, the server also runs gRPC's
    // synchronous thread pool (slower plan-cache hits; see async_server.h).
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  } else {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  builder.SetMaxReceiveMessageSize(config_.limits().max_message_bytes());
  builder.RegisterService(&planner_async_);
  builder.RegisterService(health_.async_service());
  // NOT_SERVING until the state is loaded.
  health_.SetServingStatus("", false);
  health_.SetServingStatus(kPlannerServiceName, false);
  if (!config_.listen().empty()) {
    auto credentials = TcpCredentials(config_);
    if (!credentials.ok()) return credentials.status();
    builder.AddListeningPort(config_.listen(), *credentials, &grpc_port_);
  }
  // The unix socket is plaintext: its mode and directory decide who may
  // connect.
  const std::string socket_path =
      config_.unix_socket().empty()
          ? ""
          : UnixSocketTarget(config_.unix_socket()).substr(5);
  uint32_t socket_mode = 0;
  if (!socket_path.empty()) {
    if (!ParseSocketMode(config_.unix_socket_mode(), &socket_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unix_socket_mode (--unix-socket-mode): \"",
          config_.unix_socket_mode(), "\" is not octal permission bits"));
    }
    bool removed_stale = false;
    if (auto s = PrepareUnixSocketPath(socket_path, &removed_stale); !s.ok()) {
      return s;
    }
    if (removed_stale) {
      LogEvent(spdlog::level::warn, "stale_socket_removed",
               {{"path", socket_path}});
    }
    builder.AddListeningPort(UnixSocketTarget(config_.unix_socket()),
                             grpc::InsecureServerCredentials());
  }
  queue_ = std::make_unique<ServingQueue>(builder.AddCompletionQueue());
  {
    // gRPC creates the socket file in bind() during BuildAndStart, with mode
    // 0777 & ~umask. Setting the umask around it gives the socket its mode
    // from its first moment; a chmod afterwards would leave a window in
    // which the socket carries the looser umask-derived mode (0777 under
    // umask 0), and a client that connected then would stay connected.
    // The umask is per process, but no other rematd thread creates files
    // now: the log is open already, and the workers and the metrics server
    // start later.
    std::optional<ScopedUmask> umask;
    if (!socket_path.empty()) umask.emplace(~socket_mode & 0777);
    server_ = builder.BuildAndStart();
  }
  if (server_ == nullptr || (!config_.listen().empty() && grpc_port_ == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve on listen=\"", config_.listen(), "\" unix_socket=\"",
        config_.unix_socket(),
        "\" (in use, no permission, or TLS files gRPC cannot use)"));
  }
  if (!socket_path.empty()) {
    struct stat st;
    if (::lstat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      return absl::InternalError(absl::StrCat(
          "unix_socket (--unix-socket): \"", socket_path,
          "\" is not there after binding"));
    }
    if ((st.st_mode & 0777) != socket_mode &&
        ::chmod(socket_path.c_str(), socket_mode) != 0) {
      return absl::InternalError(absl::StrCat(
          "unix_socket_mode (--unix-socket-mode): cannot chmod \"",
          socket_path, "\""));
    }
  }
  workers_ = std::make_unique<WorkerPool>(config_.worker_threads());
  report_workers_ = std::make_unique<WorkerPool>(config_.worker_threads());
  ServePlanner();
  health_.Serve(queue_.get());
  // One I/O thread: at 16 concurrent clients on 2 cores a second one
  // measured slower (the two contend for the same sockets), and the
  // workers take everything that could block.
  io_thread_ = std::thread([queue = queue_.get()] { queue->Run(); });
  if (!config_.health_listen().empty()) {
    if (auto s = StartHealthListener(); !s.ok()) return s;
  }

  if (config_.metrics_port() >= 0) {
    http_ = std::make_unique<HttpServer>(
        [this](const std::string& path) { return HandleHttp(path); });
    if (auto s = http_->Start(config_.metrics_address(),
                              config_.metrics_port());
        !s.ok()) {
      return s;
    }
    metrics_port_ = http_->port();
  }

  {
    // Replay: apply the collected records to the core.
    const auto start = std::chrono::steady_clock::now();
    uint64_t failed = 0;
    size_t i = 0;
    while (i < records.size()) {
      // Batch consecutive sample records of one model into one refit.
      if (records[i].has_samples()) {
        size_t j = i;
        size_t n = 0;
        v1::WalRecord merged;
        merged.mutable_samples()->set_model(records[i].samples().model());
        // Only batches that fitted every sample merge: a recorded verdict
        // applies to its own batch.
        auto plain = [](const v1::WalRecord& r) {
          return r.verdict().quarantined_size() == 0 &&
                 !r.verdict().release_quarantine();
        };
        while (j < records.size() && records[j].has_samples() &&
               plain(records[j]) &&
               records[j].samples().model() == records[i].samples().model() &&
               SamplesDevice(records[j]) == SamplesDevice(records[i]) &&
               n + records[j].samples().samples_size() <= kReplayBatchSamples) {
          for (const auto& s : records[j].samples().samples()) {
            *merged.mutable_samples()->add_samples() = s;
          }
          n += records[j].samples().samples_size();
          ++j;
        }
        if (j == i) j = i + 1;  // one oversized record: alone
        if (j - i > 1 && ApplyWalRecord(core_.get(), merged).ok()) {
          i = j;
          continue;
        }
        // Fall back to one record at a time so one bad record costs only
        // itself.
        for (size_t k = i; k < j; ++k) {
          absl::Status s = ApplyWalRecord(core_.get(), records[k]);
          if (!s.ok()) {
            ++failed;
            LogEvent(spdlog::level::warn, "wal_record_rejected",
                     {{"index", k}, {"error", std::string(s.message())}});
          }
        }
        i = j;
        continue;
      }
      absl::Status s = ApplyWalRecord(core_.get(), records[i]);
      if (!s.ok() &&
          !(records[i].has_register_model() && absl::IsAlreadyExists(s))) {
        ++failed;
        LogEvent(spdlog::level::warn, "wal_record_rejected",
                 {{"index", i}, {"error", std::string(s.message())}});
      }
      ++i;
    }
    if (wal_ != nullptr) {
      LogEvent(spdlog::level::info, "state_loaded",
               {{"records", records.size()},
                {"rejected", failed},
                {"models", core_->ListModels().size()},
                {"seconds", std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count()}});
    }
  }

  for (const std::string& path : import_files) {
    std::vector<std::string> files = {path};
    if (std::filesystem::is_directory(path)) {
      files.clear();
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.path().extension() == ".profile") {
          files.push_back(entry.path().string());
        }
      }
      std::sort(files.begin(), files.end());
    }
    for (const std::string& file : files) {
      if (auto s = ImportFile(file); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("--import ", file, ": ",
                                                   s.message()));
      }
    }
  }
  // A log that grew past the threshold in an earlier run shrinks now.
  service_->MaybeCompactLog();
  service_->SetReady(true);
  serving_ = true;
  health_.SetServingStatus("", true);
  health_.SetServingStatus(kPlannerServiceName, true);
  if (auto s = WritePortFile(); !s.ok()) return s;
  LogEvent(spdlog::level::info, "serving",
           {{"listen", config_.listen()},
            {"grpc_port", grpc_port_},
            {"tls", !config_.tls_cert().empty()},
            {"client_certificates", !config_.tls_client_ca().empty()},
            {"unix_socket", config_.unix_socket()},
            {"unix_socket_mode", config_.unix_socket_mode()},
            {"metrics_address", config_.metrics_address()},
            {"metrics_port", metrics_port_},
            {"health_listen", config_.health_listen()},
            {"health_port", health_port_},
            {"state_dir", config_.state_dir()}});
  return absl::OkStatus();
}

absl::Status Daemon::ImportFile(const std::string& path) {
  auto profile = ReadProfileFile(path);
  if (!profile.ok()) return profile.status();
  v1::ImportProfileRequest request;
  *request.mutable_profile() = *std::move(profile);
  v1::ImportProfileResponse response;
  return service_->Import(request, &response);
}

absl::Status Daemon::StartHealthListener() {
  // A server of its own, so that this port serves grpc.health.v1.Health and
  // nothing else: it is plaintext and may be bound to any address (kubelet
  // gRPC probes dial the pod IP without TLS), which is safe only because
  // health tells SERVING or NOT_SERVING and no data. It answers from
  // health_'s statuses, so both flip together.
  health_listener_ = health_.Share();
  grpc::ServerBuilder builder;
  // Never reflection, whatever the config says.
  builder.SetOption(std::make_unique<WithoutReflection>());
  builder.SetMaxReceiveMessageSize(kHealthMaxMessageBytes);
  // gRPC sets SO_REUSEPORT by default, with which a port that another
  // listener holds (this rematd's gRPC, another rematd) would be shared
  // with it instead of refused.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(health_listener_->async_service());
  builder.AddListeningPort(config_.health_listen(),
                           grpc::InsecureServerCredentials(), &health_port_);
  health_queue_ = std::make_unique<ServingQueue>(builder.AddCompletionQueue());
  health_server_ = builder.BuildAndStart();
  if (health_server_ == nullptr || health_port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "health_listen (--health-listen): cannot serve on \"",
        config_.health_listen(), "\" (in use or no permission)"));
  }
  health_listener_->Serve(health_queue_.get());
  health_io_thread_ =
      std::thread([queue = health_queue_.get()] { queue->Run(); });
  LogEvent(spdlog::level::info, "health_listening",
           {{"health_listen", config_.health_listen()},
            {"health_port", health_port_},
            {"serves", "grpc.health.v1.Health only"},
            {"tls", false}});
  return absl::OkStatus();
}

void Daemon::StopHealthListener() {
  // health_ is NOT_SERVING for good and the listener answered that until
  // now. Its watchers' last write may still be on its way out: a shutdown
  // without grace cancels it, and a watcher that was never told would see
  // its stream simply end. A watcher finishes itself once told, and Check
  // answers at once, so the grace only bounds a client that stopped
  // reading.
  constexpr auto kWatcherGrace = std::chrono::seconds(1);
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now() + kWatcherGrace);
  }
  if (health_queue_ != nullptr) {
    health_queue_->Shutdown();
    if (health_io_thread_.joinable()) {
      health_io_thread_.join();
    } else {
      health_queue_->Run();  // Start failed before its I/O thread
    }
  }
}

absl::Status Daemon::WritePortFile() const {
  if (config_.port_file().empty()) return absl::OkStatus();
  const std::string tmp = config_.port_file() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc_port\":" << grpc_port_
        << ",\"metrics_port\":" << metrics_port_
        << ",\"health_port\":" << health_port_ << ",\"pid\":" << ::getpid()
        << "}\n";
    if (!out) {
      return absl::InternalError(absl::StrCat("port_file: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), config_.port_file().c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("port_file: cannot rename to ", config_.port_file()));
  }
  return absl::OkStatus();
}

HttpResponse Daemon::HandleHttp(const std::string& path) {
  HttpResponse r;
  if (path == "/metrics") {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    std::vector<ExternalMetric> ext;
    if (core_ != nullptr) {
      const PlanCacheStats c = core_->cache_stats();
      ext.push_back({"rematd_plan_cache_hits_total", "Plan cache hits.",
                     "counter", static_cast<double>(c.hits)});
      ext.push_back({"rematd_plan_cache_misses_total", "Plan cache misses.",
                     "counter", static_cast<double>(c.misses)});
      ext.push_back({"rematd_plan_cache_evictions_total",
                     "Plans evicted from the cache.", "counter",
                     static_cast<double>(c.evictions)});
      ext.push_back({"rematd_plan_cache_size", "Plans in the cache.", "gauge",
                     static_cast<double>(c.size)});
      ext.push_back({"rematd_models", "Registered models.", "gauge",
                     static_cast<double>(core_->ListModels().size())});
    }
    if (wal_ != nullptr) {
      ext.push_back({"rematd_wal_bytes", "Size of the write-ahead log.",
                     "gauge", static_cast<double>(wal_->size_bytes())});
    }
    ext.push_back(
        {"rematd_serving", "1 while serving.", "gauge", serving_ ? 1.0 : 0.0});
    r.body = metrics_.RenderPrometheus(ext);
    return r;
  }
  if (path == "/healthz") {
    if (serving_) {
      r.body = "SERVING\n";
    } else {
      r.status = 503;
      r.body = "NOT_SERVING\n";
    }
    return r;
  }
  r.status = 404;
  r.body = "not found; try /metrics or /healthz\n";
  return r;
}

void Daemon::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  serving_ = false;
  if (server_ != nullptr) {
    LogEvent(spdlog::level::info, "shutting_down",
             {{"grace_seconds", config_.grace_seconds()}});
    health_.Shutdown();
    if (queue_ != nullptr) queue_->BeginDrain();
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(
                              config_.grace_seconds() * 1000));
    server_->Shutdown(deadline);
  }
  // Every call has ended or been cancelled; the workers finish what they
  // hold (their answers complete on the queue). The queue may still hold
  // calls accepted before that, which the I/O thread hands to the workers,
  // so the pool outlives the I/O thread: the queue drains, then the pool
  // goes (an answer after the queue's shutdown is refused by StartOp and
  // frees its call).
  if (workers_ != nullptr) workers_->Drain();
  if (report_workers_ != nullptr) report_workers_->Drain();
  if (queue_ != nullptr) {
    queue_->Shutdown();
    if (io_thread_.joinable()) {
      io_thread_.join();
    } else {
      queue_->Run();  // Start failed before the I/O thread
    }
  }
  workers_.reset();
  report_workers_.reset();
  StopHealthListener();
  if (http_ != nullptr) http_->Stop();
  if (server_ != nullptr) {
    LogEvent(spdlog::level::info, "stopped",
             {{"wal_bytes", wal_ != nullptr ? wal_->size_bytes() : 0}});
  }
}

std::function<void(const grpc::Status&)> Daemon::CountAs(const char* method) {
  Metrics* metrics = &metrics_;
  return [metrics, method](const grpc::Status& status) {
    metrics->CountRequest(
        method,
        absl::StatusCodeToString(FromGrpcStatus(status).code()));
  };
}

void Daemon::ServePlanner() {
  using P = v1::Planner::AsyncService;
  PlannerService* service = service_.get();
  WorkerPool* workers = workers_.get();
  UnaryMethod<v1::GetPlanRequest, v1::GetPlanResponse> get_plan;
  get_plan.answer_inline = [service](grpc::ServerContext* c,
                                     const v1::GetPlanRequest& q,
                                     v1::GetPlanResponse* r) {
    return service->GetPlanIfCached(c, &q, r);
  };
  get_plan.handler = [service](grpc::ServerContext* c,
                               const v1::GetPlanRequest& q,
                               v1::GetPlanResponse* r) {
    return service->GetPlanUncached(c, &q, r);
  };
  get_plan.workers = workers;
  get_plan.accept_ahead = 64;
  get_plan.answered_without_handler = CountAs("GetPlan");
  ServeUnary(&planner_async_, &P::RequestGetPlan, queue_.get(),
             std::move(get_plan));
  // The other methods run on the workers; ReportSamples on its own pool.
  auto on_pool = [&](WorkerPool* pool, const char* name, auto request_method,
                     auto handler) {
    ServeOnWorkers(&planner_async_, request_method, queue_.get(), pool,
                   service, handler, CountAs(name));
  };
  auto on_workers = [&](const char* name, auto request_method,
                        auto handler) {
    on_pool(workers, name, request_method, handler);
  };
  on_workers("RegisterModel", &P::RequestRegisterModel,
             &PlannerService::RegisterModel);
  on_pool(report_workers_.get(), "ReportSamples", &P::RequestReportSamples,
          &PlannerService::ReportSamples);
  on_workers("ReportOutcome", &P::RequestReportOutcome,
             &PlannerService::ReportOutcome);
  on_workers("ExplainPlan", &P::RequestExplainPlan,
             &PlannerService::ExplainPlan);
  on_workers("ListModels", &P::RequestListModels,
             &PlannerService::ListModels);
  on_workers("GetModelState", &P::RequestGetModelState,
             &PlannerService::GetModelState);
  on_workers("ExportProfile", &P::RequestExportProfile,
             &PlannerService::ExportProfile);
  on_pool(report_workers_.get(), "ImportProfile", &P::RequestImportProfile,
          &PlannerService::ImportProfile);
}

void Daemon::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace remat
