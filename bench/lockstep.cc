#include "bench/lockstep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>


namespace remat {
namespace {

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) _exit(1);
    done += static_cast<size_t>(n);
  }
}

// This machine's float matmul speed, FLOP/s (with the threads the
// benchmark runs with, RunQuietly).
double CpuFlopsPerS() {
  const int64_t n = 512;
  torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::Tensor c = torch::mm(a, b);  // warm
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  while (seconds < 0.5) {
    c = torch::mm(a, b);
    ++iters;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count();
  }
  return 2.0 * n * n * n * static_cast<double>(iters) / seconds;
}

}  // namespace

void RunQuietly(char** argv) {
  constexpr char kDone[] = "REMAT_BENCH_QUIET";
  if (std::getenv(kDone) != nullptr) return;
  setenv(kDone, "1", /*overwrite=*/1);
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  if (std::getenv("REMAT_BENCH_ANY_CPU") == nullptr) {
    setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0);
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
      for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
        if (!CPU_ISSET(cpu, &cpus)) continue;
        CPU_ZERO(&cpus);
        CPU_SET(cpu, &cpus);
        if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
          std::perror("bench: pinning to one CPU (running on all)");
        }
        break;
      }
    }
  }
  execv("/proc/self/exe", argv);
  std::perror("bench: exec to run quietly (running as is)");
}

StepProcess::StepProcess(const std::function<StepFn()>& make,
                         const std::vector<int>& close_in_child) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  std::fflush(nullptr);
  pid_ = fork();
  if (pid_ < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid_ == 0) {
    for (int fd : close_in_child) close(fd);
    close(to_child[1]);
    close(from_child[0]);
    FILE* in = fdopen(to_child[0], "r");
    try {
      const StepFn step = make();
      std::string line;
      for (int c; in != nullptr && (c = std::fgetc(in)) != EOF;) {
        if (c != '\n') {
          line.push_back(static_cast<char>(c));
          continue;
        }
        if (line == "end") break;
        WriteAll(from_child[1], step(line) + "\n");
        line.clear();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: %s\n", e.what());
      std::fflush(nullptr);
      _exit(1);
    }
    std::fflush(nullptr);
    _exit(0);
  }
  close(to_child[0]);
  close(from_child[1]);
  to_ = to_child[1];
  from_ = fdopen(from_child[0], "r");
}

std::string StepProcess::Call(const std::string& request) {
  WriteAll(to_, request + "\n");
  std::string line;
  for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) {
    line.push_back(static_cast<char>(c));
  }
  if (line.empty()) {
    std::fprintf(stderr, "bench: a strategy's process failed at \"%s\"\n",
                 request.c_str());
    std::exit(1);
  }
  return line;
}

StepProcess::~StepProcess() {
  WriteAll(to_, "end\n");
  close(to_);
  std::fclose(from_);
  int status = 0;
  waitpid(pid_, &status, 0);
}

std::vector<int> StepProcess::fds() const { return {to_, fileno(from_)}; }

// Runs `fn` in a child process and returns the text it produced; exits the
// benchmark if the child fails.
std::string RunIsolated(const std::function<std::string()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    close(fds[0]);
    std::string text;
    try {
      text = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: %s\n", e.what());
      std::fflush(nullptr);
      _exit(1);
    }
    WriteAll(fds[1], text);
    std::fflush(nullptr);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench: a strategy's process failed (status %d)\n",
                 status);
    std::exit(1);
  }
  return text;
}

std::vector<std::string> StrategyNames() {
  return {"none",  "all",   "sqrt",           "static_max", "mimose_greedy",
          "delta", "exact", "exact_recompute"};
}

std::unique_ptr<Planner> MakeStrategyPlanner(const std::string& strategy) {
  if (strategy == "none" || strategy == "all" || strategy == "sqrt") {
    return std::make_unique<FixedPlanner>(strategy);
  }
  CoreOptions core;
  if (strategy == "mimose_greedy") {
    core.estimator_kind = "mimose";
    // Mimose's own buckets: sequence lengths rounded up to 5 tokens.
    core.granularity = {{"seq", 5}};
  }
  return std::make_unique<LocalPlanner>(core);
}

TrainerOptions StrategyOptions(TrainerOptions o, const std::string& strategy) {
  o.solver = strategy;
  if (strategy == "exact_recompute") {
    o.solver = "exact";
    o.offload = false;  // no copy engine: nothing offloads
  }
  return o;
}

void EmulateH200Link(TrainerOptions* options) {
  if (options->device != "cpu" || options->host_link_gb_per_s != 0) return;
  const double flops =
      std::stod(RunIsolated([] { return std::to_string(CpuFlopsPerS()); }));
  options->host_link_gb_per_s = flops * kH200LinkBytesPerFlop / 1e9;
  std::printf("%s\n",
              nlohmann::json({{"bench", "e2e_link"},
                              {"cpu_flops_per_s", flops},
                              {"bytes_per_flop", kH200LinkBytesPerFlop},
                              {"link_gb_per_s", options->host_link_gb_per_s}})
                  .dump()
                  .c_str());
  std::fflush(stdout);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1) + 0.5)];
}


}  // namespace remat
