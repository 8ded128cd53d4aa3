#include "planner/service/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace remat {
namespace {

absl::Status Bad(const std::string& field, const std::string& flag,
                 const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, flag.empty() ? "" : absl::StrCat(" (", flag, ")"), ": ", what));
}

}  // namespace

v1::DaemonConfig DefaultDaemonConfig() {
  v1::DaemonConfig c;
  c.set_listen(kDefaultListen);
  c.set_unix_socket("");
  c.set_unix_socket_mode(kDefaultUnixSocketMode);
  c.set_allow_remote(false);
  c.set_tls_cert("");
  c.set_tls_key("");
  c.set_tls_client_ca("");
  c.set_metrics_port(kDefaultMetricsPort);
  c.set_metrics_address(kDefaultMetricsAddress);
  c.set_state_dir("");
  c.set_log_format("text");
  c.set_log_level("info");
  c.set_grace_seconds(5);
  c.set_reflection(false);
  c.set_port_file("");
  c.set_health_listen("");
  c.set_worker_threads(4);
  c.set_wal_compact_bytes(int64_t{64} << 20);
  v1::Limits* l = c.mutable_limits();
  l->set_max_models(256);
  l->set_max_blocks_per_model(kMaxBlocks);
  l->set_max_samples_per_request(10000);
  l->set_max_message_bytes(16 << 20);
  const CoreOptions core;
  v1::CoreConfig* k = c.mutable_core();
  k->set_estimator(core.estimator_kind);
  k->set_estimator_degree(core.estimator.degree);
  k->set_extrapolation_factor(core.estimator.extrapolation_factor);
  k->set_min_distinct_samples(core.estimator.min_distinct_samples);
  k->set_plan_cache_capacity(static_cast<uint32_t>(core.plan_cache_capacity));
  for (const auto& kv : core.granularity)
    (*k->mutable_granularity())[kv.first] = kv.second;
  k->set_default_granularity(core.default_granularity);
  k->set_margin_fraction(core.margin_fraction);
  k->set_default_solver(core.default_solver);
  k->set_max_samples_per_model(core.max_samples_per_model);
  k->set_solve_deadline_ms(kDefaultSolveDeadlineMs);
  return c;
}

absl::StatusOr<v1::DaemonConfig> ParseConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("config: cannot read \"", path, "\""));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  v1::DaemonConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status =
      google::protobuf::util::JsonStringToMessage(ss.str(), &config, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config \"", path, "\": ", status.message().as_string(),
                     " (see proto/config.proto for the fields)"));
  }
  // -0 is 0: the JSON printer writes a map value of -0 as 0, so a config
  // that kept it would not read back as itself.
  for (auto& kv : *config.mutable_core()->mutable_granularity()) {
    if (kv.second == 0) kv.second = 0;
  }
  return config;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  return false;
}

bool ParseSocketMode(const std::string& octal, uint32_t* mode) {
  if (octal.empty() || octal.size() > 4) return false;
  uint32_t m = 0;
  for (char ch : octal) {
    if (ch < '0' || ch > '7') return false;
    m = m * 8 + static_cast<uint32_t>(ch - '0');
  }
  if (m > 0777) return false;
  *mode = m;
  return true;
}

bool AllowRemote(const v1::DaemonConfig& c) {
  return c.allow_remote() || c.allow_non_loopback();
}

absl::Status SplitHostPort(const std::string& address, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\" is not host:port"));
  }
  *host = address.substr(0, colon);
  if (host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (!absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", address, "\": the port must be a number in 0..65535"));
  }
  return absl::OkStatus();
}

std::string UnixSocketTarget(const std::string& unix_socket) {
  if (unix_socket.rfind("unix:", 0) == 0) return unix_socket;
  return absl::StrCat("unix:", unix_socket);
}

absl::Status ValidateDaemonConfig(
    const v1::DaemonConfig& c, const std::vector<std::string>& solver_names) {
  if (c.listen().empty() && c.unix_socket().empty()) {
    return Bad("listen", "--listen",
               "no endpoint: set listen (host:port) or unix_socket");
  }
  if (!c.listen().empty()) {
    std::string host;
    int port = 0;
    if (auto s = SplitHostPort(c.listen(), &host, &port); !s.ok()) {
      return Bad("listen", "--listen", std::string(s.message()));
    }
    const bool tls = !c.tls_cert().empty() && !c.tls_key().empty();
    if (!IsLoopbackHost(host) && !AllowRemote(c)) {
      return Bad("listen", "--listen",
                 absl::StrCat("host \"", host,
                              "\" is not loopback; rematd serves this machine "
                              "only unless --allow-remote (allow_remote) is "
                              "given, with TLS: --tls-cert FILE --tls-key "
                              "FILE (or listen on 127.0.0.1)"));
    }
    if (!IsLoopbackHost(host) && !tls) {
      return Bad("listen", "--listen",
                 absl::StrCat("host \"", host,
                              "\" is not loopback and TLS is off: a remote "
                              "listen needs --tls-cert FILE --tls-key FILE "
                              "(tls_cert, tls_key) as well as --allow-remote"));
    }
  }
  if (c.tls_cert().empty() != c.tls_key().empty()) {
    return c.tls_cert().empty()
               ? Bad("tls_cert", "--tls-cert",
                     "tls_key is set without it; give both --tls-cert FILE "
                     "and --tls-key FILE")
               : Bad("tls_key", "--tls-key",
                     "tls_cert is set without it; give both --tls-cert FILE "
                     "and --tls-key FILE");
  }
  if (!c.tls_cert().empty() && c.listen().empty()) {
    return Bad("tls_cert", "--tls-cert",
               "TLS serves the TCP listen address, which is off (listen is "
               "empty); set --listen host:port or drop the TLS files");
  }
  if (!c.tls_client_ca().empty() && c.tls_cert().empty()) {
    return Bad("tls_client_ca", "--tls-client-ca",
               "client certificates are checked only on a TLS listen; give "
               "--tls-cert FILE --tls-key FILE too");
  }
  if (!c.health_listen().empty()) {
    // Any host: the listener serves health only, which tells nothing but
    // SERVING or NOT_SERVING, so neither allow_remote nor TLS is needed.
    std::string host;
    int port = 0;
    if (auto s = SplitHostPort(c.health_listen(), &host, &port); !s.ok()) {
      return Bad("health_listen", "--health-listen", std::string(s.message()));
    }
    std::string listen_host;
    int listen_port = 0;
    if (port != 0 && !c.listen().empty() &&
        SplitHostPort(c.listen(), &listen_host, &listen_port).ok() &&
        port == listen_port) {
      return Bad("health_listen", "--health-listen",
                 absl::StrCat("port ", port,
                              " is listen's; the health listener needs a "
                              "port of its own"));
    }
    if (port != 0 && port == c.metrics_port()) {
      return Bad("health_listen", "--health-listen",
                 absl::StrCat("port ", port,
                              " is metrics_port's; the health listener needs "
                              "a port of its own"));
    }
  }
  uint32_t socket_mode = 0;
  if (!ParseSocketMode(c.unix_socket_mode(), &socket_mode)) {
    return Bad("unix_socket_mode", "--unix-socket-mode",
               absl::StrCat("must be octal permission bits in 0000..0777 "
                            "such as 0660 or 0600, got \"",
                            c.unix_socket_mode(), "\""));
  }
  if (!c.unix_socket().empty()) {
    std::string path = UnixSocketTarget(c.unix_socket()).substr(5);
    if (path.empty() || path.front() != '/') {
      return Bad(
          "unix_socket", "--unix-socket",
          absl::StrCat("\"", c.unix_socket(), "\" must be an absolute path"));
    }
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return Bad(
          "unix_socket", "--unix-socket",
          absl::StrCat("path longer than ", sizeof(sockaddr_un{}.sun_path) - 1,
                       " characters"));
    }
  }
  if (c.metrics_port() < -1 || c.metrics_port() > 65535) {
    return Bad("metrics_port", "--metrics-port",
               absl::StrCat("must be -1 (off), 0 (any free port) or a port, "
                            "got ",
                            c.metrics_port()));
  }
  if (c.metrics_port() >= 0) {
    in_addr a4;
    in6_addr a6;
    const std::string& a = c.metrics_address();
    if (a != "localhost" && inet_pton(AF_INET, a.c_str(), &a4) != 1 &&
        inet_pton(AF_INET6, a.c_str(), &a6) != 1) {
      return Bad("metrics_address", "--metrics-address",
                 absl::StrCat("must be an IPv4 or IPv6 address or "
                              "\"localhost\", got \"",
                              a, "\""));
    }
    if (!IsLoopbackHost(a) && !AllowRemote(c)) {
      return Bad("metrics_address", "--metrics-address",
                 absl::StrCat("\"", a,
                              "\" is not loopback; the metrics port (plain "
                              "HTTP) serves this machine only unless "
                              "--allow-remote (allow_remote) is given"));
    }
  }
  if (c.log_format() != "text" && c.log_format() != "json") {
    return Bad("log_format", "--log-format",
               absl::StrCat("must be \"text\" or \"json\", got \"",
                            c.log_format(), "\""));
  }
  static const char* kLevels[] = {"debug", "info", "warn", "error"};
  if (std::find(std::begin(kLevels), std::end(kLevels), c.log_level()) ==
      std::end(kLevels)) {
    return Bad("log_level", "--log-level",
               absl::StrCat("must be debug, info, warn or error, got \"",
                            c.log_level(), "\""));
  }
  if (!std::isfinite(c.grace_seconds()) || c.grace_seconds() < 0 ||
      c.grace_seconds() > 3600) {
    return Bad("grace_seconds", "--grace-seconds",
               absl::StrCat("must be in [0, 3600], got ", c.grace_seconds()));
  }
  if (c.worker_threads() < 1 || c.worker_threads() > 256) {
    return Bad("worker_threads", "--worker-threads",
               absl::StrCat("must be in [1, 256], got ", c.worker_threads()));
  }
  if (c.wal_compact_bytes() < 0) {
    return Bad("wal_compact_bytes", "--wal-compact-bytes",
               absl::StrCat("must be >= 0 (0: never compact), got ",
                            c.wal_compact_bytes()));
  }
  const v1::Limits& l = c.limits();
  if (l.max_models() < 1) {
    return Bad("limits.max_models", "--max-models",
               absl::StrCat("must be >= 1, got ", l.max_models()));
  }
  if (l.max_blocks_per_model() < 1 || l.max_blocks_per_model() > kMaxBlocks) {
    return Bad("limits.max_blocks_per_model", "--max-blocks-per-model",
               absl::StrCat("must be in [1, ", kMaxBlocks, "], got ",
                            l.max_blocks_per_model()));
  }
  if (l.max_samples_per_request() < 1) {
    return Bad("limits.max_samples_per_request", "--max-samples-per-request",
               absl::StrCat("must be >= 1, got ", l.max_samples_per_request()));
  }
  if (l.max_message_bytes() < 4096) {
    return Bad("limits.max_message_bytes", "--max-message-bytes",
               absl::StrCat("must be >= 4096, got ", l.max_message_bytes()));
  }
  const v1::CoreConfig& k = c.core();
  if (k.estimator() != "remat" && k.estimator() != "mimose") {
    return Bad("core.estimator", "--estimator",
               absl::StrCat("must be \"remat\" or \"mimose\", got \"",
                            k.estimator(), "\""));
  }
  if (k.estimator_degree() < 1 || k.estimator_degree() > 4) {
    return Bad("core.estimator_degree", "",
               absl::StrCat("must be in [1, 4], got ", k.estimator_degree()));
  }
  if (!std::isfinite(k.extrapolation_factor()) ||
      k.extrapolation_factor() < 1) {
    return Bad("core.extrapolation_factor", "",
               absl::StrCat("must be >= 1, got ", k.extrapolation_factor()));
  }
  if (k.min_distinct_samples() < 0) {
    return Bad("core.min_distinct_samples", "",
               absl::StrCat("must be >= 0, got ", k.min_distinct_samples()));
  }
  if (k.plan_cache_capacity() < 1) {
    return Bad("core.plan_cache_capacity", "--plan-cache-capacity",
               "must be >= 1");
  }
  // A bucket is a whole number of granularity steps up to a feature's
  // largest value (2^53): steps finer than 1e-6 or coarser than 2^53 mean
  // nothing there.
  auto granularity_ok = [](double g) {
    return g >= 1e-6 && g <= 9007199254740992.0;  // false for NaN too
  };
  for (const auto& kv : k.granularity()) {
    if (!granularity_ok(kv.second)) {
      return Bad(absl::StrCat("core.granularity[\"", kv.first, "\"]"),
                 "--granularity",
                 absl::StrCat(kv.second, " is outside [1e-6, 2^53]"));
    }
  }
  if (!granularity_ok(k.default_granularity())) {
    return Bad("core.default_granularity", "",
               absl::StrCat(k.default_granularity(),
                            " is outside [1e-6, 2^53]"));
  }
  if (!std::isfinite(k.margin_fraction()) || k.margin_fraction() < 0 ||
      k.margin_fraction() >= 1) {
    return Bad("core.margin_fraction", "--margin-fraction",
               absl::StrCat("must be in [0, 1), got ", k.margin_fraction()));
  }
  if (std::find(solver_names.begin(), solver_names.end(), k.default_solver()) ==
      solver_names.end()) {
    return Bad("core.default_solver", "--default-solver",
               absl::StrCat("unknown solver \"", k.default_solver(),
                            "\"; known: ", absl::StrJoin(solver_names, ", ")));
  }
  if (k.max_samples_per_model() < 1) {
    return Bad("core.max_samples_per_model", "",
               absl::StrCat("must be >= 1, got ", k.max_samples_per_model()));
  }
  if (!std::isfinite(k.solve_deadline_ms()) || k.solve_deadline_ms() < 1 ||
      k.solve_deadline_ms() > 60000) {
    return Bad("core.solve_deadline_ms", "--solve-deadline-ms",
               absl::StrCat("must be in [1, 60000] ms, got ",
                            k.solve_deadline_ms()));
  }
  return absl::OkStatus();
}

CoreOptions ToCoreOptions(const v1::DaemonConfig& c) {
  CoreOptions o;
  const v1::CoreConfig& k = c.core();
  o.estimator_kind = k.estimator();
  o.estimator.degree = k.estimator_degree();
  o.estimator.extrapolation_factor = k.extrapolation_factor();
  o.estimator.min_distinct_samples = k.min_distinct_samples();
  o.plan_cache_capacity = k.plan_cache_capacity();
  o.granularity.clear();
  for (const auto& kv : k.granularity()) o.granularity[kv.first] = kv.second;
  o.default_granularity = k.default_granularity();
  o.margin_fraction = k.margin_fraction();
  o.default_solver = k.default_solver();
  o.max_models = c.limits().max_models();
  o.max_samples_per_model = k.max_samples_per_model();
  o.solve_time_limit_ms = k.solve_deadline_ms();
  return o;
}

void AddDaemonFlags(CLI::App* app, DaemonFlags* f) {
  app->add_option("--config", f->config_file,
                  "JSON config file (proto/config.proto's DaemonConfig); "
                  "flags override it");
  app->add_flag("--validate-config", f->validate_config,
                "Check the configuration and exit: 0 when valid, 2 with a "
                "message naming the field otherwise");
  app->add_option("--import", f->import_files,
                  "Profiles to import at start, after the log's replay and "
                  "before serving: files `remat export` wrote, or "
                  "directories whose *.profile files are imported (in name "
                  "order), each into its own device type. Idempotent, so a "
                  "restart may import the same files again. A file that "
                  "cannot be imported stops the start (exit 1) naming it "
                  "and why")
      ->check(CLI::ExistingPath);
  app->add_option(
      "--listen", f->listen,
      absl::StrCat("gRPC TCP address host:port (default ", kDefaultListen,
                   "; port 0 picks a free one; empty: no TCP)"));
  app->add_option("--unix-socket", f->unix_socket,
                  "Also serve gRPC on this unix socket (/path or unix:/path)");
  app->add_option(
      "--unix-socket-mode", f->unix_socket_mode,
      absl::StrCat("Permission bits of the unix socket, octal (default ",
                   kDefaultUnixSocketMode,
                   ": rematd's user and group may connect)"));
  app->add_flag("--allow-remote", f->allow_remote,
                "Permit a non-loopback --listen host (needs --tls-cert and "
                "--tls-key) or --metrics-address");
  app->add_option("--tls-cert", f->tls_cert,
                  "PEM certificate chain: serve TLS on --listen (with "
                  "--tls-key)");
  app->add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert");
  app->add_option("--tls-client-ca", f->tls_client_ca,
                  "PEM CA certificates: TCP clients must present a "
                  "certificate they signed");
  app->add_option("--metrics-port", f->metrics_port,
                  absl::StrCat("Prometheus /metrics and /healthz on "
                               "METRICS_ADDRESS:PORT (default ",
                               kDefaultMetricsPort, "; 0: any; -1: off)"));
  app->add_option("--metrics-address", f->metrics_address,
                  absl::StrCat("IP address of the metrics port (default ",
                               kDefaultMetricsAddress,
                               "; not loopback: needs --allow-remote)"));
  app->add_option("--state-dir", f->state_dir,
                  "Directory for the write-ahead log (default: none, state "
                  "is lost on exit)");
  app->add_option("--log-format", f->log_format, "text (default) or json");
  app->add_option("--log-level", f->log_level, "debug, info, warn, error");
  app->add_option("--grace-seconds", f->grace_seconds,
                  "On SIGTERM, in-flight calls get this long (default 5)");
  app->add_flag("--reflection", f->reflection, "Serve gRPC reflection");
  app->add_option("--worker-threads", f->worker_threads,
                  "Threads for solves and log writes (default 4); "
                  "sample reports get as many of their own");
  app->add_option("--wal-compact-bytes", f->wal_compact_bytes,
                  "Compact the write-ahead log past this size (default 64 "
                  "MiB; 0: never)");
  app->add_option(
      "--health-listen", f->health_listen,
      "Plaintext TCP host:port serving only grpc.health.v1.Health (never the "
      "Planner), for kubelet gRPC probes; any address, no --allow-remote or "
      "TLS needed: it tells SERVING/NOT_SERVING only (default: off; port 0 "
      "picks one)");
  app->add_option("--port-file", f->port_file,
                  "Write {\"grpc_port\":N,\"metrics_port\":M,"
                  "\"health_port\":H} here once serving");
  app->add_option("--max-models", f->max_models, "Models held (default 256)");
  app->add_option("--max-blocks-per-model", f->max_blocks_per_model,
                  "Blocks per model (default 4096)");
  app->add_option("--max-samples-per-request", f->max_samples_per_request,
                  "Samples per ReportSamples (default 10000)");
  app->add_option("--max-message-bytes", f->max_message_bytes,
                  "Largest request (default 16 MiB)");
  app->add_option("--estimator", f->estimator, "remat (default) or mimose");
  app->add_option("--default-solver", f->default_solver,
                  "Solver when a request names none (default exact)");
  app->add_option("--plan-cache-capacity", f->plan_cache_capacity,
                  "Plans cached across models (default 4096)");
  app->add_option("--margin-fraction", f->margin_fraction,
                  "Kept free below every budget, fraction (default 0)");
  app->add_option("--solve-deadline-ms", f->solve_deadline_ms,
                  "Longest exact solve of a cache miss, ms; past it the best "
                  "plan found so far (default 40; keep it below the "
                  "trainers' GetPlan deadline)");
  app->add_option("--granularity", f->granularity,
                  "Bucket granularity, feature=value (repeatable; default "
                  "none: every feature in steps of 1, a plan per value)");
}

absl::StatusOr<v1::DaemonConfig> ResolveDaemonConfig(const CLI::App& app,
                                                     const DaemonFlags& f) {
  v1::DaemonConfig config = DefaultDaemonConfig();
  if (!f.config_file.empty()) {
    auto file = ParseConfigFile(f.config_file);
    if (!file.ok()) return file.status();
    if (file->has_core() && file->core().granularity_size() > 0) {
      // A granularity map in the file replaces the default map.
      config.mutable_core()->clear_granularity();
    }
    config.MergeFrom(*file);
  }
  auto given = [&app](const char* name) { return app.count(name) > 0; };
  if (given("--listen")) config.set_listen(f.listen);
  if (given("--unix-socket")) config.set_unix_socket(f.unix_socket);
  if (config.allow_non_loopback()) {
    // The former name (config files written before allow_remote).
    config.set_allow_remote(true);
  }
  config.clear_allow_non_loopback();
  if (given("--unix-socket-mode")) {
    config.set_unix_socket_mode(f.unix_socket_mode);
  }
  if (given("--allow-remote")) config.set_allow_remote(f.allow_remote);
  if (given("--tls-cert")) config.set_tls_cert(f.tls_cert);
  if (given("--tls-key")) config.set_tls_key(f.tls_key);
  if (given("--tls-client-ca")) config.set_tls_client_ca(f.tls_client_ca);
  if (given("--metrics-port")) config.set_metrics_port(f.metrics_port);
  if (given("--metrics-address")) {
    config.set_metrics_address(f.metrics_address);
  }
  if (given("--state-dir")) config.set_state_dir(f.state_dir);
  if (given("--log-format")) config.set_log_format(f.log_format);
  if (given("--log-level")) config.set_log_level(f.log_level);
  if (given("--grace-seconds")) config.set_grace_seconds(f.grace_seconds);
  if (given("--reflection")) config.set_reflection(f.reflection);
  if (given("--port-file")) config.set_port_file(f.port_file);
  if (given("--health-listen")) config.set_health_listen(f.health_listen);
  if (given("--worker-threads")) config.set_worker_threads(f.worker_threads);
  if (given("--wal-compact-bytes")) {
    config.set_wal_compact_bytes(f.wal_compact_bytes);
  }
  v1::Limits* l = config.mutable_limits();
  if (given("--max-models")) l->set_max_models(f.max_models);
  if (given("--max-blocks-per-model")) {
    l->set_max_blocks_per_model(f.max_blocks_per_model);
  }
  if (given("--max-samples-per-request")) {
    l->set_max_samples_per_request(f.max_samples_per_request);
  }
  if (given("--max-message-bytes")) {
    l->set_max_message_bytes(f.max_message_bytes);
  }
  v1::CoreConfig* k = config.mutable_core();
  if (given("--estimator")) k->set_estimator(f.estimator);
  if (given("--default-solver")) k->set_default_solver(f.default_solver);
  if (given("--plan-cache-capacity")) {
    k->set_plan_cache_capacity(f.plan_cache_capacity);
  }
  if (given("--margin-fraction")) k->set_margin_fraction(f.margin_fraction);
  if (given("--solve-deadline-ms")) {
    k->set_solve_deadline_ms(f.solve_deadline_ms);
  }
  if (given("--granularity")) {
    k->clear_granularity();
    for (const std::string& g : f.granularity) {
      const size_t eq = g.find('=');
      double value = 0;
      if (eq == std::string::npos || eq == 0 ||
          !absl::SimpleAtod(g.substr(eq + 1), &value)) {
        return Bad("core.granularity", "--granularity",
                   absl::StrCat("\"", g, "\" is not feature=value"));
      }
      (*k->mutable_granularity())[g.substr(0, eq)] = value;
    }
  }
  return config;
}

}  // namespace remat
