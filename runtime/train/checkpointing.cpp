#include "train/checkpointing.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint/slow_env.hpp"
#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "spec/spec.hpp"

namespace hpctrain::train {
namespace {

// The monotonic clock in seconds, the save policy's.
double policy_now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

bool lacks_any_file(const checkpoint::Loaded& l, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (!l.files.count(n)) return true;
  }
  return false;
}

// The commit's vote over the communicator: an all-reduced count of the ranks that said yes.
// Which ranks share a node, for the checkpoint's node manifests: by host when every rank's is
// known, else every rank its own node (correct, only more manifests for rank 0 to read).
std::shared_ptr<const checkpoint::NodeLayout> node_layout(const std::vector<std::string>& hosts,
                                                          int size) {
  const bool known =
      static_cast<int>(hosts.size()) == size &&
      std::none_of(hosts.begin(), hosts.end(), [](const auto& h) { return h.empty(); });
  return known ? checkpoint::NodeLayout::from_hosts(hosts)
               : checkpoint::NodeLayout::one_per_rank(size);
}

CommitRanks commit_ranks(dist::Communicator& comm) {
  CommitRanks r;
  r.rank = comm.rank();
  r.size = comm.size();
  r.all = [&comm](bool ok) {
    at::Tensor t = at::full({1}, ok ? 1.0 : 0.0, at::TensorOptions().device(comm.device()));
    comm.all_reduce(t);
    return t.item<double>() == comm.size();
  };
  return r;
}

}  // namespace

CheckpointOptions checkpoint_options_from_spec(const spec::Spec& spec,
                                               const std::filesystem::path& run_dir,
                                               std::optional<int64_t> job_end_time,
                                               const TrainHooks& hooks) {
  const auto& c = spec.checkpoint;
  CheckpointOptions o;
  // Preemption needs a checkpoint to requeue into, so it turns checkpoints on too.
  o.enabled =
      !run_dir.empty() && (c.every_steps > 0 || c.every_minutes > 0 || spec.preemption.enabled);
  if (!run_dir.empty()) o.dir = run_dir / layout::kCheckpoints;
  o.store = checkpoint::store_options_from_spec(spec);
  o.policy.every_steps = c.every_steps;
  o.policy.every_minutes = c.every_minutes;
  o.policy.async = c.async;
  o.policy.job_end_time = job_end_time;
  o.content = content_options_from_spec(spec, hooks);
  o.slow_fsync_seconds = hooks.slow_fsync_seconds;
  return o;
}

Checkpointer::Checkpointer(const CheckpointOptions& options, dist::Communicator& comm,
                           std::ostream* out)
    : comm_(comm),
      out_(out),
      content_(options.content, comm, out),
      policy_(options.policy, policy_now()) {
  if (!options.enabled) return;
  if (options.slow_fsync_seconds > 0) {
    slow_env_ = checkpoint::slow_fsync_env(checkpoint::default_env(), options.slow_fsync_seconds);
  }
  commit_ = std::make_unique<CheckpointCommit>(
      std::make_unique<checkpoint::Store>(options.dir.string(), options.store, comm.rank(),
                                          node_layout(options.hosts, comm.size()),
                                          slow_env_ ? *slow_env_ : checkpoint::default_env()),
      commit_ranks(comm), out);
}

std::optional<Resumed> Checkpointer::restore(TrainingState& state, int64_t at_most) {
  if (!commit_) return std::nullopt;
  checkpoint::Store& store = commit_->store();
  if (comm_.rank() == 0) {
    store.clean_leftovers();
    store.apply_striping();
  }
  comm_.barrier();  // nobody reads while rank 0 cleans
  // Each rank verifies the files it needs (rank 0's replicated state and its own); a damaged
  // file can make ranks see different newest steps, so they settle on the lowest and load again
  // until all hold the same one. A rank's own files (local SGD's) are asked for once a step is
  // found and its resume key checked: a checkpoint of an all-reduce run is refused by name, not
  // passed over as damaged. A step whose files cannot all be read gives way to an older one.
  const std::vector<std::string> shared = content_.shared_files();
  std::optional<checkpoint::Loaded> loaded;
  while (true) {
    loaded = store.load_latest(shared, at_most);
    if (loaded) content_.check_resume_key(*loaded, state, store.dir());
    while (loaded && lacks_any_file(*loaded, content_.own_files(*loaded))) {
      std::vector<std::string> names = shared;
      for (auto& n : content_.own_files(*loaded)) names.push_back(n);
      loaded = store.load_latest(names, loaded->step);
    }
    // Every rank's step, by rank (the communicator sums: each rank fills its own slot).
    at::Tensor steps =
        at::zeros({comm_.size()}, at::TensorOptions().dtype(at::kLong).device(comm_.device()));
    steps[comm_.rank()] = loaded ? loaded->step : -1;
    comm_.all_reduce(steps);
    steps = steps.cpu();
    const int64_t agreed = steps.min().item<int64_t>();
    if (agreed < 0) {
      if (comm_.rank() == 0 && out_ && steps.max().item<int64_t>() >= 0) {
        *out_ << rt::rank_prefix()
              << "no checkpoint every rank can read; starting from the beginning" << std::endl;
      }
      return std::nullopt;
    }
    if (steps.max().item<int64_t>() == agreed) break;
    at_most = agreed;
  }
  // Every rank holds the same step: put its state back.
  const Resumed r = content_.restore(state, *loaded);
  commit_->restored(loaded->step);
  return r;
}

void Checkpointer::contribute(float* slots, double step_seconds) {
  if (!commit_) return;
  commit_->contribute(slots);
  if (comm_.rank() != 0) return;
  const SaveRequest r = policy_.request(policy_now(), std::time(nullptr), step_seconds);
  if (r.save_now) slots[Agreement::kSaveNow] = 1;
  if (r.deadline) slots[Agreement::kDeadline] = 1;
}

void Checkpointer::settle(const Agreed& agreed) {
  if (!commit_) return;
  const float* slots = agreed.slots ? agreed.slots : kNothingAgreed;
  if (const auto seconds = commit_->settle(slots, agreed.gathered_at)) policy_.took(*seconds);
}

SaveKind Checkpointer::due(int64_t step, int64_t total_steps, bool stopping,
                           const Agreed& agreed) const {
  if (!commit_) return SaveKind::kNone;
  const float* slots = agreed.slots ? agreed.slots : kNothingAgreed;
  return policy_.at_step_end(step, total_steps, stopping, slots[Agreement::kSaveNow] > 0,
                             agreed.gathered_at);
}

bool Checkpointer::save(TrainingState& state, const Position& position, bool finished,
                        SaveKind kind) {
  if (!commit_ || kind == SaveKind::kNone) return true;
  drain();  // at most one save in flight
  const auto t0 = Clock::now();
  const bool background = kind == SaveKind::kBackground;
  // A background save serialises copies: training changes the tensors meanwhile.
  auto snap = std::make_shared<Snapshot>(content_.capture(state, position, finished, background));
  policy_.began(position.step, policy_now());
  auto make_part = [this, snap] { return content_.serialise(*snap); };
  if (background) {
    commit_->write_in_background(position.step, snap->meta, t0, std::move(make_part));
    return true;
  }
  const auto seconds = commit_->write_now(position.step, snap->meta, t0, make_part);
  if (seconds) policy_.took(*seconds);
  return seconds.has_value();
}

void Checkpointer::drain() {
  if (!commit_) return;
  if (const auto seconds = commit_->drain()) policy_.took(*seconds);
}

}  // namespace hpctrain::train
