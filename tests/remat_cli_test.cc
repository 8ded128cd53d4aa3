// The remat CLI binary against a real rematd: every daemon subcommand, both
// output formats, and the documented exit codes (exit 6 against rematd's
// health service held NOT_SERVING); rematd --validate-config on the example
// config and on bad ones.
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/remote_planner.h"
#include "nlohmann/json.hpp"
#include "planner/service/async_server.h"
#include "planner/service/health_service.h"
#include "tests/daemon_harness.h"

namespace remat {
namespace {

using testing::CommandResult;
using testing::DaemonProcess;
using testing::RunCommand;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Requires exit code `code`, printing what the command wrote when not.
#define REQUIRE_EXIT(r, code)                                    \
  do {                                                           \
    INFO("stdout: " << (r).out << "\nstderr: " << (r).err);      \
    REQUIRE((r).exit_code == (code));                            \
  } while (false)

CommandResult Remat(std::vector<std::string> args) {
  args.insert(args.begin(), testing::Runfile("client/remat"));
  return RunCommand(args);
}

TEST_CASE("remat subcommands against a real daemon") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({}).ok());
  const std::string addr = daemon.address();
  const ModelSpec spec = testing::TestModel("bert", 4);
  int64_t two_rows = 0;  // the least peak of 2 rows at seq 384
  int64_t fits = 0;      // the most rows at seq 384 that fit two_rows
  {
    RemotePlannerOptions o;
    o.address = addr;
    // Generous: under ASan, beside other tests on two cores, a call can
    // take seconds; this test is about the CLI, not the daemon's latency.
    o.call_deadline = std::chrono::milliseconds(20000);
    RemotePlanner planner(o);
    const absl::Status registered = planner.RegisterModel(spec);
    INFO(registered.ToString());
    REQUIRE(registered.ok());
    REQUIRE(planner.ReportSamples("bert", testing::TestSampleGrid(spec)).ok());
    two_rows = SmallestPeakBytes(
                   planner.GetPlan({"bert", {2, 384}, 1 << 20, ""}).status())
                   .value_or(0);
    REQUIRE(two_rows > 0);
    for (int b = 1; b <= 4; ++b) {
      if (planner.GetPlan({"bert", {double(b), 384}, two_rows, ""}).ok()) {
        fits = b;
      }
    }
    REQUIRE(fits >= 2);
  }

  CommandResult r = Remat({"health", "--address", addr});
  REQUIRE_EXIT(r, 0);
  REQUIRE(r.out == "SERVING\n");

  r = Remat({"models", "--address", addr});
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "MODEL"));
  REQUIRE(Contains(r.out, "bert"));
  r = Remat({"models", "--address", addr, "-o", "json"});
  REQUIRE_EXIT(r, 0);
  auto models = nlohmann::json::parse(r.out);
  REQUIRE(models["models"][0]["name"] == "bert");
  REQUIRE(models["models"][0]["num_blocks"] == spec.blocks.size());

  r = Remat({"model", "bert", "--address", addr});
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "samples"));
  REQUIRE(Contains(r.out, "layer0"));
  REQUIRE(Contains(r.out, "reserved margin  none"));
  r = Remat({"model", "bert", "--address", addr, "-o", "json"});
  REQUIRE_EXIT(r, 0);
  REQUIRE(nlohmann::json::parse(r.out)["num_samples"] ==
          "32");  // uint64 as string

  const std::vector<std::string> plan_args = {
      "--address", addr,      "--model",   "bert",
      "--feature", "seq=384", "--feature", "batch=4"};
  auto with = [&](std::vector<std::string> head,
                  std::vector<std::string> tail) {
    head.insert(head.end(), plan_args.begin(), plan_args.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  r = Remat(with({"plan"}, {"--budget", "6GiB"}));
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "decision"));
  REQUIRE(Contains(r.out, "PLAN"));
  REQUIRE(Contains(r.out, "batch=4 seq=384"));
  r = Remat(with({"plan"}, {"--budget", "6GiB", "-o", "json"}));
  REQUIRE_EXIT(r, 0);
  auto plan = nlohmann::json::parse(r.out);
  REQUIRE(plan["decision"] == "PLAN");
  REQUIRE(plan["from_cache"] == true);  // the table call above cached it
  REQUIRE(plan["plan"]["blocks"].size() == spec.blocks.size());

  // Exit 3: no plan fits (plan and explain).
  r = Remat(with({"plan"}, {"--budget", "1MiB"}));
  REQUIRE_EXIT(r, 3);
  REQUIRE(Contains(r.err, "no plan fits"));
  r = Remat(with({"explain"}, {"--budget", "1MiB"}));
  REQUIRE_EXIT(r, 3);
  REQUIRE(Contains(r.out, "NO"));
  REQUIRE(Contains(r.out, "REASON"));
  r = Remat(with({"explain"}, {"--budget", "6GiB", "-o", "json"}));
  REQUIRE_EXIT(r, 0);
  REQUIRE(nlohmann::json::parse(r.out)["plan"]["feasible"] == true);

  // --max-batch: the largest batch that fits, and the split.
  r = Remat(with({"plan"}, {"--budget", std::to_string(two_rows),
                            "--max-batch", "batch", "-o", "json"}));
  REQUIRE_EXIT(r, 0);
  auto fit = nlohmann::json::parse(r.out);
  CHECK(fit["max_batch"] == fits);
  CHECK(fit["micro_batches"] == (4 + fits - 1) / fits);
  CHECK(fit["batch"] == 4);
  r = Remat(with({"plan"}, {"--budget", std::to_string(two_rows),
                            "--max-batch", "batch"}));
  REQUIRE_EXIT(r, 0);
  CHECK(Contains(r.out, "micro_batches"));
  r = Remat(with({"plan"}, {"--budget", "1MiB", "--max-batch", "batch",
                            "-o", "json"}));
  REQUIRE_EXIT(r, 3);
  fit = nlohmann::json::parse(r.out);
  CHECK(fit["max_batch"] == 0);
  CHECK(fit["smallest_peak_bytes"] > 1 << 20);
  r = Remat(with({"plan"}, {"--budget", "6GiB", "--max-batch", "rows"}));
  REQUIRE_EXIT(r, 2);
  CHECK(Contains(r.err, "--feature"));

  // Exit 5: rejected.
  r = Remat({"model", "nope", "--address", addr});
  REQUIRE_EXIT(r, 5);
  REQUIRE(Contains(r.err, "NOT_FOUND"));
  r = Remat({"plan", "--address", addr, "--model", "bert", "--feature",
             "seq=384", "--budget", "6GiB"});
  REQUIRE_EXIT(r, 5);
  REQUIRE(Contains(r.err, "batch"));

  // Exit 2: usage.
  REQUIRE(Remat(with({"plan"}, {"--budget", "lots"})).exit_code == 2);
  REQUIRE(Remat({"plan", "--address", addr, "--model", "bert", "--feature",
                 "seq", "--budget", "1GiB"})
              .exit_code == 2);
  REQUIRE(Remat(with({"plan"}, {})).exit_code == 2);  // no --budget
  REQUIRE(Remat({"models", "-o", "yaml"}).exit_code == 2);
  REQUIRE(Remat({"frobnicate"}).exit_code == 2);
  REQUIRE(Remat({}).exit_code == 2);

  // --help documents the exit codes.
  r = Remat({"--help"});
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "4  daemon unreachable"));
  r = Remat({"plan", "--help"});
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "plan, explain: no plan fits the budget"));

  // Exit 4: unreachable.
  REQUIRE(daemon.Signal(SIGTERM) == 0);
  r = Remat({"health", "--address", addr});
  REQUIRE_EXIT(r, 4);
  REQUIRE(Contains(r.err, "is rematd running"));
  REQUIRE(Remat({"models", "--address", "unix:/nonexistent/rematd.sock"})
              .exit_code == 4);
}

std::string Rematd() { return testing::Runfile("planner/service/rematd"); }

TEST_CASE("remat health exits 6 while the server is not serving") {
  // rematd is NOT_SERVING only while it replays its log and once shutdown
  // has begun (when it no longer takes calls): too brief to catch. So this
  // serves rematd's own health service, held NOT_SERVING, on a socket.
  HealthService health;
  health.SetServingStatus("", false);
  health.SetServingStatus("remat.v1.Planner", false);
  const std::string socket = testing::MakeTempDir() + "/health.sock";
  grpc::ServerBuilder builder;
  builder.RegisterService(health.async_service());
  builder.AddListeningPort("unix:" + socket,
                           grpc::InsecureServerCredentials());
  ServingQueue queue(builder.AddCompletionQueue());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  health.Serve(&queue);
  std::thread io([&] { queue.Run(); });

  const std::string addr = "unix:" + socket;
  CommandResult r = Remat({"health", "--address", addr});
  CHECK(r.exit_code == 6);
  CHECK(Contains(r.out + r.err, "NOT_SERVING"));
  health.SetServingStatus("", true);
  health.SetServingStatus("remat.v1.Planner", true);
  CHECK(Remat({"health", "--address", addr}).exit_code == 0);

  server->Shutdown();
  queue.Shutdown();
  io.join();
}

TEST_CASE("remat health --wait waits for a daemon that is starting") {
  DaemonProcess daemon;
  const std::string socket = testing::MakeTempDir() + "/rematd.sock";
  const std::string addr = "unix:" + socket;
  // Asked before the daemon starts: waits for it, then answers.
  CommandResult waited;
  std::thread ask([&] {
    waited = Remat({"health", "--wait", "--timeout-ms", "60000", "--address",
                    addr});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(daemon.Start({"", socket, {}}).ok());
  ask.join();
  REQUIRE_EXIT(waited, 0);
  CHECK(waited.out == "SERVING\n");
  REQUIRE(daemon.Signal(SIGTERM) == 0);
  // Still none within the deadline: unreachable, as without --wait.
  CommandResult r =
      Remat({"health", "--wait", "--timeout-ms", "300", "--address", addr});
  REQUIRE_EXIT(r, 4);
}

TEST_CASE("rematd --validate-config") {
  CommandResult r =
      RunCommand({Rematd(), "--validate-config", "--config",
                  testing::Runfile("deploy/rematd.example.json")});
  INFO(r.err);
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "configuration OK"));

  r = RunCommand({Rematd(), "--validate-config", "--listen", "0.0.0.0:7421"});
  REQUIRE_EXIT(r, 2);
  REQUIRE(Contains(r.err, "listen (--listen)"));
  // Remote needs --allow-remote and TLS (the files are read at start).
  r = RunCommand({Rematd(), "--validate-config", "--listen", "0.0.0.0:7421",
                  "--allow-remote"});
  REQUIRE_EXIT(r, 2);
  REQUIRE(Contains(r.err, "TLS is off"));
  REQUIRE(RunCommand({Rematd(), "--validate-config", "--listen", "0.0.0.0:7421",
                      "--allow-remote", "--tls-cert", "/c.pem", "--tls-key",
                      "/k.pem"})
              .exit_code == 0);

  const std::string bad = testing::MakeTempDir() + "/bad.json";
  std::ofstream(bad) << R"({"core": {"margin_fraction": 2}})";
  r = RunCommand({Rematd(), "--validate-config", "--config", bad});
  REQUIRE_EXIT(r, 2);
  REQUIRE(Contains(r.err, "core.margin_fraction"));

  std::ofstream(bad) << R"({"metrics_prot": 1})";
  r = RunCommand({Rematd(), "--validate-config", "--config", bad});
  REQUIRE_EXIT(r, 2);
  REQUIRE(Contains(r.err, "metrics_prot"));

  r = RunCommand({Rematd(), "--no-such-flag"});
  REQUIRE_EXIT(r, 2);
  r = RunCommand({Rematd(), "--help"});
  REQUIRE_EXIT(r, 0);
  REQUIRE(Contains(r.out, "127.0.0.1:7421"));
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST_CASE("rematd --log-format json writes one JSON object per line") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({"", "", {"--log-format", "json"}}).ok());
  const ModelSpec spec = testing::TestModel("bert", 3);
  RemotePlannerOptions o;
  o.address = daemon.address();
  o.get_plan_deadline = std::chrono::milliseconds(10000);
  o.call_deadline = std::chrono::milliseconds(20000);  // as above
  RemotePlanner planner(o);
  REQUIRE(planner.RegisterModel(spec).ok());
  REQUIRE(planner.ReportSamples("bert", testing::TestSampleGrid(spec)).ok());
  REQUIRE(planner.GetPlan({"bert", {4, 256}, int64_t{1} << 30, ""}).ok());
  REQUIRE(planner.GetPlan({"bert", {4, 256}, int64_t{1} << 30, ""}).ok());
  REQUIRE(daemon.Signal(SIGTERM) == 0);

  std::istringstream lines(daemon.log());
  std::string line;
  int plans = 0, parsed = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    INFO(line);
    REQUIRE_FALSE(j.is_discarded());
    ++parsed;
    REQUIRE(j.contains("time"));
    REQUIRE(j.contains("level"));
    if (j["msg"] == "plan") {
      REQUIRE(j["model"] == "bert");
      REQUIRE(j["features"]["seq"] == 256.0);
      REQUIRE(j["budget_bytes"] == int64_t{1} << 30);
      REQUIRE(j["predicted_peak_bytes"].get<int64_t>() > 0);
      REQUIRE(j.contains("blocks_recomputed"));
      REQUIRE(j["from_cache"] == (plans == 1));
      ++plans;
    }
  }
  REQUIRE(plans == 2);
  REQUIRE(parsed >= 5);  // model_registered, state_loaded, serving, plans, ...
}

}  // namespace
}  // namespace remat
