#include "collector/trace_recorder.h"

#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "planner/trace.h"

namespace remat {
namespace {

ModelSpec Model() {
  return ModelSpec{"m", {"batch", "seq"}, {{"b0", true}, {"b1", false}}};
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." +
         std::to_string(getpid()) + ".csv";
}

Sample MakeSample(double batch) {
  Sample s;
  s.features = {batch, 128};
  s.blocks = {{1000, 100, 7}, {2000, 200, 8}};
  s.base_bytes = 50;
  s.peak_bytes = 3150;
  return s;
}

bool SameSample(const Sample& a, const Sample& b) {
  if (a.features != b.features || a.base_bytes != b.base_bytes ||
      a.peak_bytes != b.peak_bytes || a.blocks.size() != b.blocks.size()) {
    return false;
  }
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    if (a.blocks[i].act_bytes != b.blocks[i].act_bytes ||
        a.blocks[i].input_bytes != b.blocks[i].input_bytes ||
        a.blocks[i].forward_ns != b.blocks[i].forward_ns) {
      return false;
    }
  }
  return true;
}

TEST_CASE("recorded samples read back with ReadTraceCsv") {
  const std::string path = TempPath("trace");
  std::remove(path.c_str());
  std::vector<Sample> recorded = {MakeSample(4), MakeSample(2.5)};
  recorded[1].peak_bytes.reset();
  TraceRecorder recorder(path, Model());
  for (const Sample& s : recorded) REQUIRE(recorder.Record(s).ok());

  // Rows are flushed as recorded: readable while the recorder is alive.
  absl::StatusOr<Trace> trace = ReadTraceCsv(path);
  REQUIRE(trace.ok());
  CHECK(trace->model.feature_names == Model().feature_names);
  REQUIRE(trace->model.blocks.size() == 2);
  CHECK(trace->model.blocks[0].name == "b0");
  CHECK(trace->model.blocks[1].name == "b1");
  REQUIRE(trace->samples.size() == recorded.size());
  for (size_t i = 0; i < recorded.size(); ++i) {
    CHECK(SameSample(trace->samples[i], recorded[i]));
  }
  std::remove(path.c_str());
}

TEST_CASE("recorder is safe to call from several threads") {
  const std::string path = TempPath("threads");
  std::remove(path.c_str());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::atomic<int> failures{0};
  {
    TraceRecorder recorder(path, Model());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&recorder, &failures, t] {
        for (int i = 0; i < kPerThread; ++i) {
          // Catch2 assertions are not thread-safe: count, check after join.
          if (!recorder.Record(MakeSample(t * kPerThread + i)).ok()) {
            ++failures;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  CHECK(failures == 0);
  absl::StatusOr<Trace> trace = ReadTraceCsv(path);
  REQUIRE(trace.ok());
  REQUIRE(trace->samples.size() == kThreads * kPerThread);
  std::vector<bool> seen(kThreads * kPerThread, false);
  for (const Sample& s : trace->samples) {
    const int batch = static_cast<int>(s.features[0]);
    REQUIRE(batch >= 0);
    REQUIRE(batch < kThreads * kPerThread);
    CHECK(!seen[batch]);
    seen[batch] = true;
    CHECK(SameSample(s, MakeSample(batch)));
  }
  std::remove(path.c_str());
}

TEST_CASE("recorder rejects a bad sample and reports an unwritable path") {
  const std::string path = TempPath("bad");
  std::remove(path.c_str());
  TraceRecorder recorder(path, Model());
  Sample bad = MakeSample(4);
  bad.blocks.pop_back();
  absl::Status s = recorder.Record(bad);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("blocks") != std::string::npos);
  REQUIRE(recorder.Record(MakeSample(4)).ok());
  absl::StatusOr<Trace> trace = ReadTraceCsv(path);
  REQUIRE(trace.ok());
  CHECK(trace->samples.size() == 1);
  std::remove(path.c_str());

  TraceRecorder nowhere("/nonexistent-dir/trace.csv", Model());
  s = nowhere.Record(MakeSample(4));
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(s.message()).find("/nonexistent-dir/trace.csv") !=
        std::string::npos);
  // The open error sticks: no later call half-succeeds.
  CHECK(nowhere.Record(MakeSample(4)).code() == absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace remat
