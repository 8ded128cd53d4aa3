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
  CHECK(ValidateSample(m, s).message().find("outside [0, 2^53]") !=
        std::string::npos);
  s = GoodSample();
  s.blocks.pop_back();
  CHECK(ValidateSample(m, s).message().find("blocks") != std::string::npos);
  s = GoodSample();
  s.blocks[1].input_bytes = -3;
  CHECK(ValidateSample(m, s).message().find("blocks[1].input_bytes") !=
        std::string::npos);
  s = GoodSample();
  s.blocks[0].transfer_bytes = -1;
  CHECK(ValidateSample(m, s).message().find("blocks[0].transfer_bytes") !=
        std::string::npos);
  s.blocks[0].transfer_bytes = 0;
  CHECK(ValidateSample(m, s).ok());
  s = GoodSample();
  s.peak_bytes = -1;
  CHECK(ValidateSample(m, s).message().find("peak_bytes") != std::string::npos);
}

TEST_CASE("every quantity has a range, named with its field") {
  const ModelSpec m = TwoBlocks();
  Sample s = GoodSample();
  // Huge but finite features are out of range, not "negative" (a cast of
  // 1e19 to int64 is undefined).
  for (double big : {1e19, 1e300, 9007199254740994.0}) {
    s.features[1] = big;
    const absl::Status st = ValidateSample(m, s);
    CHECK(absl::IsInvalidArgument(st));
    CHECK(st.message().find("features[1] (seq)") != std::string::npos);
    CHECK(st.message().find("outside [0, 2^53]") != std::string::npos);
  }
  s.features[1] = 9007199254740992.0;  // 2^53 itself is allowed
  CHECK(ValidateSample(m, s).ok());
  s = GoodSample();
  s.blocks[0].act_bytes = (int64_t{1} << 48) + 1;
  CHECK(ValidateSample(m, s).message().find(
            "blocks[0].act_bytes: 281474976710657 is outside [0, 2^48]") !=
        std::string::npos);
  s = GoodSample();
  s.blocks[1].forward_ns = int64_t{2000000000000000};
  CHECK(ValidateSample(m, s).message().find("blocks[1].forward_ns") !=
        std::string::npos);
  s = GoodSample();
  s.base_bytes = int64_t{1} << 50;
  CHECK(ValidateSample(m, s).message().find("base_bytes") != std::string::npos);
  s = GoodSample();
  s.peak_bytes = int64_t{1} << 62;
  CHECK(ValidateSample(m, s).message().find("peak_bytes: ") !=
        std::string::npos);
  s.peak_bytes = int64_t{1} << 60;
  CHECK(ValidateSample(m, s).ok());
  for (double bad : {0.0, -1.0, 2e15, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    s = GoodSample();
    s.h2d_bytes_per_s = bad;
    const absl::Status st = ValidateSample(m, s);
    CHECK(absl::IsInvalidArgument(st));
    CHECK(st.message().find("h2d_bytes_per_s: ") == 0);
  }
  s = GoodSample();
  s.d2h_bytes_per_s = 25e9;
  s.h2d_bytes_per_s = 1e15;
  CHECK(ValidateSample(m, s).ok());
  CHECK(ValidateBudget(1).ok());
  CHECK(ValidateBudget(int64_t{1} << 60).ok());
  CHECK(ValidateBudget(0).message().find("budget_bytes") != std::string::npos);
  CHECK(absl::IsInvalidArgument(ValidateBudget((int64_t{1} << 60) + 1)));
}

TEST_CASE("names are counted in characters and must be valid UTF-8") {
  ModelSpec m = TwoBlocks();
  std::string e_acute_200;
  for (int i = 0; i < 200; ++i) e_acute_200 += "\xc3\xa9";  // 400 bytes
  m.name = e_acute_200;
  CHECK(ValidateModelSpec(m).ok());
  std::string four_byte_256;
  for (int i = 0; i < 256; ++i) four_byte_256 += "\xf0\x9f\x98\x80";
  m.blocks[0].name = four_byte_256;
  CHECK(ValidateModelSpec(m).ok());
  m.blocks[0].name = four_byte_256 + "x";
  CHECK(ValidateModelSpec(m).message().find(
            "blocks[0].name: 257 characters; at most 256") !=
        std::string::npos);
  for (const char* bad : {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80"}) {
    m = TwoBlocks();
    m.feature_names[0] = bad;
    CHECK(ValidateModelSpec(m).message().find(
              "feature_names[0]: must be valid UTF-8") != std::string::npos);
  }
}

}  // namespace
}  // namespace remat
