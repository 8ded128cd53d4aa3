// rematd under faults: a state directory on a filesystem that fills up,
// corrupt, truncated and foreign files where its state lives, and SIGTERM
// while calls are in flight. Nothing acknowledged is ever lost.
#include <errno.h>
#include <fcntl.h>
#include <grpcpp/client_context.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "client/remote_planner.h"
#include "proto/remat.grpc.pb.h"
#include "tests/daemon_harness.h"
#include "tests/raw_client.h"

namespace remat {
namespace {

using testing::DaemonProcess;
using Client = testing::RawClient;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Writes zeros to `path` until the filesystem is full.
void FillUp(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  std::vector<char> chunk(4096, 0);
  while (::write(fd, chunk.data(), chunk.size()) > 0) {
  }
  REQUIRE(errno == ENOSPC);
  ::fsync(fd);
  ::close(fd);
}

// A small tmpfs mounted for the test (rematd's state on a disk that fills
// up); unmounted when it goes.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(const char* size) : dir_(testing::MakeTempDir()) {
    const std::string options = std::string("size=") + size;
    ok_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0;
    error_ = ok_ ? "" : std::strerror(errno);
  }
  ~SmallFilesystem() {
    if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  bool ok_ = false;
  std::string error_;
};

TEST_CASE("a full disk: UNAVAILABLE, nothing acknowledged lost, then resume") {
  if (::geteuid() != 0) {
    WARN("skipped: mounting a small tmpfs needs root");
    return;
  }
  SmallFilesystem fs("2m");
  INFO("mount: " << fs.error());
  REQUIRE(fs.ok());
  const std::string state = fs.dir() + "/state";
  const std::string filler = fs.dir() + "/filler";
  const ModelSpec spec = testing::TestModel("m", 4);
  DaemonProcess daemon;
  REQUIRE(daemon.Start({state, "", {"--wal-compact-bytes", "0"}}).ok());
  Client client(daemon.address());
  REQUIRE(client.Register(spec).ok());
  const std::vector<Sample> grid = testing::TestSampleGrid(spec);
  REQUIRE(client.Samples(spec, grid).ok());
  uint64_t acked = grid.size();

  // The disk fills up: durable calls answer UNAVAILABLE and change nothing;
  // plans are still served.
  FillUp(filler);
  for (int i = 0; i < 3; ++i) {
    const grpc::Status s = client.Samples(spec, grid);
    INFO(s.error_message());
    REQUIRE(s.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(Contains(s.error_message(), "retry"));
  }
  CHECK(client.State("m").num_samples() == acked);
  v1::GetPlanResponse plan;
  REQUIRE(client.Plan("m", 4, 200, int64_t{64} << 30, &plan).ok());
  CHECK(plan.decision() == v1::PLAN);

  // A little space returns: some batches fit, then the disk is full in the
  // middle of one; the log is cut back to whole records.
  struct stat full;
  REQUIRE(::stat(filler.c_str(), &full) == 0);
  REQUIRE(::truncate(filler.c_str(), full.st_size - 4 * 1024) == 0);
  int refused = 0;
  for (int i = 0; i < 2000 && refused == 0; ++i) {
    const grpc::Status s = client.Samples(spec, {testing::TestSample(spec, 1 + i % 8, 64 + i)});
    if (s.ok()) {
      ++acked;
    } else {
      REQUIRE(s.error_code() == grpc::StatusCode::UNAVAILABLE);
      ++refused;
    }
  }
  CHECK(refused == 1);
  CHECK(client.State("m").num_samples() == acked);

  // Space returns: durable writes resume.
  REQUIRE(::unlink(filler.c_str()) == 0);
  REQUIRE(client.Samples(spec, grid).ok());
  acked += grid.size();
  REQUIRE(client.Register(testing::TestModel("other", 2)).ok());

  // Nothing acknowledged is lost, nothing refused was kept.
  REQUIRE(daemon.Signal(SIGKILL) == 128 + SIGKILL);
  DaemonProcess restarted;
  REQUIRE(restarted.Start({state, "", {"--wal-compact-bytes", "0"}}).ok());
  Client again(restarted.address());
  CHECK(again.State("m").num_samples() == acked);
  CHECK(Contains(restarted.log(), "state_loaded"));
  CHECK_FALSE(Contains(restarted.log(), "wal_tail_truncated"));
  REQUIRE(restarted.Signal(SIGTERM) == 0);
}

TEST_CASE("truncated, foreign and misplaced state: clear errors, nothing lost") {
  const ModelSpec spec = testing::TestModel("m", 3);
  const std::string state = testing::MakeTempDir() + "/state";
  uint64_t acked = 0;
  {
    DaemonProcess daemon;
    REQUIRE(daemon.Start({state}).ok());
    Client client(daemon.address());
    REQUIRE(client.Register(spec).ok());
    for (const Sample& s : testing::TestSampleGrid(spec)) {
      REQUIRE(client.Samples(spec, {s}).ok());
      ++acked;
    }
    REQUIRE(daemon.Signal(SIGKILL) == 128 + SIGKILL);
  }
  const std::string wal = state + "/wal.log";

  // A log cut in the middle of its last record (a torn write): that record
  // goes, with a warning naming the file; every whole record stays.
  {
    struct stat st;
    REQUIRE(::stat(wal.c_str(), &st) == 0);
    REQUIRE(::truncate(wal.c_str(), st.st_size - 5) == 0);
    DaemonProcess daemon;
    REQUIRE(daemon.Start({state}).ok());
    CHECK(Contains(daemon.log(), "wal_tail_truncated"));
    CHECK(Contains(daemon.log(), wal));
    Client client(daemon.address());
    CHECK(client.State("m").num_samples() == acked - 1);
    REQUIRE(daemon.Signal(SIGTERM) == 0);
  }

  // A compaction that crashed before its rename left its file behind: the
  // log itself is used, and the leftover does not confuse a later
  // compaction.
  {
    std::ofstream(state + "/wal.log.compact") << "half a compaction";
    DaemonProcess daemon;
    REQUIRE(daemon.Start({state}).ok());
    Client client(daemon.address());
    CHECK(client.State("m").num_samples() == acked - 1);
    REQUIRE(daemon.Signal(SIGTERM) == 0);
  }

  // The log's name taken by a directory, and a state dir that is a file:
  // the start stops with an error that names the path.
  {
    const std::string odd = testing::MakeTempDir() + "/state";
    REQUIRE(::mkdir(odd.c_str(), 0700) == 0);
    REQUIRE(::mkdir((odd + "/wal.log").c_str(), 0700) == 0);
    DaemonProcess daemon;
    const absl::Status s = daemon.Start({odd});
    REQUIRE_FALSE(s.ok());
    CHECK(Contains(std::string(s.message()), odd + "/wal.log"));
  }
  {
    const std::string file = testing::MakeTempDir() + "/not-a-dir";
    std::ofstream(file) << "x";
    DaemonProcess daemon;
    const absl::Status s = daemon.Start({file});
    REQUIRE_FALSE(s.ok());
    CHECK(Contains(std::string(s.message()), file));
  }
  // The good state is still all there.
  DaemonProcess daemon;
  REQUIRE(daemon.Start({state}).ok());
  Client client(daemon.address());
  CHECK(client.State("m").num_samples() == acked - 1);
  REQUIRE(daemon.Signal(SIGTERM) == 0);
}

TEST_CASE("SIGTERM under load: calls in flight finish, acknowledged is durable") {
  const std::string state = testing::MakeTempDir() + "/state";
  const ModelSpec spec = testing::TestModel("m", 4);
  DaemonProcess daemon;
  // Calls in flight at SIGTERM get the grace period to finish; a generous
  // one, so that they do on a loaded machine too (past it they would be
  // cancelled, as documented).
  const absl::Status started =
      daemon.Start({state, "", {"--grace-seconds", "60"}});
  INFO(started.message());
  REQUIRE(started.ok());
  {
    Client client(daemon.address());
    REQUIRE(client.Register(spec).ok());
    REQUIRE(client.Samples(spec, testing::TestSampleGrid(spec)).ok());
  }
  const uint64_t seeded = testing::TestSampleGrid(spec).size();
  std::atomic<uint64_t> acked{0}, sent{0}, plans{0};
  std::atomic<bool> stop{false};
  std::mutex codes_mu;
  std::map<int, int> codes;  // non-OK codes seen
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      Client client(daemon.address());
      for (int i = 0; !stop; ++i) {
        grpc::Status s;
        if (t % 2 == 0) {
          sent += 2;
          s = client.Samples(spec, {testing::TestSample(spec, 1 + i % 8, 64 + t),
                                    testing::TestSample(spec, 2, 70 + i % 300)});
          if (s.ok()) acked += 2;
        } else {
          v1::GetPlanResponse resp;
          s = client.Plan("m", 4, 200, int64_t{64} << 30, &resp);
          if (s.ok()) ++plans;
        }
        if (!s.ok()) {
          std::lock_guard lock(codes_mu);
          ++codes[s.error_code()];
          if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return;
        }
      }
    });
  }
  while (acked < 100) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(daemon.Signal(SIGTERM) == 0);
  stop = true;
  for (std::thread& c : clients) c.join();
  // A call either finished or was refused as UNAVAILABLE (retry elsewhere
  // or later). A call that reaches rematd in the instant its queue shuts
  // down may still end CANCELLED (also a retry for the client; nothing of
  // it was acknowledged, which the restart below checks); nothing else.
  for (const auto& [code, n] : codes) {
    INFO("code " << code << " x" << n);
    CHECK((code == grpc::StatusCode::UNAVAILABLE ||
           code == grpc::StatusCode::CANCELLED));
  }
  CHECK(plans > 0);
  DaemonProcess restarted;
  REQUIRE(restarted.Start({state}).ok());
  Client client(restarted.address());
  const uint64_t held = client.State("m").num_samples();
  INFO("acked " << acked.load() << ", sent " << sent.load());
  CHECK(held >= seeded + acked);
  CHECK(held <= seeded + sent);
  REQUIRE(restarted.Signal(SIGTERM) == 0);
}

}  // namespace
}  // namespace remat
