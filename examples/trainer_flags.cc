#include "examples/trainer_flags.h"

#include <algorithm>

namespace remat {

void AddTrainerFlags(CLI::App* app, TrainerOptions* o) {
  app->add_option("--device", o->device,
                  "where to train: cpu, or cuda / cuda:N (a build with "
                  "--config=cuda); peaks come from that device's allocator")
      ->capture_default_str();
  app->add_option("--model", o->model_name,
                  "the model: encoder (a classifier over token sequences), "
                  "decoder (GPT-like, causal, next-token prediction over "
                  "sequences of varying length with a padding mask) or cnn "
                  "(ResNet-like, images whose height and width vary per "
                  "batch: features batch, height, width)")
      ->check(CLI::IsMember(DemoModelNames()))
      ->capture_default_str();
  app->add_option("--depth", o->model.depth, "transformer layers")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app->add_flag("--sublayers", o->model.sublayers,
                "encoder, decoder: each layer as two blocks, attention and "
                "MLP (the granularity of Megatron's selective recompute)");
  app->add_option("--width", o->model.width, "model width (d_model)")
      ->check(CLI::Range(8, 4096))->capture_default_str();
  app->add_option("--heads", o->model.heads, "attention heads")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app->add_option("--ffn", o->model.ffn, "feed-forward width")
      ->check(CLI::Range(8, 16384))->capture_default_str();
  app->add_option("--vocab", o->model.vocab, "vocabulary size (tokens)")
      ->check(CLI::Range(4, 1 << 20))->capture_default_str();
  app->add_option("--batch", o->workload.batch, "sequences per batch")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app->add_option("--min-seq", o->workload.min_seq,
                  "shortest sequence (tokens)")
      ->check(CLI::Range(1, 8192))->capture_default_str();
  app->add_option("--max-seq", o->workload.max_seq,
                  "longest sequence (tokens)")
      ->check(CLI::Range(8, 8192))->capture_default_str();
  app->add_option("--median-seq", o->workload.median_seq,
                  "median sequence length of the log-normal workload")
      ->check(CLI::Range(4.0, 8192.0))->capture_default_str();
  app->add_option("--channels", o->cnn.channels,
                  "cnn: channels of the stem (stages have 1x, 2x, 4x)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app->add_option("--blocks-per-stage", o->cnn.blocks_per_stage,
                  "cnn: residual blocks in each of its three stages")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app->add_option("--min-size", o->workload.min_size,
                  "cnn: smallest image side (pixels; sides are multiples "
                  "of 16)")
      ->check(CLI::Range(16, 4096))->capture_default_str();
  app->add_option("--max-size", o->workload.max_size,
                  "cnn: largest image side (pixels)")
      ->check(CLI::Range(16, 4096))->capture_default_str();
  app->add_option("--seed", o->seed, "seed for model, data and lengths")
      ->capture_default_str();
  app->add_option("--host-link-gbps", o->host_link_gb_per_s,
                  "OFFLOAD over an emulated host link of this many GB/s "
                  "(gigabytes per second) each way (CPU only: a copy engine "
                  "held to that speed; collect steps measure it and the "
                  "planner, in process or rematd, plans with what they "
                  "measured); 0: no link, nothing is offloaded (on a GPU "
                  "OFFLOAD always uses its real link)")
      ->check(CLI::Range(0.0, 1e4))->capture_default_str();
  app->add_flag("!--no-offload", o->offload,
                "no copy engine (on a GPU too): plans only keep and "
                "recompute");
  app->add_option("--inject-oom-every", o->inject_oom_every,
                  "every this many steps, the step's first run throws an "
                  "out-of-memory error after its forward, and runs again "
                  "(0: never)")
      ->check(CLI::NonNegativeNumber);
}

std::string FinishTrainerFlags(TrainerOptions* o) {
  const std::string& d = o->device;
  const bool cuda_n = d.size() > 5 && d.compare(0, 5, "cuda:") == 0 &&
                      d.find_first_not_of("0123456789", 5) == std::string::npos;
  if (d != "cpu" && d != "cuda" && !cuda_n) {
    return "--device " + d + ": expected cpu, cuda or cuda:N";
  }
  if (o->model.width % o->model.heads != 0) {
    return "--width (" + std::to_string(o->model.width) +
           ") must be a multiple of --heads (" +
           std::to_string(o->model.heads) + ")";
  }
  if (o->host_link_gb_per_s > 0 && d != "cpu") {
    return "--host-link-gbps emulates a link on the CPU; with --device " + d +
           " OFFLOAD uses the GPU's own link, measured by collect steps: "
           "leave it 0";
  }
  o->workload.seed = o->seed;
  o->workload.min_seq = std::min(o->workload.min_seq, o->workload.max_seq);
  o->workload.min_size = std::min(o->workload.min_size, o->workload.max_size);
  return "";
}

}  // namespace remat
