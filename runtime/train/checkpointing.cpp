#include "train/checkpointing.hpp"

#include <ATen/Context.h>
#include <torch/torch.h>

#include <ctime>
#include <fstream>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include "common/time.hpp"
#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "model/weights.hpp"
#include "preempt/time_limit.hpp"
#include "spec/spec.hpp"
#include "train/restore.hpp"

namespace hpctrain::train {
namespace {

constexpr int64_t kFormatVersion = 1;

std::string rng_file(int rank) { return "rng-rank-" + std::to_string(rank) + ".pt"; }
// Local SGD: the model and optimizer state of a rank other than 0, and the state shared by all.
std::string local_file(int rank) { return "local-rank-" + std::to_string(rank) + ".pt"; }
constexpr const char* kLocalSgdFile = "local_sgd.pt";

// What must not change between the run that saved a checkpoint and the one that resumes it.
nlohmann::json resume_key(const spec::Spec& spec, const data::DatasetInfo& dataset,
                          const model::Classifier& model) {
  (void)model;
  nlohmann::json key = {{"arch", std::string(spec::name_of(spec.model.arch))},
                        {"stem", std::string(spec::name_of(spec.model.stem))},
                        {"num_classes", spec.model.num_classes},
                        {"optimizer", std::string(spec::name_of(spec.train.optimizer.name))},
                        {"train_samples", dataset.num_samples},
                        {"image", {dataset.height, dataset.width, dataset.channels}},
                        {"dataset_classes", dataset.num_classes}};
  // Only local SGD's checkpoints say so (they hold more), so older ones keep resuming.
  if (spec.train.sync == spec::Sync::kLocalSgd) {
    key["sync"] = std::string(spec::name_of(spec.train.sync));
    key["outer_optimizer"] = std::string(spec::name_of(spec.train.outer_optimizer));
  }
  return key;
}

std::vector<std::pair<std::string, at::Tensor>> items_of(const model::StateDict& dict) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}

// A local-rank-R.pt's entries: its model's ("model.<key>") and its optimizer's.
struct LocalPart {
  std::vector<std::pair<std::string, at::Tensor>> model, optimizer;
};
LocalPart parse_local(const std::string& bytes, const std::string& name) {
  LocalPart out;
  for (const auto& item : model::weights_from_bytes(bytes, name)) {
    const std::string& key = item.key();
    if (key.rfind("model.", 0) == 0) {
      out.model.emplace_back(key.substr(6), item.value());
    } else if (key.rfind("optimizer.", 0) == 0) {
      out.optimizer.emplace_back(key.substr(10), item.value());
    } else {
      HPCTRAIN_THROW(rt::Error, name + " holds " + key + ", neither model.* nor optimizer.*");
    }
  }
  return out;
}

model::StateDict to_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  model::StateDict out;
  for (const auto& [name, t] : items) out.insert(name, t);
  return out;
}

// The default generators of this process: the CPU one, and the CUDA one of the current device.
std::vector<std::pair<std::string, at::Generator>> generators(const at::Device& device) {
  std::vector<std::pair<std::string, at::Generator>> out = {
      {"cpu", at::globalContext().defaultGenerator(at::Device(at::kCPU))}};
  if (device.is_cuda()) out.emplace_back("cuda", at::globalContext().defaultGenerator(device));
  return out;
}

// Local SGD's files a rank needs from checkpoint `l` besides the shared ones: local_sgd.pt, rank
// R > 0 its local-rank-R.pt, and at another world size all the saving ranks' (it starts from
// their mean).
std::vector<std::string> local_files_needed(const checkpoint::Loaded& l, int rank, int size) {
  std::vector<std::string> names = {kLocalSgdFile};
  if (l.world_size == size) {
    if (rank != 0) names.push_back(local_file(rank));
  } else {
    for (int r = 1; r < l.world_size; ++r) names.push_back(local_file(r));
  }
  return names;
}

bool lacks_any(const checkpoint::Loaded& l, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (!l.files.count(n)) return true;
  }
  return false;
}

// Every piece of state restore() puts back, by name; tests leave some out
// (Checkpointer::set_restore_ablation).
struct RestoredPieces {
  const std::set<std::string>& skip;
  std::set<std::string> names;

  bool restoring(const std::string& piece) {
    names.insert(piece);
    return skip.count(piece) == 0;
  }
};

// Every entry of the model's state dict from `weights` (model.pt of step `step`).
void restore_model(model::Classifier& model, const model::StateDict& weights, int64_t step,
                   RestoredPieces& pieces) {
  std::set<std::string> parameter_names;
  for (const auto& p : model.named_parameters()) parameter_names.insert(p.key());
  model::StateDict own = model::state_dict(model);
  for (const auto& item : own) {
    const at::Tensor* saved = weights.find(item.key());
    if (!saved) {
      HPCTRAIN_THROW(rt::Error,
                     "model.pt of step " + std::to_string(step) + " lacks " + item.key());
    }
    const bool parameter = parameter_names.count(item.key()) > 0;
    if (pieces.restoring(parameter ? "model.parameters" : "model.buffers")) {
      restore_into(item.value(), *saved,
                   "model.pt of step " + std::to_string(step) + ": " + item.key());
    }
  }
}

void restore_optimizer(TrainingState& state, const model::StateDict& opt, RestoredPieces& pieces) {
  std::vector<std::pair<std::string, at::Tensor>> entries;
  for (const auto& item : opt) {
    const std::string& name = item.key();  // "<parameter>.<kind>"
    if (pieces.restoring("optimizer." + name.substr(name.rfind('.') + 1))) {
      entries.emplace_back(name, item.value());
    }
  }
  load_optimizer_state(state.optimizer, state.params, entries);
}

void restore_scaler(GradScaler* scaler, const nlohmann::json& trainer, RestoredPieces& pieces) {
  if (!scaler || !trainer["scaler"].is_object()) return;
  GradScalerState s = scaler->state();  // a fresh scaler's, where a test skips one
  if (pieces.restoring("scaler.scale")) s.scale = trainer["scaler"]["scale"].get<double>();
  if (pieces.restoring("scaler.growth_tracker")) {
    s.growth_tracker = trainer["scaler"]["growth_tracker"].get<int64_t>();
  }
  scaler->load_state(s);
}

// This rank's generator states, when the checkpoint holds them.
void restore_rng(const checkpoint::Loaded& loaded, int rank, const at::Device& device,
                 RestoredPieces& pieces) {
  const auto rng_it = loaded.files.find(rng_file(rank));
  if (rng_it == loaded.files.end()) return;
  const model::StateDict rng = model::weights_from_bytes(rng_it->second, rng_file(rank));
  for (auto& [name, gen] : generators(device)) {
    if (const at::Tensor* s = rng.find(name); s && pieces.restoring("rng." + name)) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(*s);
    }
  }
}

}  // namespace

// A save whose files are being written in the background.
struct Checkpointer::InFlight {
  int64_t step = 0;
  nlohmann::json meta;
  Clock::time_point started;
  std::future<checkpoint::WriteResult> write;     // serialise + write_part, in the background
  std::optional<checkpoint::WriteResult> result;  // once collected from `write`
};

Checkpointer::Checkpointer(const spec::Spec& spec, const std::filesystem::path& run_dir,
                           dist::Communicator& comm, std::optional<int64_t> job_end_time,
                           std::ostream* out)
    : spec_(spec), comm_(comm), job_end_time_(job_end_time), out_(out) {
  const auto& c = spec.checkpoint;
  // Preemption needs a checkpoint to requeue into, so it turns checkpoints on too.
  enabled_ =
      !run_dir.empty() && (c.every_steps > 0 || c.every_minutes > 0 || spec.preemption.enabled);
  if (!enabled_) return;
  store_ = std::make_unique<checkpoint::Store>((run_dir / layout::kCheckpoints).string(),
                                               checkpoint::store_options_from_spec(spec),
                                               comm.rank(), comm.size());
  last_save_time_ = Clock::now();
}

Checkpointer::~Checkpointer() = default;

bool Checkpointer::all_ranks(bool ok) {
  at::Tensor t = at::full({1}, ok ? 1.0 : 0.0, at::TensorOptions().device(comm_.device()));
  comm_.all_reduce(t);
  return t.item<double>() == comm_.size();
}

Checkpointer::Snapshot Checkpointer::capture(TrainingState& state, const Position& position,
                                             bool finished, bool copy) {
  Snapshot snap;
  torch::NoGradGuard no_grad;
  // Copies to host memory when the save continues in the background, so training may change the
  // model meanwhile; a synchronous save serialises the tensors themselves. The copies go into
  // buffers kept from the last save (at most one save is in flight, so they are free again):
  // fresh allocations would page-fault on every save, most of the stall.
  const auto keep = [&](const std::string& name, const at::Tensor& t) {
    if (!copy) return t.detach();
    at::Tensor& buffer = snapshot_buffers_[name];
    if (!buffer.defined() || buffer.sizes() != t.sizes() || buffer.dtype() != t.dtype()) {
      buffer = at::empty(t.sizes(), t.options().device(at::kCPU));
    }
    buffer.copy_(t.detach());
    return buffer;
  };
  // Every generator of this rank (dropout draws from them; the data pipeline does not).
  for (auto& [name, gen] : generators(comm_.device())) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    snap.rng.emplace_back(name, gen.get_state());
  }
  snap.meta = {{"step", position.step},
               {"epoch", position.epoch},
               {"consumed", position.consumed},
               {"finished", finished},
               {"world_size", comm_.size()},
               {"batch_size", spec_.train.batch_size},
               {"time", static_cast<int64_t>(std::time(nullptr))}};
  if (state.local_sgd && comm_.rank() != 0) {
    for (const auto& item : model::state_dict(state.model)) {
      snap.local.emplace_back("model." + item.key(), keep("model/" + item.key(), item.value()));
    }
    for (const auto& [name, t] : optimizer_state(state.optimizer, state.params)) {
      snap.local.emplace_back("optimizer." + name, keep("optimizer/" + name, t));
    }
  }
  if (comm_.rank() != 0) return snap;
  if (state.local_sgd) {
    for (const auto& [name, t] : state.local_sgd->state()) {
      snap.local_sgd.emplace_back(name, keep("local_sgd/" + name, t));
    }
  }
  for (const auto& item : model::state_dict(state.model)) {
    snap.model.emplace_back(item.key(), keep("model/" + item.key(), item.value()));
  }
  for (const auto& [name, t] : optimizer_state(state.optimizer, state.params)) {
    snap.optimizer.emplace_back(name, keep("optimizer/" + name, t));
  }
  nlohmann::json trainer = snap.meta;
  trainer["format_version"] = kFormatVersion;
  trainer["resume"] = resume_key(spec_, state.dataset, state.model);
  if (state.scaler) {
    const auto s = state.scaler->state();
    trainer["scaler"] = {{"scale", s.scale}, {"growth_tracker", s.growth_tracker}};
  } else {
    trainer["scaler"] = nullptr;
  }
  snap.trainer_json = trainer.dump(2) + "\n";
  return snap;
}

checkpoint::Part Checkpointer::serialise(const Snapshot& snap) const {
  checkpoint::Part part;
  part.files[rng_file(comm_.rank())] = model::weights_to_bytes(to_state_dict(snap.rng));
  if (spec_.train.sync == spec::Sync::kLocalSgd) {
    if (comm_.rank() != 0) {
      part.files[local_file(comm_.rank())] = model::weights_to_bytes(to_state_dict(snap.local));
    } else {
      part.files[kLocalSgdFile] = model::weights_to_bytes(to_state_dict(snap.local_sgd));
    }
  }
  if (comm_.rank() != 0) return part;
  part.files["model.pt"] = model::weights_to_bytes(to_state_dict(snap.model));
  part.files["optimizer.pt"] = model::weights_to_bytes(to_state_dict(snap.optimizer));
  part.files["trainer.json"] = snap.trainer_json;
  return part;
}

std::optional<Checkpointer::Resumed> Checkpointer::restore(TrainingState& state) {
  if (!enabled_) return std::nullopt;
  if (comm_.rank() == 0) {
    store_->clean_leftovers();
    store_->apply_striping();
  }
  comm_.barrier();  // nobody reads while rank 0 cleans
  // Each rank verifies the files it needs (rank 0's replicated state and its own); a damaged
  // file can make ranks see different newest steps, so they settle on the lowest and load again
  // until all hold the same one.
  std::vector<std::string> shared = {"model.pt", "optimizer.pt", "trainer.json"};
  const bool local = state.local_sgd != nullptr;
  // Local SGD needs more (local_files_needed). They are asked for once a step is found and its
  // resume key checked: a checkpoint of an all-reduce run is refused by name, not passed over as
  // damaged. A step whose files cannot all be read gives way to an older one.
  const auto locals_needed = [&](const checkpoint::Loaded& l) {
    return local_files_needed(l, comm_.rank(), comm_.size());
  };
  int64_t at_most = std::numeric_limits<int64_t>::max();
  std::optional<checkpoint::Loaded> loaded;
  while (true) {
    loaded = store_->load_latest(shared, at_most);
    if (loaded) check_resume_key(*loaded, state);  // before looking for files it may lack
    while (local && loaded && lacks_any(*loaded, locals_needed(*loaded))) {
      std::vector<std::string> names = shared;
      for (auto& n : locals_needed(*loaded)) names.push_back(n);
      loaded = store_->load_latest(names, loaded->step);
    }
    const at::Tensor steps = gather(loaded ? loaded->step : -1);
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
  const int64_t step = loaded->step;
  const nlohmann::json trainer = nlohmann::json::parse(loaded->files.at("trainer.json"));
  torch::NoGradGuard no_grad;
  RestoredPieces pieces{ablate_skip_, {}};
  model::StateDict weights = model::weights_from_bytes(loaded->files.at("model.pt"),
                                                       "model.pt of step " + std::to_string(step));
  model::StateDict opt = model::weights_from_bytes(loaded->files.at("optimizer.pt"),
                                                   "optimizer.pt of step " + std::to_string(step));
  if (local) {
    restore_local(state, *loaded, weights, opt,
                  [&](const std::string& piece) { return pieces.restoring(piece); });
  }
  restore_model(state.model, weights, step, pieces);
  restore_optimizer(state, opt, pieces);
  restore_scaler(state.scaler, trainer, pieces);
  restore_rng(*loaded, comm_.rank(), comm_.device(), pieces);
  Resumed r;
  const auto position = [&](const char* key) {
    return pieces.restoring(std::string("position.") + key) ? trainer[key].get<int64_t>() : 0;
  };
  r.position = {position("step"), position("epoch"), position("consumed")};
  if (comm_.rank() == 0 && !ablate_pieces_file_.empty()) {
    std::ofstream list(ablate_pieces_file_);
    for (const auto& p : pieces.names) list << p << '\n';
  }
  r.finished = trainer.value("finished", false);
  r.world_size = loaded->world_size;
  last_committed_ = step;
  return r;
}

void Checkpointer::check_resume_key(const checkpoint::Loaded& loaded,
                                    const TrainingState& state) const {
  const nlohmann::json trainer = nlohmann::json::parse(loaded.files.at("trainer.json"));
  const nlohmann::json key = resume_key(spec_, state.dataset, state.model);
  const nlohmann::json theirs = trainer.value("resume", nlohmann::json::object());
  if (theirs == key) return;
  std::ostringstream diff;
  std::set<std::string> names;
  for (const auto& [k, v] : key.items()) names.insert(k);
  if (theirs.is_object()) {
    for (const auto& [k, v] : theirs.items()) names.insert(k);
  }
  for (const auto& k : names) {
    const auto in_checkpoint = theirs.is_object() ? theirs.value(k, nlohmann::json()) : nullptr;
    const auto in_spec = key.value(k, nlohmann::json());
    if (in_checkpoint != in_spec) {
      diff << "\n  " << k << ": checkpoint " << in_checkpoint.dump() << ", spec " << in_spec.dump();
    }
  }
  HPCTRAIN_THROW(rt::Error,
                 "the checkpoint at step " + std::to_string(loaded.step) + " in " + store_->dir() +
                     " was made by a different model, dataset or train.sync:" + diff.str() +
                     "\nHINT: restore the spec, or use a new job.run_dir to start "
                     "over");
}

void Checkpointer::restore_local(TrainingState& state, const checkpoint::Loaded& loaded,
                                 model::StateDict& weights, model::StateDict& opt,
                                 const std::function<bool(const std::string&)>& restoring) {
  const std::string at_step = " of step " + std::to_string(loaded.step);
  std::set<std::string> parameter_names;
  for (const auto& p : state.model.named_parameters()) parameter_names.insert(p.key());
  // The pieces, named on every rank (rank 0 lists them; its own state is model.pt's).
  const bool params = restoring("local.parameters"), buffers = restoring("local.buffers");
  const bool optimizer = restoring("local.optimizer");
  // Takes `from`'s entries into `weights`: parameters and buffers apart, each a piece.
  const auto take_model = [&](const std::vector<std::pair<std::string, at::Tensor>>& from) {
    for (const auto& [key, t] : from) {
      if (!(parameter_names.count(key) ? params : buffers)) continue;
      if (at::Tensor* slot = weights.find(key)) {
        *slot = t;
      } else {
        weights.insert(key, t);
      }
    }
  };
  if (loaded.world_size == comm_.size()) {
    // Every rank its own state back (rank 0's is model.pt and optimizer.pt).
    if (comm_.rank() != 0) {
      const std::string name = local_file(comm_.rank());
      const LocalPart part = parse_local(loaded.files.at(name), name + at_step);
      take_model(part.model);
      if (optimizer) opt = to_state_dict(part.optimizer);
    }
  } else {
    // Another world size: every rank starts from the mean of the saving ranks' models and
    // optimizer states, which the next averaging would have made of them anyway.
    std::vector<std::vector<std::pair<std::string, at::Tensor>>> models{items_of(weights)};
    std::vector<std::vector<std::pair<std::string, at::Tensor>>> opts{items_of(opt)};
    for (int r = 1; r < loaded.world_size; ++r) {
      const std::string name = local_file(r);
      LocalPart part = parse_local(loaded.files.at(name), name + at_step);
      models.push_back(std::move(part.model));
      opts.push_back(std::move(part.optimizer));
    }
    take_model(average_state(models));
    if (optimizer) opt = to_state_dict(average_state(opts));
    if (comm_.rank() == 0 && out_) {
      *out_ << rt::rank_prefix() << "local SGD: the checkpoint's " << loaded.world_size
            << " ranks' models and optimizer states averaged for " << comm_.size() << " ranks"
            << std::endl;
    }
  }
  const model::StateDict shared =
      model::weights_from_bytes(loaded.files.at(kLocalSgdFile), kLocalSgdFile + at_step);
  std::vector<std::string> skip;
  for (const auto& item : shared) {
    const std::string& key = item.key();
    const std::string kind = key.substr(0, key.find('.'));  // local_steps, anchor, momentum
    if (!restoring("local_sgd." + kind)) skip.push_back(kind);
  }
  state.local_sgd->load_state(items_of(shared), skip);
}

at::Tensor Checkpointer::gather(int64_t value) {
  // The communicator sums: each rank fills its own slot of a zero vector.
  at::Tensor all =
      at::zeros({comm_.size()}, at::TensorOptions().dtype(at::kLong).device(comm_.device()));
  all[comm_.rank()] = value;
  comm_.all_reduce(all);
  return all.cpu();
}

void Checkpointer::contribute(float* slots, double step_seconds) {
  if (!enabled_) return;
  if (in_flight_) {
    if (!in_flight_->result &&
        in_flight_->write.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      in_flight_->result = in_flight_->write.get();
    }
    if (!in_flight_->result) {
      slots[Agreement::kWritePending] += 1;
    } else if (in_flight_->result->ok) {
      slots[Agreement::kWriteDone] += 1;
    } else {
      slots[Agreement::kWriteFailed] += 1;
    }
  }
  if (comm_.rank() != 0) return;
  const double minutes = spec_.checkpoint.every_minutes;
  if (minutes > 0 && seconds_since(last_save_time_) >= minutes * 60) slots[Agreement::kSaveNow] = 1;
  if (job_end_time_) {
    // Stop while a save still fits (preempt/time_limit.hpp).
    const double left = static_cast<double>(*job_end_time_ - std::time(nullptr));
    if (preempt::time_limit_near(left, last_save_seconds_, step_seconds)) {
      slots[Agreement::kDeadline] = 1;
    }
  }
}

void Checkpointer::settle(const float* agreed, int64_t gathered_at) {
  if (!in_flight_ || gathered_at < in_flight_->step) return;
  if (agreed[Agreement::kWriteFailed] > 0) {
    if (in_flight_->result && !in_flight_->result->ok) {
      std::cerr << rt::rank_prefix() << "checkpoint step " << in_flight_->step
                << ": writing this rank's part failed: " << in_flight_->result->error << std::endl;
    }
    if (!in_flight_->result) in_flight_->result = in_flight_->write.get();
    if (comm_.rank() == 0) {
      store_->abandon(in_flight_->step);
      std::cerr << rt::rank_prefix() << "checkpoint step " << in_flight_->step
                << " NOT committed: a rank could not write its part (see its error line)"
                << std::endl;
    }
    in_flight_.reset();
    return;
  }
  if (agreed[Agreement::kWriteDone] < comm_.size()) return;  // still writing somewhere
  if (comm_.rank() == 0) {
    try {
      store_->commit(in_flight_->step, in_flight_->meta);
      last_committed_ = in_flight_->step;
      last_save_seconds_ = seconds_since(in_flight_->started);
      if (out_) {
        *out_ << rt::rank_prefix() << "checkpoint step " << in_flight_->step << " committed ("
              << std::fixed << std::setprecision(1) << last_save_seconds_
              << " s, in the background)" << std::endl;
      }
    } catch (const rt::Error& e) {
      std::cerr << e.what() << std::endl;
    }
  }
  in_flight_.reset();
}

bool Checkpointer::due(int64_t step, const float* agreed, int64_t gathered_at) const {
  if (!enabled_) return false;
  const int64_t every = spec_.checkpoint.every_steps;
  return (every > 0 && step % every == 0) ||
         (agreed[Agreement::kSaveNow] > 0 && gathered_at >= last_save_step_);
}

void Checkpointer::commit_agreed(int64_t step, const nlohmann::json& meta, bool all_ok) {
  bool committed = false;
  std::string problem = "a rank could not write its part (see its error line)";
  if (comm_.rank() == 0) {
    if (all_ok) {
      try {
        store_->commit(step, meta);
        committed = true;
      } catch (const rt::Error& e) {
        problem = e.message();
      }
    } else {
      store_->abandon(step);
    }
  }
  // Every rank learns the outcome, so all of them report and decide alike.
  committed = all_ranks(comm_.rank() == 0 ? committed : true);
  if (committed) {
    last_committed_ = step;
  } else if (comm_.rank() == 0) {
    std::cerr << rt::rank_prefix() << "checkpoint step " << step << " NOT committed: " << problem
              << std::endl;
  }
}

void Checkpointer::save(TrainingState& state, const Position& position, bool finished,
                        bool allow_async) {
  if (!enabled_) return;
  last_save_step_ = position.step;
  drain();  // at most one save in flight
  const auto t0 = Clock::now();
  const bool async = allow_async && spec_.checkpoint.async;
  Snapshot snap = capture(state, position, finished, /*copy=*/async);
  const nlohmann::json meta = snap.meta;
  last_save_time_ = Clock::now();
  if (async) {
    // Serialising and writing run on their own thread, which has the store to itself until the
    // result is collected (the training thread touches the store again only after that).
    in_flight_ = std::make_unique<InFlight>();
    in_flight_->step = position.step;
    in_flight_->meta = meta;
    in_flight_->started = t0;
    in_flight_->write =
        std::async(std::launch::async, [this, step = position.step, snap = std::move(snap)] {
          try {
            return store_->write_part(step, serialise(snap));
          } catch (const std::exception& e) {
            checkpoint::WriteResult failed;
            failed.error = e.what();
            return failed;
          }
        });
    if (comm_.rank() == 0 && out_) {
      *out_ << rt::rank_prefix() << "checkpoint step " << position.step
            << ": writing in the background (training stalled " << std::fixed
            << std::setprecision(3) << seconds_since(t0) << " s)" << std::endl;
    }
    return;
  }
  const checkpoint::Part part = serialise(snap);
  const auto result = store_->write_part(position.step, part);
  if (!result.ok) {
    std::cerr << rt::rank_prefix() << "checkpoint step " << position.step
              << ": writing this rank's part failed: " << result.error << std::endl;
  }
  commit_agreed(position.step, meta, all_ranks(result.ok));
  last_save_seconds_ = seconds_since(t0);
  if (comm_.rank() == 0 && out_ && last_committed_ == position.step) {
    *out_ << rt::rank_prefix() << "checkpoint step " << position.step << " committed ("
          << std::fixed << std::setprecision(3) << last_save_seconds_
          << " s, training stalled as long)" << std::endl;
  }
}

void Checkpointer::drain() {
  if (!in_flight_) return;
  if (!in_flight_->result) in_flight_->result = in_flight_->write.get();
  const checkpoint::WriteResult result = *in_flight_->result;
  if (!result.ok) {
    std::cerr << rt::rank_prefix() << "checkpoint step " << in_flight_->step
              << ": writing this rank's part failed: " << result.error << std::endl;
  }
  const auto step = in_flight_->step;
  const auto meta = in_flight_->meta;
  const auto started = in_flight_->started;
  in_flight_.reset();
  commit_agreed(step, meta, all_ranks(result.ok));
  if (comm_.rank() == 0 && out_ && last_committed_ == step) {
    *out_ << rt::rank_prefix() << "checkpoint step " << step << " committed (" << std::fixed
          << std::setprecision(1) << seconds_since(started) << " s, in the background)"
          << std::endl;
  }
}

}  // namespace hpctrain::train
