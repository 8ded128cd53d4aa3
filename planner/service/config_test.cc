#include "planner/service/config.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace remat {
namespace {

// The solver names the core registers; the daemon passes SolverNames().
const std::vector<std::string> kSolvers = {
    "none", "all", "sqrt", "static_max", "mimose_greedy", "exact"};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

std::string WriteTemp(const std::string& text) {
  std::string path =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
      "/cfgXXXXXX";
  int fd = mkstemp(path.data());
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

absl::StatusOr<v1::DaemonConfig> Resolve(std::vector<std::string> args) {
  CLI::App app;
  DaemonFlags flags;
  AddDaemonFlags(&app, &flags);
  args.insert(args.begin(), "rematd");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return ResolveDaemonConfig(flags);
}

TEST_CASE("the defaults are valid and loopback-only") {
  const v1::DaemonConfig c = DefaultDaemonConfig();
  REQUIRE(ValidateDaemonConfig(c, kSolvers).ok());
  REQUIRE(c.listen() == "127.0.0.1:7421");
  REQUIRE(c.metrics_port() == 7422);
  const CoreOptions o = ToCoreOptions(c);
  const CoreOptions d;
  REQUIRE(o.default_solver == d.default_solver);
  REQUIRE(o.granularity == d.granularity);
  REQUIRE(o.plan_cache_capacity == d.plan_cache_capacity);
  // The daemon bounds every solve by its deadline; in process, nothing does.
  REQUIRE(o.solve_time_limit_ms == Approx(40));
  REQUIRE(d.solve_time_limit_ms == 0);
}

TEST_CASE("the example config in deploy/ is valid") {
  auto c = ParseConfigFile("deploy/rematd.example.json");
  REQUIRE(c.ok());
  v1::DaemonConfig merged = DefaultDaemonConfig();
  merged.mutable_core()->clear_granularity();
  merged.MergeFrom(*c);
  INFO(Message(ValidateDaemonConfig(merged, kSolvers)));
  REQUIRE(ValidateDaemonConfig(merged, kSolvers).ok());
  REQUIRE(merged.unix_socket() == "/run/rematd/rematd.sock");
  REQUIRE(merged.state_dir() == "/var/lib/rematd");
  REQUIRE(ToCoreOptions(merged).margin_fraction == Approx(0.05));
}

TEST_CASE("config files: unknown fields and bad JSON name the problem") {
  auto c = ParseConfigFile(WriteTemp(R"({"listne": "127.0.0.1:1"})"));
  REQUIRE(absl::IsInvalidArgument(c.status()));
  REQUIRE(Message(c.status()).find("listne") != std::string::npos);
  REQUIRE_FALSE(ParseConfigFile(WriteTemp("{not json")).ok());
  REQUIRE(absl::IsNotFound(ParseConfigFile("/nonexistent/x.json").status()));
}

TEST_CASE("a granularity of -0 reads as 0, still refused by name") {
  // The JSON printer writes a map value of -0 as 0: read as 0, a config
  // file reads back as itself (config_fuzzer's property).
  const std::string path =
      WriteTemp(R"({"core": {"granularity": {"batch": -0.0}}})");
  auto c = ParseConfigFile(path);
  REQUIRE(c.ok());
  const double g = c->core().granularity().at("batch");
  REQUIRE(g == 0);
  REQUIRE_FALSE(std::signbit(g));
  auto resolved = Resolve({"--config", path});
  REQUIRE(resolved.ok());
  const absl::Status valid = ValidateDaemonConfig(*resolved, kSolvers);
  INFO(Message(valid));
  REQUIRE_FALSE(valid.ok());
  REQUIRE(Message(valid).find("core.granularity") != std::string::npos);
}

TEST_CASE("flags override the file field by field") {
  const std::string path = WriteTemp(
      R"({"listen": "127.0.0.1:9000", "metrics_port": 9001,
          "limits": {"max_models": 3}, "core": {"granularity": {"img": 32}}})");
  auto c = Resolve({"--config", path, "--metrics-port", "-1",
                    "--max-samples-per-request", "5"});
  REQUIRE(c.ok());
  REQUIRE(c->listen() == "127.0.0.1:9000");                   // from the file
  REQUIRE(c->metrics_port() == -1);                           // the flag wins
  REQUIRE(c->limits().max_models() == 3);                     // file
  REQUIRE(c->limits().max_samples_per_request() == 5);        // flag
  REQUIRE(c->limits().max_blocks_per_model() == kMaxBlocks);  // default
  REQUIRE(c->core().granularity().size() == 1);  // the file's map replaced it
  REQUIRE(c->core().granularity().at("img") == 32);
  REQUIRE(ValidateDaemonConfig(*c, kSolvers).ok());

  auto g = Resolve({"--granularity", "seq=16", "--granularity", "batch=4"});
  REQUIRE(g.ok());
  REQUIRE(g->core().granularity().at("batch") == 4);
  REQUIRE_FALSE(Resolve({"--granularity", "seq"}).ok());
}

TEST_CASE("validation names the field and its flag") {
  struct Case {
    std::vector<std::string> args;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{"--listen", "0.0.0.0:7421"}, "listen (--listen)"},
      {{"--listen", "localhost"}, "listen (--listen)"},
      {{"--listen", "127.0.0.1:70000"}, "listen (--listen)"},
      {{"--listen", ""}, "listen (--listen): no endpoint"},
      {{"--unix-socket", "relative.sock"}, "unix_socket"},
      {{"--unix-socket", "/" + std::string(200, 's')}, "unix_socket"},
      {{"--metrics-port", "-2"}, "metrics_port"},
      {{"--log-format", "xml"}, "log_format"},
      {{"--log-level", "loud"}, "log_level"},
      {{"--grace-seconds", "-1"}, "grace_seconds"},
      {{"--worker-threads", "0"}, "worker_threads"},
      {{"--wal-compact-bytes", "-1"}, "wal_compact_bytes"},
      {{"--max-models", "0"}, "limits.max_models (--max-models)"},
      {{"--max-blocks-per-model", "5000"}, "limits.max_blocks_per_model"},
      {{"--max-message-bytes", "10"}, "limits.max_message_bytes"},
      {{"--estimator", "magic"}, "core.estimator"},
      {{"--default-solver", "quantum"}, "core.default_solver"},
      {{"--margin-fraction", "1.5"}, "core.margin_fraction"},
      {{"--solve-deadline-ms", "0"}, "core.solve_deadline_ms (--solve-deadline-ms)"},
      {{"--solve-deadline-ms", "1e9"}, "core.solve_deadline_ms"},
      {{"--granularity", "seq=0"}, "core.granularity[\"seq\"]"},
      {{"--granularity", "seq=1e-305"},
       "core.granularity[\"seq\"] (--granularity): 1e-305 is outside "
       "[1e-6, 2^53]"},
      {{"--unix-socket-mode", "0860"}, "unix_socket_mode (--unix-socket-mode)"},
      {{"--unix-socket-mode", "4660"}, "unix_socket_mode"},
      {{"--listen", "0.0.0.0:7421", "--allow-remote"},
       "listen (--listen): host \"0.0.0.0\" is not loopback and TLS is off"},
      {{"--tls-cert", "/c.pem"}, "tls_key (--tls-key)"},
      {{"--tls-key", "/k.pem"}, "tls_cert (--tls-cert)"},
      {{"--tls-client-ca", "/ca.pem"}, "tls_client_ca (--tls-client-ca)"},
      {{"--listen", "", "--unix-socket", "/r.sock", "--tls-cert", "/c.pem",
        "--tls-key", "/k.pem"},
       "tls_cert (--tls-cert)"},
      {{"--metrics-address", "0.0.0.0"}, "metrics_address (--metrics-address)"},
      {{"--metrics-address", "example.com"}, "metrics_address"},
      {{"--health-listen", "0.0.0.0"}, "health_listen (--health-listen)"},
      {{"--health-listen", "0.0.0.0:7421"},
       "health_listen (--health-listen): port 7421 is listen's"},
      {{"--health-listen", "[::]:7422"},
       "health_listen (--health-listen): port 7422 is metrics_port's"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0] << " " << c.args[1]);
    auto config = Resolve(c.args);
    REQUIRE(config.ok());
    const absl::Status s = ValidateDaemonConfig(*config, kSolvers);
    REQUIRE(absl::IsInvalidArgument(s));
    INFO(Message(s));
    REQUIRE(Message(s).rfind(c.field, 0) == 0);
  }
  auto open =
      Resolve({"--listen", "0.0.0.0:7421", "--allow-remote", "--tls-cert",
               "/c.pem", "--tls-key", "/k.pem", "--metrics-address", "::"});
  REQUIRE(ValidateDaemonConfig(*open, kSolvers).ok());
  auto tls_loopback = Resolve({"--tls-cert", "/c.pem", "--tls-key", "/k.pem",
                               "--tls-client-ca", "/ca.pem"});
  REQUIRE(ValidateDaemonConfig(*tls_loopback, kSolvers).ok());
  auto off = Resolve({"--metrics-port", "-1", "--metrics-address", "0.0.0.0"});
  REQUIRE(ValidateDaemonConfig(*off, kSolvers).ok());  // not bound at all
  auto unix_only =
      Resolve({"--listen", "", "--unix-socket", "unix:/run/r.sock"});
  REQUIRE(ValidateDaemonConfig(*unix_only, kSolvers).ok());
  // The health listener may be remote without --allow-remote or TLS: it
  // serves health only.
  auto health =
      Resolve({"--listen", "", "--unix-socket", "/run/r.sock",
               "--health-listen", "0.0.0.0:7423"});
  REQUIRE(health->health_listen() == "0.0.0.0:7423");
  REQUIRE(ValidateDaemonConfig(*health, kSolvers).ok());
  REQUIRE(DefaultDaemonConfig().health_listen().empty());
  REQUIRE(UnixSocketTarget("/run/r.sock") == "unix:/run/r.sock");
}

TEST_CASE("the former allow_non_loopback is read as allow_remote") {
  auto c = Resolve({"--config", WriteTemp(R"({"allow_non_loopback": true})")});
  REQUIRE(c.ok());
  REQUIRE(c->allow_remote());
  REQUIRE_FALSE(c->has_allow_non_loopback());
  // The rule is allow_remote's: a remote listen still needs TLS.
  c->set_listen("0.0.0.0:7421");
  REQUIRE(Message(ValidateDaemonConfig(*c, kSolvers)).find("TLS is off") !=
          std::string::npos);
}

TEST_CASE("socket modes are octal permission bits") {
  uint32_t mode = 0;
  REQUIRE(ParseSocketMode("0660", &mode));
  REQUIRE(mode == 0660);
  REQUIRE(ParseSocketMode("600", &mode));
  REQUIRE(mode == 0600);
  REQUIRE(ParseSocketMode("0", &mode));
  REQUIRE(mode == 0);
  for (const char* bad : {"", "0x1b4", "660a", "8", "1777", "07777", "-660"}) {
    INFO(bad);
    REQUIRE_FALSE(ParseSocketMode(bad, &mode));
  }
  REQUIRE(DefaultDaemonConfig().unix_socket_mode() == "0660");
}

TEST_CASE("loopback hosts") {
  for (const char* h :
       {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) {
    REQUIRE(IsLoopbackHost(h));
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "example.com", "::"}) {
    REQUIRE_FALSE(IsLoopbackHost(h));
  }
}

TEST_CASE("the settings table covers every config field, once") {
  std::set<std::string> rows;
  for (const ConfigSetting& s : ConfigSettings()) {
    INFO(s.field);
    REQUIRE(rows.insert(s.field).second);
  }
  // Every scalar or map field of DaemonConfig and its messages has a row,
  // but the former name of allow_remote.
  std::set<std::string> fields;
  std::function<void(const google::protobuf::Descriptor*, std::string)> walk =
      [&](const google::protobuf::Descriptor* d, const std::string& prefix) {
        for (int i = 0; i < d->field_count(); ++i) {
          const google::protobuf::FieldDescriptor* f = d->field(i);
          const std::string path = prefix + f->name();
          if (f->message_type() != nullptr && !f->is_map()) {
            walk(f->message_type(), path + ".");
          } else if (path != "allow_non_loopback") {
            fields.insert(path);
          }
        }
      };
  walk(v1::DaemonConfig::descriptor(), "");
  REQUIRE(rows == fields);
}

TEST_CASE("the help of a flag says its range, choices and default") {
  CLI::App app;
  DaemonFlags flags;
  AddDaemonFlags(&app, &flags);
  const std::string help = app.help();
  INFO(help);
  CHECK(help.find("[worker_threads; in [1, 256]; default 4]") !=
        std::string::npos);
  CHECK(help.find("[log_level; debug, info, warn, error; default info]") !=
        std::string::npos);
  CHECK(help.find("[core.margin_fraction; in [0, 1); default 0]") !=
        std::string::npos);
}

TEST_CASE("a flag value not of its field's type names the field") {
  for (const auto& [args, message] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--max-models", "many"},
            "limits.max_models (--max-models): \"many\" is not an integer"},
           {{"--grace-seconds", "soon"},
            "grace_seconds (--grace-seconds): \"soon\" is not a number"},
           {{"--plan-cache-capacity", "-1"}, "core.plan_cache_capacity"},
           {{"--granularity", "seq"},
            "core.granularity (--granularity): \"seq\" is not feature=value"},
       }) {
    const auto c = Resolve(args);
    INFO(c.status());
    REQUIRE(absl::IsInvalidArgument(c.status()));
    CHECK(Message(c.status()).rfind(message, 0) == 0);
  }
}

TEST_CASE("the core's defaults are the daemon's") {
  const CoreOptions d;
  const CoreOptions o = ToCoreOptions(DefaultDaemonConfig());
  CHECK(o.estimator_kind == d.estimator_kind);
  CHECK(o.estimator.degree == d.estimator.degree);
  CHECK(o.estimator.extrapolation_factor == d.estimator.extrapolation_factor);
  CHECK(o.estimator.min_distinct_samples == d.estimator.min_distinct_samples);
  CHECK(o.default_granularity == d.default_granularity);
  CHECK(o.margin_fraction == d.margin_fraction);
  CHECK(o.max_samples_per_model == d.max_samples_per_model);
}

}  // namespace
}  // namespace remat
