// DDP equivalence check, one process per rank: trains a small conv net for a few SGD steps on a
// deterministic synthetic global batch, each rank on its contiguous shard, gradients synchronised
// by GradSync; rank 0 writes the final parameters as raw float32. Run with world size 1 on the
// full batch and with N ranks on shards, the files must agree (see ddp_equivalence.sh).
//   ddp_check --out FILE [--global-batch 32] [--steps 5] [--bucket-mb 0.001] [--no-overlap]
//             [--compression none|fp16|bf16]
//   ddp_check --compare A B --tolerance T
#include <torch/torch.h>
#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <iostream>

#include "dist/grad_sync.hpp"
#include "dist/launch.hpp"
#include "dist/process_group.hpp"

namespace {

using namespace hpctrain;

torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, /*kernel_size=*/3)), torch::nn::ReLU(),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, /*kernel_size=*/3)), torch::nn::ReLU(),
      torch::nn::Flatten(), torch::nn::Linear(8 * 4 * 4, 32), torch::nn::ReLU(),
      torch::nn::Linear(32, 10));
}

int compare(const std::string& a, const std::string& b, double tolerance) {
  auto read = [](const std::string& f) {
    std::ifstream in(f, std::ios::binary | std::ios::ate);
    std::vector<float> out(in ? static_cast<size_t>(in.tellg()) / sizeof(float) : 0);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
    return out;
  };
  const auto x = read(a), y = read(b);
  if (x.empty() || x.size() != y.size()) {
    std::cerr << "compare: sizes differ (" << x.size() << " vs " << y.size() << " floats)\n";
    return 1;
  }
  double max_diff = 0;
  size_t identical = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(x[i] - y[i])));
    identical += x[i] == y[i];
  }
  std::cout << "compare: " << x.size() << " parameters, " << identical
            << " bitwise identical, max |diff| " << max_diff << " (tolerance " << tolerance
            << ")\n";
  return max_diff <= tolerance ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GradSync equivalence check"};
  std::string out;
  int64_t global_batch = 32, steps = 5;
  double bucket_mb = 0.001;
  bool no_overlap = false;
  std::string compression = "none";
  std::vector<std::string> compare_files;
  double tolerance = 0;
  app.add_option("--out", out);
  app.add_option("--global-batch", global_batch);
  app.add_option("--steps", steps);
  app.add_option("--bucket-mb", bucket_mb);
  app.add_flag("--no-overlap", no_overlap);
  app.add_option("--compression", compression);
  app.add_option("--compare", compare_files)->expected(2);
  app.add_option("--tolerance", tolerance);
  CLI11_PARSE(app, argc, argv);
  if (!compare_files.empty()) return compare(compare_files[0], compare_files[1], tolerance);
  try {
    const auto launch = dist::detect_launch();
    const auto& world = launch.world;
    auto group = dist::join(world, launch.env, {});
    auto& comm = group->communicator();
    if (global_batch % world.world_size != 0) {
      std::cerr << "global batch must divide by the world size\n";
      return 2;
    }
    const int64_t local = global_batch / world.world_size;
    auto model = make_model();
    std::vector<std::string> names;
    std::vector<torch::Tensor> params;
    for (auto& p : model->named_parameters()) {
      names.push_back(p.key());
      params.push_back(p.value());
    }
    dist::broadcast_from_rank0(comm, params);
    const auto wire = spec::parse_choice<spec::GradCompression>(compression);
    if (!wire) {
      std::cerr << "unknown --compression " << compression << '\n';
      return 2;
    }
    dist::GradSync sync(names, params, comm, {bucket_mb, *wire, !no_overlap});
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int64_t step = 0; step < steps; ++step) {
      // The same global batch on every rank; each rank takes its contiguous shard.
      auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
      auto x = torch::randn({global_batch, 3, 8, 8}, gen, torch::kFloat32);
      auto y = torch::randint(0, 10, {global_batch}, gen, torch::kLong);
      x = x.narrow(0, world.rank * local, local);
      y = y.narrow(0, world.rank * local, local);
      opt.zero_grad();
      sync.prepare();
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
      sync.finish();
      opt.step();
    }
    if (world.rank == 0) {
      std::vector<torch::Tensor> flat;
      for (auto& p : params) flat.push_back(p.detach().reshape({-1}));
      auto all = torch::cat(flat).contiguous();
      std::ofstream f(out, std::ios::binary);
      f.write(reinterpret_cast<const char*>(all.data_ptr<float>()),
              static_cast<std::streamsize>(all.numel() * 4));
      std::cout << "rank 0 of " << world.world_size << ": " << sync.bucket_count()
                << " buckets, wrote " << all.numel() << " parameters to " << out << '\n';
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
