#include "kernels/copy_engine.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace remat::kernels {
namespace {

std::vector<unsigned char> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

TEST_CASE("a round trip through the host is bit-exact") {
  auto engine = NewCpuCopyEngine();
  for (size_t n : {size_t{1}, size_t{12345}, size_t{5} << 20}) {
    const std::vector<unsigned char> device = RandomBytes(n, n);
    auto host = engine->AllocateHost(static_cast<int64_t>(n));
    REQUIRE(host.ok());
    REQUIRE(engine->CopyToHost(device.data(), &*host).Wait().ok());
    std::vector<unsigned char> back(n, 0);
    REQUIRE(engine->CopyToDevice(*host, back.data()).Wait().ok());
    CHECK(back == device);
  }
  const CopyEngineStats s = engine->stats();
  CHECK(s.bytes_to_host == 1 + 12345 + (5 << 20));
  CHECK(s.bytes_to_device == s.bytes_to_host);
  CHECK(s.failed_copies == 0);
}

TEST_CASE("copies run first in first out, off the caller's thread") {
  CopyEngineOptions options;
  options.link_bytes_per_s = 1e9;  // an emulated 1 GB/s link
  auto engine = NewCpuCopyEngine(options);
  const std::vector<unsigned char> device = RandomBytes(size_t{16} << 20, 3);
  std::vector<HostBuffer> hosts;
  for (int i = 0; i < 4; ++i) {
    hosts.push_back(*engine->AllocateHost(int64_t{16} << 20));
  }
  std::vector<CopyEvent> events;
  for (HostBuffer& h : hosts) events.push_back(engine->CopyToHost(device.data(), &h));
  // Queued, not run: 64 MiB at 1 GB/s takes 67 ms.
  CHECK_FALSE(events.back().done());
  // First in, first out: whenever a copy is done, every copy queued before
  // it is done too. Read from the last to the first, so that a copy seen
  // done was done before the earlier ones were looked at.
  bool all_done = false, out_of_order = false;
  while (!all_done) {
    bool later_done = false;
    all_done = true;
    for (size_t i = events.size(); i-- > 0;) {
      const bool done = events[i].done();
      out_of_order = out_of_order || (later_done && !done);
      later_done = later_done || done;
      all_done = all_done && done;
    }
    std::this_thread::yield();
  }
  CHECK_FALSE(out_of_order);
  REQUIRE(events.back().Wait().ok());
  for (const HostBuffer& h : hosts) {
    CHECK(std::memcmp(h.data(), device.data(), device.size()) == 0);
  }
}

TEST_CASE("the two directions are independent queues") {
  CopyEngineOptions options;
  options.link_bytes_per_s = 1e9;
  auto engine = NewCpuCopyEngine(options);
  const std::vector<unsigned char> a = RandomBytes(size_t{32} << 20, 1);
  auto host_a = *engine->AllocateHost(int64_t{32} << 20);
  auto host_b = *engine->AllocateHost(1 << 20);
  std::memset(host_b.data(), 7, 1 << 20);
  std::vector<unsigned char> b(1 << 20, 0);
  CopyEvent out = engine->CopyToHost(a.data(), &host_a);  // ~34 ms
  CopyEvent in = engine->CopyToDevice(host_b, b.data());  // ~1 ms
  REQUIRE(in.Wait().ok());
  CHECK_FALSE(out.done());  // the small copy back did not queue behind it
  REQUIRE(out.Wait().ok());
  CHECK(b == std::vector<unsigned char>(1 << 20, 7));
}

TEST_CASE("a copy back waits for the copy out it depends on") {
  CopyEngineOptions options;
  options.link_bytes_per_s = 1e9;
  auto engine = NewCpuCopyEngine(options);
  const std::vector<unsigned char> device = RandomBytes(size_t{32} << 20, 4);
  auto host = *engine->AllocateHost(int64_t{32} << 20);
  bool landed = false;
  CopyEvent out = engine->CopyToHost(device.data(), &host,
                                     [&] { landed = true; });
  std::vector<unsigned char> back(device.size(), 0);
  // Issued at once, yet it reads the host buffer only once it is full.
  REQUIRE(engine->CopyToDevice(host, back.data(), out).Wait().ok());
  CHECK(out.done());
  CHECK(landed);
  CHECK(back == device);
  // A failed copy out fails the copy back, with both reasons.
  CopyEvent bad = engine->CopyToHost(nullptr, &host);
  const absl::Status s = engine->CopyToDevice(host, back.data(), bad).Wait();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("waited for") != std::string::npos);
}

TEST_CASE("a warm pool allocates nothing more") {
  CopyEngineOptions options;
  options.pool.chunk_bytes = int64_t{32} << 20;
  auto engine = NewCpuCopyEngine(options);
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> size(1, int64_t{4} << 20);
  auto step = [&](bool largest) {
    std::vector<HostBuffer> held;
    for (int i = 0; i < 12; ++i) {
      auto b = engine->AllocateHost(largest ? int64_t{4} << 20 : size(rng));
      REQUIRE(b.ok());
      held.push_back(std::move(*b));
    }
  };
  step(/*largest=*/true);  // warm-up: the largest step
  const HostPoolStats warm = engine->stats().pool;
  CHECK(warm.chunk_allocations >= 1);
  for (int s = 0; s < 200; ++s) step(false);  // shapes vary, sizes shrink
  const HostPoolStats after = engine->stats().pool;
  CHECK(after.chunk_allocations == warm.chunk_allocations);
  CHECK(after.reserved_bytes == warm.reserved_bytes);
  CHECK(after.in_use_bytes == 0);
  CHECK(after.peak_in_use_bytes == warm.peak_in_use_bytes);
}

TEST_CASE("freed neighbours merge: a chunk in pieces serves it whole again") {
  auto pool = HostPool::Create(HeapChunks(), {int64_t{64} << 20, 1 << 20});
  {
    std::vector<HostBuffer> pieces;
    for (int i = 0; i < 4; ++i) pieces.push_back(*pool->Allocate(256 << 10));
    std::swap(pieces[0], pieces[2]);  // freed out of order
  }
  auto whole = pool->Allocate(1 << 20);
  REQUIRE(whole.ok());
  CHECK(pool->stats().chunk_allocations == 1);
}

TEST_CASE("past the host limit: RESOURCE_EXHAUSTED, and room once freed") {
  CopyEngineOptions options;
  options.pool.limit_bytes = int64_t{16} << 20;
  options.pool.chunk_bytes = int64_t{8} << 20;
  auto engine = NewCpuCopyEngine(options);
  auto a = engine->AllocateHost(int64_t{7} << 20);
  auto b = engine->AllocateHost(int64_t{7} << 20);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto c = engine->AllocateHost(int64_t{7} << 20);
  REQUIRE(c.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(c.status().message().find("host-memory limit") != std::string::npos);
  *a = HostBuffer();  // freed
  CHECK(engine->AllocateHost(int64_t{7} << 20).ok());
  CHECK(engine->AllocateHost(0).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(engine->AllocateHost(int64_t{17} << 20).status().code() ==
        absl::StatusCode::kResourceExhausted);
}

TEST_CASE("a copy that cannot run fails its event, with the reason") {
  auto engine = NewCpuCopyEngine();
  auto host = *engine->AllocateHost(64);
  const absl::Status s = engine->CopyToHost(nullptr, &host).Wait();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("needs a source") != std::string::npos);
  CHECK(engine->CopyToDevice(host, nullptr).Wait().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(engine->stats().failed_copies == 2);
}

TEST_CASE("an engine destroyed with copies queued finishes them first") {
  const std::vector<unsigned char> device = RandomBytes(size_t{8} << 20, 9);
  std::vector<CopyEvent> events;
  std::vector<HostBuffer> hosts;
  {
    CopyEngineOptions options;
    options.link_bytes_per_s = 2e9;
    auto engine = NewCpuCopyEngine(options);
    for (int i = 0; i < 3; ++i) {
      hosts.push_back(*engine->AllocateHost(int64_t{8} << 20));
    }
    for (HostBuffer& h : hosts) {
      events.push_back(engine->CopyToHost(device.data(), &h));
    }
  }
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(events[i].done());
    CHECK(events[i].Wait().ok());
    CHECK(std::memcmp(hosts[i].data(), device.data(), device.size()) == 0);
  }
}

TEST_CASE("MeasureLink reads the emulated link's speed each way") {
  // Slow links and 4 MiB (10 to 40 ms a copy), so that the copy thread's
  // scheduling on a busy machine (tests run side by side, some under the
  // sanitizers) cannot dominate what is measured.
  for (double gbps : {0.1, 0.4}) {
    CopyEngineOptions options;
    options.link_bytes_per_s = gbps * 1e9;
    auto engine = NewCpuCopyEngine(options);
    std::vector<unsigned char> device = RandomBytes(size_t{4} << 20, 9);
    const std::vector<unsigned char> before = device;
    // The cap is a floor on each copy's time; queueing and scheduling only
    // add to it, so the fastest of three tries is the one to hold to both
    // bounds.
    LinkBandwidth best;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto link = MeasureLink(engine.get(), device.data(), int64_t{4} << 20);
      REQUIRE(link.ok());
      best.d2h_bytes_per_s =
          std::max(best.d2h_bytes_per_s, link->d2h_bytes_per_s);
      best.h2d_bytes_per_s =
          std::max(best.h2d_bytes_per_s, link->h2d_bytes_per_s);
    }
    INFO(gbps << " GB/s: d2h " << best.d2h_bytes_per_s << ", h2d "
              << best.h2d_bytes_per_s);
    for (double measured : {best.d2h_bytes_per_s, best.h2d_bytes_per_s}) {
      CHECK(measured <= gbps * 1e9 * 1.02);
      CHECK(measured >= gbps * 1e9 * 0.25);
    }
    CHECK(device == before);
  }
  auto engine = NewCpuCopyEngine();
  unsigned char byte = 0;
  CHECK(absl::IsInvalidArgument(MeasureLink(engine.get(), &byte, 0).status()));
  CopyEngineOptions tiny;
  tiny.pool.limit_bytes = 1 << 20;
  tiny.pool.chunk_bytes = 1 << 20;
  auto small = NewCpuCopyEngine(tiny);
  std::vector<unsigned char> big(size_t{4} << 20);
  CHECK_FALSE(MeasureLink(small.get(), big.data(), int64_t{4} << 20).ok());
}

}  // namespace
}  // namespace remat::kernels
