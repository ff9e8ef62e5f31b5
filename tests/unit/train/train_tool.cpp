// Writes what hpctrain's optimizers and schedules do on fixed inputs, for
// optimizer_interop.py to compare with torch.optim and torch.optim.lr_scheduler:
//   train_tool --out FILE
// FILE (torch.save format, a dict name -> tensor) holds, for each case: the initial parameters,
// the gradients fed at each step, the learning rate of each step and the parameters after each
// step; and for each schedule case, the learning rate of every step.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "model/weights.hpp"
#include "spec/spec.hpp"
#include "train/optimizer.hpp"
#include "train/schedule.hpp"

namespace {

using namespace hpctrain;

struct Case {
  std::string name;
  spec::Optimizer optimizer;
  double momentum, weight_decay;
  bool nesterov, decay_bn_bias;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Optimizer and schedule trajectories for optimizer_interop.py"};
  std::string out;
  app.add_option("--out", out)->required();
  CLI11_PARSE(app, argc, argv);

  constexpr int64_t kSteps = 6, kStepsPerEpoch = 3;
  model::StateDict record;
  // A schedule with warmup then cosine; its learning rates drive the optimizer cases too.
  train::ScheduleConfig cosine;
  cosine.kind = spec::Schedule::kCosine;
  cosine.base_lr = 0.2;
  cosine.warmup_steps = 2;
  cosine.total_steps = kSteps;
  cosine.steps_per_epoch = kStepsPerEpoch;
  cosine.min_lr = 0.01;
  const train::LrSchedule schedule(cosine);
  std::vector<double> lrs;
  for (int64_t k = 0; k < kSteps; ++k) lrs.push_back(schedule.lr_at(k));
  record.insert("schedule/cosine", torch::tensor(lrs, torch::kFloat64));
  for (auto [name, kind] : {std::pair{"step", spec::Schedule::kStep},
                            std::pair{"multistep", spec::Schedule::kMultistep}}) {
    train::ScheduleConfig c = cosine;
    c.kind = kind;
    c.warmup_steps = 0;
    c.total_steps = 30;
    c.step_size_epochs = 2;
    c.milestone_epochs = {3, 7};
    c.gamma = 0.5;
    const train::LrSchedule s(c);
    std::vector<double> values;
    for (int64_t k = 0; k < c.total_steps; ++k) values.push_back(s.lr_at(k));
    record.insert(std::string("schedule/") + name, torch::tensor(values, torch::kFloat64));
  }

  const std::vector<Case> cases = {
      {"sgd", spec::Optimizer::kSgd, 0.0, 0.0, false, true},
      {"sgd_momentum_wd", spec::Optimizer::kSgd, 0.9, 5e-4, false, true},
      {"sgd_nesterov_no_bn_decay", spec::Optimizer::kSgd, 0.9, 1e-2, true, false},
      {"adamw", spec::Optimizer::kAdamW, 0.0, 0.05, false, true},
      {"adamw_no_bn_decay", spec::Optimizer::kAdamW, 0.0, 0.05, false, false},
  };
  for (const auto& c : cases) {
    spec::Spec s;
    s.train.optimizer.name = c.optimizer;
    s.train.optimizer.momentum = c.momentum;
    s.train.optimizer.weight_decay = c.weight_decay;
    s.train.optimizer.nesterov = c.nesterov;
    s.train.optimizer.decay_bn_bias = c.decay_bn_bias;
    s.train.optimizer.betas = {0.9, 0.99};
    s.train.optimizer.eps = 1e-8;
    torch::manual_seed(7);
    // A weight matrix (decayed) and a bias (exempt when decay_bn_bias is false).
    train::NamedParams params = {{"w", torch::randn({3, 4}).requires_grad_()},
                                 {"b", torch::randn({4}).requires_grad_()}};
    for (auto& [name, p] : params) record.insert(c.name + "/init/" + name, p.detach().clone());
    auto optimizer = train::optimizer_from_spec(s, params, lrs[0]);
    for (int64_t k = 0; k < kSteps; ++k) {
      train::set_lr(*optimizer, lrs[static_cast<size_t>(k)]);
      for (auto& [name, p] : params) {
        p.mutable_grad() = torch::randn(p.sizes());
        record.insert(c.name + "/grad/" + std::to_string(k) + "/" + name, p.grad().clone());
      }
      optimizer->step();
      for (auto& [name, p] : params) {
        record.insert(c.name + "/after/" + std::to_string(k) + "/" + name, p.detach().clone());
      }
    }
  }
  model::save_weights(record, out);
  std::cout << "wrote " << record.size() << " tensors to " << out << '\n';
  return 0;
}
