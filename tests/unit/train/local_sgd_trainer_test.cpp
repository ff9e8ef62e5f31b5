// Local SGD through the checkpointer (docs/runtime.md "Local SGD"), ranks as threads over Gloo:
// resumed at another world size, every rank starts from the mean of the saving ranks' models and
// optimizer states (and their shared outer state). The worker-process counterpart is
// tests/integration/local_sgd.sh's resize case.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/format.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"
#include "spec/spec.hpp"
#include "support/gloo_communicator.hpp"
#include "support/temp_dir.hpp"
#include "train/builders.hpp"
#include "train/checkpointing.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"

namespace hpctrain::train {
namespace {

using test::GlooCommunicator;
using test::TempDir;
using Tensors = std::map<std::string, at::Tensor>;

// A spec for ResNet-20 with 10 classes, run_dir DIR/run (created, as the worker does), and
// `sections` (TOML) for the rest.
spec::Spec load_spec(const TempDir& dir, const std::string& sections) {
  std::filesystem::create_directories(dir / "run");
  const std::filesystem::path file = dir / "spec.toml";
  std::ofstream(file) << "[job]\nname = \"local-sgd\"\nrun_dir = \"" << (dir / "run").string()
                      << "\"\n[model]\narch = \"resnet20\"\nnum_classes = 10\n"
                      << sections;
  spec::LoadOptions options;
  options.spec_file = file;
  options.check_paths = false;
  options.default_worker = "/bin/true";
  return spec::load(options).spec;
}

std::shared_ptr<model::Classifier> resnet20(const spec::Spec& spec) {
  return model::build_model(model::model_config_from_spec(spec, /*in_channels=*/3));
}

at::Tensor random_like(const at::Tensor& t, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(t.sizes(), gen, t.options());
}

// Fills every floating-point parameter and buffer with its own draw from `seed`.
void fill_model(model::Classifier& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  uint64_t i = 0;
  for (auto& item : model::state_dict(model)) {
    if (item.value().is_floating_point()) item.value().copy_(random_like(item.value(), seed + ++i));
  }
}

Tensors copies(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  Tensors out;
  for (const auto& [name, t] : items) out[name] = t.detach().clone();
  return out;
}
Tensors copies(const model::StateDict& dict) {
  Tensors out;
  for (const auto& item : dict) out[item.key()] = item.value().detach().clone();
  return out;
}

// Entry `name` averaged over `states` (floating point), or the first's (integers).
at::Tensor mean_of(const std::vector<Tensors>& states, const std::string& name) {
  at::Tensor sum = states.front().at(name).clone();
  if (!sum.is_floating_point()) return sum;
  for (size_t s = 1; s < states.size(); ++s) sum.add_(states[s].at(name));
  return sum.div_(static_cast<int64_t>(states.size()));
}

// Every entry of `got` (and no other) is `states`' mean; returns the first that is not, or "".
std::string first_not_mean(const Tensors& got, const std::vector<Tensors>& states) {
  if (got.size() != states.front().size()) {
    return std::to_string(got.size()) + " entries, want " + std::to_string(states.front().size());
  }
  for (const auto& [name, t] : got) {
    if (!states.front().count(name)) return name + " (not saved)";
    if (!torch::allclose(t, mean_of(states, name), /*rtol=*/1e-6, /*atol=*/1e-6)) return name;
  }
  return "";
}

// How many entries differ between the first two states: the mean can be told from one of them.
int64_t entries_apart(const std::vector<Tensors>& states) {
  int64_t apart = 0;
  for (const auto& [name, t] : states[0]) apart += !torch::equal(t, states[1].at(name));
  return apart;
}

// One rank's model, optimizer and local SGD as the trainer builds them, and what a checkpoint
// holds of them.
struct Rank {
  Rank(const spec::Spec& spec, const data::DatasetInfo& info, dist::Communicator& comm)
      : model(resnet20(spec)),
        params(model_params(*model)),
        optimizer(make_optimizer(spec, params.named, /*lr=*/0.1)),
        local_sgd(build_local_sgd(spec, *model, params.named, comm)),
        state{*model, *optimizer, params.named, nullptr, info, local_sgd.get()} {}

  // Copies of the model's state dict, the optimizer's state and local SGD's shared state.
  struct Saved {
    Tensors model, optimizer, outer;
  };
  Saved copy() const {
    return {copies(model::state_dict(*model)), copies(optimizer_state(*optimizer, params.named)),
            copies(local_sgd->state())};
  }

  std::shared_ptr<model::Classifier> model;
  ModelParams params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<LocalSgd> local_sgd;
  TrainingState state;
};

// Rank r's state at a step between averagings: one period as training goes (the ranks equal at
// the anchor, apart, averaged through the outer step, which gives local_sgd.pt an anchor and a
// momentum), then a local step that leaves them apart again, with momentum buffers of their own.
void train_apart(Rank& rank, int r) {
  const auto seed = [&](uint64_t base) { return base + 100000 * static_cast<uint64_t>(r); };
  fill_model(*rank.model, /*seed=*/1000);
  rank.local_sgd->start_local_step();
  fill_model(*rank.model, seed(2000));
  rank.local_sgd->synchronize();
  rank.local_sgd->start_local_step();
  fill_model(*rank.model, seed(3000));
  std::vector<std::pair<std::string, at::Tensor>> momentum;
  uint64_t i = 0;
  for (const auto& [name, p] : rank.params.named) {
    momentum.emplace_back(name + ".momentum_buffer", random_like(p, seed(4000) + ++i));
  }
  load_optimizer_state(*rank.optimizer, rank.params.named, momentum);
}

std::vector<Tensors> part(const std::vector<Rank::Saved>& ranks, Tensors Rank::Saved::*member) {
  std::vector<Tensors> out;
  for (const auto& r : ranks) out.push_back(r.*member);
  return out;
}

TEST(LocalSgdResume, AnotherWorldSizeStartsEveryRankFromTheMeanOfTheSavingRanks) {
  constexpr int kSaving = 3, kResuming = 2;
  const TempDir dir;
  const spec::Spec spec = load_spec(dir, R"([data]
synthetic = true
[train]
sync = "local_sgd"
sync_every_steps = 4
outer_optimizer = "nesterov"
[checkpoint]
every_steps = 1
)");
  data::DatasetInfo info;
  info.num_samples = 48;
  info.height = info.width = 16;
  info.channels = 3;
  info.num_classes = 10;

  std::vector<Rank::Saved> saved(kSaving);
  test::on_gloo_ranks(kSaving, [&](GlooCommunicator& comm) {
    Rank rank(spec, info, comm);
    train_apart(rank, comm.rank());
    Checkpointer checkpointer(spec, dir / "run", comm, std::nullopt, nullptr);
    checkpointer.save(rank.state, Position{/*step=*/5, /*epoch=*/0, /*consumed=*/5 * 24},
                      /*finished=*/false, /*allow_async=*/false);
    saved[static_cast<size_t>(comm.rank())] = rank.copy();
  });
  const std::vector<Tensors> models = part(saved, &Rank::Saved::model);
  const std::vector<Tensors> optimizers = part(saved, &Rank::Saved::optimizer);
  ASSERT_GT(entries_apart(models), 0);
  ASSERT_GT(entries_apart(optimizers), 0);
  // local_steps, anchor.* and momentum.*, the same on every saving rank.
  ASSERT_EQ(saved[0].outer.size(), 1 + 2 * optimizers[0].size());
  ASSERT_EQ(entries_apart(part(saved, &Rank::Saved::outer)), 0);

  // Resumed on 2 ranks from fresh models and optimizers without state.
  std::vector<Rank::Saved> got(kResuming);
  std::vector<int64_t> world_sizes(kResuming);
  test::on_gloo_ranks(kResuming, [&](GlooCommunicator& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    Rank rank(spec, info, comm);
    Checkpointer checkpointer(spec, dir / "run", comm, std::nullopt, nullptr);
    const auto resumed = checkpointer.restore(rank.state);
    world_sizes[r] = resumed ? resumed->world_size : -1;
    got[r] = rank.copy();
  });
  for (int r = 0; r < kResuming; ++r) {
    const auto& mine = got[static_cast<size_t>(r)];
    EXPECT_EQ(world_sizes[static_cast<size_t>(r)], kSaving) << "rank " << r;
    EXPECT_EQ(first_not_mean(mine.model, models), "")
        << "rank " << r << ": this model entry is not the mean of the 3 saved ranks'";
    EXPECT_EQ(first_not_mean(mine.optimizer, optimizers), "")
        << "rank " << r << ": this optimizer state is not the mean of the 3 saved ranks'";
    EXPECT_EQ(first_not_mean(mine.outer, {saved[0].outer}), "") << "rank " << r << ": outer state";
  }
}

}  // namespace
}  // namespace hpctrain::train
