// soak: rematd under a long mixed load, watching for errors and for the
// daemon's memory growing.
//
// Starts the real daemon binary (planner/service/rematd, a data dependency)
// as a child process on 127.0.0.1:0 (--port-file) with a temporary
// --state-dir, so every mutating call goes through the write-ahead log, and
// a low --wal-compact-bytes so the log is compacted several times during
// the run. Then 64 clients (threads, each with its own channel and
// connection, as separate trainers) run a closed loop of mixed calls, each
// with a deadline:
//   GetPlan        most calls: a per-model hot set of (features, budget)
//                  keys (cache hits) and random features and budgets
//                  (misses; the key space is far larger than the cache);
//                  the answer must be a feasible PLAN for every block;
//   ReportOutcome  after a quarter of the plans: the plan's actions and a
//                  measured peak under the predicted one (a plan that
//                  worked), so calibration does not move;
//   ReportSamples  16 measured samples of a model at a time;
//   RegisterModel  a new model now and then (each seeded with a grid of
//                  samples before it is planned for), and idempotent
//                  re-registrations of existing ones (a restarted trainer);
//   GetModelState, ListModels  now and then.
// Samples follow a transformer-like law: retained bytes grow with
// batch*seq, plus noise of 0.5%. Every query lies inside the sampled
// range, and budgets lie between about half and 1.6 times the keep-all
// footprint (plus 128 MiB), so every GetPlan has a plan that fits.
//
// Bounded state: the daemon keeps every sample (up to max_samples_per_model
// per model) and every model, so a soak that kept registering models and
// sending samples would measure that growth, not a leak. New models and
// samples are therefore sent only during the first quarter of the RSS
// reference time (below), up to --models models and --samples-per-model
// samples each, as a fleet of trainers that have collected enough; after
// that the load is plans, outcomes, re-registrations and state queries,
// which must leave the daemon's memory flat. The plan cache is bounded by
// --plan-cache-capacity; outcomes are folded by log compaction. The rest of
// the reference time lets the daemon reach its steady state before the
// reference is read: refits make plans slow while samples arrive, so the
// full request rate, a full plan cache and compactions of the log at its
// full size (each holds a few copies of the log in memory for a moment)
// all come after the growth stops. With growth until 3/4 of the first
// minute, RSS still rose from 148 to 191 MiB between 60 and 100 s of a
// 10-minute run, then by 2% (to 195 MiB) in the 500 s after.
//
// Output: one JSON line every --interval-seconds and at the end (elapsed
// seconds, cumulative calls and errors per method, plans/s in the interval,
// the daemon's VmRSS, threads and open files, the plan cache's size and
// counters, the log's size), then a summary line:
//   {"bench":"soak","summary":true,"errors":0,"plans_per_s":...,
//    "rss_bytes_first_minute":...,"rss_bytes_end":...,"rss_growth":1.01,...}
// rss_bytes_first_minute is VmRSS at 60 s, or at 10% of the duration when
// that is shorter; rss_growth is end / first minute. Exit code 1 when any
// call failed (a non-OK status, a deadline miss, a COLLECT or unusable
// plan, a wrong `created`), the daemon died or exited non-zero, or
// rss_growth exceeds 1 + --max-rss-growth (default 0.10).
//
// Flags (all "--flag value"): --duration-seconds (600), --interval-seconds
// (10), --clients (64), --deadline-ms (5000), --models (32),
// --initial-models (8), --samples-per-model (1024), --plan-cache-capacity
// (4096), --wal-compact-bytes (4194304), --max-rss-growth (0.10),
// --rematd PATH (default: the runfile), --daemon-log-level (warn; info logs
// every plan), --keep-state (1: leave the temporary directory).
#include <fcntl.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/remote_planner.h"
#include "nlohmann/json.hpp"
#include "proto/remat.grpc.pb.h"

extern char** environ;

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kBaseBytes = 2 * kGiB;
constexpr int kMinBatch = 1, kMaxBatch = 8;
constexpr int kMinSeq = 64, kMaxSeq = 640;
constexpr int kSamplesPerReport = 16;
constexpr int kHotKeys = 16;        // per model
constexpr int kBudgetLevels = 64;   // budget fractions a miss draws from

struct Options {
  double duration_s = 600;
  double interval_s = 10;
  int clients = 64;
  int deadline_ms = 5000;
  int models = 32;
  int initial_models = 8;
  int samples_per_model = 1024;
  int64_t plan_cache_capacity = 4096;
  int64_t wal_compact_bytes = 4 << 20;
  double max_rss_growth = 0.10;
  std::string rematd;
  std::string daemon_log_level = "warn";
  bool keep_state = false;
};

enum Method {
  kGetPlan,
  kReportOutcome,
  kReportSamples,
  kRegisterModel,
  kGetModelState,
  kListModels,
  kNumMethods
};
constexpr std::array<const char*, kNumMethods> kMethodNames = {
    "GetPlan",       "ReportOutcome", "ReportSamples",
    "RegisterModel", "GetModelState", "ListModels"};

// The law every sample of every model follows; block i of `blocks`.
int64_t ActBytes(int i, double batch, double seq) {
  const double tokens = batch * seq;
  return static_cast<int64_t>(8192 * (1 + i % 3) * tokens + 1536 * tokens +
                              4096);
}
int64_t InputBytes(double batch, double seq) {
  return static_cast<int64_t>(2048 * batch * seq);
}
int64_t ForwardNs(int i, double batch, double seq) {
  return static_cast<int64_t>(150 * (1 + i % 2) * batch * seq + 8000);
}

// The base, 128 MiB, and `fraction` of the keep-all activations. At 0.45
// it is still about twice what the all-recompute plan needs on large
// inputs; the 128 MiB cover small inputs, where the estimator's upper
// bounds (residuals of the largest samples) exceed the activations
// themselves.
int64_t Budget(int blocks, double batch, double seq, double fraction) {
  double act = 0;
  for (int i = 0; i < blocks; ++i) act += ActBytes(i, batch, seq);
  return kBaseBytes + (int64_t{128} << 20) + static_cast<int64_t>(fraction * act);
}
double BudgetFraction(int level) {
  return 0.45 + (1.6 - 0.45) * level / (kBudgetLevels - 1);
}

struct Model {
  std::string name;
  int blocks = 0;  // embed + layers + head
  v1::ModelSpec spec;
  std::atomic<int> samples{0};  // sent or reserved
  struct Key {
    double batch, seq;
    int64_t budget;
  };
  std::vector<Key> hot;
};

void InitModel(int index, Model* m) {
  m->name = absl::StrCat("soak-model-", index);
  const int layers = 12 + 4 * (index % 4);
  m->blocks = layers + 2;
  m->spec.set_name(m->name);
  m->spec.add_feature_names("batch");
  m->spec.add_feature_names("seq");
  auto add = [m](const std::string& name, bool checkpointable) {
    v1::Block* b = m->spec.add_blocks();
    b->set_name(name);
    b->set_checkpointable(checkpointable);
  };
  add("embed", false);
  for (int i = 0; i < layers; ++i) add(absl::StrCat("layer", i), true);
  add("head", true);
  std::mt19937_64 rng(1000 + index);
  for (int k = 0; k < kHotKeys; ++k) {
    const double batch = std::uniform_int_distribution<int>(kMinBatch, kMaxBatch)(rng);
    const double seq = std::uniform_int_distribution<int>(kMinSeq, kMaxSeq)(rng);
    const double fraction = BudgetFraction(
        std::uniform_int_distribution<int>(0, kBudgetLevels - 1)(rng));
    m->hot.push_back({batch, seq, Budget(m->blocks, batch, seq, fraction)});
  }
}

void AddSample(const Model& m, double batch, double seq, std::mt19937_64* rng,
               v1::ReportSamplesRequest* r) {
  std::normal_distribution<double> noise(1.0, 0.005);
  v1::Sample* s = r->add_samples();
  (*s->mutable_features())["batch"] = batch;
  (*s->mutable_features())["seq"] = seq;
  for (int i = 0; i < m.blocks; ++i) {
    v1::BlockMeasurement* b = s->add_blocks();
    b->set_act_bytes(static_cast<int64_t>(ActBytes(i, batch, seq) *
                                          std::max(0.9, noise(*rng))));
    b->set_input_bytes(InputBytes(batch, seq));
    b->set_forward_ns(static_cast<int64_t>(ForwardNs(i, batch, seq) *
                                           std::max(0.9, noise(*rng))));
  }
  s->set_base_bytes(kBaseBytes);
}

// The grid a new model is seeded with before it is planned for: it spans
// the whole query range, so every query is trusted.
v1::ReportSamplesRequest SeedRequest(const Model& m, std::mt19937_64* rng) {
  v1::ReportSamplesRequest r;
  r.set_model(m.name);
  for (int batch : {1, 2, 3, 4, 6, 8}) {
    for (int seq = kMinSeq; seq <= kMaxSeq; seq += 32) {
      AddSample(m, batch, seq, rng, &r);
    }
  }
  return r;
}

std::string Runfile(const std::string& path) {
  if (const char* dir = getenv("RUNFILES_DIR")) {
    return absl::StrCat(dir, "/remat/", path);
  }
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return absl::StrCat(exe.string(), ".runfiles/remat/", path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A numeric field of /proc/<pid>/status ("VmRSS", "Threads"); 0 when it
// cannot be read. Sizes there are in kB.
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::atoll(line.c_str() + field.size() + 1);
    }
  }
  return 0;
}

int64_t RssBytes(pid_t pid) { return ProcStatus(pid, "VmRSS") * 1024; }

int64_t OpenFds(pid_t pid) {
  std::error_code ec;
  int64_t n = 0;
  for (std::filesystem::directory_iterator it(absl::StrCat("/proc/", pid, "/fd"), ec), end;
       !ec && it != end; it.increment(ec)) {
    ++n;
  }
  return n;
}

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

// Everything the clients share. Thread-safe: atomics, and `mu` for the
// list of models that may be planned for.
struct Shared {
  Options options;
  std::string address;
  Clock::time_point start;
  double grow_until_s = 0;  // no new models or samples after this
  std::atomic<bool> stop{false};

  std::vector<std::unique_ptr<Model>> models;  // all of them, fixed
  std::atomic<int> next_new_model{0};          // next index to register
  std::mutex mu;
  std::vector<int> ready;  // registered and seeded, guarded by mu

  std::array<std::atomic<uint64_t>, kNumMethods> calls{};
  std::array<std::atomic<uint64_t>, kNumMethods> errors{};
  std::atomic<uint64_t> plans{0};        // GetPlan answered with a PLAN
  std::atomic<uint64_t> cache_hits{0};   // of those, from the cache
  std::atomic<uint64_t> max_latency_us{0};  // since the last report
  std::atomic<int> error_lines{0};

  double elapsed_s() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  // When the k-th model beyond the initial ones is registered: spread over
  // the growth window.
  double due_s(int index) const {
    const int extra = options.models - options.initial_models;
    return grow_until_s * (index - options.initial_models + 1) / (extra + 1);
  }
};

// Counts one call of `method`; `ok` false is an error, `what` says why
// (the first 30 errors go to stderr).
void Record(Shared* sh, Method method, bool ok, Clock::time_point start,
            const std::string& what) {
  sh->calls[method].fetch_add(1, std::memory_order_relaxed);
  const uint64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                          Clock::now() - start)
                          .count();
  uint64_t seen = sh->max_latency_us.load(std::memory_order_relaxed);
  while (us > seen && !sh->max_latency_us.compare_exchange_weak(seen, us)) {
  }
  if (ok) return;
  sh->errors[method].fetch_add(1, std::memory_order_relaxed);
  if (sh->error_lines.fetch_add(1) < 30) {
    std::fprintf(stderr, "soak: %s error at %.1f s after %.0f ms: %s\n",
                 kMethodNames[method], sh->elapsed_s(), us / 1000.0,
                 what.c_str());
  }
}

std::string StatusText(const grpc::Status& s) {
  return absl::StrCat("status ", static_cast<int>(s.error_code()), ": ",
                      s.error_message());
}

class Client {
 public:
  Client(Shared* sh, int index) : sh_(sh), rng_(index * 7919 + 1) {
    // The client library's channel settings, and a connection per client,
    // as separate trainers would have.
    grpc::ChannelArguments args = DaemonChannelArguments();
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stub_ = v1::Planner::NewStub(grpc::CreateCustomChannel(
        sh->address, grpc::InsecureChannelCredentials(), args));
  }

  void Run() {
    while (!sh_->stop.load(std::memory_order_relaxed)) Step();
  }

  // Registers model `index` and seeds it; on success it may be planned for.
  bool RegisterAndSeed(int index) {
    Model& m = *sh_->models[index];
    if (!Register(m, /*expect_created=*/true)) return false;
    v1::ReportSamplesRequest seed = SeedRequest(m, &rng_);
    m.samples.fetch_add(seed.samples_size());
    if (!ReportSamples(seed)) return false;
    std::lock_guard lock(sh_->mu);
    sh_->ready.push_back(index);
    return true;
  }

 private:
  void SetDeadline(grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(sh_->options.deadline_ms));
  }

  void Step() {
    const double t = sh_->elapsed_s();
    const bool growing = t < sh_->grow_until_s;
    // A new model when one is due; one client wins it.
    int next = sh_->next_new_model.load();
    if (growing && next < sh_->options.models && t >= sh_->due_s(next) &&
        sh_->next_new_model.compare_exchange_strong(next, next + 1)) {
      RegisterAndSeed(next);
      return;
    }
    Model& m = *sh_->models[PickModel()];
    const int r = std::uniform_int_distribution<int>(0, 999)(rng_);
    if (r < 40) {
      if (growing) {
        MoreSamples(m);
      } else {
        GetPlan(m);
      }
    } else if (r < 45) {
      Register(m, /*expect_created=*/false);
    } else if (r < 55) {
      GetModelState(m);
    } else if (r < 60) {
      ListModels();
    } else {
      GetPlan(m);
    }
  }

  int PickModel() {
    std::lock_guard lock(sh_->mu);
    return sh_->ready[std::uniform_int_distribution<size_t>(
        0, sh_->ready.size() - 1)(rng_)];
  }

  bool Register(const Model& m, bool expect_created) {
    grpc::ClientContext c;
    SetDeadline(&c);
    v1::RegisterModelRequest request;
    *request.mutable_model() = m.spec;
    v1::RegisterModelResponse response;
    const auto start = Clock::now();
    const grpc::Status s = stub_->RegisterModel(&c, request, &response);
    const bool ok = s.ok() && response.created() == expect_created;
    Record(sh_, kRegisterModel, ok, start,
           s.ok() ? absl::StrCat(m.name, ": created ",
                                 response.created() ? "true" : "false")
                  : StatusText(s));
    return ok;
  }

  bool ReportSamples(const v1::ReportSamplesRequest& request) {
    grpc::ClientContext c;
    SetDeadline(&c);
    v1::ReportSamplesResponse response;
    const auto start = Clock::now();
    const grpc::Status s = stub_->ReportSamples(&c, request, &response);
    const bool ok = s.ok() && static_cast<int>(response.accepted()) ==
                                  request.samples_size();
    Record(sh_, kReportSamples, ok, start,
           s.ok() ? absl::StrCat("accepted ", response.accepted(), " of ",
                                 request.samples_size())
                  : StatusText(s));
    return ok;
  }

  // kSamplesPerReport more samples, while the model is under its share.
  void MoreSamples(Model& m) {
    if (m.samples.fetch_add(kSamplesPerReport) + kSamplesPerReport >
        sh_->options.samples_per_model) {
      m.samples.fetch_sub(kSamplesPerReport);
      GetPlan(m);
      return;
    }
    v1::ReportSamplesRequest request;
    request.set_model(m.name);
    for (int i = 0; i < kSamplesPerReport; ++i) {
      AddSample(m, std::uniform_int_distribution<int>(kMinBatch, kMaxBatch)(rng_),
                std::uniform_int_distribution<int>(kMinSeq, kMaxSeq)(rng_),
                &rng_, &request);
    }
    ReportSamples(request);
  }

  void GetPlan(const Model& m) {
    v1::GetPlanRequest request;
    request.set_model(m.name);
    double batch, seq;
    int64_t budget;
    if (std::uniform_int_distribution<int>(0, 9)(rng_) < 7) {
      const Model::Key& k =
          m.hot[std::uniform_int_distribution<int>(0, kHotKeys - 1)(rng_)];
      batch = k.batch;
      seq = k.seq;
      budget = k.budget;
    } else {
      batch = std::uniform_int_distribution<int>(kMinBatch, kMaxBatch)(rng_);
      seq = std::uniform_int_distribution<int>(kMinSeq, kMaxSeq)(rng_);
      budget = Budget(m.blocks, batch, seq,
                      BudgetFraction(std::uniform_int_distribution<int>(
                          0, kBudgetLevels - 1)(rng_)));
    }
    (*request.mutable_features())["batch"] = batch;
    (*request.mutable_features())["seq"] = seq;
    request.set_budget_bytes(budget);
    grpc::ClientContext c;
    SetDeadline(&c);
    v1::GetPlanResponse response;
    const auto start = Clock::now();
    const grpc::Status s = stub_->GetPlan(&c, request, &response);
    std::string what;
    if (!s.ok()) {
      what = StatusText(s);
    } else if (response.decision() != v1::PLAN) {
      what = absl::StrCat(m.name, " batch ", batch, " seq ", seq,
                          ": decision ", static_cast<int>(response.decision()), " (",
                          response.collect_reason(), ")");
    } else if (response.plan().blocks_size() != m.blocks ||
               !response.plan().feasible() ||
               response.plan().predicted_peak_bytes() > budget) {
      what = absl::StrCat(m.name, ": unusable plan (", response.plan().blocks_size(),
                          " blocks, feasible ", response.plan().feasible(),
                          ", peak ", response.plan().predicted_peak_bytes(),
                          " > budget ", budget, "?)");
    }
    Record(sh_, kGetPlan, what.empty(), start, what);
    if (!what.empty()) return;
    sh_->plans.fetch_add(1, std::memory_order_relaxed);
    if (response.from_cache()) {
      sh_->cache_hits.fetch_add(1, std::memory_order_relaxed);
    }
    if (std::uniform_int_distribution<int>(0, 3)(rng_) == 0) {
      ReportOutcome(m, request, response.plan());
    }
  }

  // A step that ran `plan` and measured 92% of its predicted peak.
  void ReportOutcome(const Model& m, const v1::GetPlanRequest& plan_request,
                     const v1::Plan& plan) {
    v1::ReportOutcomeRequest request;
    request.set_model(m.name);
    *request.mutable_features() = plan_request.features();
    for (const v1::BlockPlan& b : plan.blocks()) request.add_actions(b.action());
    request.set_measured_peak_bytes(
        static_cast<int64_t>(plan.predicted_peak_bytes() * 0.92));
    request.set_predicted_peak_bytes(plan.predicted_peak_bytes());
    request.set_step_ns(200'000'000 + plan.recompute_ns());
    grpc::ClientContext c;
    SetDeadline(&c);
    v1::ReportOutcomeResponse response;
    const auto start = Clock::now();
    const grpc::Status s = stub_->ReportOutcome(&c, request, &response);
    Record(sh_, kReportOutcome, s.ok(), start, StatusText(s));
  }

  void GetModelState(const Model& m) {
    grpc::ClientContext c;
    SetDeadline(&c);
    v1::GetModelStateRequest request;
    request.set_model(m.name);
    v1::GetModelStateResponse response;
    const auto start = Clock::now();
    const grpc::Status s = stub_->GetModelState(&c, request, &response);
    // Seeded before it was ready, so it has at least the grid.
    const bool ok = s.ok() && response.num_samples() >= 114 &&
                    response.model().blocks_size() == m.blocks;
    Record(sh_, kGetModelState, ok, start,
           s.ok() ? absl::StrCat(m.name, ": ", response.num_samples(),
                                 " samples, ", response.model().blocks_size(),
                                 " blocks")
                  : StatusText(s));
  }

  void ListModels() {
    size_t ready;
    {
      std::lock_guard lock(sh_->mu);
      ready = sh_->ready.size();
    }
    grpc::ClientContext c;
    SetDeadline(&c);
    v1::ListModelsResponse response;
    const auto start = Clock::now();
    const grpc::Status s =
        stub_->ListModels(&c, v1::ListModelsRequest(), &response);
    const bool ok = s.ok() && static_cast<size_t>(response.models_size()) >=
                                  ready;
    Record(sh_, kListModels, ok, start,
           s.ok() ? absl::StrCat(response.models_size(), " models, ", ready,
                                 " ready")
                  : StatusText(s));
  }

  Shared* sh_;
  std::mt19937_64 rng_;
  std::unique_ptr<v1::Planner::Stub> stub_;
};

// rematd as a child process; its stderr goes to `log_path`.
class Daemon {
 public:
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool Start(const std::vector<std::string>& argv, const std::string& log_path,
             const std::string& port_file) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr,
                               args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      std::fprintf(stderr, "soak: cannot start %s: %s\n", argv[0].c_str(),
                   std::strerror(rc));
      return false;
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      if (!Running()) {
        std::fprintf(stderr, "soak: rematd exited during start:\n%s",
                     ReadFile(log_path).c_str());
        return false;
      }
      auto ports = nlohmann::json::parse(ReadFile(port_file), nullptr, false);
      if (!ports.is_discarded() && ports.value("grpc_port", 0) > 0) {
        grpc_port_ = ports.value("grpc_port", 0);
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::fprintf(stderr, "soak: rematd did not serve within 30 s\n");
    return false;
  }

  // False once the daemon has exited (its code is then in exit_code()).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
      pid_ = -1;
      return false;
    }
    return true;
  }

  // SIGTERM, then the exit code (128 + signal when killed).
  int Stop() {
    if (!Running()) return exit_code_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

  pid_t pid() const { return pid_; }
  int grpc_port() const { return grpc_port_; }

 private:
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int exit_code_ = -1;
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "soak: %s needs a value\n", flag.c_str());
      return false;
    }
    const char* v = argv[i + 1];
    if (flag == "--duration-seconds") o->duration_s = std::atof(v);
    else if (flag == "--interval-seconds") o->interval_s = std::atof(v);
    else if (flag == "--clients") o->clients = std::atoi(v);
    else if (flag == "--deadline-ms") o->deadline_ms = std::atoi(v);
    else if (flag == "--models") o->models = std::atoi(v);
    else if (flag == "--initial-models") o->initial_models = std::atoi(v);
    else if (flag == "--samples-per-model") o->samples_per_model = std::atoi(v);
    else if (flag == "--plan-cache-capacity") o->plan_cache_capacity = std::atoll(v);
    else if (flag == "--wal-compact-bytes") o->wal_compact_bytes = std::atoll(v);
    else if (flag == "--max-rss-growth") o->max_rss_growth = std::atof(v);
    else if (flag == "--rematd") o->rematd = v;
    else if (flag == "--daemon-log-level") o->daemon_log_level = v;
    else if (flag == "--keep-state") o->keep_state = std::atoi(v) != 0;
    else {
      std::fprintf(stderr, "soak: unknown flag %s (see bench/soak.cc)\n",
                   flag.c_str());
      return false;
    }
  }
  if (o->duration_s <= 0 || o->interval_s <= 0 || o->clients < 1 ||
      o->deadline_ms < 1 || o->initial_models < 1 ||
      o->models < o->initial_models || o->models > 200 ||
      o->samples_per_model < 114) {
    std::fprintf(stderr,
                 "soak: need duration, interval, clients, deadline > 0, "
                 "1 <= initial-models <= models <= 200, samples-per-model "
                 ">= 114 (the seed grid)\n");
    return false;
  }
  return true;
}

Json Counts(const std::array<std::atomic<uint64_t>, kNumMethods>& counts) {
  Json j = Json::object();
  for (int m = 0; m < kNumMethods; ++m) j[kMethodNames[m]] = counts[m].load();
  return j;
}

uint64_t Sum(const std::array<std::atomic<uint64_t>, kNumMethods>& counts) {
  uint64_t n = 0;
  for (const auto& c : counts) n += c.load();
  return n;
}

int Main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  if (options.rematd.empty()) options.rematd = Runfile("planner/service/rematd");

  char dir_template[] = "/tmp/remat-soak-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr, "soak: cannot create a temporary directory\n");
    return 2;
  }
  const std::string dir = dir_template;
  const std::string state_dir = dir + "/state";
  const std::string wal_path = state_dir + "/wal.log";
  const std::string log_path = dir + "/rematd.log";
  const std::string port_file = dir + "/ports.json";
  Daemon daemon;
  const bool started = daemon.Start(
      {options.rematd, "--listen", "127.0.0.1:0", "--port-file", port_file,
       "--metrics-port", "-1", "--state-dir", state_dir, "--log-level",
       options.daemon_log_level, "--plan-cache-capacity",
       std::to_string(options.plan_cache_capacity), "--wal-compact-bytes",
       std::to_string(options.wal_compact_bytes)},
      log_path, port_file);
  if (!started) return 2;

  Shared sh;
  sh.options = options;
  sh.address = absl::StrCat("127.0.0.1:", daemon.grpc_port());
  // The RSS reference: after the first minute, or 10% of a shorter run.
  const double reference_s = std::min(60.0, 0.1 * options.duration_s);
  sh.grow_until_s = 0.25 * reference_s;
  for (int i = 0; i < options.models; ++i) {
    sh.models.push_back(std::make_unique<Model>());
    InitModel(i, sh.models.back().get());
  }
  sh.next_new_model = options.initial_models;
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < options.clients; ++c) {
    clients.push_back(std::make_unique<Client>(&sh, c));
  }
  sh.start = Clock::now();
  for (int i = 0; i < options.initial_models; ++i) {
    if (!clients[0]->RegisterAndSeed(i)) {
      std::fprintf(stderr, "soak: cannot register and seed %s\n",
                   sh.models[i]->name.c_str());
      return 1;
    }
  }
  std::fprintf(stderr,
               "soak: rematd pid %d on %s, state in %s; %d clients for %.0f "
               "s; new models and samples until %.1f s, RSS reference at "
               "%.1f s\n",
               static_cast<int>(daemon.pid()), sh.address.c_str(),
               state_dir.c_str(), options.clients, options.duration_s,
               sh.grow_until_s, reference_s);
  const pid_t pid = daemon.pid();
  sh.start = Clock::now();  // the run's clock starts with the load
  std::vector<std::thread> threads;
  for (auto& c : clients) threads.emplace_back([&c] { c->Run(); });

  // The reporter's own channel, for the cache's counters (not counted as
  // load).
  auto probe = v1::Planner::NewStub(grpc::CreateCustomChannel(
      sh.address, grpc::InsecureChannelCredentials(), DaemonChannelArguments()));
  int64_t rss_reference = 0, rss_max = 0;
  bool reference_taken = false, daemon_died = false;
  uint64_t last_plans = 0;
  double last_t = 0, next_report = options.interval_s;
  auto report = [&](double t) {
    const uint64_t plans = sh.plans.load();
    const int64_t rss = RssBytes(pid);
    rss_max = std::max(rss_max, rss);
    int ready;
    {
      std::lock_guard lock(sh.mu);
      ready = static_cast<int>(sh.ready.size());
    }
    uint64_t samples = 0;
    for (const auto& m : sh.models) samples += m->samples.load();
    Json line;
    line["bench"] = "soak";
    line["elapsed_s"] = std::round(t * 10) / 10;
    line["plans_per_s"] =
        std::round((plans - last_plans) / std::max(1e-9, t - last_t));
    line["cache_hits"] = sh.cache_hits.load();
    line["calls"] = Counts(sh.calls);
    line["errors"] = Counts(sh.errors);
    line["max_latency_ms"] = sh.max_latency_us.exchange(0) / 1000.0;
    line["models"] = ready;
    line["samples"] = samples;
    line["rss_bytes"] = rss;
    // Other things a leak would grow: threads, open files, cached plans.
    line["threads"] = ProcStatus(pid, "Threads");
    line["fds"] = OpenFds(pid);
    {
      grpc::ClientContext c;
      c.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(options.deadline_ms));
      v1::GetModelStateRequest request;
      request.set_model(sh.models[0]->name);
      v1::GetModelStateResponse state;
      if (probe->GetModelState(&c, request, &state).ok()) {
        line["cache_size"] = state.cache().size();
        line["cache_evictions"] = state.cache().evictions();
        line["cache_invalidations"] = state.cache().invalidations();
      }
    }
    line["wal_bytes"] = FileBytes(wal_path);
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
    last_plans = plans;
    last_t = t;
  };
  while (true) {
    const double t = sh.elapsed_s();
    if (!daemon.Running()) {
      std::fprintf(stderr, "soak: rematd died at %.1f s:\n%s", t,
                   ReadFile(log_path).c_str());
      daemon_died = true;
      break;
    }
    if (t >= options.duration_s) break;
    if (!reference_taken && t >= reference_s) {
      rss_reference = RssBytes(pid);
      reference_taken = true;
    }
    if (t >= next_report) {
      report(t);
      next_report += options.interval_s;
    }
    const double wake = std::min({next_report, options.duration_s,
                                  reference_taken ? options.duration_s
                                                  : reference_s});
    std::this_thread::sleep_for(std::chrono::duration<double>(
        std::clamp(wake - sh.elapsed_s(), 0.001, 0.5)));
  }
  sh.stop = true;
  for (auto& t : threads) t.join();
  const double total_s = sh.elapsed_s();
  const int64_t rss_end = daemon_died ? 0 : RssBytes(pid);
  report(total_s);
  const int exit_code = daemon.Stop();
  if (!reference_taken) rss_reference = rss_end;

  const uint64_t errors = Sum(sh.errors);
  const double growth =
      rss_reference > 0 ? static_cast<double>(rss_end) / rss_reference : 0;
  Json summary;
  summary["bench"] = "soak";
  summary["summary"] = true;
  summary["duration_s"] = std::round(total_s * 10) / 10;
  summary["clients"] = options.clients;
  summary["calls"] = Sum(sh.calls);
  summary["errors"] = errors;
  summary["errors_by_method"] = Counts(sh.errors);
  summary["plans_per_s"] = std::round(sh.plans.load() / total_s);
  summary["cache_hit_fraction"] =
      sh.plans.load() > 0
          ? std::round(1000.0 * sh.cache_hits.load() / sh.plans.load()) / 1000
          : 0.0;
  summary["rss_reference_s"] = reference_s;
  summary["rss_bytes_first_minute"] = rss_reference;
  summary["rss_bytes_end"] = rss_end;
  summary["rss_bytes_max"] = rss_max;
  summary["rss_growth"] = std::round(growth * 1000) / 1000;
  summary["wal_bytes"] = FileBytes(wal_path);
  summary["daemon_exit_code"] = exit_code;
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);

  const bool rss_ok = rss_end > 0 && growth <= 1 + options.max_rss_growth;
  if (!rss_ok) {
    std::fprintf(stderr, "soak: rematd's RSS grew from %lld to %lld bytes\n",
                 static_cast<long long>(rss_reference),
                 static_cast<long long>(rss_end));
  }
  // The end of the daemon's log (at level warn, normally only its start
  // and stop).
  const std::string log = ReadFile(log_path);
  if (!log.empty()) {
    std::fprintf(stderr, "soak: rematd's log (level %s), last 4 KiB:\n%s",
                 options.daemon_log_level.c_str(),
                 log.substr(log.size() > 4096 ? log.size() - 4096 : 0).c_str());
  }
  if (!options.keep_state) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "soak: state kept in %s\n", dir.c_str());
  }
  return errors == 0 && !daemon_died && exit_code == 0 && rss_ok ? 0 : 1;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) { return remat::Main(argc, argv); }
