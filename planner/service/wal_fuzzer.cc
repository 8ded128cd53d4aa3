// Fuzzes the write-ahead log's reader (Wal::Open, planner/service/wal.h) and
// what replay does with each record (ApplyWalRecord, service.h), in a
// temporary directory.
//
// Input: one mode byte, then the body. Mode bit 0 clear: the body is the log
// file as it is. Set: the body is split at "--rec--" into payloads that are
// framed correctly behind the magic (so the fuzzer reaches the records
// themselves); with bit 1 also set the last piece is appended unframed (a
// torn or corrupt tail).
//
// Checks: recovery's byte counts add up and the file is cut to the valid
// prefix; correctly framed payloads all come back, in order; a record
// appended after Open comes back on the next Open. The replayed payloads go
// through ApplyWalRecord into a fresh core; the records it accepts must be
// accepted again on a second replay, and their compaction
// (CompactWalRecords) must rebuild the same model states.
#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "planner/core.h"
#include "planner/service/convert.h"
#include "planner/service/crc32c.h"
#include "planner/service/logging.h"
#include "planner/service/service.h"
#include "planner/service/wal.h"
#include "planner/service/wal_compaction.h"
#include "proto/wal.pb.h"
#include "third_party/fuzz/fuzz_util.h"

namespace {

constexpr char kMagic[] = "RMTWAL01";
constexpr char kSeparator[] = "--rec--";

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void Frame(const std::string& payload, std::string* out) {
  std::string header;
  PutU32(static_cast<uint32_t>(payload.size()), &header);
  const uint32_t crc = remat::Crc32c(
      remat::Crc32c(0, header.data(), 4), payload.data(), payload.size());
  PutU32(crc, &header);
  *out += header;
  *out += payload;
}

std::vector<std::string> Split(const std::string& body) {
  std::vector<std::string> pieces;
  size_t start = 0;
  for (;;) {
    const size_t at = body.find(kSeparator, start);
    if (at == std::string::npos) {
      pieces.push_back(body.substr(start));
      return pieces;
    }
    pieces.push_back(body.substr(start, at - start));
    start = at + std::strlen(kSeparator);
  }
}

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    REMAT_FUZZ_CHECK(m.SerializeToCodedStream(&coded));
  }
  return out;
}

// Every model's state (spec, samples, fits, ranges, outcome counts), without
// the plan cache's counters.
std::string States(const remat::PlannerCore& core) {
  std::string out;
  std::vector<std::string> names = core.ListModels();
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto state = core.GetModelState(name);
    REMAT_FUZZ_CHECK(state.ok());
    remat::v1::GetModelStateResponse proto;
    remat::ModelStateToProto(*state, remat::PlanCacheStats{}, &proto);
    proto.clear_cache();
    out += Deterministic(proto);
    out += '\n';
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  remat::InitLogging("text", "error");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string file;
  std::vector<std::string> framed;  // payloads framed correctly, in order
  bool clean = false;               // nothing after the framed records
  if ((mode & 1) == 0) {
    file = body;
  } else {
    std::vector<std::string> pieces = Split(body);
    std::string tail;
    if ((mode & 2) != 0) {
      tail = pieces.back();
      pieces.pop_back();
    }
    file = kMagic;
    for (const std::string& p : pieces) Frame(p, &file);
    framed = pieces;
    file += tail;
    clean = tail.empty();
  }

  const std::string path = remat::fuzz::TempDir::Path() + "/wal.log";
  remat::fuzz::WriteFileOrDie(path, file.data(), file.size());

  std::vector<std::string> replayed;
  remat::WalRecovery recovery;
  auto wal = remat::Wal::Open(
      path, [&](absl::string_view r) { replayed.emplace_back(r); }, &recovery);
  if (!wal.ok()) {
    ::unlink(path.c_str());
    REMAT_FUZZ_CHECK(wal.status().code() ==
                     absl::StatusCode::kFailedPrecondition);
    REMAT_FUZZ_CHECK(file.size() >= 8 && file.compare(0, 8, kMagic) != 0);
    return 0;
  }
  REMAT_FUZZ_CHECK(recovery.records == replayed.size());
  REMAT_FUZZ_CHECK(recovery.valid_bytes >= 8);
  REMAT_FUZZ_CHECK(recovery.dropped_bytes ==
                   (file.size() >= 8 ? file.size() - recovery.valid_bytes
                                     : file.size()));
  REMAT_FUZZ_CHECK((recovery.dropped_bytes == 0) ==
                   recovery.dropped_reason.empty());
  struct stat st;
  REMAT_FUZZ_CHECK(::stat(path.c_str(), &st) == 0);
  REMAT_FUZZ_CHECK(static_cast<uint64_t>(st.st_size) == recovery.valid_bytes);
  REMAT_FUZZ_CHECK((*wal)->size_bytes() == recovery.valid_bytes);
  if ((mode & 1) != 0) {
    // The framed records come first, whatever the tail holds.
    REMAT_FUZZ_CHECK(replayed.size() >= framed.size());
    for (size_t i = 0; i < framed.size(); ++i) {
      REMAT_FUZZ_CHECK(replayed[i] == framed[i]);
    }
    if (clean) {
      REMAT_FUZZ_CHECK(replayed.size() == framed.size());
      REMAT_FUZZ_CHECK(recovery.dropped_bytes == 0);
    }
  }

  // Append after recovery; the next Open sees it after the kept records.
  const std::string extra = "appended";
  REMAT_FUZZ_CHECK((*wal)->Append(extra).ok());
  wal->reset();
  std::vector<std::string> reread;
  auto wal2 = remat::Wal::Open(
      path, [&](absl::string_view r) { reread.emplace_back(r); }, &recovery);
  REMAT_FUZZ_CHECK(wal2.ok());
  REMAT_FUZZ_CHECK(recovery.dropped_bytes == 0);
  REMAT_FUZZ_CHECK(reread.size() == replayed.size() + 1);
  for (size_t i = 0; i < replayed.size(); ++i) {
    REMAT_FUZZ_CHECK(reread[i] == replayed[i]);
  }
  REMAT_FUZZ_CHECK(reread.back() == extra);
  wal2->reset();
  ::unlink(path.c_str());

  // Replay as rematd does: decode, apply, move on past errors.
  remat::PlannerCore core;
  std::vector<remat::v1::WalRecord> accepted;
  for (const std::string& payload : replayed) {
    remat::v1::WalRecord record;
    if (!record.ParseFromString(payload)) continue;
    if (remat::ApplyWalRecord(&core, record).ok()) accepted.push_back(record);
  }
  const std::string state = States(core);

  // What the daemon logs is what the core accepted: replaying just that
  // must accept all of it and give the same state...
  remat::PlannerCore again;
  for (const remat::v1::WalRecord& r : accepted) {
    REMAT_FUZZ_CHECK(remat::ApplyWalRecord(&again, r).ok());
  }
  REMAT_FUZZ_CHECK(States(again) == state);
  // ...and so must its compaction.
  remat::PlannerCore compacted;
  for (const remat::v1::WalRecord& r : remat::CompactWalRecords(accepted)) {
    REMAT_FUZZ_CHECK(remat::ApplyWalRecord(&compacted, r).ok());
  }
  if (States(compacted) != state) {
    for (const remat::PlannerCore* c : {&core, &compacted}) {
      for (const std::string& name : c->ListModels()) {
        remat::v1::GetModelStateResponse proto;
        remat::ModelStateToProto(*c->GetModelState(name),
                                 remat::PlanCacheStats{}, &proto);
        proto.clear_cache();
        std::fprintf(stderr, "%s\n", proto.ShortDebugString().c_str());
      }
      std::fprintf(stderr, "--\n");
    }
  }
  REMAT_FUZZ_CHECK(States(compacted) == state);
  return 0;
}
