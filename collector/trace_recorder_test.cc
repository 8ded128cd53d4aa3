#include "collector/trace_recorder.h"

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

namespace remat {
namespace {

ModelSpec Model() {
  return ModelSpec{"m", {"batch", "seq"}, {{"b0", true}, {"b1", false}}};
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." +
         std::to_string(getpid());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Sample MakeSample(double batch) {
  Sample s;
  s.features = {batch, 128};
  s.blocks = {{1000, 100, 7}, {2000, 200, 8}};
  s.base_bytes = 50;
  s.peak_bytes = 3150;
  return s;
}

TEST_CASE("trace columns follow the model") {
  std::vector<std::string> expected = {
      "feature.batch", "feature.seq",  "act_bytes.b0",   "input_bytes.b0",
      "forward_ns.b0", "act_bytes.b1", "input_bytes.b1", "forward_ns.b1",
      "base_bytes",    "peak_bytes"};
  CHECK(TraceColumns(Model()) == expected);
}

TEST_CASE("recorder writes a header once, then one row per sample") {
  const std::string path = TempPath("trace.csv");
  std::remove(path.c_str());
  {
    TraceRecorder recorder(Model(), std::make_unique<CsvFileTraceSink>(path));
    REQUIRE(recorder.Record(MakeSample(4)).ok());
    Sample no_peak = MakeSample(2.5);
    no_peak.peak_bytes.reset();
    REQUIRE(recorder.Record(no_peak).ok());
  }
  {
    // A second recorder appends to the same file without a second header.
    TraceRecorder recorder(Model(), std::make_unique<CsvFileTraceSink>(path));
    REQUIRE(recorder.Record(MakeSample(8)).ok());
  }
  CHECK(ReadAll(path) ==
        "feature.batch,feature.seq,act_bytes.b0,input_bytes.b0,forward_ns.b0,"
        "act_bytes.b1,input_bytes.b1,forward_ns.b1,base_bytes,peak_bytes\n"
        "4,128,1000,100,7,2000,200,8,50,3150\n"
        "2.5,128,1000,100,7,2000,200,8,50,\n"
        "8,128,1000,100,7,2000,200,8,50,3150\n");
  std::remove(path.c_str());
}

TEST_CASE("recorder rejects a bad sample and a foreign file") {
  const std::string path = TempPath("foreign.csv");
  {
    std::ofstream out(path);
    out << "feature.x,peak_bytes\n1,2\n";
  }
  TraceRecorder recorder(Model(), std::make_unique<CsvFileTraceSink>(path));
  Sample bad = MakeSample(4);
  bad.blocks.pop_back();
  absl::Status s = recorder.Record(bad);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  s = recorder.Record(MakeSample(4));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(s.message()).find("new file") != std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace remat
