// Step time of data-parallel training with GradSync, overlapped (bucket all-reduces launched from
// the autograd hooks during backward) against all-reduce after backward. One process per rank
// (torchrun variables); rank 0 prints one JSON line.
//   bench_ddp_step [--no-overlap] [--steps 20] [--bucket-mb 25] [--batch 32]
#include <torch/torch.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "dist/grad_sync.hpp"
#include "dist/launch.hpp"
#include "dist/process_group.hpp"

int main(int argc, char** argv) {
  using namespace hpctrain;
  CLI::App app{"GradSync step time"};
  bool no_overlap = false;
  int steps = 20, batch = 32;
  double bucket_mb = 25;
  app.add_flag("--no-overlap", no_overlap);
  app.add_option("--steps", steps);
  app.add_option("--bucket-mb", bucket_mb);
  app.add_option("--batch", batch);
  CLI11_PARSE(app, argc, argv);
  const auto launch = dist::detect_launch();
  const auto& world = launch.world;
  auto group = dist::join(world, launch.env, {});
  auto& comm = group->communicator();
  torch::set_num_threads(1);
  torch::manual_seed(0);
  // Convolutions for compute, wide linear layers for gradient volume (about 17M parameters).
  torch::nn::Sequential model(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 32, 3).padding(1)), torch::nn::ReLU(),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 32, 3).padding(1)), torch::nn::ReLU(),
      torch::nn::MaxPool2d(2), torch::nn::Flatten(), torch::nn::Linear(32 * 16 * 16, 1536),
      torch::nn::ReLU(), torch::nn::Linear(1536, 1536), torch::nn::ReLU(),
      torch::nn::Linear(1536, 10));
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  int64_t numel = 0;
  for (auto& p : model->named_parameters()) {
    names.push_back(p.key());
    params.push_back(p.value());
    numel += p.value().numel();
  }
  dist::broadcast_from_rank0(comm, params);
  dist::GradSync sync(names, params, comm, {bucket_mb, spec::GradCompression::kNone, !no_overlap});
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::randn({batch, 3, 32, 32});
  auto y = torch::randint(0, 10, {batch});
  double total = 0;
  const int warmup = 3;
  for (int step = 0; step < warmup + steps; ++step) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    sync.prepare();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    sync.finish();
    opt.step();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step >= warmup) total += s;
  }
  if (world.rank == 0) {
    std::cout << "{\"overlap\":" << (no_overlap ? "false" : "true")
              << ",\"ranks\":" << world.world_size << ",\"params\":" << numel
              << ",\"buckets\":" << sync.bucket_count() << ",\"step_ms\":" << total / steps * 1e3
              << "}" << std::endl;
  }
  return 0;
}
