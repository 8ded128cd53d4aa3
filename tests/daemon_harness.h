// Test support: runs the real rematd and remat binaries (Bazel data deps)
// as child processes, and builds a deterministic synthetic model with
// samples whose costs follow known formulas.
#ifndef REMAT_TESTS_DAEMON_HARNESS_H_
#define REMAT_TESTS_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "planner/model.h"

namespace remat {
namespace testing {

// Absolute path of a runfile, e.g. "planner/service/rematd".
std::string Runfile(const std::string& path);
// A fresh directory under /tmp (short, so unix socket paths fit).
std::string MakeTempDir();
std::string ReadFile(const std::string& path);

// One rematd child process. It listens on 127.0.0.1 (or Options::listen)
// with a port chosen by the kernel (--listen 127.0.0.1:0) and reports it
// through --port-file; or on a unix socket only.
class DaemonProcess {
 public:
  struct Options {
    std::string state_dir;    // empty: no state
    std::string unix_socket;  // set: serve only on this socket
    std::vector<std::string> extra_args;
    // The TCP address when unix_socket is empty. address() is 127.0.0.1
    // with the bound port whatever host this names (e.g. 0.0.0.0:0).
    std::string listen = "127.0.0.1:0";
  };
  DaemonProcess() = default;
  ~DaemonProcess();  // SIGKILLs a daemon still running
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Spawns rematd and waits (up to 20 s) until it serves. On failure the
  // error carries the daemon's stderr.
  absl::Status Start(const Options& options);
  // Sends `sig` and waits for the exit: the exit code, or 128 + signal.
  // A sanitizer report in the daemon's log ends the test process (exit 1).
  int Signal(int sig);
  bool running() const { return pid_ > 0; }

  // "127.0.0.1:PORT" or "unix:/path".
  const std::string& address() const { return address_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // The --health-listen port; 0 when not given.
  int health_port() const { return health_port_; }
  // Everything the daemon wrote to stderr (its log) so far.
  std::string log() const { return ReadFile(log_path_); }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string log_path_;
  std::string address_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int health_port_ = 0;
};

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};
// Runs argv[0] (a path) with the arguments; waits for it. A sanitizer
// report on its stderr ends the test process (exit 1).
CommandResult RunCommand(const std::vector<std::string>& argv);

// GET http://127.0.0.1:port/path; "" when it cannot connect. The whole
// answer, status line included.
std::string HttpGet(int port, const std::string& path);

// A transformer-like chain: "embed" (not checkpointable), layer0..n-1,
// "head"; features {batch, seq}.
ModelSpec TestModel(const std::string& name, int layers = 6);
// A sample at (batch, seq) whose per-block costs are exact degree-2
// polynomials of the features.
Sample TestSample(const ModelSpec& spec, double batch, double seq);
// A grid of distinct samples: batch in {1,2,4,8}, seq in {64,..,512}.
std::vector<Sample> TestSampleGrid(const ModelSpec& spec);

}  // namespace testing
}  // namespace remat

#endif  // REMAT_TESTS_DAEMON_HARNESS_H_
