// Where each key of the schema lives in a Spec: for_each_key(spec, f) calls f(path, member) for
// every key, in schema order. Building a Spec from the merged values (merge.cpp) and freezing it
// back to TOML (freeze.cpp) both walk this one binding, so a value exists once, in its typed
// member, and the frozen text is always derived from it.
// Thread safety: pure.
#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

#include "spec/spec.hpp"

namespace hpctrain::spec {

// Whether a member is std::optional (an optional key without a default).
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

// S is Spec or const Spec; f takes (std::string_view path, member&). A test (spec_test.cpp)
// checks that the binding covers fields() exactly.
template <typename S, typename F>
void for_each_key(S& s, F&& f) {
  auto& j = s.job;
  f("job.name", j.name);
  f("job.profile", j.profile);
  f("job.account", j.account);
  f("job.partition", j.partition);
  f("job.qos", j.qos);
  f("job.nodes", j.nodes);
  f("job.tasks_per_node", j.tasks_per_node);
  f("job.gpus_per_node", j.gpus_per_node);
  f("job.cpus_per_task", j.cpus_per_task);
  f("job.mem", j.mem);
  f("job.time", j.time);
  f("job.constraint", j.constraint);
  f("job.exclusive", j.exclusive);
  f("job.reservation", j.reservation);
  f("job.nodelist", j.nodelist);
  f("job.exclude", j.exclude);
  f("job.begin", j.begin);
  f("job.dependency", j.dependency);
  f("job.mail_type", j.mail_type);
  f("job.mail_user", j.mail_user);
  f("job.run_dir", j.run_dir);
  f("job.modules", j.modules);
  f("job.env", j.env);
  f("job.extra_sbatch", j.extra_sbatch);
  f("job.srun_mpi", j.srun_mpi);
  f("job.worker", j.worker);
  f("job.container.runtime", j.container.runtime);
  f("job.container.image", j.container.image);
  f("job.container.mounts", j.container.mounts);

  auto& d = s.data;
  f("data.train", d.train);
  f("data.val", d.val);
  f("data.synthetic", d.synthetic);
  f("data.synthetic_samples", d.synthetic_samples);
  f("data.synthetic_image_size", d.synthetic_image_size);
  f("data.workers", d.workers);
  f("data.prefetch_batches", d.prefetch_batches);
  f("data.shard_tail", d.shard_tail);
  f("data.file_locking", d.file_locking);
  f("data.skip_corrupt", d.skip_corrupt);
  f("data.augment", d.augment);
  f("data.crop_padding", d.crop_padding);
  f("data.image_size", d.image_size);

  auto& m = s.model;
  f("model.arch", m.arch);
  f("model.stem", m.stem);
  f("model.num_classes", m.num_classes);
  f("model.zero_init_residual", m.zero_init_residual);
  f("model.fused_bn", m.fused_bn);
  f("model.pretrained", m.pretrained);
  f("model.freeze", m.freeze);

  auto& t = s.train;
  f("train.epochs", t.epochs);
  f("train.max_steps", t.max_steps);
  f("train.batch_size", t.batch_size);
  f("train.precision", t.precision);
  f("train.channels_last", t.channels_last);
  f("train.cuda_graphs", t.cuda_graphs);
  f("train.tf32", t.tf32);
  f("train.threads", t.threads);
  f("train.seed", t.seed);
  f("train.label_smoothing", t.label_smoothing);
  f("train.grad_clip_norm", t.grad_clip_norm);
  f("train.log_every_steps", t.log_every_steps);
  f("train.eval_every_epochs", t.eval_every_epochs);
  f("train.bucket_mb", t.bucket_mb);
  f("train.grad_compression", t.grad_compression);
  f("train.sync", t.sync);
  f("train.sync_every_steps", t.sync_every_steps);
  f("train.sync_warmup_steps", t.sync_warmup_steps);
  f("train.outer_optimizer", t.outer_optimizer);
  f("train.outer_lr", t.outer_lr);
  f("train.outer_momentum", t.outer_momentum);
  f("train.rendezvous_timeout_s", t.rendezvous_timeout_s);
  f("train.collective_timeout_s", t.collective_timeout_s);
  auto& o = t.optimizer;
  f("train.optimizer.name", o.name);
  f("train.optimizer.lr", o.lr);
  f("train.optimizer.momentum", o.momentum);
  f("train.optimizer.nesterov", o.nesterov);
  f("train.optimizer.weight_decay", o.weight_decay);
  f("train.optimizer.betas", o.betas);
  f("train.optimizer.eps", o.eps);
  f("train.optimizer.decay_bn_bias", o.decay_bn_bias);
  auto& sc = t.schedule;
  f("train.schedule.name", sc.name);
  f("train.schedule.warmup_epochs", sc.warmup_epochs);
  f("train.schedule.step_size", sc.step_size);
  f("train.schedule.milestones", sc.milestones);
  f("train.schedule.gamma", sc.gamma);
  f("train.schedule.min_lr", sc.min_lr);
  f("train.schedule.scale_lr", sc.scale_lr);
  f("train.schedule.reference_batch", sc.reference_batch);

  auto& c = s.checkpoint;
  f("checkpoint.every_steps", c.every_steps);
  f("checkpoint.every_minutes", c.every_minutes);
  f("checkpoint.keep_last", c.keep_last);
  f("checkpoint.keep_every", c.keep_every);
  f("checkpoint.async", c.async);
  f("checkpoint.commit_timeout_s", c.commit_timeout_s);
  f("checkpoint.lustre_stripe_count", c.lustre_stripe_count);
  f("checkpoint.lustre_stripe_size_mib", c.lustre_stripe_size_mib);

  auto& p = s.preemption;
  f("preemption.enabled", p.enabled);
  f("preemption.signal", p.signal);
  f("preemption.signal_lead_s", p.signal_lead_s);
  f("preemption.max_restarts", p.max_restarts);
  f("preemption.max_consecutive_failures", p.max_consecutive_failures);
  f("preemption.max_attempts_without_progress", p.max_attempts_without_progress);
  f("preemption.chain", p.chain);

  auto& r = s.resilience;
  f("resilience.spare_nodes", r.spare_nodes);
  f("resilience.on_node_loss", r.on_node_loss);
  f("resilience.max_node_losses", r.max_node_losses);
  f("resilience.heartbeat_timeout_s", r.heartbeat_timeout_s);
  f("resilience.hang_timeout_s", r.hang_timeout_s);
  f("resilience.hang_grace_s", r.hang_grace_s);
  f("resilience.evict_stragglers", r.evict_stragglers);
  f("resilience.straggler_ratio", r.straggler_ratio);
  f("resilience.straggler_windows", r.straggler_windows);
  f("resilience.stop_on", r.stop_on);
  f("resilience.loss_spike_factor", r.loss_spike_factor);
  f("resilience.fp16_skip_limit", r.fp16_skip_limit);
  f("resilience.max_rollbacks", r.max_rollbacks);
  f("resilience.replay_on_divergence", r.replay_on_divergence);
  f("resilience.require_same_binary", r.require_same_binary);

  f("tracking.mlflow_uri", s.tracking.mlflow_uri);
  f("tracking.experiment", s.tracking.experiment);

  f("sweep.mode", s.sweep.mode);
  f("sweep.max_parallel", s.sweep.max_parallel);
  f("sweep.params", s.sweep.params);
}

}  // namespace hpctrain::spec
