#include "planner/service/wal.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "planner/service/crc32c.h"

namespace remat {
namespace {

std::string TempDir() {
  std::string tmpl =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
      "/walXXXXXX";
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

std::vector<std::string> Replay(const std::string& path, WalRecovery* rec,
                                std::unique_ptr<Wal>* wal = nullptr) {
  std::vector<std::string> out;
  auto w = Wal::Open(
      path, [&](absl::string_view p) { out.emplace_back(p); }, rec);
  REQUIRE(w.ok());
  if (wal != nullptr) *wal = *std::move(w);
  return out;
}

off_t FileSize(const std::string& path) {
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  return st.st_size;
}

TEST_CASE("crc32c matches the standard check value") {
  REQUIRE(Crc32c(0, "123456789", 9) == 0xE3069283u);
  // Extending equals one pass.
  REQUIRE(Crc32c(Crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
}

TEST_CASE("records survive reopening, in order") {
  const std::string path = TempDir() + "/wal.log";
  WalRecovery rec;
  {
    std::unique_ptr<Wal> wal;
    REQUIRE(Replay(path, &rec, &wal).empty());
    REQUIRE(rec.dropped_bytes == 0);
    for (int i = 0; i < 100; ++i) {
      REQUIRE(wal->Append("record " + std::to_string(i)).ok());
    }
    REQUIRE(wal->Append("").ok());  // empty payloads are records too
  }
  auto records = Replay(path, &rec);
  REQUIRE(records.size() == 101);
  REQUIRE(rec.records == 101);
  for (int i = 0; i < 100; ++i)
    REQUIRE(records[i] == "record " + std::to_string(i));
  REQUIRE(records[100].empty());
}

TEST_CASE("concurrent appends are all durable (group commit)") {
  const std::string path = TempDir() + "/wal.log";
  WalRecovery rec;
  {
    std::unique_ptr<Wal> wal;
    Replay(path, &rec, &wal);
    // Catch2's assertions are not thread-safe: each thread counts its
    // failed appends, checked after the join.
    std::vector<std::thread> threads;
    std::vector<int> failed(8, 0);
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&wal, &failed, t] {
        for (int i = 0; i < 50; ++i) {
          if (!wal->Append(std::to_string(t) + ":" + std::to_string(i)).ok()) {
            ++failed[t];
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    REQUIRE(failed == std::vector<int>(8, 0));
    REQUIRE(static_cast<off_t>(wal->size_bytes()) == FileSize(path));
  }
  auto records = Replay(path, &rec);
  REQUIRE(records.size() == 400);
  std::sort(records.begin(), records.end());
  REQUIRE(std::unique(records.begin(), records.end()) == records.end());
}

TEST_CASE("a torn tail is truncated and appends continue after it") {
  const std::string path = TempDir() + "/wal.log";
  WalRecovery rec;
  {
    std::unique_ptr<Wal> wal;
    Replay(path, &rec, &wal);
    for (int i = 0; i < 3; ++i)
      REQUIRE(wal->Append(std::string(100, 'a' + i)).ok());
  }
  const off_t full = FileSize(path);
  REQUIRE(truncate(path.c_str(), full - 5) == 0);  // a crash mid-write
  {
    std::unique_ptr<Wal> wal;
    auto records = Replay(path, &rec, &wal);
    REQUIRE(records.size() == 2);
    REQUIRE(rec.dropped_bytes == 100 + 8 - 5);
    REQUIRE(rec.dropped_reason.find("torn") != std::string::npos);
    REQUIRE(FileSize(path) == full - (100 + 8));
    REQUIRE(wal->Append("after").ok());
  }
  auto records = Replay(path, &rec);
  REQUIRE(rec.dropped_bytes == 0);
  REQUIRE(records.size() == 3);
  REQUIRE(records[2] == "after");
}

TEST_CASE("a flipped byte fails the checksum; garbage tails are cut") {
  const std::string path = TempDir() + "/wal.log";
  WalRecovery rec;
  {
    std::unique_ptr<Wal> wal;
    Replay(path, &rec, &wal);
    REQUIRE(wal->Append("first").ok());
    REQUIRE(wal->Append("second").ok());
  }
  SECTION("flipped payload byte") {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(FileSize(path) - 2);
    f.put('X');
    f.close();
    auto records = Replay(path, &rec);
    REQUIRE(records == std::vector<std::string>{"first"});
    REQUIRE(rec.dropped_reason == "checksum mismatch");
  }
  SECTION("random garbage appended") {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << "\x13\x37garbage that is not a record at all";
    f.close();
    auto records = Replay(path, &rec);
    REQUIRE(records == std::vector<std::string>{"first", "second"});
    REQUIRE(rec.dropped_bytes > 0);
  }
  SECTION("a huge length field") {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << std::string("\xff\xff\xff\x7f\0\0\0\0", 8);
    f.close();
    auto records = Replay(path, &rec);
    REQUIRE(records.size() == 2);
    REQUIRE(rec.dropped_reason.find("exceeds") != std::string::npos);
  }
}

TEST_CASE("a file that is not a log is refused, not overwritten") {
  const std::string path = TempDir() + "/wal.log";
  {
    std::ofstream f(path);
    f << "precious data, not a log";
  }
  WalRecovery rec;
  auto wal = Wal::Open(
      path, [](absl::string_view) {}, &rec);
  REQUIRE(absl::IsFailedPrecondition(wal.status()));
  REQUIRE(FileSize(path) == 24);
}

TEST_CASE("a torn file header (crash at creation) starts a fresh log") {
  const std::string path = TempDir() + "/wal.log";
  {
    std::ofstream f(path);
    f << "RMT";
  }
  WalRecovery rec;
  std::unique_ptr<Wal> wal;
  REQUIRE(Replay(path, &rec, &wal).empty());
  REQUIRE(rec.dropped_bytes == 3);
  REQUIRE(wal->Append("x").ok());
}

TEST_CASE("compaction replaces the records; appends continue after them") {
  const std::string path = TempDir() + "/wal.log";
  WalRecovery rec;
  std::unique_ptr<Wal> wal;
  Replay(path, &rec, &wal);
  for (int i = 0; i < 10; ++i) REQUIRE(wal->Append(std::to_string(i)).ok());
  std::vector<std::string> seen;
  REQUIRE(wal->Compact([&](std::vector<std::string> records) {
                seen = records;
                std::vector<std::string> kept;
                for (const std::string& r : records) {
                  if (std::stoi(r) % 3 == 0) kept.push_back(r);
                }
                return kept;
              }).ok());
  REQUIRE(seen.size() == 10);
  REQUIRE(wal->size_bytes() == static_cast<uint64_t>(FileSize(path)));
  REQUIRE(wal->Append("after").ok());
  wal.reset();
  REQUIRE(Replay(path, &rec) ==
          std::vector<std::string>{"0", "3", "6", "9", "after"});
  REQUIRE(rec.dropped_bytes == 0);
  struct stat st;
  REQUIRE(stat((path + ".compact").c_str(), &st) != 0);  // no leftovers
}

TEST_CASE("appends racing a compaction are all durable") {
  const std::string path = TempDir() + "/wal.log";
  WalRecovery rec;
  std::unique_ptr<Wal> wal;
  Replay(path, &rec, &wal);
  for (int i = 0; i < 100; ++i) REQUIRE(wal->Append("old" + std::to_string(i)).ok());
  // Catch2's assertions are not thread-safe: the appender counts its failed
  // appends, checked after the join.
  std::vector<std::string> acked;
  int failed = 0;
  std::thread appender([&] {
    for (int i = 0; i < 300; ++i) {
      const std::string r = "new" + std::to_string(i);
      if (wal->Append(r).ok()) {
        acked.push_back(r);
      } else {
        ++failed;
      }
    }
  });
  std::vector<std::string> snapshot;
  REQUIRE(wal->Compact([&](std::vector<std::string> records) {
                snapshot = records;
                // Keep the new records, drop the old ones.
                std::vector<std::string> kept;
                for (const std::string& r : records) {
                  if (r.rfind("new", 0) == 0) kept.push_back(r);
                }
                return kept;
              }).ok());
  appender.join();
  REQUIRE(failed == 0);
  wal.reset();
  // Every acknowledged record is there, in order; no old one is.
  REQUIRE(Replay(path, &rec) == acked);
  REQUIRE(snapshot.size() >= 100);
}

}  // namespace
}  // namespace remat
