#include "planner/trace.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "planner/model.h"

namespace remat {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Trace Example() {
  Trace t;
  t.model.name = "ignored";
  t.model.feature_names = {"batch", "seq"};
  t.model.blocks = {{"l0", true}, {"l1", true}};
  Sample a;
  a.features = {4, 128.5};
  a.blocks = {{1000, 200, 30}, {int64_t{1} << 40, 0, 7}};
  a.blocks[1].workspace_bytes = 123;  // measured for one block only
  a.blocks[0].transfer_bytes = 0;
  a.blocks[1].transfer_bytes = 456;
  a.base_bytes = 5000;
  a.peak_bytes = 9000;
  a.tail_bytes = 700;
  Sample b;
  b.features = {0.1, 1e-7};  // values that need full precision
  b.blocks = {{1, 2, 3}, {4, 5, 6}};
  t.samples = {a, b};
  return t;
}

TEST_CASE("a written trace reads back identically") {
  const std::string path = TempPath("bert_squad.csv");
  const Trace t = Example();
  REQUIRE(WriteTraceCsv(path, t).ok());
  auto r = ReadTraceCsv(path);
  REQUIRE(r.ok());
  CHECK(r->model.name == "bert_squad");  // the file's stem
  CHECK(r->model.feature_names == t.model.feature_names);
  REQUIRE(r->model.blocks.size() == 2);
  CHECK(r->model.blocks[1].name == "l1");
  REQUIRE(r->samples.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const Sample& want = t.samples[i];
    const Sample& got = r->samples[i];
    CHECK(got.features == want.features);  // exact doubles
    for (size_t b = 0; b < 2; ++b) {
      CHECK(got.blocks[b].act_bytes == want.blocks[b].act_bytes);
      CHECK(got.blocks[b].input_bytes == want.blocks[b].input_bytes);
      CHECK(got.blocks[b].forward_ns == want.blocks[b].forward_ns);
      CHECK(got.blocks[b].workspace_bytes == want.blocks[b].workspace_bytes);
      CHECK(got.blocks[b].transfer_bytes == want.blocks[b].transfer_bytes);
    }
    CHECK(got.base_bytes == want.base_bytes);
    CHECK(got.peak_bytes == want.peak_bytes);
    CHECK(got.tail_bytes == want.tail_bytes);
  }
  CHECK(Contains(ReadFile(path),
                 "feature.batch,feature.seq,act_bytes.l0,act_bytes.l1,"
                 "input_bytes.l0,input_bytes.l1,forward_ns.l0,forward_ns.l1,"
                 "workspace_bytes.l0,workspace_bytes.l1,transfer_bytes.l0,"
                 "transfer_bytes.l1,base_bytes,peak_bytes,tail_bytes\n"));
}

TEST_CASE("optional columns may be left out, in any order") {
  const std::string path = TempPath("minimal.trace.csv");
  WriteFile(path,
            "act_bytes.b,feature.seq,act_bytes.a,peak_bytes,forward_ns.a\r\n"
            "10,32,20,,5\r\n"
            "\r\n"
            "11,64,21,900,6\r\n");
  auto r = ReadTraceCsv(path);
  REQUIRE(r.ok());
  CHECK(r->model.name == "minimal.trace");
  REQUIRE(r->model.blocks.size() == 2);
  CHECK(r->model.blocks[0].name == "b");  // order of act_bytes columns
  CHECK(r->model.feature_names == std::vector<std::string>{"seq"});
  REQUIRE(r->samples.size() == 2);
  CHECK(r->samples[0].blocks[0].act_bytes == 10);
  CHECK(r->samples[0].blocks[1].act_bytes == 20);
  CHECK(r->samples[0].blocks[1].forward_ns == 5);
  CHECK(r->samples[0].blocks[0].forward_ns == 0);
  CHECK(r->samples[0].blocks[1].input_bytes == 0);
  CHECK_FALSE(r->samples[0].peak_bytes.has_value());
  CHECK(r->samples[1].peak_bytes == 900);
  CHECK_FALSE(r->samples[1].base_bytes.has_value());
}

TEST_CASE("malformed traces name the line and the column") {
  const std::string path = TempPath("bad.csv");
  auto error = [&](const std::string& text) {
    WriteFile(path, text);
    auto r = ReadTraceCsv(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  const std::string header = "feature.seq,act_bytes.l0,base_bytes\n";
  std::string m = error(header + "32,100,5\n64,abc,5\n");
  CHECK(Contains(m, "bad.csv:3:"));
  CHECK(Contains(m, "column 2 (act_bytes.l0)"));
  CHECK(Contains(m, "abc"));
  CHECK(Contains(error(header + "32,-4,5\n"), "column 2"));
  CHECK(Contains(error(header + "32,,5\n"), "column 2"));  // only base/peak
  CHECK(Contains(error(header + "32,1.5,5\n"), "column 2"));
  m = error(header + "nan,100,5\n");
  CHECK(Contains(m, "column 1 (feature.seq)"));
  CHECK(Contains(error(header + "-1,100,5\n"), "column 1"));
  CHECK(Contains(error(header + "32,100,x\n"), "column 3 (base_bytes)"));
  m = error(header + "32,100\n");
  CHECK(Contains(m, "bad.csv:2:"));
  CHECK(Contains(m, "2 cells"));
  m = error("feature.seq,act_bytes.l0,weird\n");
  CHECK(Contains(m, "bad.csv:1:"));
  CHECK(Contains(m, "column 3 (weird)"));
  CHECK(
      Contains(error("feature.seq,act_bytes.l0,act_bytes.l0\n"), "duplicate"));
  CHECK(Contains(error("feature.seq,act_bytes.l0,input_bytes.l9\n"),
                 "act_bytes.l9"));
  CHECK(Contains(error("act_bytes.l0\n1\n"), "feature"));
  CHECK(Contains(error("feature.seq\n1\n"), "blocks"));
  CHECK(Contains(error(""), "header"));
  auto missing = ReadTraceCsv(TempPath("does_not_exist.csv"));
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("the streaming writer appends rows after one header") {
  const std::string path = TempPath("stream.csv");
  const Trace t = Example();
  auto w = TraceWriter::Open(path, t.model);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(t.samples[0]).ok());
  REQUIRE((*w)->Append(t.samples[1]).ok());
  REQUIRE((*w)->Flush().ok());
  // Readable while the writer is still open.
  auto partial = ReadTraceCsv(path);
  REQUIRE(partial.ok());
  CHECK(partial->samples.size() == 2);
  REQUIRE((*w)->Append(t.samples[0]).ok());
  CHECK((*w)->rows_written() == 3);
  Sample bad = t.samples[0];
  bad.blocks[1].act_bytes = -1;
  const absl::Status s = (*w)->Append(bad);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(std::string(s.message()), "sample.blocks[1].act_bytes"));
  REQUIRE((*w)->Close().ok());
  CHECK((*w)->Append(t.samples[0]).code() ==
        absl::StatusCode::kFailedPrecondition);
  auto r = ReadTraceCsv(path);
  REQUIRE(r.ok());
  CHECK(r->samples.size() == 3);
  const std::string text = ReadFile(path);
  CHECK(text.find("feature.batch") == 0);
  CHECK(text.find("feature.batch", 1) == std::string::npos);  // one header
}

TEST_CASE("writers reject what the format cannot hold, before writing") {
  const std::string path = TempPath("rejected.csv");
  Trace t = Example();
  t.model.blocks[0].name = "a,b";
  absl::Status s = WriteTraceCsv(path, t);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(std::string(s.message()), "model.blocks[0].name"));
  t = Example();
  t.samples[1].features.pop_back();
  s = WriteTraceCsv(path, t);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(std::string(s.message()), "samples[1].features"));
  CHECK(ReadTraceCsv(path).status().code() == absl::StatusCode::kNotFound);
  t = Example();
  t.model.feature_names.clear();
  CHECK(
      Contains(std::string(TraceWriter::Open(path, t.model).status().message()),
               "model.feature_names"));
  CHECK(TraceWriter::Open("/nonexistent-dir/x.csv", Example().model)
            .status()
            .code() == absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace remat
