#include "client/cli/instance_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "planner/model.h"
#include "planner/units.h"

namespace remat {
namespace cli {
namespace {

using nlohmann::json;

// Limits forward_ns like ParseBytes limits sizes: 2^50 ns is 13 days, and
// keeps sums over kMaxBlocks blocks far from int64 overflow.
constexpr int64_t kMaxForwardNs = int64_t{1} << 50;

absl::Status Error(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(field + ": " + what);
}

std::string Shown(const json& value) {
  std::string s = value.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

absl::StatusOr<int64_t> Bytes(const json& value, const std::string& field) {
  const std::string expected =
      "must be a non-negative integer or a size like \"6GiB\"";
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(kMaxParsedBytes)) {
      return Error(field, "is too large (at most 1 PiB)");
    }
    return static_cast<int64_t>(v);
  }
  if (value.is_string()) {
    auto parsed = ParseBytes(value.get<std::string>());
    if (!parsed.ok()) {
      return Error(field, expected + " (got " + Shown(value) + ")");
    }
    return *parsed;
  }
  return Error(field, expected + " (got " + Shown(value) + ")");
}

absl::StatusOr<int64_t> Nanoseconds(const json& value,
                                    const std::string& field) {
  if (!value.is_number_unsigned()) {
    return Error(field,
                 "must be a non-negative integer number of "
                 "nanoseconds (got " +
                     Shown(value) + ")");
  }
  const uint64_t v = value.get<uint64_t>();
  if (v > static_cast<uint64_t>(kMaxForwardNs)) {
    return Error(field, "is too large (at most 2^50 ns)");
  }
  return static_cast<int64_t>(v);
}

absl::Status CheckKeys(const json& object, const std::string& where,
                       const std::set<std::string>& known) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (known.count(it.key()) == 0) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return Error(where.empty() ? it.key() : where + "." + it.key(),
                   "unknown field; known fields: " + list);
    }
  }
  return absl::OkStatus();
}

const json* Find(const json& object, const std::string& key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

absl::StatusOr<PlanProblem> ParseInstanceJson(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(std::string("not valid JSON: ") +
                                      e.what());
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        "the instance must be a JSON object with base_bytes, budget_bytes "
        "and blocks");
  }
  absl::Status keys =
      CheckKeys(doc, "",
                {"base_bytes", "budget_bytes", "margin_bytes", "blocks",
                 "d2h_bytes_per_s", "h2d_bytes_per_s", "offload_checkpoints"});
  if (!keys.ok()) return keys;

  PlanProblem problem;
  struct Field {
    const char* name;
    int64_t* out;
    bool required;
  } fields[] = {{"base_bytes", &problem.base_bytes, true},
                {"budget_bytes", &problem.budget_bytes, true},
                {"margin_bytes", &problem.margin_bytes, false}};
  for (const Field& f : fields) {
    const json* v = Find(doc, f.name);
    if (v == nullptr) {
      if (f.required) return Error(f.name, "missing (required)");
      continue;
    }
    auto bytes = Bytes(*v, f.name);
    if (!bytes.ok()) return bytes.status();
    *f.out = *bytes;
  }
  if (problem.margin_bytes > problem.budget_bytes) {
    return Error("margin_bytes", "must not exceed budget_bytes");
  }
  // The host link, per direction (optional; without both, no OFFLOAD).
  for (auto [key, out] : {std::pair{"d2h_bytes_per_s", &problem.d2h_bytes_per_s},
                          std::pair{"h2d_bytes_per_s", &problem.h2d_bytes_per_s}}) {
    const json* v = Find(doc, key);
    if (v == nullptr) continue;
    auto rate = Bytes(*v, key);
    if (!rate.ok()) return rate.status();
    *out = static_cast<double>(*rate);
  }
  if (const json* v = Find(doc, "offload_checkpoints")) {
    if (!v->is_boolean()) {
      return Error("offload_checkpoints",
                   "must be true or false (got " + Shown(*v) + ")");
    }
    problem.offload_checkpoints = v->get<bool>();
  }

  const json* blocks = Find(doc, "blocks");
  if (blocks == nullptr) return Error("blocks", "missing (required)");
  if (!blocks->is_array()) {
    return Error("blocks", "must be an array of block objects");
  }
  if (blocks->size() > static_cast<size_t>(kMaxBlocks)) {
    return Error("blocks", "has " + std::to_string(blocks->size()) +
                               " entries; at most " +
                               std::to_string(kMaxBlocks));
  }
  for (size_t i = 0; i < blocks->size(); ++i) {
    const json& b = (*blocks)[i];
    const std::string where = "blocks[" + std::to_string(i) + "]";
    if (!b.is_object()) return Error(where, "must be an object");
    keys = CheckKeys(
        b, where,
        {"name", "act_bytes", "input_bytes", "forward_ns", "checkpointable",
         "output_bytes", "workspace_bytes", "transfer_bytes", "backward_ns"});
    if (!keys.ok()) return keys;
    BlockCost cost;
    const json* name = Find(b, "name");
    if (name == nullptr) return Error(where + ".name", "missing (required)");
    if (!name->is_string() || name->get<std::string>().empty()) {
      return Error(where + ".name", "must be a non-empty string");
    }
    cost.name = name->get<std::string>();
    if (cost.name.size() > kMaxNameLength) {
      return Error(
          where + ".name",
          "is longer than " + std::to_string(kMaxNameLength) + " characters");
    }
    for (const char* key : {"act_bytes", "input_bytes"}) {
      const json* v = Find(b, key);
      const std::string field = where + "." + key;
      if (v == nullptr) return Error(field, "missing (required)");
      auto bytes = Bytes(*v, field);
      if (!bytes.ok()) return bytes.status();
      (std::strcmp(key, "act_bytes") == 0 ? cost.act_bytes : cost.input_bytes) =
          *bytes;
    }
    const json* ns = Find(b, "forward_ns");
    if (ns == nullptr) {
      return Error(where + ".forward_ns", "missing (required)");
    }
    auto forward = Nanoseconds(*ns, where + ".forward_ns");
    if (!forward.ok()) return forward.status();
    cost.forward_ns = *forward;
    // Optional quantities of the memory model v2 (plan.h: unknown when
    // absent).
    for (auto [key, out] : {std::pair{"output_bytes", &cost.output_bytes},
                            std::pair{"workspace_bytes", &cost.workspace_bytes},
                            std::pair{"transfer_bytes", &cost.transfer_bytes}}) {
      if (const json* v = Find(b, key)) {
        auto bytes = Bytes(*v, where + "." + key);
        if (!bytes.ok()) return bytes.status();
        *out = *bytes;
      }
    }
    if (const json* v = Find(b, "backward_ns")) {
      auto backward = Nanoseconds(*v, where + ".backward_ns");
      if (!backward.ok()) return backward.status();
      cost.backward_ns = *backward;
    }
    if (const json* c = Find(b, "checkpointable")) {
      if (!c->is_boolean()) {
        return Error(where + ".checkpointable",
                     "must be true or false (got " + Shown(*c) + ")");
      }
      cost.checkpointable = c->get<bool>();
    }
    problem.blocks.push_back(std::move(cost));
  }
  return problem;
}

absl::StatusOr<PlanProblem> LoadInstanceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError("cannot read " + path + ": " +
                               std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto problem = ParseInstanceJson(text.str());
  if (!problem.ok()) {
    return absl::InvalidArgumentError(path + ": " +
                                      std::string(problem.status().message()));
  }
  return problem;
}

}  // namespace cli
}  // namespace remat
