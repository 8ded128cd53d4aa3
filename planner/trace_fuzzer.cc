// Fuzzes ReadTraceCsv (planner/trace.h): the input is a trace file. A trace
// that reads is valid (model and every sample), and when its names are
// writable it survives WriteTraceCsv and a second read unchanged.
#include <unistd.h>

#include <cstdint>
#include <string>

#include "planner/model.h"
#include "planner/trace.h"
#include "third_party/fuzz/fuzz_util.h"

namespace {

bool Writable(const std::string& name) {
  return name.find_first_of(",\"\r\n") == std::string::npos;
}

bool SameSample(const remat::Sample& a, const remat::Sample& b) {
  if (a.features != b.features || a.blocks.size() != b.blocks.size() ||
      a.base_bytes != b.base_bytes || a.peak_bytes != b.peak_bytes) {
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using remat::fuzz::TempDir;
  const std::string path = TempDir::Path() + "/fuzz.csv";
  remat::fuzz::WriteFileOrDie(path, data, size);
  auto trace = remat::ReadTraceCsv(path);
  ::unlink(path.c_str());
  if (!trace.ok()) {
    REMAT_FUZZ_CHECK(trace.status().code() ==
                     absl::StatusCode::kInvalidArgument);
    return 0;
  }
  REMAT_FUZZ_CHECK(trace->model.name == "fuzz");
  REMAT_FUZZ_CHECK(remat::ValidateModelSpec(trace->model).ok());
  for (const remat::Sample& s : trace->samples) {
    REMAT_FUZZ_CHECK(remat::ValidateSample(trace->model, s).ok());
  }
  bool writable = true;
  for (const std::string& f : trace->model.feature_names) {
    writable = writable && Writable(f);
  }
  for (const remat::BlockSpec& b : trace->model.blocks) {
    writable = writable && Writable(b.name);
  }
  if (!writable) return 0;
  const std::string out = TempDir::Path() + "/roundtrip.csv";
  REMAT_FUZZ_CHECK(remat::WriteTraceCsv(out, *trace).ok());
  auto again = remat::ReadTraceCsv(out);
  ::unlink(out.c_str());
  REMAT_FUZZ_CHECK(again.ok());
  REMAT_FUZZ_CHECK(again->model.feature_names == trace->model.feature_names);
  REMAT_FUZZ_CHECK(again->model.blocks.size() == trace->model.blocks.size());
  for (size_t i = 0; i < trace->model.blocks.size(); ++i) {
    REMAT_FUZZ_CHECK(again->model.blocks[i].name ==
                     trace->model.blocks[i].name);
  }
  REMAT_FUZZ_CHECK(again->samples.size() == trace->samples.size());
  for (size_t i = 0; i < trace->samples.size(); ++i) {
    REMAT_FUZZ_CHECK(SameSample(again->samples[i], trace->samples[i]));
  }
  return 0;
}
