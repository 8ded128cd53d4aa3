// remat._core: the C++ client core for Python (pybind11).
//
// What it binds, and nothing more: the planners (in process and remote),
// plan choice with its fallbacks (PlanChooser), the memory sources (the
// CPU tracker; the CUDA allocator's statistics in CUDA builds), the block
// sampler that turns a measured step into a Sample, the trace recorder, and
// OFFLOAD's copy engine and offloader (whose pack and unpack PyTorch's
// saved-tensor hooks call). How a step runs its blocks under a plan is
// PyTorch's business and lives in Python (remat/torch.py).
//
// Built with REMAT_NO_REMOTE_PLANNER (no gRPC), it has no RemotePlanner.
//
// Errors: a non-OK absl::Status becomes remat.Error (remat/errors.py) with
// the status code's name and the message.
//
// The GIL is released around every call that may wait on the daemon or
// solve a plan, so other Python threads (a data loader) keep running.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor
#include <torch/version.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/offload.h"
#include "client/plan_chooser.h"
#include "client/planner.h"
#ifndef REMAT_NO_REMOTE_PLANNER
#include "client/remote_planner.h"
#endif
#include "client/step_lifecycle.h"
#include "collector/block_sampler.h"
#include "collector/cpu_memory_tracker.h"
#include "collector/cuda_memory_source.h"
#include "collector/memory_source.h"
#include "collector/trace_recorder.h"
#include "kernels/copy_engine.h"
#include "planner/core.h"
#include "planner/estimator.h"
#include "planner/model.h"
#include "planner/plan.h"
#include "planner/solver.h"

namespace py = pybind11;

namespace remat {
namespace {

// Raises remat.Error(code, message) for a non-OK status (with the GIL);
// remat.BudgetError when it says no plan fits, with the smallest peak.
void Raise(const absl::Status& status) {
  py::module_ errors = py::module_::import("remat.errors");
  const std::optional<int64_t> smallest = SmallestPeakBytes(status);
  py::object error = errors.attr(smallest ? "BudgetError" : "Error");
  py::object instance =
      smallest ? error(std::string(status.message()), *smallest)
               : error(std::string(absl::StatusCodeToString(status.code())),
                       std::string(status.message()));
  PyErr_SetObject(error.ptr(), instance.ptr());
  throw py::error_already_set();
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Value(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// A MemorySource written in Python (a subclass of remat._core.MemorySource).
class PyMemorySource : public MemorySource {
 public:
  int64_t current_bytes() const override {
    PYBIND11_OVERRIDE_PURE(int64_t, MemorySource, current_bytes);
  }
  int64_t peak_bytes() const override {
    PYBIND11_OVERRIDE_PURE(int64_t, MemorySource, peak_bytes);
  }
  void reset_peak() override {
    PYBIND11_OVERRIDE_PURE(void, MemorySource, reset_peak);
  }
  bool absolute() const override {
    PYBIND11_OVERRIDE(bool, MemorySource, absolute);
  }
  void Synchronize() override {
    PYBIND11_OVERRIDE_NAME(void, MemorySource, "synchronize", Synchronize);
  }
  int64_t out_of_memory_count() const override {
    PYBIND11_OVERRIDE(int64_t, MemorySource, out_of_memory_count);
  }
  std::optional<int64_t> reserved_peak_bytes() const override {
    PYBIND11_OVERRIDE(std::optional<int64_t>, MemorySource,
                      reserved_peak_bytes);
  }
  std::string device_type() const override {
    PYBIND11_OVERRIDE(std::string, MemorySource, device_type);
  }
};

// A MemorySource::Attachment as a context manager; detach() (or leaving
// the with block) destroys it, on the thread that attached.
struct Attachment {
  std::unique_ptr<MemorySource::Attachment> held;
  void Detach() { held.reset(); }
};

// Runs `f` without the GIL: a call that may wait on a solve or the daemon.
template <typename F>
auto NoGil(F f) {
  py::gil_scoped_release released;
  return f();
}

std::chrono::milliseconds Ms(double ms) {
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

}  // namespace
}  // namespace remat

PYBIND11_MODULE(_core, m) {
  using namespace remat;
  m.doc() = "remat's C++ client core (see the remat package for the API).";

  py::enum_<Action> action(m, "Action",
                           "What a block does with its activations.");
  for (const ActionInfo& info : kActions) action.value(info.name, info.action);

  py::enum_<PlanSource>(m, "PlanSource", "Where a step's plan came from.")
      .value("LOCAL_CACHE", PlanSource::kLocalCache)
      .value("PLANNER", PlanSource::kPlanner)
      .value("COLLECT", PlanSource::kCollect)
      .value("LAST_GOOD", PlanSource::kLastGood)
      .value("SAFE", PlanSource::kSafe);

  py::class_<BlockSpec>(m, "BlockSpec")
      .def(py::init([](std::string name, bool checkpointable) {
             return BlockSpec{std::move(name), checkpointable};
           }),
           py::arg("name"), py::arg("checkpointable") = true)
      .def_readwrite("name", &BlockSpec::name)
      .def_readwrite("checkpointable", &BlockSpec::checkpointable);

  py::class_<ModelSpec>(m, "ModelSpec")
      .def(py::init([](std::string name, std::vector<std::string> features,
                       std::vector<BlockSpec> blocks) {
             return ModelSpec{std::move(name), std::move(features),
                              std::move(blocks)};
           }),
           py::arg("name"), py::arg("feature_names"), py::arg("blocks"))
      .def_readwrite("name", &ModelSpec::name)
      .def_readwrite("feature_names", &ModelSpec::feature_names)
      .def_readwrite("blocks", &ModelSpec::blocks)
      .def("validate", [](const ModelSpec& s) { Check(ValidateModelSpec(s)); });

  py::class_<BlockMeasurement>(m, "BlockMeasurement")
      .def(py::init<>())
      .def_readwrite("act_bytes", &BlockMeasurement::act_bytes)
      .def_readwrite("input_bytes", &BlockMeasurement::input_bytes)
      .def_readwrite("forward_ns", &BlockMeasurement::forward_ns)
      .def_readwrite("workspace_bytes", &BlockMeasurement::workspace_bytes)
      .def_readwrite("transfer_bytes", &BlockMeasurement::transfer_bytes);

  py::class_<Sample>(m, "Sample")
      .def(py::init<>())
      .def_readwrite("features", &Sample::features)
      .def_readwrite("blocks", &Sample::blocks)
      .def_readwrite("base_bytes", &Sample::base_bytes)
      .def_readwrite("peak_bytes", &Sample::peak_bytes)
      .def_readwrite("tail_bytes", &Sample::tail_bytes)
      .def_readwrite("d2h_bytes_per_s", &Sample::d2h_bytes_per_s)
      .def_readwrite("h2d_bytes_per_s", &Sample::h2d_bytes_per_s)
      .def_readwrite("device", &Sample::device);

  py::class_<Outcome>(m, "Outcome")
      .def(py::init<>())
      .def_readwrite("model", &Outcome::model)
      .def_readwrite("features", &Outcome::features)
      .def_readwrite("actions", &Outcome::actions)
      .def_readwrite("measured_peak_bytes", &Outcome::measured_peak_bytes)
      .def_readwrite("step_ns", &Outcome::step_ns)
      .def_readwrite("out_of_memory", &Outcome::out_of_memory)
      .def_readwrite("plan_source", &Outcome::plan_source)
      .def_readwrite("copy_wait_ns", &Outcome::copy_wait_ns)
      .def_readwrite("reserved_peak_bytes", &Outcome::reserved_peak_bytes)
      .def_readwrite("device", &Outcome::device);

  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan")
      .def_readonly("actions", &Plan::actions)
      .def_readonly("reasons", &Plan::reasons)
      .def_readonly("feasible", &Plan::feasible)
      .def_readonly("predicted_peak_bytes", &Plan::predicted_peak_bytes)
      .def_readonly("recompute_ns", &Plan::recompute_ns)
      .def_readonly("exposed_transfer_ns", &Plan::exposed_transfer_ns)
      .def_readonly("copies_out_landed", &Plan::copies_out_landed)
      .def_readonly("solver", &Plan::solver)
      .def_readonly("optimality_gap_ns", &Plan::optimality_gap_ns);

  m.def(
      "plan_for_sample",
      [](const ModelSpec& spec, const Sample& sample, int64_t budget_bytes,
         const std::string& solver) {
        Check(ValidateModelSpec(spec));
        Check(Prefixed("sample.", ValidateSample(spec, sample)));
        Check(ValidateBudget(budget_bytes));
        std::unique_ptr<Solver> s = Value(NewSolver(solver));
        const PlanProblem problem = MakePlanProblem(spec, sample, budget_bytes);
        return std::make_shared<Plan>(NoGil([&] { return s->Solve(problem); }));
      },
      py::arg("spec"), py::arg("sample"), py::arg("budget_bytes"),
      py::arg("solver") = "exact",
      "The plan `solver` makes for the batch `sample` measured, from its own "
      "quantities (no estimate, no bound, no calibration): the plan in "
      "hindsight.");

  py::class_<PlanResult>(m, "PlanResult")
      .def_readonly("collect", &PlanResult::collect)
      .def_readonly("collect_reason", &PlanResult::collect_reason)
      .def_property_readonly(
          "plan",
          [](const PlanResult& r) { return std::make_shared<Plan>(*r.plan); })
      .def_readonly("from_cache", &PlanResult::from_cache)
      .def_readonly("bucket", &PlanResult::bucket);

  // The planners. Every call may block (a solve, the daemon): no GIL.
  py::class_<Planner>(m, "Planner", "A planner: in process or rematd.")
      .def(
          "register_model",
          [](Planner& p, const ModelSpec& spec) {
            Check(NoGil([&] { return p.RegisterModel(spec); }));
          },
          py::arg("spec"))
      .def(
          "get_plan",
          [](Planner& p, const std::string& model, Features features,
             int64_t budget_bytes, const std::string& solver, bool offload,
             bool offload_checkpoints, const std::string& device) {
            PlanRequest request;
            request.device = device;
            request.model = model;
            request.features = std::move(features);
            request.budget_bytes = budget_bytes;
            request.solver = solver;
            request.offload = offload;
            request.offload_checkpoints = offload_checkpoints;
            return Value(NoGil([&] { return p.GetPlan(request); }));
          },
          py::arg("model"), py::arg("features"), py::arg("budget_bytes"),
          py::arg("solver") = "", py::arg("offload") = true,
          py::arg("offload_checkpoints") = false, py::arg("device") = "")
      .def(
          "report_samples",
          [](Planner& p, const std::string& model,
             const std::vector<Sample>& samples) {
            Check(NoGil([&] { return p.ReportSamples(model, samples); }));
          },
          py::arg("model"), py::arg("samples"))
      .def(
          "report_outcome",
          [](Planner& p, const Outcome& outcome) {
            Check(NoGil([&] { return p.ReportOutcome(outcome); }));
          },
          py::arg("outcome"));

  py::class_<LocalPlanner, Planner>(m, "LocalPlanner")
      .def(py::init([](std::map<std::string, double> granularity,
                       const std::string& default_solver,
                       double margin_fraction, double host_link_bytes_per_s) {
             CoreOptions options;
             for (const auto& [name, g] : granularity) {
               options.granularity[name] = g;
             }
             if (!default_solver.empty()) {
               options.default_solver = default_solver;
             }
             options.margin_fraction = margin_fraction;
             options.host_link_bytes_per_s = host_link_bytes_per_s;
             return std::make_unique<LocalPlanner>(options);
           }),
           py::arg("granularity") = std::map<std::string, double>{},
           py::arg("default_solver") = "", py::arg("margin_fraction") = 0.0,
           py::arg("host_link_bytes_per_s") = 0.0)
      .def(
          "model_state",
          [](LocalPlanner& p, const std::string& model,
             const std::string& device) {
            return Value(p.core().GetModelState(model, device));
          },
          py::arg("model"), py::arg("device") = "");

  py::class_<ModelState>(m, "ModelState")
      .def_readonly("spec", &ModelState::spec)
      .def_readonly("device", &ModelState::device)
      .def_readonly("num_samples", &ModelState::num_samples)
      .def_readonly("num_quarantined", &ModelState::num_quarantined)
      .def_readonly("outcomes", &ModelState::outcomes)
      .def_readonly("out_of_memory", &ModelState::out_of_memory)
      .def_readonly("outcomes_quarantined", &ModelState::outcomes_quarantined)
      .def_readonly("reserved_ratio", &ModelState::reserved_ratio)
      .def_readonly("reserved_outcomes", &ModelState::reserved_outcomes);

  // A build without gRPC (bench/gpu_peers.sh compiles the module with the
  // compiler alone) plans in process only.
#ifndef REMAT_NO_REMOTE_PLANNER
  py::class_<RemotePlanner, Planner>(m, "RemotePlanner")
      .def(py::init([](const std::string& address, double get_plan_deadline_ms,
                       double call_deadline_ms, int max_attempts,
                       const std::string& tls_ca_file,
                       const std::string& tls_cert_file,
                       const std::string& tls_key_file) {
             RemotePlannerOptions options;
             options.address = address;
             options.get_plan_deadline = Ms(get_plan_deadline_ms);
             options.call_deadline = Ms(call_deadline_ms);
             options.max_attempts = max_attempts;
             options.tls = {tls_ca_file, tls_cert_file, tls_key_file};
             return std::make_unique<RemotePlanner>(options);
           }),
           py::arg("address") = std::string(kDefaultDaemonAddress),
           py::arg("get_plan_deadline_ms") = 50.0,
           py::arg("call_deadline_ms") = 2000.0, py::arg("max_attempts") = 3,
           py::arg("tls_ca_file") = "", py::arg("tls_cert_file") = "",
           py::arg("tls_key_file") = "")
      .def(
          "plans_from_daemon",
          [](const RemotePlanner& p) { return p.stats().plans_from_daemon; });
#endif

  py::class_<PlanChoice>(m, "PlanChoice")
      .def_readonly("actions", &PlanChoice::actions)
      .def_readonly("copies_out_landed", &PlanChoice::copies_out_landed)
      .def_readonly("source", &PlanChoice::source)
      .def_readonly("predicted_peak_bytes", &PlanChoice::predicted_peak_bytes)
      .def_readonly("solver", &PlanChoice::solver)
      .def_property_readonly("collect", &PlanChoice::collect)
      .def_readonly("bucket", &PlanChoice::bucket)
      .def_property_readonly("planner_error",
                             [](const PlanChoice& c) -> py::object {
                               if (c.planner_status.ok()) return py::none();
                               return py::str(c.planner_status.ToString());
                             })
      .def_readonly("smallest_peak_bytes", &PlanChoice::smallest_peak_bytes);

  py::class_<BatchFit>(m, "BatchFit")
      .def_readonly("max_batch", &BatchFit::max_batch)
      .def_readonly("micro_batches", &BatchFit::micro_batches)
      .def_readonly("smallest_peak_bytes", &BatchFit::smallest_peak_bytes)
      .def("__repr__", [](const BatchFit& f) {
        return absl::StrCat("BatchFit(max_batch=", f.max_batch,
                            ", micro_batches=", f.micro_batches, ")");
      });

  py::class_<PlanChooserStats>(m, "PlanChooserStats")
      .def_readonly("local_hits", &PlanChooserStats::local_hits)
      .def_readonly("planner_calls", &PlanChooserStats::planner_calls)
      .def_readonly("collects", &PlanChooserStats::collects)
      .def_readonly("fallbacks_last_good",
                    &PlanChooserStats::fallbacks_last_good)
      .def_readonly("fallbacks_safe", &PlanChooserStats::fallbacks_safe);

  py::class_<PlanChooser>(m, "PlanChooser")
      .def(py::init([](Planner* planner, ModelSpec spec, size_t cache_capacity,
                       std::map<std::string, double> granularity,
                       std::string solver, bool offload,
                       bool offload_checkpoints, std::string device) {
             PlanChooserOptions options;
             options.device = std::move(device);
             options.cache_capacity = cache_capacity;
             for (const auto& [name, g] : granularity) {
               options.granularity[name] = g;
             }
             options.solver = std::move(solver);
             options.offload = offload;
             options.offload_checkpoints = offload_checkpoints;
             return std::make_unique<PlanChooser>(planner, std::move(spec),
                                                  options);
           }),
           py::arg("planner"), py::arg("spec"), py::arg("cache_capacity") = 256,
           py::arg("granularity") = std::map<std::string, double>{},
           py::arg("solver") = "", py::arg("offload") = false,
           py::arg("offload_checkpoints") = false, py::arg("device") = "",
           // The chooser holds the planner: keep it alive as long.
           py::keep_alive<1, 2>())
      .def_property_readonly(
          "device",
          [](const PlanChooser& c) { return c.options().device; })
      .def("choose", &PlanChooser::Choose, py::arg("features"),
           py::arg("budget_bytes"),
           py::call_guard<py::gil_scoped_release>())
      .def_static(
          "check_actions",
          [](const ModelSpec& spec, const std::vector<Action>& actions,
             bool offload, bool offload_checkpoints) {
            Check(PlanChooser::CheckActions(spec, actions, offload,
                                            offload_checkpoints));
          },
          py::arg("spec"), py::arg("actions"), py::arg("offload") = false,
          py::arg("offload_checkpoints") = false)
      .def(
          "smallest_peak_bytes",
          [](PlanChooser& c, const Features& features) {
            return NoGil([&] { return c.SmallestPeakBytes(features); });
          },
          py::arg("features"))
      .def(
          "fit_batch",
          [](PlanChooser& c, const Features& features, int64_t budget_bytes,
             size_t batch_feature) {
            absl::StatusOr<BatchFit> fit;
            {
              py::gil_scoped_release release;
              fit = c.FitBatch(features, budget_bytes, batch_feature);
            }
            return Value(std::move(fit));
          },
          py::arg("features"), py::arg("budget_bytes"),
          py::arg("batch_feature"))
      .def("invalidate_plans", &PlanChooser::InvalidatePlans)
      .def("stats", &PlanChooser::stats);

  // The one step lifecycle (client/step_lifecycle.h): remat.torch runs
  // its steps through it, as the C++ runtime does.
  py::class_<StepLifecycle>(m, "StepLifecycle")
      .def(py::init([](Planner* planner, PlanChooser* chooser,
                       MemorySource* memory, TraceRecorder* trace,
                       bool report_outcomes, int64_t link_probe_bytes,
                       int link_probe_steps, int warmup_steps,
                       const std::string& over_budget) {
             StepLifecycleOptions o;
             if (over_budget == "run") {
               o.over_budget = StepLifecycleOptions::OverBudget::kRun;
             } else if (over_budget != "raise") {
               Raise(absl::InvalidArgumentError(absl::StrCat(
                   "over_budget: \"", over_budget,
                   "\"; use \"raise\" or \"run\"")));
             }
             o.memory = memory;
             o.trace = trace;
             o.report_outcomes = report_outcomes;
             o.link_probe_bytes = link_probe_bytes;
             o.link_probe_steps = link_probe_steps;
             o.warmup_steps = warmup_steps;
             return std::make_unique<StepLifecycle>(planner, chooser, o);
           }),
           py::arg("planner"), py::arg("chooser"), py::arg("memory") = nullptr,
           py::arg("trace") = nullptr, py::arg("report_outcomes") = true,
           py::arg("link_probe_bytes") = int64_t{16} << 20,
           py::arg("link_probe_steps") = 8, py::arg("warmup_steps") = 1,
           py::arg("over_budget") = "raise",
           // It holds all four: keep them alive as long.
           py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           py::keep_alive<1, 4>(), py::keep_alive<1, 5>())
      .def(
          "begin",
          [](StepLifecycle& l, const Features& features, int64_t budget_bytes,
             int64_t held_bytes) {
            absl::StatusOr<std::unique_ptr<StepSession>> session;
            {
              py::gil_scoped_release release;
              session = l.Begin(features, budget_bytes, held_bytes);
            }
            return Value(std::move(session));
          },
          py::arg("features"), py::arg("budget_bytes"),
          py::arg("held_bytes") = 0, py::keep_alive<0, 1>())
      .def(
          "retry",
          [](StepLifecycle& l, const StepSession& failed) {
            absl::StatusOr<std::unique_ptr<StepSession>> session;
            {
              py::gil_scoped_release release;
              session = l.Retry(failed);
            }
            return Value(std::move(session));
          },
          py::arg("failed"), py::keep_alive<0, 1>());

  py::class_<StepSession>(m, "StepSession")
      .def_property_readonly("choice", &StepSession::choice)
      .def("start", &StepSession::Start, py::arg("resident_bytes"),
           py::return_value_policy::reference_internal)
      .def_property_readonly("started", &StepSession::started)
      .def_property_readonly("finished", &StepSession::finished)
      .def(
          "finish",
          [](StepSession& s, int64_t copy_wait_ns, py::object probe) {
            LinkProbe link;
            if (!probe.is_none()) {
              // Python's probe returns (d2h, h2d) bytes/s, or None when
              // the link could not be timed.
              link = [probe](int64_t bytes)
                  -> absl::StatusOr<kernels::LinkBandwidth> {
                py::gil_scoped_acquire gil;
                py::object speeds = probe(bytes);
                if (speeds.is_none()) {
                  return absl::UnavailableError("the link was not timed");
                }
                auto [d2h, h2d] = speeds.cast<std::pair<double, double>>();
                return kernels::LinkBandwidth{d2h, h2d};
              };
            }
            absl::Status status;
            {
              py::gil_scoped_release release;
              status = s.Finish(copy_wait_ns, link);
            }
            Check(status);
          },
          py::arg("copy_wait_ns") = 0, py::arg("probe") = py::none())
      .def("unwind", &StepSession::Unwind, py::arg("copy_wait_ns") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "fail_out_of_memory",
          [](StepSession& s, int64_t copy_wait_ns) {
            absl::Status status;
            {
              py::gil_scoped_release release;
              status = s.FailOutOfMemory(copy_wait_ns);
            }
            Check(status);
          },
          py::arg("copy_wait_ns") = 0)
      .def("discard", &StepSession::Discard)
      .def_property_readonly("sample", &StepSession::sample)
      .def_property_readonly("measured_peak_bytes",
                             &StepSession::measured_peak_bytes);

  py::class_<MemorySource, PyMemorySource>(m, "MemorySource")
      .def(py::init<>())
      .def("current_bytes", &MemorySource::current_bytes)
      .def("peak_bytes", &MemorySource::peak_bytes)
      .def("reset_peak", &MemorySource::reset_peak)
      .def("absolute", &MemorySource::absolute)
      .def("synchronize", &MemorySource::Synchronize)
      .def("out_of_memory_count", &MemorySource::out_of_memory_count)
      .def("reserved_peak_bytes", &MemorySource::reserved_peak_bytes)
      .def("device_type", &MemorySource::device_type)
      .def("attach", [](MemorySource& s) {
        return Attachment{s.Attach()};
      });

  py::class_<Attachment>(m, "Attachment")
      .def("detach", &Attachment::Detach)
      .def("__enter__", [](Attachment& a) -> Attachment& { return a; },
           py::return_value_policy::reference)
      .def("__exit__", [](Attachment& a, py::args) { a.Detach(); });

  py::class_<CpuMemoryTracker, MemorySource>(m, "CpuMemoryTracker")
      .def(py::init<>())
      .def("events", &CpuMemoryTracker::events);

  // The LibTorch this module was compiled against (remat.torch_version).
  m.attr("torch_version") = std::to_string(TORCH_VERSION_MAJOR) + "." +
                            std::to_string(TORCH_VERSION_MINOR) + "." +
                            std::to_string(TORCH_VERSION_PATCH);

#ifdef REMAT_WITH_CUDA
  py::class_<CudaMemorySource, MemorySource>(m, "CudaMemorySource")
      .def(py::init<int>(), py::arg("device_index") = 0)
      .def_property_readonly("device_index", &CudaMemorySource::device_index);
  m.attr("WITH_CUDA") = true;
#else
  m.attr("WITH_CUDA") = false;
#endif

  py::class_<BlockSampler>(m, "BlockSampler")
      .def(py::init<MemorySource*, int>(), py::arg("source"),
           py::arg("num_blocks"), py::keep_alive<1, 2>())
      .def("begin_step", &BlockSampler::BeginStep,
           py::arg("resident_bytes") = 0)
      .def("before_block", &BlockSampler::BeforeBlock, py::arg("index"),
           py::arg("input_bytes"))
      .def("after_block", &BlockSampler::AfterBlock, py::arg("index"))
      .def("end_forward", &BlockSampler::EndForward)
      .def("after_backward", &BlockSampler::AfterBackward, py::arg("index"))
      .def("transfer_bytes", &BlockSampler::TransferBytes, py::arg("index"),
           py::arg("bytes"))
      .def(
          "end_step",
          [](BlockSampler& s, const Features& features) {
            return Value(s.EndStep(features));
          },
          py::arg("features"));

  // OFFLOAD: the copy engine, and the offloader of one forward pass.
  py::class_<kernels::CopyEngineStats>(m, "CopyEngineStats")
      .def_readonly("bytes_to_host", &kernels::CopyEngineStats::bytes_to_host)
      .def_readonly("bytes_to_device",
                    &kernels::CopyEngineStats::bytes_to_device)
      .def_readonly("failed_copies", &kernels::CopyEngineStats::failed_copies)
      .def_readonly("pending_copies",
                    &kernels::CopyEngineStats::pending_copies)
      .def_property_readonly("host_reserved_bytes",
                             [](const kernels::CopyEngineStats& s) {
                               return s.pool.reserved_bytes;
                             });

  py::class_<kernels::CopyEngine>(m, "CopyEngine")
      .def(py::init([](const std::string& device, double link_bytes_per_s,
                       int64_t host_limit_bytes) {
             kernels::CopyEngineOptions options;
             options.link_bytes_per_s = link_bytes_per_s;
             if (host_limit_bytes > 0) {
               options.pool.limit_bytes = host_limit_bytes;
             }
             std::optional<c10::Device> parsed;
             try {
               parsed = c10::Device(device);
             } catch (const c10::Error&) {
               Raise(absl::InvalidArgumentError(
                   "device: \"" + device + "\" is not a device; use cpu or "
                   "cuda[:N]"));
             }
             return Value(NewCopyEngine(*parsed, options));
           }),
           py::arg("device") = "cpu", py::arg("link_bytes_per_s") = 0.0,
           py::arg("host_limit_bytes") = 0)
      .def_property_readonly("name", &kernels::CopyEngine::name)
      .def("stats", &kernels::CopyEngine::stats)
      .def(
          "measure_link",
          [](kernels::CopyEngine& engine, const at::Tensor& probe) {
            TORCH_CHECK(probe.is_contiguous(), "measure_link: a contiguous "
                        "tensor is needed");
            auto link = NoGil([&] {
              return kernels::MeasureLink(
                  &engine, probe.data_ptr(),
                  static_cast<int64_t>(probe.nbytes()));
            });
            const kernels::LinkBandwidth l = Value(std::move(link));
            return std::make_pair(l.d2h_bytes_per_s, l.h2d_bytes_per_s);
          },
          py::arg("probe"));

  py::class_<OffloadGroup, std::shared_ptr<OffloadGroup>>(m, "OffloadGroup")
      .def("prefetch", &OffloadGroup::Prefetch)
      .def("wait_copies_out", &OffloadGroup::WaitCopiesOut,
           py::call_guard<py::gil_scoped_release>());

  py::class_<SavedTensor>(m, "SavedTensor")
      .def("unpack", &SavedTensor::Unpack,
           py::call_guard<py::gil_scoped_release>());

  py::class_<Offloader>(m, "Offloader")
      .def(py::init([](kernels::CopyEngine* engine, int64_t min_bytes) {
             OffloadOptions options;
             options.min_bytes = min_bytes;
             return std::make_unique<Offloader>(engine, options);
           }),
           py::arg("engine"), py::arg("min_bytes") = int64_t{64} << 10,
           py::keep_alive<1, 2>())
      .def("begin_block", &Offloader::Begin, py::arg("stays"))
      .def(
          "pack",
          [](Offloader& o, const at::Tensor& t) {
            return SavedTensor::Pack(&o, t);
          },
          py::arg("tensor"),
          // Every saved tensor keeps the offloader (and its engine) alive.
          py::keep_alive<0, 1>())
      .def("end_block", &Offloader::End, py::arg("outputs"))
      .def("wait_copies_out", &Offloader::WaitCopiesOut,
           py::call_guard<py::gil_scoped_release>());
  m.def("prefetch_on_backward", &Offloader::PrefetchOnBackward, py::arg("x"),
        py::arg("group"));

  py::class_<TraceRecorder>(m, "TraceRecorder")
      .def(py::init<std::string, ModelSpec>(), py::arg("path"),
           py::arg("spec"))
      .def(
          "record",
          [](TraceRecorder& t, const Sample& sample) {
            Check(t.Record(sample));
          },
          py::arg("sample"));
}
