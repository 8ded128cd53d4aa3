#include "collector/block_sampler.h"

#include <catch2/catch.hpp>

#include "collector/memory_source.h"

namespace remat {
namespace {

// Drives the sampler the way the runtime does for a two-block chain whose
// blocks are both recomputed: forward keeps only inputs, backward recomputes
// block 1 then block 0.
TEST_CASE("sampler turns a scripted step into a sample") {
  FakeMemorySource mem(/*initial_bytes=*/1000);
  BlockSampler sampler(&mem, 2);
  sampler.BeginStep();
  mem.Allocate(100);  // forward: block 0's output (block 1's input)
  mem.Allocate(50);   // block 1's output

  // Backward, block 1 recompute: saves 30, output 50, a 70-byte temporary.
  sampler.BeforeBlock(1, 100);
  mem.Allocate(70);
  mem.Allocate(80);
  mem.Free(70);
  sampler.AfterBlock(1);
  mem.Free(80 + 50);  // its backward frees it all, and the output
  // Block 0 recompute: retains 100 + 20.
  sampler.BeforeBlock(0, 40);
  mem.Allocate(120);
  sampler.AfterBlock(0);
  mem.Free(120 + 100);

  auto sample = sampler.EndStep({4, 128});
  REQUIRE(sample.ok());
  REQUIRE(sample->features == Features{4, 128});
  REQUIRE(sample->blocks.size() == 2);
  CHECK(sample->blocks[0].act_bytes == 120);
  CHECK(sample->blocks[0].input_bytes == 40);
  CHECK(sample->blocks[1].act_bytes == 80);
  CHECK(sample->blocks[1].input_bytes == 100);
  CHECK(sample->blocks[0].forward_ns >= 0);
  CHECK(*sample->base_bytes == 1000);
  // Peak: 1000 + 150 + 150 (block 1's recompute with its temporary).
  CHECK(*sample->peak_bytes == 1300);
  // The device is synchronised around each timed block.
  CHECK(mem.synchronize_calls() == 4);
}

// The head and loss between the end of forward and the last block's
// recompute: logits of 400 bytes, their loss's 300-byte temporary, then
// the 400-byte gradient of the logits (the peak: 800), all gone before
// backward reaches the block.
TEST_CASE("the tail is the peak after forward, above what forward left") {
  FakeMemorySource mem(/*initial_bytes=*/1000);
  BlockSampler sampler(&mem, 2);
  sampler.BeginStep();
  mem.Allocate(100);  // block 0's output
  mem.Allocate(50);   // block 1's output
  sampler.EndForward();
  mem.Allocate(400);  // logits
  mem.Allocate(300);  // the loss's temporary
  mem.Free(300);
  mem.Allocate(400);  // their gradient
  mem.Free(800);      // the head's backward is done
  sampler.BeforeBlock(1, 100);
  mem.Allocate(2000);  // a recompute larger than the tail: not the tail's
  sampler.AfterBlock(1);
  mem.Free(2000 + 50);
  sampler.BeforeBlock(0, 40);
  sampler.AfterBlock(0);
  auto sample = sampler.EndStep({1});
  REQUIRE(sample.ok());
  CHECK(sample->tail_bytes == 400 + 400);
  CHECK(*sample->peak_bytes == 1000 + 150 + 2000);

  // A step that never ends its forward measures no tail.
  sampler.BeginStep();
  sampler.BeforeBlock(1, 1);
  sampler.AfterBlock(1);
  sampler.BeforeBlock(0, 1);
  sampler.AfterBlock(0);
  auto untold = sampler.EndStep({1});
  REQUIRE(untold.ok());
  CHECK_FALSE(untold->tail_bytes.has_value());
}

TEST_CASE("a relative source reports its peak above the resident bytes") {
  FakeMemorySource mem(/*initial_bytes=*/0, /*absolute=*/false);
  mem.Allocate(500);  // before the step: not part of the step's peak
  mem.Free(500);
  BlockSampler sampler(&mem, 1);
  sampler.BeginStep(/*resident_bytes=*/4096);
  sampler.BeforeBlock(0, 64);
  mem.Allocate(256);
  sampler.AfterBlock(0);
  mem.Free(256);
  auto sample = sampler.EndStep({1});
  REQUIRE(sample.ok());
  CHECK(*sample->base_bytes == 4096);
  CHECK(*sample->peak_bytes == 4096 + 256);
  CHECK(sample->blocks[0].act_bytes == 256);
}

TEST_CASE("a relative source's count left by earlier steps is not a base") {
  // Earlier steps left 1 MiB in the count: allocations it saw whose frees
  // came after their attachment ended.
  FakeMemorySource mem(/*initial_bytes=*/0, /*absolute=*/false);
  mem.Allocate(1 << 20);
  BlockSampler sampler(&mem, 1);
  sampler.BeginStep(/*resident_bytes=*/4096);
  sampler.BeforeBlock(0, 64);
  mem.Allocate(256);
  sampler.AfterBlock(0);
  mem.Free(256);
  auto sample = sampler.EndStep({1});
  REQUIRE(sample.ok());
  CHECK(*sample->base_bytes == 4096);
  CHECK(*sample->peak_bytes == 4096 + 256);
}

TEST_CASE("a block that frees more than it allocates retains nothing") {
  FakeMemorySource mem(1000);
  BlockSampler sampler(&mem, 1);
  sampler.BeginStep();
  sampler.BeforeBlock(0, 8);
  mem.Free(100);
  sampler.AfterBlock(0);
  auto sample = sampler.EndStep({1});
  REQUIRE(sample.ok());
  CHECK(sample->blocks[0].act_bytes == 0);
}

TEST_CASE("an unmeasured block fails the step, naming the block") {
  FakeMemorySource mem;
  BlockSampler sampler(&mem, 3);
  sampler.BeginStep();
  sampler.BeforeBlock(0, 1);
  sampler.AfterBlock(0);
  sampler.BeforeBlock(2, 1);
  sampler.AfterBlock(2);
  auto sample = sampler.EndStep({1});
  REQUIRE_FALSE(sample.ok());
  CHECK(sample.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(sample.status().message()).find("block 1") !=
        std::string::npos);
}

TEST_CASE("hooks outside a step, out of range or unpaired are ignored") {
  FakeMemorySource mem;
  BlockSampler sampler(&mem, 1);
  sampler.BeforeBlock(0, 8);  // no step yet
  sampler.AfterBlock(0);
  REQUIRE_FALSE(sampler.EndStep({1}).ok());  // no step begun

  sampler.BeginStep();
  sampler.BeforeBlock(5, 8);
  sampler.AfterBlock(5);
  sampler.AfterBlock(0);  // never begun
  REQUIRE_FALSE(sampler.EndStep({1}).ok());

  // The next step starts clean.
  sampler.BeginStep();
  sampler.BeforeBlock(0, 8);
  mem.Allocate(16);
  sampler.AfterBlock(0);
  auto sample = sampler.EndStep({1});
  REQUIRE(sample.ok());
  CHECK(sample->blocks[0].act_bytes == 16);
}

TEST_CASE("fake source tracks current and peak") {
  FakeMemorySource mem(10);
  mem.Allocate(5);
  mem.Free(12);
  CHECK(mem.current_bytes() == 3);
  CHECK(mem.peak_bytes() == 15);
  mem.reset_peak();
  CHECK(mem.peak_bytes() == 3);
  CHECK(mem.absolute());
}

}  // namespace
}  // namespace remat
