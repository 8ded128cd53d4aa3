// grpc_load: GetPlan throughput and latency of rematd's gRPC service under
// concurrent clients.
//
// Runs the real daemon (planner/service/daemon.h: the real PlannerService,
// PlannerCore and async server) in this process on a free loopback port,
// registers a 26-block model, seeds it with samples, and drives GetPlan
// from 1, 4, 16 and 64 clients with three mixes:
//   hit    every request hits the plan cache (32 warm keys, cycled);
//   miss   every request has a budget never asked before, so the estimator
//          and the exact solver run;
//   mixed  9 hits to 1 miss.
//
// The clients are a load generator in a separate process (this binary
// again, with --client), like gRPC's own benchmarks: each client has its
// own channel and TCP connection and keeps one GetPlan in flight (a closed
// loop: a trainer waiting for its plan), and one thread drives them all
// through a completion queue, so that the generator costs as little CPU as
// a gRPC client can. Latency is from the call's start to its completion
// being seen, so it includes any wait in the generator.
//
// On a 2-core machine the generator and the daemon compete for the CPUs.
// Each level is measured twice: cpus "split" pins the daemon to CPU 0 and
// the generator to CPU 1 (the usual benchmark layout, and what a node gives
// a daemon beside its trainers); cpus "shared" leaves both to the
// scheduler. One JSON line per (mix, clients, cpus):
//   {"bench":"grpc_load","clients":16,"mix":"hit","cpus":"split",
//    "plans_per_s":...,"p50_us":...,"p99_us":...,"errors":0,
//    "cpu_loop_ms":[29,83]}
// cpu_loop_ms: a fixed loop's time on each CPU just before the run (lower is
// faster; see FixedLoopMs). In "split", a slow CPU 1 bounds the generator,
// a slow CPU 0 the daemon.
// Plan-decision log lines are off (log level warn) so stderr is not timed.
//
// Flags: --seconds S per run (default 1.5); --clients N and --mix M run one
// level only.
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_model.h"
#include "client/remote_planner.h"
#include "planner/service/config.h"
#include "planner/service/daemon.h"
#include "planner/service/logging.h"
#include "proto/remat.grpc.pb.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kLayers = 24;
constexpr int64_t kGiB = int64_t{1} << 30;

v1::GetPlanRequest Request(double batch, double seq, int64_t budget) {
  v1::GetPlanRequest r;
  r.set_model("bench");
  (*r.mutable_features())["batch"] = batch;
  (*r.mutable_features())["seq"] = seq;
  r.set_budget_bytes(budget);
  return r;
}

struct RunResult {
  double plans_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  uint64_t errors = 0;
  std::vector<double> cpu_loop_ms;  // FixedLoopMs of each CPU, before the run
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

// Restricts every thread of this process to `cpu`, or lets them run on
// every CPU when cpu < 0. Threads started later inherit it.
void SetProcessCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int n = static_cast<int>(std::thread::hardware_concurrency());
  for (int c = 0; c < n; ++c) {
    if (cpu < 0 || c == cpu) CPU_SET(c, &set);
  }
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t tid = std::atoi(task.path().filename().c_str());
    sched_setaffinity(tid, sizeof(set), &set);
  }
}

// Times a fixed loop (100M additions) on `cpu`, in milliseconds. This VM's
// CPUs do not always run at the same speed (the same loop has measured 3x
// slower on one of them for minutes at a time), so each result line says
// how fast each CPU was just before its run.
double FixedLoopMs(int cpu) {
  cpu_set_t old_set, set;
  sched_getaffinity(0, sizeof(old_set), &old_set);
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
  const auto start = Clock::now();
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < 100'000'000; ++i) sum = sum + i;
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  sched_setaffinity(0, sizeof(old_set), &old_set);
  return ms;
}

// The load generator (see the top of the file). From start_ns to end_ns
// (steady clock, which is CLOCK_MONOTONIC and so shared by every process)
// it keeps one GetPlan in flight per client, then writes to `out_fd` its
// error count and one latency in microseconds per call, as doubles.
int ClientMain(const std::string& address, const std::string& mix,
               int clients, int64_t budget_base, int64_t start_ns,
               int64_t end_ns, int out_fd) {
  std::vector<std::unique_ptr<v1::Planner::Stub>> stubs;
  for (int c = 0; c < clients; ++c) {
    // The client library's channel settings, and a connection per client,
    // as separate trainers would have. Retries are off: the retry layer
    // costs the client CPU (~8% of plans/s here, where the 16 clients share
    // one generator thread; a trainer pays it on its own core) and a load
    // generator never retries.
    grpc::ChannelArguments args = DaemonChannelArguments();
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    stubs.push_back(v1::Planner::NewStub(grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args)));
    grpc::ClientContext context;  // connect before the clock starts
    v1::GetPlanResponse response;
    stubs.back()->GetPlan(&context, Request(1, 128, 12 * kGiB), &response);
  }
  std::vector<v1::GetPlanRequest> warm;
  for (int k = 0; k < 32; ++k) {
    warm.push_back(Request(1 + k % 8, 128 + 8 * (k / 8) * 16, 12 * kGiB));
  }
  // One call slot per client, reused: its response keeps its parsed
  // sub-messages' memory, so a call allocates little in the generator.
  struct Call {
    int client = 0;
    bool miss = false;
    Clock::time_point start;
    std::optional<grpc::ClientContext> context;  // one per call, by gRPC's rule
    v1::GetPlanResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::GetPlanResponse>>
        reader;
  };
  grpc::CompletionQueue cq;
  std::vector<Call> calls(clients);
  std::vector<int64_t> sent(clients, 0);
  v1::GetPlanRequest miss_request;
  for (int c = 0; c < clients; ++c) calls[c].client = c;
  auto start_call = [&](int c) {
    Call& call = calls[c];
    const int64_t i = sent[c]++;
    call.miss = mix == "miss" || (mix == "mixed" && (i + c) % 10 == 0);
    // A miss asks for a budget no call has asked for before.
    if (call.miss) {
      miss_request = Request(1 + (i + c) % 8, 128 + 8 * ((i * 7 + c) % 48),
                             budget_base + 4096 * (i * 1024 + c));
    }
    const v1::GetPlanRequest& request =
        call.miss ? miss_request : warm[(i + c) % warm.size()];
    call.context.emplace();
    call.response.Clear();
    call.start = Clock::now();
    call.reader = stubs[c]->AsyncGetPlan(&*call.context, request, &cq);
    call.reader->Finish(&call.response, &call.status, &call);
  };
  std::vector<double> out = {0};  // errors, then latencies
  out.reserve(1 << 20);
  std::this_thread::sleep_for(std::chrono::nanoseconds(start_ns - NowNs()));
  for (int c = 0; c < clients; ++c) start_call(c);
  int in_flight = clients;
  void* tag = nullptr;
  bool ok = false;
  // No per-call deadline (each costs a timer); calls still unanswered 5 s
  // after the run ends count as errors instead.
  const auto give_up = std::chrono::system_clock::now() +
                       std::chrono::nanoseconds(end_ns - NowNs()) +
                       std::chrono::seconds(5);
  while (in_flight > 0 && cq.AsyncNext(&tag, &ok, give_up) ==
                              grpc::CompletionQueue::GOT_EVENT) {
    const Call& call = *static_cast<Call*>(tag);
    out.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - call.start)
            .count());
    if (!ok || !call.status.ok() || call.response.decision() != v1::PLAN ||
        call.response.from_cache() == call.miss) {
      ++out[0];
    }
    if (NowNs() < end_ns) {
      start_call(call.client);
    } else {
      --in_flight;
    }
  }
  out[0] += in_flight;
  const char* p = reinterpret_cast<const char*>(out.data());
  size_t left = out.size() * sizeof(double);
  while (left > 0) {
    const ssize_t n = ::write(out_fd, p, left);
    if (n <= 0) return 1;
    p += n;
    left -= n;
  }
  // Unanswered calls would block gRPC's teardown.
  if (in_flight > 0) std::_Exit(0);
  return 0;
}

// Runs the load generator for `seconds` and gathers its latencies.
RunResult Run(const std::string& address, int clients, const std::string& mix,
              bool split_cpus, double seconds, int64_t budget_base) {
  RunResult r;
  for (int cpu = 0; cpu < static_cast<int>(std::thread::hardware_concurrency());
       ++cpu) {
    r.cpu_loop_ms.push_back(FixedLoopMs(cpu));
  }
  SetProcessCpu(split_cpus ? 0 : -1);
  // Time for the generator to start and connect before the clock starts.
  const int64_t start_ns = NowNs() + 300'000'000 + 5'000'000 * clients;
  const int64_t end_ns = start_ns + static_cast<int64_t>(seconds * 1e9);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    r.errors = 1;
    return r;
  }
  std::vector<std::string> args = {
      "grpc_load",  "--client",   address,
      "--mix",      mix,          "--clients",
      std::to_string(clients),    "--budget-base",
      std::to_string(budget_base), "--start-ns",
      std::to_string(start_ns),   "--end-ns",
      std::to_string(end_ns),     "--out-fd",
      std::to_string(pipe_fds[1]), "--cpu",
      split_cpus ? "1" : "-1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  std::vector<double> values;
  if (rc == 0) {
    std::vector<char> bytes;
    char buffer[1 << 16];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) {
      bytes.insert(bytes.end(), buffer, buffer + n);
    }
    values.resize(bytes.size() / sizeof(double));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) values.clear();
  }
  ::close(pipe_fds[0]);
  SetProcessCpu(-1);
  if (values.size() < 2) {
    r.errors = 1;  // the generator failed
    return r;
  }
  r.errors = static_cast<uint64_t>(values[0]);
  std::vector<double> latencies(values.begin() + 1, values.end());
  std::sort(latencies.begin(), latencies.end());
  r.plans_per_s = latencies.size() / seconds;
  r.p50_us = latencies[latencies.size() / 2];
  r.p99_us = latencies[std::min(latencies.size() - 1,
                                latencies.size() * 99 / 100)];
  return r;
}

int Main(int argc, char** argv) {
  double seconds = 1.5;
  std::vector<int> levels = {1, 4, 16, 64};
  std::vector<std::string> mixes = {"hit", "mixed", "miss"};
  std::string client_of;
  int64_t budget_base = 0, start_ns = 0, end_ns = 0;
  int out_fd = -1, cpu = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--seconds") seconds = std::atof(value);
    if (flag == "--clients") levels = {std::atoi(value)};
    if (flag == "--mix") mixes = {value};
    if (flag == "--client") client_of = value;
    if (flag == "--budget-base") budget_base = std::atoll(value);
    if (flag == "--start-ns") start_ns = std::atoll(value);
    if (flag == "--end-ns") end_ns = std::atoll(value);
    if (flag == "--out-fd") out_fd = std::atoi(value);
    if (flag == "--cpu") cpu = std::atoi(value);
  }
  // Debian's abseil checks every Mutex acquisition for lock-order cycles
  // (a debug aid that showed up as ~5% of GetPlan's CPU); rematd turns it
  // off too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (!client_of.empty()) {
    SetProcessCpu(cpu);
    return ClientMain(client_of, mixes[0], levels[0], budget_base, start_ns,
                      end_ns, out_fd);
  }
  InitLogging("text", "warn");
  v1::DaemonConfig config = DefaultDaemonConfig();
  config.set_listen("127.0.0.1:0");
  config.set_metrics_port(-1);
  Daemon daemon(config);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "grpc_load: cannot start the daemon: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  const std::string address =
      absl::StrCat("127.0.0.1:", daemon.grpc_port());
  auto stub = v1::Planner::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  if (absl::Status s = RegisterAndSeed(*stub, kLayers + 2); !s.ok()) {
    std::fprintf(stderr, "grpc_load: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // Warm the cache keys the "hit" mix cycles through.
  for (int k = 0; k < 32; ++k) {
    grpc::ClientContext c;
    v1::GetPlanResponse resp;
    grpc::Status s = stub->GetPlan(
        &c, Request(1 + k % 8, 128 + 8 * (k / 8) * 16, 12 * kGiB), &resp);
    if (!s.ok() || resp.decision() != v1::PLAN) {
      std::fprintf(stderr, "grpc_load: warm-up plan failed: %s %s\n",
                   s.error_message().c_str(), resp.collect_reason().c_str());
      return 1;
    }
  }
  stub.reset();  // the daemon's process serves only, as rematd does
  budget_base = 8 * kGiB;
  const bool can_split = std::thread::hardware_concurrency() >= 2;
  uint64_t total_errors = 0;
  for (const std::string& mix : mixes) {
    for (int clients : levels) {
      for (const bool split : {true, false}) {
        if (split && !can_split) continue;
        const RunResult r =
            Run(address, clients, mix, split, seconds, budget_base);
        budget_base += int64_t{1} << 40;  // budgets the next run has not seen
        total_errors += r.errors;
        std::printf(
            "{\"bench\":\"grpc_load\",\"clients\":%d,\"mix\":\"%s\","
            "\"cpus\":\"%s\",\"plans_per_s\":%.0f,\"p50_us\":%.1f,"
            "\"p99_us\":%.1f,\"errors\":%llu,\"cpu_loop_ms\":[%s]}\n",
            clients, mix.c_str(), split ? "split" : "shared", r.plans_per_s,
            r.p50_us, r.p99_us, static_cast<unsigned long long>(r.errors),
            absl::StrJoin(r.cpu_loop_ms, ",",
                          [](std::string* out, double ms) {
                            absl::StrAppend(out, static_cast<int>(ms));
                          })
                .c_str());
        std::fflush(stdout);
      }
    }
  }
  daemon.Shutdown();
  daemon.Wait();
  return total_errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) { return remat::Main(argc, argv); }
