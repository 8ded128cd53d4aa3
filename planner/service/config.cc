#include "planner/service/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"

namespace remat {
namespace {

absl::Status Bad(const std::string& field, const std::string& flag,
                 const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, flag.empty() ? "" : absl::StrCat(" (", flag, ")"), ": ", what));
}

// A bucket is a whole number of granularity steps up to a feature's largest
// value (2^53): steps finer than 1e-6 or coarser than 2^53 mean nothing
// there.
constexpr double kMinGranularity = 1e-6;
constexpr double kMaxGranularity = 9007199254740992.0;

// The shortest decimal that reads back as `v` (integers as integers).
template <typename T>
std::string NumberText(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    for (int digits = 6; digits < 17; ++digits) {
      const std::string text = absl::StrFormat("%.*g", digits, v);
      double back = 0;
      if (absl::SimpleAtod(text, &back) && back == v) return text;
    }
    return absl::StrFormat("%.17g", v);
  } else {
    return absl::StrCat(v);
  }
}

}  // namespace

const std::vector<ConfigSetting>& ConfigSettings() {
  static const std::vector<ConfigSetting>* const settings = [] {
    const CoreOptions core;
    auto number = [](auto v) { return NumberText(v); };
    auto range = [](std::optional<double> min, std::optional<double> max,
                    bool max_exclusive = false) {
      ConfigSetting s;
      s.min = min;
      s.max = max;
      s.max_exclusive = max_exclusive;
      return s;
    };
    auto row = [](ConfigSetting s, std::string field, std::string flag,
                  std::string default_value, std::string help) {
      s.field = std::move(field);
      s.flag = std::move(flag);
      s.default_value = std::move(default_value);
      s.help = std::move(help);
      return s;
    };
    auto choices = [](std::vector<std::string> values) {
      ConfigSetting s;
      s.choices = std::move(values);
      return s;
    };
    const ConfigSetting any;
    const std::optional<double> none;
    return new std::vector<ConfigSetting>{
        row(any, "listen", "--listen", kDefaultListen,
            "gRPC TCP address host:port (port 0 picks a free one; empty: no "
            "TCP)"),
        row(any, "unix_socket", "--unix-socket", "",
            "Also serve gRPC on this unix socket (/path or unix:/path)"),
        row(any, "unix_socket_mode", "--unix-socket-mode",
            kDefaultUnixSocketMode,
            "Permission bits of the unix socket, octal (the default: "
            "rematd's user and group may connect)"),
        row(any, "allow_remote", "--allow-remote", "false",
            "Permit a non-loopback --listen host (needs --tls-cert and "
            "--tls-key) or --metrics-address"),
        row(any, "tls_cert", "--tls-cert", "",
            "PEM certificate chain: serve TLS on --listen (with --tls-key)"),
        row(any, "tls_key", "--tls-key", "", "PEM private key of --tls-cert"),
        row(any, "tls_client_ca", "--tls-client-ca", "",
            "PEM CA certificates: TCP clients must present a certificate "
            "they signed"),
        row(range(-1, 65535), "metrics_port", "--metrics-port",
            number(kDefaultMetricsPort),
            "Prometheus /metrics and /healthz on METRICS_ADDRESS:PORT (0: "
            "any free port; -1: off)"),
        row(any, "metrics_address", "--metrics-address",
            kDefaultMetricsAddress,
            "IP address of the metrics port (not loopback: needs "
            "--allow-remote)"),
        row(any, "state_dir", "--state-dir", "",
            "Directory for the write-ahead log; without one, state is lost "
            "on exit"),
        row(choices({"text", "json"}), "log_format", "--log-format", "text",
            "Log line format"),
        row(choices({"debug", "info", "warn", "error"}), "log_level",
            "--log-level", "info", "Least severity logged"),
        row(range(0, 3600), "grace_seconds", "--grace-seconds", "5",
            "On SIGTERM, in-flight calls get this long, seconds"),
        row(any, "reflection", "--reflection", "false",
            "Serve gRPC reflection"),
        row(any, "port_file", "--port-file", "",
            "Write {\"grpc_port\":N,\"metrics_port\":M,\"health_port\":H} "
            "here once serving"),
        row(any, "health_listen", "--health-listen", "",
            "Plaintext TCP host:port serving only grpc.health.v1.Health "
            "(never the Planner), for kubelet gRPC probes; any address, no "
            "--allow-remote or TLS needed: it tells SERVING/NOT_SERVING only "
            "(empty: off; port 0 picks one)"),
        row(range(1, 256), "worker_threads", "--worker-threads", "4",
            "Threads for solves and log writes; sample reports get as many "
            "of their own"),
        row(range(0, none), "wal_compact_bytes", "--wal-compact-bytes",
            number(int64_t{64} << 20),
            "Compact the write-ahead log past this size, bytes (0: never)"),
        row(range(1, none), "limits.max_models", "--max-models", "256",
            "Models held"),
        row(range(1, kMaxBlocks), "limits.max_blocks_per_model",
            "--max-blocks-per-model", number(kMaxBlocks), "Blocks per model"),
        row(range(1, none), "limits.max_samples_per_request",
            "--max-samples-per-request", "10000",
            "Samples per ReportSamples"),
        row(range(4096, none), "limits.max_message_bytes",
            "--max-message-bytes", number(16 << 20), "Largest request, bytes"),
        row(choices({"remat", "mimose"}), "core.estimator", "--estimator",
            core.estimator_kind, "The estimator every model gets"),
        row(range(1, 4), "core.estimator_degree", "",
            number(core.estimator.degree),
            "Degree of the estimator's polynomial"),
        row(range(1, none), "core.extrapolation_factor", "",
            number(core.estimator.extrapolation_factor),
            "How far past the measured features the estimator extrapolates"),
        row(range(0, none), "core.min_distinct_samples", "",
            number(core.estimator.min_distinct_samples),
            "Distinct samples before the estimator is fitted"),
        // The solvers' names are the core's: checked in ValidateDaemonConfig.
        row(any, "core.default_solver", "--default-solver",
            core.default_solver, "Solver when a request names none"),
        row(range(1, none), "core.plan_cache_capacity",
            "--plan-cache-capacity", number(core.plan_cache_capacity),
            "Plans cached across models"),
        row(range(0, 1, /*max_exclusive=*/true), "core.margin_fraction",
            "--margin-fraction", number(core.margin_fraction),
            "Kept free below every budget, fraction"),
        row(range(1, 60000), "core.solve_deadline_ms", "--solve-deadline-ms",
            number(kDefaultSolveDeadlineMs),
            "Longest exact solve of a cache miss, ms; past it the best plan "
            "found so far (keep it below the trainers' GetPlan deadline)"),
        row(range(1, none), "core.max_samples_per_model", "",
            number(core.max_samples_per_model), "Samples held per profile"),
        // Map values are checked in ValidateDaemonConfig (kGranularity*).
        row(any, "core.granularity", "--granularity", "",
            "Bucket granularity, feature=value (repeatable; features not "
            "given use core.default_granularity)"),
        row(range(kMinGranularity, kMaxGranularity),
            "core.default_granularity", "", number(core.default_granularity),
            "Bucket granularity of features core.granularity does not "
            "name"),
    };
  }();
  return *settings;
}

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The field at `path` ("limits.max_models") of DaemonConfig.
const FieldDescriptor* FieldOf(const std::string& path) {
  const google::protobuf::Descriptor* d = v1::DaemonConfig::descriptor();
  const FieldDescriptor* f = nullptr;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (f != nullptr) d = f->message_type();
    f = d->FindFieldByName(std::string(part));
  }
  return f;
}

// The message of `config` that holds `path`'s last field (created on the
// way when mutable).
Message* MutableHolder(Message* config, const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return config;
  Message* holder = MutableHolder(config, path.substr(0, dot));
  return holder->GetReflection()->MutableMessage(
      holder, FieldOf(path.substr(0, dot)));
}
const Message& Holder(const Message& config, const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return config;
  const Message& holder = Holder(config, path.substr(0, dot));
  return holder.GetReflection()->GetMessage(holder,
                                            FieldOf(path.substr(0, dot)));
}

// Sets `setting`'s field from its text form. INVALID_ARGUMENT naming the
// field and flag when the text is not a value of the field's type.
// The map fields of DaemonConfig, through their typed API: reflection sees
// a map as a repeated field whose sync with the map is not for callers.
google::protobuf::Map<std::string, double>* MutableMap(
    v1::DaemonConfig* config, const std::string& path) {
  if (path == "core.granularity") {
    return config->mutable_core()->mutable_granularity();
  }
  return nullptr;
}

absl::Status SetFromText(const ConfigSetting& setting, const std::string& text,
                         v1::DaemonConfig* config) {
  Message* m = MutableHolder(config, setting.field);
  const FieldDescriptor* f = FieldOf(setting.field);
  const auto* r = m->GetReflection();
  auto bad = [&](const char* type) {
    return Bad(setting.field, setting.flag,
               absl::StrCat("\"", text, "\" is not ", type));
  };
  if (f->is_map()) {
    const size_t eq = text.find('=');
    double value = 0;
    if (eq == std::string::npos || eq == 0 ||
        !absl::SimpleAtod(text.substr(eq + 1), &value)) {
      return bad("feature=value");
    }
    auto* map = MutableMap(config, setting.field);
    if (map == nullptr) {
      return absl::InternalError(
          absl::StrCat(setting.field, ": a map with no typed home"));
    }
    (*map)[text.substr(0, eq)] = value;
    return absl::OkStatus();
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      r->SetString(m, f, text);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v = false;
      if (!absl::SimpleAtob(text, &v)) return bad("true or false");
      r->SetBool(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      r->SetInt32(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return bad("a non-negative integer");
      r->SetUInt32(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      r->SetInt64(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v = 0;
      if (!absl::SimpleAtod(text, &v)) return bad("a number");
      r->SetDouble(m, f, v);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(
          absl::StrCat(setting.field, ": no text form for its type"));
  }
}

// "in [1, 256]", ">= 0", ...: the range a setting's number must be in.
std::string RangeText(const ConfigSetting& s) {
  if (s.min && s.max) {
    return absl::StrCat("in [", NumberText(*s.min), ", ", NumberText(*s.max),
                        s.max_exclusive ? ")" : "]");
  }
  if (s.min) return absl::StrCat(">= ", NumberText(*s.min));
  if (s.max) {
    return absl::StrCat(s.max_exclusive ? "< " : "<= ", NumberText(*s.max));
  }
  return "";
}

// `setting`'s range and choices: OK or INVALID_ARGUMENT naming it.
absl::Status CheckSetting(const ConfigSetting& setting,
                          const v1::DaemonConfig& config) {
  const Message& m = Holder(config, setting.field);
  const FieldDescriptor* f = FieldOf(setting.field);
  const auto* r = m.GetReflection();
  if (!setting.choices.empty()) {
    const std::string v = r->GetString(m, f);
    if (std::find(setting.choices.begin(), setting.choices.end(), v) ==
        setting.choices.end()) {
      return Bad(setting.field, setting.flag,
                 absl::StrCat("must be one of ",
                              absl::StrJoin(setting.choices, ", "), "; got \"",
                              v, "\""));
    }
  }
  if (!setting.min && !setting.max) return absl::OkStatus();
  double v = 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: v = r->GetInt32(m, f); break;
    case FieldDescriptor::CPPTYPE_UINT32: v = r->GetUInt32(m, f); break;
    case FieldDescriptor::CPPTYPE_INT64:
      v = static_cast<double>(r->GetInt64(m, f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE: v = r->GetDouble(m, f); break;
    default: return absl::OkStatus();
  }
  const bool above =
      setting.max && (setting.max_exclusive ? v >= *setting.max : v > *setting.max);
  if (std::isfinite(v) && !(setting.min && v < *setting.min) && !above) {
    return absl::OkStatus();
  }
  return Bad(setting.field, setting.flag,
             absl::StrCat("must be ", RangeText(setting), ", got ",
                          NumberText(v)));
}

}  // namespace

v1::DaemonConfig DefaultDaemonConfig() {
  v1::DaemonConfig c;
  for (const ConfigSetting& setting : ConfigSettings()) {
    if (FieldOf(setting.field)->is_map()) continue;  // empty by default
    const absl::Status s = SetFromText(setting, setting.default_value, &c);
    assert(s.ok());
    (void)s;
  }
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
  for (const ConfigSetting& setting : ConfigSettings()) {
    if (absl::Status s = CheckSetting(setting, c); !s.ok()) return s;
  }
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
  const v1::CoreConfig& k = c.core();
  auto granularity_ok = [](double g) {
    return g >= kMinGranularity && g <= kMaxGranularity;  // false for NaN
  };
  for (const auto& kv : k.granularity()) {
    if (!granularity_ok(kv.second)) {
      return Bad(absl::StrCat("core.granularity[\"", kv.first, "\"]"),
                 "--granularity",
                 absl::StrCat(kv.second, " is outside [1e-6, 2^53]"));
    }
  }
  if (std::find(solver_names.begin(), solver_names.end(), k.default_solver()) ==
      solver_names.end()) {
    return Bad("core.default_solver", "--default-solver",
               absl::StrCat("unknown solver \"", k.default_solver(),
                            "\"; known: ", absl::StrJoin(solver_names, ", ")));
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
  for (const ConfigSetting& s : ConfigSettings()) {
    if (s.flag.empty()) continue;
    const FieldDescriptor* field = FieldOf(s.field);
    std::string help = absl::StrCat(s.help, " [", s.field);
    if (!s.choices.empty()) {
      absl::StrAppend(&help, "; ", absl::StrJoin(s.choices, ", "));
    } else if (s.min || s.max) {
      absl::StrAppend(&help, "; ", RangeText(s));
    }
    if (!s.default_value.empty() && !field->is_map()) {
      absl::StrAppend(&help, "; default ", s.default_value);
    }
    absl::StrAppend(&help, "]");
    auto record = [f, name = s.field](std::vector<std::string> values) {
      f->given[name] = std::move(values);
    };
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
      app->add_flag_function(
          s.flag, [record](int64_t) { record({"true"}); }, help);
    } else if (field->is_map()) {
      app->add_option_function<std::vector<std::string>>(s.flag, record, help);
    } else {
      const char* type = "TEXT";
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
        case FieldDescriptor::CPPTYPE_INT64: type = "INT"; break;
        case FieldDescriptor::CPPTYPE_UINT32: type = "UINT"; break;
        case FieldDescriptor::CPPTYPE_DOUBLE: type = "FLOAT"; break;
        default: break;
      }
      app->add_option_function<std::string>(
             s.flag, [record](const std::string& v) { record({v}); }, help)
          ->type_name(type);
    }
  }
}

absl::StatusOr<v1::DaemonConfig> ResolveDaemonConfig(const DaemonFlags& f) {
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
  if (config.allow_non_loopback()) {
    // The former name (config files written before allow_remote).
    config.set_allow_remote(true);
  }
  config.clear_allow_non_loopback();
  for (const ConfigSetting& setting : ConfigSettings()) {
    const auto given = f.given.find(setting.field);
    if (given == f.given.end()) continue;
    // A map given on the command line replaces the file's.
    if (auto* map = MutableMap(&config, setting.field)) map->clear();
    for (const std::string& text : given->second) {
      if (absl::Status s = SetFromText(setting, text, &config); !s.ok()) {
        return s;
      }
    }
  }
  return config;
}

}  // namespace remat
