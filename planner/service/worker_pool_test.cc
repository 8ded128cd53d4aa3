#include "planner/service/worker_pool.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include <catch2/catch.hpp>

namespace remat {
namespace {

TEST_CASE("every posted task runs, also those posted by tasks") {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(3);
    for (int i = 0; i < 1000; ++i) {
      pool.Post([&, i] {
        ++ran;
        if (i % 100 == 0) pool.Post([&] { ++ran; });
      });
    }
    // The destructor runs what is queued before joining.
  }
  REQUIRE(ran == 1010);
}

TEST_CASE("Drain waits for queued and running tasks, the pool keeps running") {
  std::atomic<int> ran{0};
  WorkerPool pool(2);
  for (int i = 0; i < 200; ++i) {
    pool.Post([&, i] {
      if (i % 50 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        pool.Post([&] { ++ran; });
      }
      ++ran;
    });
  }
  pool.Drain();
  REQUIRE(ran == 204);
  pool.Post([&] { ++ran; });
  pool.Drain();
  REQUIRE(ran == 205);
}

TEST_CASE("a blocked task does not hold up the others") {
  WorkerPool pool(2);
  absl::Notification release;
  absl::Notification second_ran;
  pool.Post([&] { release.WaitForNotification(); });
  pool.Post([&] { second_ran.Notify(); });
  REQUIRE(second_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
}

}  // namespace
}  // namespace remat
