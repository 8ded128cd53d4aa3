// rematd's security settings, against the real daemon process: the unix
// socket's mode and directory checks, stale and live sockets, the refusal
// of remote endpoints without --allow-remote and TLS, and TLS with and
// without client certificates (certificates made with openssl at test
// time), and the health-only listener (--health-listen).
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/remote_planner.h"
#include "proto/health.grpc.pb.h"
#include "proto/remat.grpc.pb.h"
#include "tests/daemon_harness.h"

namespace remat {
namespace {

using testing::CommandResult;
using testing::DaemonProcess;
using testing::RunCommand;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode;
}

// Health of `service` ("": the whole server) over `channel`: "SERVING", or
// "code N".
std::string Check(const std::shared_ptr<grpc::Channel>& channel,
                  const std::string& service = "") {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status s = stub->Check(&context, request, &response);
  if (!s.ok()) return "code " + std::to_string(s.error_code());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

std::string Check(const std::string& address) {
  return Check(MakeDaemonChannel(address));
}

std::string Check(const std::string& address, const DaemonTlsOptions& tls) {
  auto channel = MakeDaemonChannel(address, tls);
  REQUIRE(channel.ok());
  return Check(*channel);
}

// Starts a daemon that is expected to refuse; its error (log) or "started".
std::string StartError(DaemonProcess::Options options) {
  DaemonProcess daemon;
  const absl::Status s = daemon.Start(options);
  return s.ok() ? "started" : std::string(s.message());
}

// A test CA, and a server (127.0.0.1, localhost) and a client certificate
// it signed; EC P-256 keys, valid for two days.
struct Certs {
  std::string ca, server_cert, server_key, client_cert, client_key;
};

void OpenSsl(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  const CommandResult r = RunCommand(args);
  INFO(args[1] << ": " << r.err);
  REQUIRE(r.exit_code == 0);
}

Certs MakeCerts() {
  const std::string dir = testing::MakeTempDir();
  const std::string cnf = dir + "/openssl.cnf";
  std::ofstream(cnf) << R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
)";
  auto key = [&](const std::string& name) {
    const std::string path = dir + "/" + name + ".key";
    OpenSsl({"genpkey", "-algorithm", "EC", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-out", path});
    return path;
  };
  Certs c;
  const std::string ca_key = key("ca");
  c.ca = dir + "/ca.pem";
  OpenSsl({"req", "-new", "-x509", "-key", ca_key, "-out", c.ca, "-days", "2",
           "-subj", "/CN=remat test CA", "-config", cnf, "-extensions",
           "v3_ca"});
  auto sign = [&](const std::string& name, const std::string& key_path,
                  const std::string& serial) {
    const std::string csr = dir + "/" + name + ".csr";
    const std::string pem = dir + "/" + name + ".pem";
    OpenSsl({"req", "-new", "-key", key_path, "-out", csr, "-subj",
             "/CN=" + name, "-config", cnf});
    OpenSsl({"x509", "-req", "-in", csr, "-CA", c.ca, "-CAkey", ca_key,
             "-set_serial", serial, "-days", "2", "-out", pem, "-extfile", cnf,
             "-extensions", name});
    return pem;
  };
  c.server_key = key("server");
  c.server_cert = sign("server", c.server_key, "2");
  c.client_key = key("client");
  c.client_cert = sign("client", c.client_key, "3");
  return c;
}

TEST_CASE("the unix socket is 0660 by default and follows the flag") {
  const std::string dir = testing::MakeTempDir();
  {
    DaemonProcess daemon;
    const std::string socket = dir + "/rematd.sock";
    REQUIRE(daemon.Start({"", socket, {}}).ok());
    CHECK(S_ISSOCK(ModeOf(socket)));
    CHECK((ModeOf(socket) & 07777) == 0660);
    CHECK(Check(daemon.address()) == "SERVING");
  }
  {
    DaemonProcess daemon;
    const std::string socket = dir + "/private.sock";
    REQUIRE(daemon.Start({"", socket, {"--unix-socket-mode", "0600"}}).ok());
    CHECK((ModeOf(socket) & 07777) == 0600);
    CHECK(Check(daemon.address()) == "SERVING");
  }
  // A missing directory is created, 0750.
  DaemonProcess daemon;
  const std::string socket = dir + "/run/rematd.sock";
  REQUIRE(daemon.Start({"", socket, {}}).ok());
  CHECK((ModeOf(dir + "/run") & 07777) == 0750);
  CHECK((ModeOf(socket) & 07777) == 0660);
  // A mode that is not octal permission bits is a configuration error.
  const CommandResult r = RunCommand(
      {testing::Runfile("planner/service/rematd"), "--validate-config",
       "--listen", "", "--unix-socket", socket, "--unix-socket-mode", "666x"});
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "unix_socket_mode (--unix-socket-mode)"));
}

TEST_CASE("a socket directory that every user may write is refused") {
  for (mode_t mode : {mode_t{0777}, mode_t{01777}}) {
    const std::string dir = testing::MakeTempDir();
    REQUIRE(::chmod(dir.c_str(), mode) == 0);
    const std::string error = StartError({"", dir + "/rematd.sock", {}});
    INFO(error);
    CHECK(Contains(error, "unix_socket (--unix-socket)"));
    CHECK(Contains(error, "the directory \\\"" + dir));  // the log escapes "
    CHECK(Contains(error, "writable by every user"));
    CHECK(Contains(error, "chmod o-w " + dir));
  }
}

TEST_CASE("a stale socket does not block a start; a served one is refused") {
  const std::string dir = testing::MakeTempDir();
  const std::string socket = dir + "/rematd.sock";
  {
    DaemonProcess crashed;
    REQUIRE(crashed.Start({"", socket, {}}).ok());
    crashed.Signal(SIGKILL);
  }
  REQUIRE(S_ISSOCK(ModeOf(socket)));  // left behind
  DaemonProcess daemon;
  REQUIRE(daemon.Start({"", socket, {}}).ok());
  CHECK(Contains(daemon.log(), "stale_socket_removed"));
  CHECK(Check(daemon.address()) == "SERVING");

  // A second daemon on the same path must not take it over.
  const std::string error = StartError({"", socket, {}});
  INFO(error);
  CHECK(Contains(error, "is in use"));
  CHECK(Check(daemon.address()) == "SERVING");

  // Nor may it replace something that is not a socket.
  const std::string file = dir + "/not-a-socket";
  std::ofstream(file) << "x";
  CHECK(Contains(StartError({"", file, {}}), "is not a socket"));
}

TEST_CASE("remote endpoints need --allow-remote, and TCP needs TLS") {
  DaemonProcess::Options open;
  open.listen = "0.0.0.0:0";
  std::string error = StartError(open);
  INFO(error);
  CHECK(Contains(error, "listen (--listen)"));
  CHECK(Contains(error, "--allow-remote"));

  open.extra_args = {"--allow-remote"};
  error = StartError(open);
  INFO(error);
  CHECK(Contains(error, "TLS is off"));
  CHECK(Contains(error, "--tls-cert FILE --tls-key FILE"));

  error = StartError({"", "", {"--metrics-address", "0.0.0.0"}});
  INFO(error);
  CHECK(Contains(error, "metrics_address (--metrics-address)"));
  CHECK(Contains(error, "--allow-remote"));
}

TEST_CASE("TLS: a TLS client is served, a plaintext one is not") {
  const Certs certs = MakeCerts();
  DaemonProcess::Options options;
  options.listen = "0.0.0.0:0";  // not loopback; reached through 127.0.0.1
  options.extra_args = {"--allow-remote", "--tls-cert",     certs.server_cert,
                        "--tls-key",      certs.server_key, "--metrics-address",
                        "0.0.0.0"};
  DaemonProcess daemon;
  const absl::Status started = daemon.Start(options);
  INFO(started.message());
  REQUIRE(started.ok());
  const std::string address = daemon.address();

  DaemonTlsOptions tls;
  tls.ca_file = certs.ca;
  CHECK(Check(address, tls) == "SERVING");
  CHECK(Check("localhost:" + std::to_string(daemon.grpc_port()), tls) ==
        "SERVING");
  CHECK(Check(address) != "SERVING");  // plaintext

  // The remote planner and the CLI over TLS.
  RemotePlannerOptions o;
  o.address = address;
  o.tls = tls;
  o.call_deadline = std::chrono::milliseconds(20000);
  RemotePlanner planner(o);
  REQUIRE(planner.RegisterModel(testing::TestModel("bert")).ok());
  const std::string remat = testing::Runfile("client/remat");
  CommandResult r =
      RunCommand({remat, "health", "--address", address, "--tls-ca", certs.ca});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "SERVING"));
  r = RunCommand({remat, "health", "--address", address});
  CHECK(r.exit_code == 4);  // unreachable: no TLS handshake

  // A missing CA file is the client's error, not an unreachable daemon.
  tls.ca_file = certs.ca + ".missing";
  CHECK_FALSE(MakeDaemonChannel(address, tls).ok());
  o.tls = tls;
  RemotePlanner misconfigured(o);
  CHECK(absl::IsFailedPrecondition(
      misconfigured.RegisterModel(testing::TestModel("gpt"))));

  // The metrics port bound 0.0.0.0 (allowed by --allow-remote).
  CHECK(
      Contains(testing::HttpGet(daemon.metrics_port(), "/healthz"), "SERVING"));
}

TEST_CASE("TLS with --tls-client-ca refuses a client without a certificate") {
  const Certs certs = MakeCerts();
  DaemonProcess::Options options;
  options.extra_args = {"--tls-cert",     certs.server_cert, "--tls-key",
                        certs.server_key, "--tls-client-ca", certs.ca};
  DaemonProcess daemon;
  const absl::Status started = daemon.Start(options);
  INFO(started.message());
  REQUIRE(started.ok());
  const std::string address = daemon.address();

  DaemonTlsOptions tls;
  tls.ca_file = certs.ca;
  CHECK(Check(address, tls) != "SERVING");  // no client certificate
  CHECK(Check(address) != "SERVING");       // plaintext
  tls.cert_file = certs.client_cert;
  tls.key_file = certs.client_key;
  CHECK(Check(address, tls) == "SERVING");

  const std::string remat = testing::Runfile("client/remat");
  CommandResult r = RunCommand(
      {remat, "health", "--address", address, "--tls-ca", certs.ca,
       "--tls-cert", certs.client_cert, "--tls-key", certs.client_key});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  r = RunCommand({remat, "health", "--address", address, "--tls-ca", certs.ca});
  CHECK(r.exit_code == 4);
}

TEST_CASE("--health-listen serves health only, plaintext, on any address") {
  using grpc::health::v1::HealthCheckResponse;
  DaemonProcess::Options options;
  // Not loopback, and neither --allow-remote nor TLS.
  options.extra_args = {"--health-listen", "0.0.0.0:0"};
  DaemonProcess daemon;
  const absl::Status started = daemon.Start(options);
  INFO(started.message());
  REQUIRE(started.ok());
  REQUIRE(daemon.health_port() > 0);
  CHECK(daemon.health_port() != daemon.grpc_port());
  CHECK(Contains(daemon.log(), "health_listening"));
  const std::string address =
      "127.0.0.1:" + std::to_string(daemon.health_port());
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  CHECK(Check(channel) == "SERVING");
  CHECK(Check(channel, "remat.v1.Planner") == "SERVING");
  CHECK(Check(channel, "remat.v1.Nothing") ==
        "code " + std::to_string(grpc::StatusCode::NOT_FOUND));

  // The Planner is not served there, only on its own endpoint.
  auto planner = v1::Planner::NewStub(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    v1::ListModelsResponse response;
    const grpc::Status s =
        planner->ListModels(&context, v1::ListModelsRequest(), &response);
    CHECK(s.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    v1::GetPlanRequest request;
    v1::GetPlanResponse response;
    CHECK(planner->GetPlan(&context, request, &response).error_code() ==
          grpc::StatusCode::UNIMPLEMENTED);
  }
  CHECK(Check(daemon.address()) == "SERVING");

  // The CLI, as a probe would ask.
  const std::string remat = testing::Runfile("client/remat");
  CommandResult r = RunCommand(
      {remat, "health", "--address", address, "--service", "remat.v1.Planner"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);

  // SIGTERM: a watcher on the health listener is told NOT_SERVING, then the
  // stream ends; afterwards nothing answers SERVING.
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext watch;
  watch.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("remat.v1.Planner");
  auto reader = health->Watch(&watch, request);
  HealthCheckResponse response;
  REQUIRE(reader->Read(&response));
  CHECK(response.status() == HealthCheckResponse::SERVING);
  int exit_code = -1;
  std::thread stop([&] { exit_code = daemon.Signal(SIGTERM); });
  std::vector<int> seen;
  while (reader->Read(&response)) seen.push_back(response.status());
  reader->Finish();
  stop.join();
  CHECK(exit_code == 0);
  CHECK(seen == std::vector<int>{HealthCheckResponse::NOT_SERVING});
  CHECK(Check(channel) != "SERVING");
}

TEST_CASE("--health-listen on a port in use stops the start") {
  DaemonProcess first;
  REQUIRE(first.Start({}).ok());
  const std::string error = StartError(
      {"",
       "",
       {"--health-listen", "0.0.0.0:" + std::to_string(first.grpc_port())}});
  INFO(error);
  CHECK(Contains(error, "health_listen (--health-listen): cannot serve"));
  CHECK(Check(first.address()) == "SERVING");
}

TEST_CASE("unreadable TLS files stop the start, naming the flag") {
  const std::string dir = testing::MakeTempDir();
  const std::string error = StartError(
      {"", "", {"--tls-cert", dir + "/none.pem", "--tls-key", dir + "/k.pem"}});
  INFO(error);
  CHECK(Contains(error, "tls_cert (--tls-cert): cannot read"));
}

}  // namespace
}  // namespace remat
