#include "tests/daemon_harness.h"

#include <algorithm>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace remat {
namespace testing {
namespace {

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

absl::Status Spawn(const std::vector<std::string>& argv,
                   const std::string& out_path, const std::string& err_path,
                   pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(pid, argv[0].c_str(), &actions, nullptr,
                             args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("posix_spawn ", argv[0], ": ", rc));
  }
  return absl::OkStatus();
}

// Under --config=asan/tsan the daemon and CLI binaries are instrumented
// too, but a report in a child process only reaches its stderr (and an
// exit code the test may not look at, or never see after SIGKILL): any
// report there fails the test process, with the child's stderr.
void FailOnSanitizerReport(const std::string& what, const std::string& err) {
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "WARNING: ThreadSanitizer",
                             "ThreadSanitizer: reported", "runtime error:"}) {
    if (err.find(marker) != std::string::npos) {
      std::fprintf(stderr, "%s reported \"%s\"; its stderr:\n%s\n",
                   what.c_str(), marker, err.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
}

}  // namespace

std::string Runfile(const std::string& path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (srcdir == nullptr) return path;  // run by hand from the workspace root
  return absl::StrCat(srcdir, "/", workspace ? workspace : "remat", "/", path);
}

std::string MakeTempDir() {
  char tmpl[] = "/tmp/rematXXXXXX";
  if (mkdtemp(tmpl) == nullptr) return "/tmp";
  return tmpl;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Signal(SIGKILL);
}

absl::Status DaemonProcess::Start(const Options& options) {
  if (dir_.empty()) dir_ = MakeTempDir();
  log_path_ = absl::StrCat(
      dir_, "/rematd.",
      std::chrono::steady_clock::now().time_since_epoch().count(), ".log");
  const std::string port_file = dir_ + "/ports.json";
  unlink(port_file.c_str());
  std::vector<std::string> argv = {Runfile("planner/service/rematd"),
                                   "--metrics-port", "0", "--port-file",
                                   port_file};
  // A short grace keeps tests quick; a test may ask for its own.
  if (std::find(options.extra_args.begin(), options.extra_args.end(),
                "--grace-seconds") == options.extra_args.end()) {
    argv.insert(argv.end(), {"--grace-seconds", "2"});
  }
  if (options.unix_socket.empty()) {
    argv.insert(argv.end(), {"--listen", options.listen});
  } else {
    argv.insert(argv.end(),
                {"--listen", "", "--unix-socket", options.unix_socket});
  }
  if (!options.state_dir.empty()) {
    argv.insert(argv.end(), {"--state-dir", options.state_dir});
  }
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  if (auto s = Spawn(argv, "/dev/null", log_path_, &pid_); !s.ok()) return s;

  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FailOnSanitizerReport("rematd", log());
      return absl::InternalError(
          absl::StrCat("rematd exited during start: ", log()));
    }
    struct stat st;
    if (stat(port_file.c_str(), &st) == 0) {
      auto ports = nlohmann::json::parse(ReadFile(port_file), nullptr, false);
      if (!ports.is_discarded()) {
        grpc_port_ = ports.value("grpc_port", 0);
        metrics_port_ = ports.value("metrics_port", 0);
        health_port_ = ports.value("health_port", 0);
        address_ = options.unix_socket.empty()
                       ? absl::StrCat("127.0.0.1:", grpc_port_)
                       : absl::StrCat("unix:", options.unix_socket);
        return absl::OkStatus();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Signal(SIGKILL);
  return absl::DeadlineExceededError(
      absl::StrCat("rematd did not start in 20 s: ", log()));
}

int DaemonProcess::Signal(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  const int code = WaitExit(pid_);
  pid_ = -1;
  FailOnSanitizerReport("rematd", log());
  return code;
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult result;
  const std::string dir = MakeTempDir();
  const std::string out = dir + "/out", err = dir + "/err";
  pid_t pid;
  if (!Spawn(argv, out, err, &pid).ok()) return result;
  result.exit_code = WaitExit(pid);
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  FailOnSanitizerReport(argv[0], result.err);
  unlink(out.c_str());
  unlink(err.c_str());
  rmdir(dir.c_str());
  return result;
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return "";
  }
  std::string answer;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, n);
  close(fd);
  return answer;
}

ModelSpec TestModel(const std::string& name, int layers) {
  ModelSpec spec;
  spec.name = name;
  spec.feature_names = {"batch", "seq"};
  spec.blocks.push_back({"embed", false});
  for (int i = 0; i < layers; ++i) {
    spec.blocks.push_back({absl::StrCat("layer", i), true});
  }
  spec.blocks.push_back({"head", true});
  return spec;
}

Sample TestSample(const ModelSpec& spec, double batch, double seq) {
  Sample s;
  s.features = {batch, seq};
  const double tokens = batch * seq;
  for (size_t i = 0; i < spec.blocks.size(); ++i) {
    BlockMeasurement m;
    // Retained bytes grow with tokens and (attention-like) with seq^2.
    m.act_bytes = static_cast<int64_t>(4096 * (1 + i % 3) * tokens +
                                       64 * seq * seq + 1024);
    m.input_bytes = static_cast<int64_t>(1024 * tokens);
    m.forward_ns = static_cast<int64_t>(200 * (1 + i % 2) * tokens + 5000);
    s.blocks.push_back(m);
  }
  s.base_bytes = 64 << 20;
  return s;
}

std::vector<Sample> TestSampleGrid(const ModelSpec& spec) {
  std::vector<Sample> samples;
  for (double batch : {1, 2, 4, 8}) {
    for (double seq = 64; seq <= 512; seq += 64) {
      samples.push_back(TestSample(spec, batch, seq));
    }
  }
  return samples;
}

}  // namespace testing
}  // namespace remat
