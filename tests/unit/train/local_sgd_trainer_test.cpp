// Local SGD through the checkpointer and the trainer (docs/runtime.md "Local SGD"), ranks as
// threads over Gloo: resumed at another world size, every rank starts from the mean of the saving
// ranks' models and optimizer states (and their shared outer state); an evaluation between
// averagings scores one model, the ranks' mean. The worker-process counterparts are
// tests/integration/local_sgd.sh's resize and evaluate cases.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/run_layout.hpp"
#include "data/format.hpp"
#include "dataset_writer.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"
#include "spec/spec.hpp"
#include "support/gloo_communicator.hpp"
#include "support/temp_dir.hpp"
#include "train/builders.hpp"
#include "train/checkpointing.hpp"
#include "train/device_input.hpp"
#include "train/evaluate.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"
#include "train/train_step.hpp"
#include "train/trainer.hpp"

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
        optimizer(optimizer_from_spec(spec, params.named, /*lr=*/0.1)),
        local_sgd(local_sgd_from_spec(spec, *model, params.named, comm)),
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
    Checkpointer checkpointer(checkpoint_options_from_spec(spec, dir / "run", std::nullopt), comm,
                              nullptr);
    checkpointer.save(rank.state, Position{/*step=*/5, /*epoch=*/0, /*consumed=*/5 * 24},
                      /*finished=*/false, SaveKind::kBlocking);
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
    Checkpointer checkpointer(checkpoint_options_from_spec(spec, dir / "run", std::nullopt), comm,
                              nullptr);
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

// A validation set of `n` random 16x16 RGB images of 10 classes.
void write_val_set(const std::string& path, int64_t n) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(/*seed=*/7);
  const at::Tensor images = at::randint(0, 256, {n, 16, 16, 3}, gen, at::kByte);
  const at::Tensor labels = at::randint(0, 10, {n}, gen, at::kLong);
  std::vector<std::string> classes;
  for (int c = 0; c < 10; ++c) classes.push_back("c" + std::to_string(c));
  datasets::DatasetWriter writer(path, n, 16, 16, 3, classes);
  writer.write(0, n, images.data_ptr<uint8_t>(), labels.data_ptr<int64_t>());
  writer.finish();
}

// The validation set's figures for `weights`, evaluated as the trainer does on 2 ranks.
EvalResult evaluate_weights(const spec::Spec& spec, const Tensors& weights) {
  std::vector<EvalResult> results(2);
  test::on_gloo_ranks(2, [&](GlooCommunicator& comm) {
    auto model = resnet20(spec);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : model::state_dict(*model)) item.value().copy_(weights.at(item.key()));
    }
    model->eval();
    TrainData data = data_from_spec(spec, comm.rank(), comm.size(),
                                    choose_input_path(at::kCPU, /*device_path_on_cpu=*/false));
    const data::Transform transform = data.val->transform();
    results[static_cast<size_t>(comm.rank())] =
        evaluate([&](const at::Tensor& x) { return model->forward(x); },
                 [&](const data::Batch& b) {
                   DeviceBatch d = to_device_batch(b, transform, at::kCPU, /*channels_last=*/false);
                   return std::make_pair(d.images, d.labels);
                 },
                 *data.val, data.val_source->size(), comm);
  });
  return results[0];
}

TEST(LocalSgdEvaluation, AnEvaluationBetweenAveragingsScoresTheRanksMeanModel) {
  const TempDir dir;
  write_val_set(dir.file("val.h5"), /*n=*/40);
  // 2 ranks x 8 images, 4 steps per epoch, evaluated after each epoch; no averaging in 100 local
  // steps, so at the first evaluation (step 4) the ranks have trained apart from the start.
  const spec::Spec spec = load_spec(dir, R"([data]
synthetic = true
synthetic_samples = 64
synthetic_image_size = 16
workers = 1
val = ")" + dir.file("val.h5") + R"("
[train]
epochs = 2
batch_size = 8
threads = 1
eval_every_epochs = 1
sync = "local_sgd"
sync_every_steps = 100
[train.optimizer]
lr = 0.05
[checkpoint]
every_steps = 4
keep_last = 10
)");
  test::on_gloo_ranks(2, [&](GlooCommunicator& comm) {
    TrainOptions options;
    options.run_dir = dir / "run";
    train(spec, comm, options);
  });
  std::optional<nlohmann::json> record;
  std::ifstream metrics(dir / "run" / layout::kMetrics);
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("kind", "") == "eval" && j.value("step", -1) == 4) record = j;
  }
  ASSERT_TRUE(record) << "no evaluation at step 4 in metrics.jsonl";

  // The step-4 checkpoint was taken before the evaluation averaged: each rank's own model.
  const std::filesystem::path step =
      dir / "run" / layout::kCheckpoints / layout::checkpoint_name(4);
  const Tensors rank0 = copies(model::load_weights((step / "model.pt").string()));
  Tensors rank1;
  for (const auto& [key, t] : copies(model::load_weights((step / "local-rank-1.pt").string()))) {
    if (key.rfind("model.", 0) == 0) rank1[key.substr(6)] = t;
  }
  ASSERT_GT(entries_apart({rank0, rank1}), 0) << "the ranks were not apart at step 4";
  Tensors mean;
  for (const auto& [key, t] : rank0) mean[key] = mean_of({rank0, rank1}, key);

  const EvalResult want = evaluate_weights(spec, mean), one_rank = evaluate_weights(spec, rank0);
  const auto loss = record->at("loss").get<double>();
  EXPECT_EQ(record->at("samples").get<int64_t>(), 40);
  EXPECT_NEAR(loss, want.loss, 1e-6 * want.loss)
      << "the evaluation at step 4 did not score the ranks' mean model (rank 0's alone: loss "
      << one_rank.loss << ")";
  EXPECT_DOUBLE_EQ(record->at("top1").get<double>(), want.top1);
  EXPECT_DOUBLE_EQ(record->at("top5").get<double>(), want.top5);
  // The check can fail: rank 0's own model scores another loss.
  EXPECT_GT(std::abs(one_rank.loss - want.loss), 1e-4 * want.loss)
      << "rank 0's model and the mean score alike: the test could not tell them apart";
}

}  // namespace
}  // namespace hpctrain::train
