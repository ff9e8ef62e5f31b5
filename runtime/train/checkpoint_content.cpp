#include "train/checkpoint_content.hpp"

#include <ATen/Context.h>
#include <torch/torch.h>

#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "model/weights.hpp"
#include "spec/spec.hpp"
#include "train/restore.hpp"

namespace hpctrain::train {
namespace {

constexpr int64_t kFormatVersion = 1;

std::string rng_file(int rank) { return "rng-rank-" + std::to_string(rank) + ".pt"; }
// Local SGD: the model and optimizer state of a rank other than 0, and the state shared by all.
std::string local_file(int rank) { return "local-rank-" + std::to_string(rank) + ".pt"; }
constexpr const char* kLocalSgdFile = "local_sgd.pt";

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

// Every piece of state restore() puts back, by name; tests leave some out
// (ContentOptions::ablate_skip).
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

ContentOptions content_options_from_spec(const spec::Spec& spec, const TrainHooks& hooks) {
  ContentOptions o;
  o.batch_size = spec.train.batch_size;
  o.local_sgd = spec.train.sync == spec::Sync::kLocalSgd;
  o.resume_key = {{"arch", std::string(spec::name_of(spec.model.arch))},
                  {"stem", std::string(spec::name_of(spec.model.stem))},
                  {"num_classes", spec.model.num_classes},
                  {"optimizer", std::string(spec::name_of(spec.train.optimizer.name))}};
  // Only local SGD's checkpoints say so (they hold more), so older ones keep resuming.
  if (o.local_sgd) {
    o.resume_key["sync"] = std::string(spec::name_of(spec.train.sync));
    o.resume_key["outer_optimizer"] = std::string(spec::name_of(spec.train.outer_optimizer));
  }
  o.ablate_skip = hooks.resume_skip;
  o.ablate_pieces_file = hooks.resume_pieces_file;
  return o;
}

CheckpointContent::CheckpointContent(ContentOptions options, dist::Communicator& comm,
                                     std::ostream* out)
    : options_(std::move(options)), comm_(comm), out_(out) {}

nlohmann::json CheckpointContent::resume_key(const data::DatasetInfo& dataset) const {
  nlohmann::json key = options_.resume_key;
  key["train_samples"] = dataset.num_samples;
  key["image"] = {dataset.height, dataset.width, dataset.channels};
  key["dataset_classes"] = dataset.num_classes;
  return key;
}

Snapshot CheckpointContent::capture(TrainingState& state, const Position& position, bool finished,
                                    bool copy) {
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
               {"rollbacks", position.rollbacks},
               {"finished", finished},
               {"world_size", comm_.size()},
               {"batch_size", options_.batch_size},
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
  trainer["resume"] = resume_key(state.dataset);
  if (state.scaler) {
    const auto s = state.scaler->state();
    trainer["scaler"] = {{"scale", s.scale}, {"growth_tracker", s.growth_tracker}};
  } else {
    trainer["scaler"] = nullptr;
  }
  snap.trainer_json = trainer.dump(2) + "\n";
  return snap;
}

checkpoint::Part CheckpointContent::serialise(const Snapshot& snap) const {
  checkpoint::Part part;
  part.files[rng_file(comm_.rank())] = model::weights_to_bytes(to_state_dict(snap.rng));
  if (options_.local_sgd) {
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

std::vector<std::string> CheckpointContent::shared_files() const {
  return {"model.pt", "optimizer.pt", "trainer.json"};
}

std::vector<std::string> CheckpointContent::own_files(const checkpoint::Loaded& loaded) const {
  if (!options_.local_sgd) return {};
  return local_files_needed(loaded, comm_.rank(), comm_.size());
}

void CheckpointContent::check_resume_key(const checkpoint::Loaded& loaded,
                                         const TrainingState& state, const std::string& dir) const {
  const nlohmann::json trainer = nlohmann::json::parse(loaded.files.at("trainer.json"));
  const nlohmann::json key = resume_key(state.dataset);
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
                 "the checkpoint at step " + std::to_string(loaded.step) + " in " + dir +
                     " was made by a different model, dataset or train.sync:" + diff.str() +
                     "\nHINT: restore the spec, or use a new job.run_dir to start "
                     "over");
}

Resumed CheckpointContent::restore(TrainingState& state, const checkpoint::Loaded& loaded) {
  const int64_t step = loaded.step;
  const nlohmann::json trainer = nlohmann::json::parse(loaded.files.at("trainer.json"));
  torch::NoGradGuard no_grad;
  RestoredPieces pieces{options_.ablate_skip, {}};
  model::StateDict weights = model::weights_from_bytes(loaded.files.at("model.pt"),
                                                       "model.pt of step " + std::to_string(step));
  model::StateDict opt = model::weights_from_bytes(loaded.files.at("optimizer.pt"),
                                                   "optimizer.pt of step " + std::to_string(step));
  if (options_.local_sgd) {
    restore_local(state, loaded, weights, opt,
                  [&](const std::string& piece) { return pieces.restoring(piece); });
  }
  restore_model(state.model, weights, step, pieces);
  restore_optimizer(state, opt, pieces);
  restore_scaler(state.scaler, trainer, pieces);
  restore_rng(loaded, comm_.rank(), comm_.device(), pieces);
  Resumed r;
  const auto position = [&](const char* key) {
    return pieces.restoring(std::string("position.") + key) ? trainer[key].get<int64_t>() : 0;
  };
  r.position = {position("step"), position("epoch"), position("consumed"),
                trainer.value("rollbacks", int64_t{0})};
  if (comm_.rank() == 0 && !options_.ablate_pieces_file.empty()) {
    std::ofstream list(options_.ablate_pieces_file);
    for (const auto& p : pieces.names) list << p << '\n';
  }
  r.finished = trainer.value("finished", false);
  r.world_size = loaded.world_size;
  return r;
}

void CheckpointContent::restore_local(TrainingState& state, const checkpoint::Loaded& loaded,
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

}  // namespace hpctrain::train
