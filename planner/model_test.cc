#include "planner/model.h"

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

namespace remat {
namespace {

ModelSpec TwoBlocks() {
  return ModelSpec{"bert", {"batch", "seq"}, {{"b0", true}, {"b1", false}}};
}

Sample GoodSample() {
  Sample s;
  s.features = {4, 128};
  s.blocks = {{100, 10, 5}, {200, 20, 6}};
  return s;
}

TEST_CASE("a well-formed model and sample validate") {
  REQUIRE(ValidateModelSpec(TwoBlocks()).ok());
  REQUIRE(ValidateSample(TwoBlocks(), GoodSample()).ok());
  REQUIRE(FeatureIndex(TwoBlocks(), "seq") == 1);
  REQUIRE_FALSE(FeatureIndex(TwoBlocks(), "width").has_value());
}

TEST_CASE("bad model specs name the field") {
  ModelSpec m = TwoBlocks();
  m.name = "";
  CHECK(ValidateModelSpec(m).message().find("name") != std::string::npos);
  m = TwoBlocks();
  m.blocks.clear();
  CHECK(ValidateModelSpec(m).message().find("blocks") != std::string::npos);
  m = TwoBlocks();
  m.feature_names.clear();
  CHECK(ValidateModelSpec(m).message().find("feature_names") !=
        std::string::npos);
  m = TwoBlocks();
  m.blocks[1].name = "b0";
  CHECK(ValidateModelSpec(m).message().find("blocks[1].name") !=
        std::string::npos);
  m = TwoBlocks();
  m.feature_names[1] = "batch";
  CHECK(ValidateModelSpec(m).message().find("feature_names[1]") !=
        std::string::npos);
}

TEST_CASE("bad samples name the field") {
  const ModelSpec m = TwoBlocks();
  Sample s = GoodSample();
  s.features = {4};
  CHECK(absl::IsInvalidArgument(ValidateSample(m, s)));
  s = GoodSample();
  s.features[1] = std::nan("");
  CHECK(ValidateSample(m, s).message().find("features[1] (seq)") !=
        std::string::npos);
  s = GoodSample();
  s.features[0] = std::numeric_limits<double>::infinity();
  CHECK(ValidateSample(m, s).message().find("features[0]") !=
        std::string::npos);
  s = GoodSample();
  s.features[0] = -1;
  CHECK(ValidateSample(m, s).message().find("negative") != std::string::npos);
  s = GoodSample();
  s.blocks.pop_back();
  CHECK(ValidateSample(m, s).message().find("blocks") != std::string::npos);
  s = GoodSample();
  s.blocks[1].input_bytes = -3;
  CHECK(ValidateSample(m, s).message().find("blocks[1].input_bytes") !=
        std::string::npos);
  s = GoodSample();
  s.peak_bytes = -1;
  CHECK(ValidateSample(m, s).message().find("peak_bytes") != std::string::npos);
}

}  // namespace
}  // namespace remat
