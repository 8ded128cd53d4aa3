#include "client/cli/instance_json.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

namespace remat {
namespace cli {
namespace {

std::string ErrorOf(const std::string& text) {
  auto r = ParseInstanceJson(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

const char kBlock[] =
    R"({"name": "l0", "act_bytes": 100, "input_bytes": 10, "forward_ns": 5})";

std::string WithBlocks(const std::string& blocks) {
  return R"({"base_bytes": 1000, "budget_bytes": 5000, "blocks": [)" + blocks +
         "]}";
}

TEST_CASE("a complete instance parses, sizes and integers alike") {
  auto r = ParseInstanceJson(R"({
    "base_bytes": "2GiB", "budget_bytes": "6GiB", "margin_bytes": "256MiB",
    "blocks": [
      {"name": "embed", "act_bytes": "12MiB", "input_bytes": 4096,
       "forward_ns": 300000, "checkpointable": false},
      {"name": "layer0", "act_bytes": "1.5GB", "input_bytes": "100KiB",
       "forward_ns": 4200000}
    ]})");
  REQUIRE(r.ok());
  const PlanProblem& p = *r;
  CHECK(p.base_bytes == 2LL << 30);
  CHECK(p.budget_bytes == 6LL << 30);
  CHECK(p.margin_bytes == 256LL << 20);
  CHECK(p.limit_bytes() == (6LL << 30) - (256LL << 20));
  REQUIRE(p.blocks.size() == 2);
  CHECK(p.blocks[0].name == "embed");
  CHECK(p.blocks[0].act_bytes == 12LL << 20);
  CHECK(p.blocks[0].input_bytes == 4096);
  CHECK(p.blocks[0].forward_ns == 300000);
  CHECK_FALSE(p.blocks[0].checkpointable);
  CHECK(p.blocks[1].act_bytes == 1500000000);
  CHECK(p.blocks[1].input_bytes == 102400);
  CHECK(p.blocks[1].checkpointable);  // default
  // The memory model v2's optional quantities stay unknown; no link.
  CHECK(p.blocks[1].output_bytes == kUnknown);
  CHECK(p.blocks[1].workspace_bytes == kUnknown);
  CHECK_FALSE(p.has_link());
}

TEST_CASE("the memory model v2's quantities and the host link parse") {
  auto r = ParseInstanceJson(R"({
    "base_bytes": 0, "budget_bytes": "1GiB",
    "d2h_bytes_per_s": "25GB", "h2d_bytes_per_s": 20000000000,
    "offload_checkpoints": true,
    "blocks": [
      {"name": "l0", "act_bytes": "100MiB", "input_bytes": "1MiB",
       "forward_ns": 1000, "output_bytes": "2MiB", "workspace_bytes": "8MiB",
       "transfer_bytes": "90MiB", "backward_ns": 2500}
    ]})");
  REQUIRE(r.ok());
  CHECK(r->has_link());
  CHECK(r->d2h_bytes_per_s == 25e9);
  CHECK(r->h2d_bytes_per_s == 2e10);
  CHECK(r->offload_checkpoints);
  const BlockCost& b = r->blocks[0];
  CHECK(b.output_bytes == 2LL << 20);
  CHECK(b.workspace_bytes == 8LL << 20);
  CHECK(b.transfer_bytes == 90LL << 20);
  CHECK(b.backward_ns == 2500);
  auto bad = ParseInstanceJson(R"({"base_bytes": 0, "budget_bytes": 1,
    "blocks": [{"name": "l0", "act_bytes": 1, "input_bytes": 0,
                "forward_ns": 1, "workspace_bytes": -4}]})");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("blocks[0].workspace_bytes") !=
        std::string::npos);
  auto not_bool = ParseInstanceJson(R"({"base_bytes": 0, "budget_bytes": 1,
    "offload_checkpoints": 1, "blocks": []})");
  REQUIRE_FALSE(not_bool.ok());
  CHECK(std::string(not_bool.status().message()).find("offload_checkpoints") !=
        std::string::npos);
}

TEST_CASE("margin defaults to zero and blocks may be empty") {
  auto r = ParseInstanceJson(WithBlocks(""));
  REQUIRE(r.ok());
  CHECK(r->margin_bytes == 0);
  CHECK(r->blocks.empty());
}

TEST_CASE("errors name the field and say what is expected") {
  CHECK(ErrorOf("{").find("not valid JSON") != std::string::npos);
  CHECK(ErrorOf("[1, 2]").find("JSON object") != std::string::npos);
  CHECK(ErrorOf(R"({"budget_bytes": 1, "blocks": []})") ==
        "base_bytes: missing (required)");
  CHECK(ErrorOf(R"({"base_bytes": 1, "budget_bytes": 1})") ==
        "blocks: missing (required)");
  CHECK(ErrorOf(R"({"base_bytes": -1, "budget_bytes": 1, "blocks": []})") ==
        "base_bytes: must be a non-negative integer or a size like \"6GiB\" "
        "(got -1)");
  CHECK(ErrorOf(R"({"base_bytes": 1, "budget_bytes": "lots", "blocks": []})")
            .rfind("budget_bytes: must be", 0) == 0);
  CHECK(ErrorOf(R"({"base_bytes": 1, "budget_bytes": 1, "blocks": {}})") ==
        "blocks: must be an array of block objects");
  CHECK(ErrorOf(R"({"base_bytes": 1, "budget_bytes": 10, "margin_bytes": 11,
                    "blocks": []})") ==
        "margin_bytes: must not exceed budget_bytes");
  CHECK(ErrorOf(R"({"base_bytes": 1, "budget_bytes": 1, "blocks": [],
                    "budget": 3})")
            .rfind("budget: unknown field", 0) == 0);

  const std::string b = kBlock;
  CHECK(ErrorOf(WithBlocks(b + "," + b + "," + b +
                           R"(, {"name": "l3", "act_bytes": -5,
                           "input_bytes": 1, "forward_ns": 1})")) ==
        "blocks[3].act_bytes: must be a non-negative integer or a size like "
        "\"6GiB\" (got -5)");
  CHECK(ErrorOf(WithBlocks(
            R"({"name": "x", "act_bytes": 1.5, "input_bytes": 1,
                "forward_ns": 1})")) ==
        "blocks[0].act_bytes: must be a non-negative integer or a size like "
        "\"6GiB\" (got 1.5)");
  CHECK(ErrorOf(
            WithBlocks(R"({"name": "x", "act_bytes": 1, "forward_ns": 1})")) ==
        "blocks[0].input_bytes: missing (required)");
  CHECK(ErrorOf(WithBlocks(
                    R"({"name": "x", "act_bytes": 1, "input_bytes": 1,
                "forward_ns": "5ms"})"))
            .rfind("blocks[0].forward_ns: must be a non-negative integer", 0) ==
        0);
  CHECK(ErrorOf(WithBlocks(
            R"({"name": "", "act_bytes": 1, "input_bytes": 1,
                "forward_ns": 1})")) ==
        "blocks[0].name: must be a non-empty string");
  CHECK(ErrorOf(WithBlocks(
            R"({"name": "x", "act_bytes": 1, "input_bytes": 1,
                "forward_ns": 1, "checkpointable": "yes"})")) ==
        "blocks[0].checkpointable: must be true or false (got \"yes\")");
  CHECK(ErrorOf(WithBlocks(
                    R"({"name": "x", "act_byte": 1, "input_bytes": 1,
                "forward_ns": 1})"))
            .rfind("blocks[0].act_byte: unknown field", 0) == 0);
  CHECK(ErrorOf(WithBlocks("3")) == "blocks[0]: must be an object");
  CHECK(ErrorOf(WithBlocks(
                    R"({"name": "x", "act_bytes": "2PiB", "input_bytes": 1,
                "forward_ns": 1})"))
            .rfind("blocks[0].act_bytes:", 0) == 0);
}

TEST_CASE("LoadInstanceFile reads files and names them in errors") {
  auto missing = LoadInstanceFile("/nonexistent/instance.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("/nonexistent") !=
        std::string::npos);

  const std::string dir = std::getenv("TEST_TMPDIR") != nullptr
                              ? std::getenv("TEST_TMPDIR")
                              : "/tmp";
  const std::string path = dir + "/instance_json_test.json";
  { std::ofstream(path) << WithBlocks(kBlock); }
  auto ok = LoadInstanceFile(path);
  REQUIRE(ok.ok());
  CHECK(ok->blocks.size() == 1);
  { std::ofstream(path) << R"({"base_bytes": true})"; }
  auto bad = LoadInstanceFile(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).rfind(path + ": base_bytes", 0) ==
        0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace cli
}  // namespace remat
