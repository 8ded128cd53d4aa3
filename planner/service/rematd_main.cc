// rematd: the remat planner daemon. See `rematd --help`, proto/remat.proto
// and deploy/README.md.
//
// Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT) or a valid
// --validate-config; 1 when it cannot start; 2 for a bad configuration.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "planner/service/config.h"
#include "planner/service/daemon.h"
#include "planner/service/logging.h"
#include "planner/solver.h"

int main(int argc, char** argv) {
  // Block the shutdown signals in every thread (threads inherit the mask);
  // one thread waits for them with sigwait. Nothing runs in a handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{
      "rematd: the remat planner daemon (gRPC service remat.v1.Planner).\n"
      "Serves loopback TCP 127.0.0.1:7421 by default, and/or a unix socket;\n"
      "Prometheus text on http://127.0.0.1:7422/metrics.\n"
      "Security (deploy/README.md, \"Security\"):\n"
      "  * The unix socket gets mode --unix-socket-mode (default 0660: rematd's\n"
      "    user and group). Its directory is created 0750 when missing, and\n"
      "    refused when every user may write it or another non-root user owns\n"
      "    it. A socket left by a daemon that died is replaced; one that is\n"
      "    still served is refused.\n"
      "  * A non-loopback --listen needs --allow-remote and TLS (--tls-cert,\n"
      "    --tls-key); --tls-client-ca makes every TCP client present a\n"
      "    certificate signed by those CAs. TLS covers TCP only.\n"
      "  * A non-loopback --metrics-address needs --allow-remote (plain HTTP).\n"
      "  * --health-listen ADDR (off by default) serves grpc.health.v1.Health\n"
      "    only, never the Planner, in plaintext on any address, without\n"
      "    --allow-remote or TLS: it tells SERVING or NOT_SERVING and no data\n"
      "    (for kubelet gRPC probes, which dial the pod IP without TLS).\n"
      "  * Requests over --max-message-bytes (default 16 MiB) are refused;\n"
      "    --max-models, --max-blocks-per-model and --max-samples-per-request\n"
      "    bound what one client can make rematd hold.\n"
      "Exit codes: 0 clean shutdown or valid config, 1 cannot start,\n"
      "2 bad configuration.",
      "rematd"};
  remat::DaemonFlags flags;
  remat::AddDaemonFlags(&app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  auto config = remat::ResolveDaemonConfig(flags);
  absl::Status valid =
      config.ok() ? remat::ValidateDaemonConfig(*config, remat::SolverNames())
                  : config.status();
  if (!valid.ok()) {
    std::cerr << "rematd: invalid configuration: " << valid.message() << "\n";
    return 2;
  }
  if (flags.validate_config) {
    std::cout << "rematd: configuration OK\n";
    return 0;
  }

  // Debian's abseil checks every Mutex acquisition for lock-order cycles
  // (a debug aid that showed up as ~5% of GetPlan's CPU); the service's
  // lock order is fixed and tested, so skip the bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  remat::InitLogging(config->log_format(), config->log_level());
  remat::Daemon daemon(*config);
  if (absl::Status s = daemon.Start(flags.import_files); !s.ok()) {
    remat::LogEvent(spdlog::level::err, "cannot_start",
                    {{"error", std::string(s.message())}});
    daemon.Shutdown();
    return 1;
  }

  std::thread signal_waiter([&daemon, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    remat::LogEvent(spdlog::level::info, "signal",
                    {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    daemon.Shutdown();
  });
  daemon.Wait();
  signal_waiter.join();
  return 0;
}
