#include "planner/service/logging.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

TEST_CASE("JSON log bodies are the members of one valid object") {
  const std::string body = FormatLogBody(true, "plan",
                                         {{"model", "bert \"base\""},
                                          {"budget_bytes", 6442450944LL},
                                          {"from_cache", true},
                                          {"features", {{"seq", 384.0}}}});
  const auto parsed = nlohmann::json::parse("{" + body + "}");
  REQUIRE(parsed["msg"] == "plan");
  REQUIRE(parsed["model"] == "bert \"base\"");
  REQUIRE(parsed["budget_bytes"] == 6442450944LL);
  REQUIRE(parsed["from_cache"] == true);
  REQUIRE(parsed["features"]["seq"] == 384.0);
}

TEST_CASE("text log bodies are msg key=value") {
  REQUIRE(FormatLogBody(false, "plan", {{"model", "m"}, {"n", 3}}) ==
          "plan model=\"m\" n=3");
}

TEST_CASE("invalid UTF-8 does not throw") {
  REQUIRE_NOTHROW(FormatLogBody(true, "x", {{"s", std::string("\xff\xfe")}}));
}

}  // namespace
}  // namespace remat
