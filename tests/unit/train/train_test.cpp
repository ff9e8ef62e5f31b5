// The training library's parts against closed forms: learning-rate schedules and the scaling
// rule, optimizer parameter groups, the loss scaler's skip / back-off / growth, and evaluation's
// exact counting. (tests/unit/train/optimizer_interop.py compares the same against torch.optim.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "data/loader.hpp"
#include "data/source.hpp"
#include "dist/process_group.hpp"
#include "spec/spec.hpp"
#include "support/gloo_communicator.hpp"
#include "train/device_input.hpp"
#include "train/evaluate.hpp"
#include "train/fused_step.hpp"
#include "train/grad_scaler.hpp"
#include "train/optimizer.hpp"
#include "train/restore.hpp"
#include "train/schedule.hpp"

namespace hpctrain::train {
namespace {

ScheduleConfig cosine(int64_t warmup, int64_t total) {
  ScheduleConfig c;
  c.kind = spec::Schedule::kCosine;
  c.base_lr = 0.4;
  c.warmup_steps = warmup;
  c.total_steps = total;
  c.steps_per_epoch = 10;
  c.min_lr = 0.001;
  return c;
}

TEST(Schedule, WarmupClimbsLinearlyThenCosineFallsToTheFloor) {
  const LrSchedule s(cosine(/*warmup=*/5, /*total=*/105));
  for (int64_t k = 0; k < 5; ++k) EXPECT_DOUBLE_EQ(s.lr_at(k), 0.4 * (k + 1) / 5.0) << k;
  EXPECT_DOUBLE_EQ(s.lr_at(5), 0.4);                             // cos(0)
  EXPECT_NEAR(s.lr_at(55), 0.001 + (0.4 - 0.001) * 0.5, 1e-15);  // half way: cos(pi/2)
  EXPECT_NEAR(s.lr_at(104), 0.001 + 0.399 * 0.5 * (1 + std::cos(M_PI * 99 / 100)), 1e-15);
  for (int64_t k = 6; k < 105; ++k) EXPECT_LT(s.lr_at(k), s.lr_at(k - 1)) << k;
}

TEST(Schedule, StepAndMultistepDecayAtEpochBoundaries) {
  ScheduleConfig c = cosine(0, 100);
  c.kind = spec::Schedule::kStep;
  c.step_size_epochs = 3;
  c.gamma = 0.1;
  const LrSchedule step(c);
  EXPECT_DOUBLE_EQ(step.lr_at(29), 0.4);        // epoch 2
  EXPECT_DOUBLE_EQ(step.lr_at(30), 0.4 * 0.1);  // epoch 3
  EXPECT_NEAR(step.lr_at(60), 0.4 * 0.01, 1e-17);
  c.kind = spec::Schedule::kMultistep;
  c.milestone_epochs = {2, 7};
  const LrSchedule multi(c);
  EXPECT_DOUBLE_EQ(multi.lr_at(19), 0.4);
  EXPECT_DOUBLE_EQ(multi.lr_at(20), 0.4 * 0.1);
  EXPECT_DOUBLE_EQ(multi.lr_at(69), 0.4 * 0.1);
  EXPECT_NEAR(multi.lr_at(70), 0.4 * 0.01, 1e-17);
  c.kind = spec::Schedule::kConstant;
  EXPECT_DOUBLE_EQ(LrSchedule(c).lr_at(99), 0.4);
}

TEST(Schedule, TheSpecScalesTheLearningRateByTheGlobalBatch) {
  spec::Spec s;
  s.train.optimizer.lr = 0.1;
  s.train.schedule.name = spec::Schedule::kCosine;
  s.train.schedule.reference_batch = 256;
  s.train.schedule.scale_lr = true;
  s.train.schedule.warmup_epochs = 0.5;
  const ScheduleConfig c = schedule_config_from_spec(s, /*global_batch=*/1024,
                                                     /*steps_per_epoch=*/30, /*total_steps=*/90);
  EXPECT_DOUBLE_EQ(c.base_lr, 0.4);
  EXPECT_EQ(c.warmup_steps, 15);
  s.train.schedule.scale_lr = false;
  EXPECT_DOUBLE_EQ(schedule_config_from_spec(s, 1024, 30, 90).base_lr, 0.1);
  EXPECT_THROW(LrSchedule(schedule_config_from_spec(s, 1024, 0, 90)), rt::Error);
}

TEST(Optimizer, BatchNormAndBiasesCanBeExemptFromWeightDecay) {
  spec::Spec s;
  s.train.optimizer.name = spec::Optimizer::kSgd;
  s.train.optimizer.momentum = 0;
  s.train.optimizer.weight_decay = 0.5;
  for (const bool decay_all : {true, false}) {
    s.train.optimizer.decay_bn_bias = decay_all;
    auto w = torch::full({2, 2}, 1.0).requires_grad_();
    auto b = torch::full({2}, 1.0).requires_grad_();
    auto frozen = torch::full({2}, 1.0);  // requires_grad false: not optimised
    auto opt = optimizer_from_spec(s, {{"w", w}, {"b", b}, {"frozen", frozen}}, /*lr=*/0.1);
    EXPECT_EQ(opt->param_groups().size(), decay_all ? 1u : 2u);
    w.mutable_grad() = torch::full({2, 2}, 0.25);
    b.mutable_grad() = torch::full({2}, 0.25);
    opt->step();
    // p - lr * (g + wd * p)
    EXPECT_TRUE(w.allclose(torch::full({2, 2}, 1 - 0.1 * (0.25 + 0.5))));
    const double b_expected = decay_all ? 1 - 0.1 * (0.25 + 0.5) : 1 - 0.1 * 0.25;
    EXPECT_TRUE(b.allclose(torch::full({2}, b_expected))) << b;
    set_lr(*opt, 0.01);
    for (auto& g : opt->param_groups()) EXPECT_DOUBLE_EQ(g.options().get_lr(), 0.01);
  }
}

TEST(GradScaler, SkipsAndBacksOffOnOverflowThenGrowsAfterTheInterval) {
  GradScalerConfig config;
  config.init_scale = 1024;
  config.growth_interval = 3;
  GradScaler scaler(config, at::kCPU);
  auto p = torch::zeros({4}).requires_grad_();
  // A clean step: gradients are divided by the scale exactly (a power of two).
  p.mutable_grad() = torch::full({4}, 512.0);
  at::Tensor found = scaler.unscale({p});
  EXPECT_EQ(found.item<float>(), 0);
  EXPECT_TRUE(p.grad().equal(torch::full({4}, 0.5)));
  scaler.update(found);
  EXPECT_EQ(scaler.current_scale(), 1024);
  EXPECT_EQ(scaler.state().growth_tracker, 1);
  // An overflow: found, the scale halves, the clean-step count restarts.
  p.mutable_grad() = torch::tensor({1.0f, INFINITY, 2.0f, 3.0f});
  found = scaler.unscale({p});
  EXPECT_EQ(found.item<float>(), 1);
  scaler.update(found);
  EXPECT_EQ(scaler.current_scale(), 512);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  // NaN too.
  p.mutable_grad() = torch::tensor({NAN, 0.0f, 0.0f, 0.0f});
  found = scaler.unscale({p});
  scaler.update(found);
  EXPECT_EQ(scaler.current_scale(), 256);
  // Three clean steps in a row: the scale doubles.
  for (int k = 0; k < 3; ++k) {
    p.mutable_grad() = torch::ones({4});
    scaler.update(scaler.unscale({p}));
  }
  EXPECT_EQ(scaler.current_scale(), 512);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  // The loss is multiplied by the scale; state round-trips.
  EXPECT_EQ(scaler.scale(torch::tensor(2.0f)).item<float>(), 1024);
  GradScaler other(config, at::kCPU);
  other.load_state(scaler.state());
  EXPECT_EQ(other.current_scale(), 512);
}

TEST(Evaluate, CountsEverySampleOnceWithTopOneAndTopFive) {
  // 10 samples in batches of 4 (the last one short). The "images" handed to the forward carry
  // each sample's index and label: even samples are predicted right, odd ones have their label
  // second (a top-5 hit, a top-1 miss).
  auto source = data::ImageSource::synthetic(/*num_samples=*/10, /*side=*/8, /*channels=*/1,
                                             /*num_classes=*/10, /*seed=*/3);
  data::LoaderConfig config;
  config.batch_size = 4;
  config.prefetch_batches = 1;
  config.shuffle = false;
  config.tail = data::TailPolicy::kPad;
  data::Loader loader(source, config);
  dist::WorldInfo world;
  world.hostname = "localhost";
  auto group = dist::join(world, {}, {});
  const ToDevice to_device = [](const data::Batch& b) {
    auto images = torch::empty({b.size, 2}, torch::kInt64);
    auto labels = torch::tensor(b.labels, torch::kInt64);
    images.select(1, 0).copy_(torch::tensor(b.samples, torch::kInt64));
    images.select(1, 1).copy_(labels);
    return std::make_pair(images, labels);
  };
  const Forward forward = [](const at::Tensor& images) {
    auto logits = torch::zeros({images.size(0), 10});
    for (int64_t i = 0; i < images.size(0); ++i) {
      const int64_t sample = images[i][0].item<int64_t>(), label = images[i][1].item<int64_t>();
      if (sample % 2 == 0) {
        logits[i][label] = 1;
      } else {
        logits[i][(label + 1) % 10] = 2;
        logits[i][label] = 1;
      }
    }
    return logits;
  };
  const EvalResult r = evaluate(forward, to_device, loader, source->size(), group->communicator());
  EXPECT_EQ(r.samples, 10);
  EXPECT_DOUBLE_EQ(r.top1, 0.5);
  EXPECT_DOUBLE_EQ(r.top5, 1.0);
  // Cross-entropy: -log softmax at the label: e/(e+9) for even, e/(e^2+e+8) for odd samples.
  const double e = std::exp(1.0);
  const double even = -std::log(e / (e + 9)), odd = -std::log(e / (e * e + e + 8));
  EXPECT_NEAR(r.loss, (even + odd) / 2, 1e-6);  // float32 logits
}

// One random gradient for both copies of the parameters: contiguous for the reference, the
// weight's channels_last for the fused step.
void set_same_grads(at::Tensor& rw, at::Tensor& rb, at::Tensor& fw, at::Tensor& fb) {
  const at::Tensor gw = torch::randn({4, 3, 2, 2}), gb = torch::randn({4});
  rw.mutable_grad() = gw.clone();
  rb.mutable_grad() = gb.clone();
  fw.mutable_grad() = gw.clone().contiguous(at::MemoryFormat::ChannelsLast);
  fb.mutable_grad() = gb.clone();
}

// A checkpoint's state put back as a file gives it (contiguous CPU tensors, the parameters
// channels_last): every state tensor takes its parameter's layout, the device step counts
// follow, and the state is `want` again. With the file's layout kept, torch's fused CPU kernels
// compute other updates without a word (the CUDA ones refuse).
void expect_restore_takes_parameter_layout(torch::optim::Optimizer& reference,
                                           const NamedParams& reference_params,
                                           torch::optim::Optimizer& fused_opt, FusedStep& fused,
                                           const NamedParams& fused_params,
                                           const NamedParams& want) {
  std::vector<std::pair<std::string, at::Tensor>> from_file;
  for (const auto& [name, t] : optimizer_state(reference, reference_params)) {
    from_file.emplace_back(name, t.contiguous().clone());
  }
  load_optimizer_state(fused_opt, fused_params, from_file);
  fused.reload_state();
  const auto restored = optimizer_state(fused_opt, fused_params);
  for (const auto& [name, t] : restored) {
    if (t.dim() == 0) continue;  // AdamW's step
    const at::Tensor& param =
        name.rfind("w.", 0) == 0 ? fused_params[0].second : fused_params[1].second;
    EXPECT_EQ(t.strides(), param.strides()) << name << " restored with the file's layout";
  }
  fused.flush_state();
  const auto reloaded = optimizer_state(fused_opt, fused_params);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(torch::equal(reloaded[i].second, want[i].second)) << want[i].first;
  }
}

// The device path's fused kernels against the per-parameter optimizers of the CPU path, from the
// same start, over several steps with a changing learning rate; a step with found_inf = 1 changes
// neither the parameters nor the state (AdamW's step count included). After a restore from a
// file the next steps match the optimizer that never stopped.
void expect_fused_matches(spec::Optimizer name, bool nesterov) {
  spec::Spec s;
  s.train.optimizer.name = name;
  s.train.optimizer.momentum = 0.9;
  s.train.optimizer.nesterov = nesterov;
  s.train.optimizer.weight_decay = 0.05;
  s.train.optimizer.decay_bn_bias = false;  // two groups
  s.train.optimizer.betas = {0.9, 0.999};
  s.train.optimizer.eps = 1e-8;
  torch::manual_seed(7);
  const at::Tensor w0 = torch::randn({4, 3, 2, 2}), b0 = torch::randn({4});
  auto make = [&](at::Tensor& w, at::Tensor& b) {
    w = w0.clone().contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
    b = b0.clone().requires_grad_();
    return optimizer_from_spec(s, {{"w", w}, {"b", b}}, /*lr=*/0.1);
  };
  at::Tensor rw, rb, fw, fb;
  auto reference = make(rw, rb);
  auto fused_opt = make(fw, fb);
  FusedStep fused(*fused_opt, {{"w", fw}, {"b", fb}});
  const at::Tensor clean = torch::zeros({1}), skip = torch::ones({1});
  for (int step = 0; step < 5; ++step) {
    set_same_grads(rw, rb, fw, fb);
    const double lr = 0.1 / (step + 1);
    set_lr(*reference, lr);
    set_lr(*fused_opt, lr);
    if (step == 2) {  // skipped: nothing moves
      const at::Tensor w_before = fw.detach().clone();
      fused.step(skip);
      EXPECT_TRUE(torch::equal(fw, w_before)) << "a skipped step changed the weights";
      continue;
    }
    reference->step();
    fused.step(step % 2 ? clean : at::Tensor());
    EXPECT_TRUE(torch::allclose(fw, rw, /*rtol=*/1e-5, /*atol=*/1e-6)) << "step " << step;
    EXPECT_TRUE(torch::allclose(fb, rb, 1e-5, 1e-6)) << "step " << step;
  }
  fused.flush_state();
  const auto want = optimizer_state(*reference, {{"w", rw}, {"b", rb}});
  const auto got = optimizer_state(*fused_opt, {{"w", fw}, {"b", fb}});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_TRUE(
        torch::allclose(got[i].second.to(at::kDouble), want[i].second.to(at::kDouble), 1e-5, 1e-6))
        << want[i].first << ": " << got[i].second << " vs " << want[i].second;
  }
  expect_restore_takes_parameter_layout(*reference, {{"w", rw}, {"b", rb}}, *fused_opt, fused,
                                        {{"w", fw}, {"b", fb}}, want);
  for (int step = 5; step < 8; ++step) {
    set_same_grads(rw, rb, fw, fb);
    reference->step();
    fused.step(at::Tensor());
    EXPECT_TRUE(torch::allclose(fw, rw, 1e-5, 1e-6)) << "step " << step << " after the restore";
    EXPECT_TRUE(torch::allclose(fb, rb, 1e-5, 1e-6)) << "step " << step << " after the restore";
  }
}

TEST(FusedStep, SgdMatchesThePerParameterOptimizerAndSkipsOnInf) {
  expect_fused_matches(spec::Optimizer::kSgd, /*nesterov=*/false);
  expect_fused_matches(spec::Optimizer::kSgd, /*nesterov=*/true);
}

TEST(FusedStep, AdamWMatchesThePerParameterOptimizerAndSkipsOnInf) {
  expect_fused_matches(spec::Optimizer::kAdamW, /*nesterov=*/false);
}

// What torch's CUDA kernels refuse, the step refuses on every device, naming the tensor: a state
// tensor laid out unlike its parameter (here a contiguous momentum buffer of a channels_last
// weight, as a restore that kept the file's layout made), a gradient of another dtype. Checked
// once after each (re)load: the step runs once the state is right.
TEST(FusedStep, AStateTensorLaidOutUnlikeItsParameterIsAnErrorNamingIt) {
  spec::Spec s;
  s.train.optimizer.momentum = 0.9;
  const at::Tensor w =
      torch::randn({4, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
  const at::Tensor b = torch::randn({4}).requires_grad_();
  auto optimizer = optimizer_from_spec(s, {{"conv.weight", w}, {"conv.bias", b}}, /*lr=*/0.1);
  {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(torch::zeros({4, 3, 2, 2}));  // contiguous
    optimizer->state()[w.unsafeGetTensorImpl()] = std::move(state);
  }
  FusedStep fused(*optimizer, {{"conv.weight", w}, {"conv.bias", b}});
  w.mutable_grad() = torch::ones({4, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast);
  b.mutable_grad() = torch::ones({4});
  const at::Tensor before = w.detach().clone();
  try {
    fused.step(at::Tensor());
    FAIL() << "a contiguous momentum buffer of a channels_last weight was accepted";
  } catch (const rt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("momentum_buffer of conv.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("strides"), std::string::npos) << what;
  }
  EXPECT_TRUE(torch::equal(w, before)) << "the refused step changed the weight";
  // Put right by a restore (which lays the buffer out as its parameter): the step runs.
  load_optimizer_state(*optimizer, {{"conv.weight", w}, {"conv.bias", b}},
                       {{"conv.weight.momentum_buffer", torch::zeros({4, 3, 2, 2})},
                        {"conv.bias.momentum_buffer", torch::zeros({4})}});
  fused.reload_state();
  EXPECT_NO_THROW(fused.step(at::Tensor()));
  EXPECT_FALSE(torch::equal(w, before));
  // A gradient of another dtype than the parameters'.
  w.mutable_grad() =
      torch::ones({4, 3, 2, 2}, torch::kDouble).contiguous(at::MemoryFormat::ChannelsLast);
  fused.reload_state();
  try {
    fused.step(at::Tensor());
    FAIL() << "a double gradient of a float parameter was accepted";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient of conv.weight"), std::string::npos) << e.what();
  }
}

// Every restore lays the saved values out as the live tensor: optimizer state and local SGD's
// anchor and outer momentum as their parameters, a model tensor restored in place keeps its own.
TEST(Restore, RestoredTensorsTakeTheLiveTensorsDeviceDtypeSizesAndStrides) {
  const at::Tensor live = torch::randn({2, 3, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor saved = torch::randn({2, 3, 4, 4}, torch::kDouble);  // contiguous, double
  const at::Tensor t = restored_like(saved, live, "x");
  EXPECT_EQ(t.strides(), live.strides());
  EXPECT_EQ(t.scalar_type(), at::kFloat);
  EXPECT_TRUE(torch::allclose(t.to(at::kDouble), saved, 1e-6, 1e-6));
  EXPECT_NE(t.data_ptr(), live.data_ptr());
  at::Tensor in_place = live.clone();
  restore_into(in_place, saved, "x");
  EXPECT_EQ(in_place.strides(), live.strides());
  EXPECT_TRUE(torch::allclose(in_place.to(at::kDouble), saved, 1e-6, 1e-6));
  try {
    restored_like(torch::zeros({2, 3}), live, "optimizer state layer1.weight.momentum_buffer");
    FAIL() << "another shape was accepted";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer1.weight.momentum_buffer has shape [2, 3]"),
              std::string::npos)
        << e.what();
  }
  // AdamW's moments, from a file.
  spec::Spec s;
  s.train.optimizer.name = spec::Optimizer::kAdamW;
  s.train.optimizer.betas = {0.9, 0.999};
  const at::Tensor w =
      torch::randn({4, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
  auto adamw = optimizer_from_spec(s, {{"w", w}}, 0.1);
  load_optimizer_state(*adamw, {{"w", w}},
                       {{"w.step", at::scalar_tensor(3, at::kLong)},
                        {"w.exp_avg", torch::ones({4, 3, 2, 2})},
                        {"w.exp_avg_sq", torch::ones({4, 3, 2, 2})}});
  for (const auto& [name, state] : optimizer_state(*adamw, {{"w", w}})) {
    if (state.dim() > 0) {
      EXPECT_EQ(state.strides(), w.strides()) << name;
    }
  }
}

TEST(FusedStep, ClipOnDeviceMatchesClipGradNorm) {
  torch::manual_seed(3);
  auto a = torch::randn({5, 5}).requires_grad_(), b = torch::randn({7}).requires_grad_();
  a.mutable_grad() = torch::randn({5, 5}) * 10;
  b.mutable_grad() = torch::randn({7}) * 10;
  const at::Tensor ga = a.grad().clone(), gb = b.grad().clone();
  clip_grad_norm_on_device({a, b}, 1.0);
  auto ra = ga.clone().requires_grad_(), rb = gb.clone().requires_grad_();
  ra.mutable_grad() = ga.clone();
  rb.mutable_grad() = gb.clone();
  torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{ra, rb}, 1.0);
  EXPECT_TRUE(torch::allclose(a.grad(), ra.grad(), 1e-5, 1e-7));
  EXPECT_TRUE(torch::allclose(b.grad(), rb.grad(), 1e-5, 1e-7));
  // Below the limit nothing changes.
  const at::Tensor before = a.grad().clone();
  clip_grad_norm_on_device({a, b}, 1e9);
  EXPECT_TRUE(torch::equal(a.grad(), before));
}

// The device path's input: uint8 NHWC batches normalised on the device give what the CPU path's
// float batches hold (the same samples, the same positions); crop-and-flip augmentation keeps
// whole pixels, so the values agree to float rounding.
TEST(DeviceInput, Uint8BatchesNormalisedOnTheDeviceMatchTheFloatPath) {
  auto source = data::ImageSource::synthetic(/*num_samples=*/24, /*side=*/12, /*channels=*/3,
                                             /*num_classes=*/5, /*seed=*/11);
  data::LoaderConfig base;
  base.batch_size = 5;
  base.prefetch_batches = 2;
  base.workers = 2;
  base.seed = 4;
  base.transform.mean = {0.4f, 0.5f, 0.6f};
  base.transform.std = {0.2f, 0.25f, 0.3f};
  base.transform.image_size = 8;
  base.transform.crop_padding = 2;
  base.transform.augment = data::Augment::kCropFlip;
  for (const bool channels_last : {false, true}) {
    data::LoaderConfig host_config = base, device_config = base;
    host_config.transform.layout = channels_last ? data::Layout::kNHWC : data::Layout::kNCHW;
    const InputPath host_path = choose_input_path(at::kCPU, /*device_path_on_cpu=*/false);
    const InputPath device_path = choose_input_path(at::kCPU, /*device_path_on_cpu=*/true);
    EXPECT_FALSE(host_path.device);
    EXPECT_TRUE(device_path.device && device_path.prefetch && !device_path.pinned);
    configure_loader(device_config, device_path);
    EXPECT_EQ(device_config.transform.output, data::OutputType::kUint8);
    data::Loader host_loader(source, host_config), device_loader(source, device_config);
    DeviceInput host(host_loader, at::kCPU, channels_last, host_path);
    DeviceInput device(device_loader, at::kCPU, channels_last, device_path);
    // From the middle of epoch 1, as after a resume.
    host.start_epoch(1, 5);
    device.start_epoch(1, 5);
    int batches = 0;
    while (true) {
      auto h = host.next();
      auto d = device.next();
      ASSERT_EQ(h.has_value(), d.has_value());
      if (!h) break;
      ++batches;
      EXPECT_EQ(h->samples, d->samples);
      EXPECT_TRUE(torch::equal(h->labels, d->labels));
      EXPECT_EQ(d->images.scalar_type(), at::kFloat);
      EXPECT_EQ(d->images.is_contiguous(at::MemoryFormat::ChannelsLast), channels_last);
      EXPECT_TRUE(torch::allclose(h->images, d->images, /*rtol=*/0, /*atol=*/1e-5))
          << "batch " << batches << " max diff "
          << (h->images - d->images).abs().max().item<float>();
      // The position recorded in a checkpoint: after the batch handed out, not the one fetched
      // ahead.
      EXPECT_EQ(device.state().consumed, host.state().consumed);
      EXPECT_EQ(device.state().epoch, host.state().epoch);
    }
    EXPECT_EQ(batches, 4);  // 19 samples left: 3 full batches and a short one
  }
}

// Evaluation on W ranks equals a single process's, whatever the remainder of N / W: each rank
// reads its shard padded to a whole number of samples per rank, and the padding must be counted
// nowhere. Sizes 1, W - 1, W + 1 and primes, on 1..4 ranks (threads with Gloo). The "images"
// carry each sample's index; the logits are a fixed random table indexed by it, so every rank
// computes the same logits for a sample as the single process does.
EvalResult evaluate_on_ranks(int64_t num_samples, int world, const at::Tensor& table) {
  auto source = data::ImageSource::synthetic(num_samples, /*side=*/4, /*channels=*/1,
                                             /*num_classes=*/10, /*seed=*/5);
  std::vector<EvalResult> results(static_cast<size_t>(world));
  test::on_gloo_ranks(world, [&](test::GlooCommunicator& comm) {
    data::LoaderConfig config;
    config.batch_size = 3;
    config.prefetch_batches = 1;
    config.shuffle = false;
    config.tail = data::TailPolicy::kPad;
    config.transform.train = false;
    config.rank = comm.rank();
    config.world_size = world;
    data::Loader loader(source, config);
    const ToDevice to_device = [](const data::Batch& b) {
      return std::make_pair(torch::tensor(b.samples, torch::kInt64),
                            torch::tensor(b.labels, torch::kInt64));
    };
    const Forward forward = [&](const at::Tensor& samples) {
      return table.index_select(0, samples.remainder(table.size(0)));
    };
    results[static_cast<size_t>(comm.rank())] =
        evaluate(forward, to_device, loader, source->size(), comm);
  });
  for (int rank = 1; rank < world; ++rank) {
    EXPECT_EQ(results[static_cast<size_t>(rank)].samples, results[0].samples);
  }
  return results[0];
}

TEST(Evaluate, EveryRankCountMatchesOneProcessWhateverTheRemainder) {
  torch::manual_seed(9);
  // Logits with ties impossible in practice; some samples right, some in the top 5, some not.
  const at::Tensor table = torch::randn({64, 10}) * 3;
  for (const int world : {1, 2, 3, 4}) {
    std::vector<int64_t> sizes = {1, world + 1, 7, 13};
    if (world > 1) sizes.push_back(world - 1);
    for (const int64_t n : sizes) {
      const EvalResult one = evaluate_on_ranks(n, 1, table);
      const EvalResult many = evaluate_on_ranks(n, world, table);
      EXPECT_EQ(one.samples, n);
      EXPECT_EQ(many.samples, n) << n << " samples on " << world << " ranks";
      EXPECT_DOUBLE_EQ(many.top1, one.top1) << n << " samples on " << world << " ranks";
      EXPECT_DOUBLE_EQ(many.top5, one.top5) << n << " samples on " << world << " ranks";
      // The loss sums float32 per-sample losses in a different grouping: equal to rounding.
      EXPECT_NEAR(many.loss, one.loss, 1e-6 * std::max(1.0, one.loss))
          << n << " samples on " << world << " ranks";
    }
  }
}

}  // namespace
}  // namespace hpctrain::train
