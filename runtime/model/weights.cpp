#include "model/weights.hpp"

#include <sys/stat.h>
#include <unistd.h>

// libtorch's zip container (what torch.save writes) and its pickler, for writing.
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string_view>

#include "common/durable_file.hpp"
#include "common/error.hpp"
#include "model/model.hpp"
#include "model/unpickler.hpp"

namespace hpctrain::model {
namespace {

// Names listed in one error message; the rest are counted.
constexpr size_t kMaxListed = 10;

std::string shape_string(const torch::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

// "a, b, c (and 7 more)".
std::string listing(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kMaxListed)
    out += " (and " + std::to_string(names.size() - kMaxListed) + " more)";
  return out;
}

// c10::Error's what() carries a C++ backtrace that means nothing to a user.
std::string reason(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

// The bytes torch.save would write for a plain dict of these tensors: a zip archive (libtorch's
// writer, as torch.save's) holding data.pkl, byteorder and one data/<n> record per tensor. The
// pickle comes from libtorch's Pickler with type tags off: tagged containers need
// torch.jit._pickle.restore_type_tag, which torch.load(weights_only=True) refuses.
std::string torch_save_bytes(const StateDict& tensors) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& item : tensors) {
    if (!item.value().defined()) {
      throw std::runtime_error("tensor '" + item.key() + "' is undefined");
    }
    // A fresh contiguous CPU copy: the file then holds just this tensor's bytes (not a shared
    // storage's), in a layout independent of device and memory format.
    dict.insert(item.key(), item.value().detach().to(torch::TensorOptions().device(torch::kCPU),
                                                     /*non_blocking=*/false, /*copy=*/true,
                                                     torch::MemoryFormat::Contiguous));
  }
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* data, size_t n) { pickle.append(data, n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
                              /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(dict);
  pickler.stop();

  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  constexpr std::string_view kByteOrder = "little";
  writer.writeRecord("byteorder", kByteOrder.data(), kByteOrder.size());
  // The pickler names storages "0", "1", ... in the order of tensorData().
  const auto& storages = pickler.tensorData();
  for (size_t i = 0; i < storages.size(); ++i) {
    const auto& storage = storages[i].storage();
    writer.writeRecord("data/" + std::to_string(i), storage.data(), storage.nbytes());
  }
  writer.writeEndOfFile();
  return bytes;
}

// The dict name -> tensor of a torch.save archive; throws std::exception on any problem.
StateDict read_archive(caffe2::serialize::PyTorchStreamReader& reader) {
  if (!reader.hasRecord("data.pkl")) {
    throw std::runtime_error("the archive has no data.pkl (not written by torch.save)");
  }
  const auto [pickle_data, pickle_size] = reader.getRecord("data.pkl");
  const std::string_view pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
  return unpickle_state_dict(
      pickle, [&](const std::string& key, torch::ScalarType dtype, int64_t numel) {
        const std::string record = "data/" + key;
        if (!reader.hasRecord(record))
          throw std::runtime_error("storage record " + record + " is missing");
        // Checked before allocating, so a damaged size cannot make us allocate terabytes.
        const size_t nbytes = reader.getRecordSize(record);
        if (numel < 0 || nbytes != static_cast<size_t>(numel) * c10::elementSize(dtype)) {
          throw std::runtime_error("storage record " + record + " has " + std::to_string(nbytes) +
                                   " bytes, the pickle expects " + std::to_string(numel) + " " +
                                   c10::toString(dtype) + " elements");
        }
        torch::Tensor storage = torch::empty({numel}, torch::dtype(dtype));
        if (nbytes > 0) reader.getRecord(record, storage.data_ptr(), nbytes);
        return storage;
      });
}

std::string archive_problem(const std::exception& e) {
  std::string problem = reason(e);
  if (problem.find("zip archive") != std::string::npos) {
    problem +=
        " (not a torch.save zip file: truncated, or written with "
        "_use_new_zipfile_serialization=False)";
  }
  return problem;
}

bool matches(const std::string& name, const std::string& prefix) {
  return name.size() >= prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         (name.size() == prefix.size() || name[prefix.size()] == '.');
}

}  // namespace

StateDict state_dict(const torch::nn::Module& module) {
  StateDict out;
  const auto add_own = [&](const std::string& prefix, const torch::nn::Module& m) {
    for (const auto& p : m.named_parameters(/*recurse=*/false))
      out.insert(prefix + p.key(), p.value());
    for (const auto& b : m.named_buffers(/*recurse=*/false))
      out.insert(prefix + b.key(), b.value());
  };
  add_own("", module);
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    add_own(item.key() + ".", *item.value());
  }
  return out;
}

void save_weights(const torch::nn::Module& module, const std::string& path) {
  save_weights(state_dict(module), path);
}

void save_weights(const StateDict& tensors, const std::string& path) {
  try {
    common::write_file_atomic(path, torch_save_bytes(tensors));
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::Error, "cannot save weights to " + path + ": " + reason(e));
  }
}

StateDict load_weights(const std::string& path) {
  // stat(2), not std::filesystem: the torch wheel's libtorch.so exports its own, older copy of
  // std::filesystem's functions, which the dynamic linker may bind instead of libstdc++'s.
  struct stat st {};
  std::string why;
  if (::stat(path.c_str(), &st) != 0) {
    why = errno == ENOENT ? "no such file" : std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    why = "a directory, not a file";
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (::access(path.c_str(), R_OK) != 0) {
    why = std::strerror(errno);
  }
  if (!why.empty()) HPCTRAIN_THROW(rt::Error, "cannot read weights " + path + ": " + why);
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    return read_archive(reader);
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::Error, "cannot load weights from " + path + ": " + archive_problem(e));
  }
}

std::string weights_to_bytes(const StateDict& tensors) { return torch_save_bytes(tensors); }

StateDict weights_from_bytes(const std::string& bytes, const std::string& name) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(
        std::make_shared<caffe2::serialize::MemoryReadAdapter>(bytes.data(),
                                                               static_cast<off_t>(bytes.size())));
    return read_archive(reader);
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::Error, "cannot load weights from " + name + ": " + archive_problem(e));
  }
}

PretrainedLoad load_pretrained(Classifier& model, const std::string& path) {
  const StateDict file = load_weights(path);
  StateDict own = state_dict(model);
  const std::string head = model.head(), stem = model.stem_conv();

  std::vector<std::string> missing, unknown, mismatched, problems;
  for (const auto& item : own) {
    if (!file.contains(item.key())) missing.push_back(item.key());
  }
  for (const auto& item : file) {
    if (!own.contains(item.key())) unknown.push_back(item.key());
  }
  PretrainedLoad result;
  for (const auto& item : own) {
    const torch::Tensor* theirs = file.find(item.key());
    if (theirs == nullptr || theirs->sizes() == item.value().sizes()) continue;
    const torch::Tensor& ours = item.value();
    const bool same_rank = theirs->dim() == ours.dim();
    if (matches(item.key(), head) && same_rank &&
        theirs->sizes().slice(1) == ours.sizes().slice(1)) {
      result.head_skipped = true;  // only the number of classes differs
    } else if (item.key() == stem + ".weight" && same_rank && ours.dim() == 4 &&
               theirs->size(0) == ours.size(0) &&
               theirs->sizes().slice(2) == ours.sizes().slice(2)) {
      problems.push_back(item.key() + " takes " + std::to_string(theirs->size(1)) +
                         " input channels in the file, the model " + std::to_string(ours.size(1)) +
                         " (in_channels): pretrained weights need the in_channels they were "
                         "trained with");
    } else {
      mismatched.push_back(item.key() + " " + shape_string(*theirs) + " in the file, " +
                           shape_string(ours) + " in the model");
    }
  }
  if (!missing.empty()) {
    problems.push_back(std::to_string(missing.size()) +
                       " missing from the file: " + listing(missing));
  }
  if (!unknown.empty()) {
    std::string line =
        std::to_string(unknown.size()) + " unknown to the model: " + listing(unknown);
    if (std::all_of(unknown.begin(), unknown.end(),
                    [](const std::string& n) { return n.rfind("module.", 0) == 0; })) {
      line += " (HINT: saved from DataParallel/DDP; save model.module.state_dict() instead)";
    }
    problems.push_back(line);
  }
  if (!mismatched.empty()) {
    problems.push_back(std::to_string(mismatched.size()) +
                       " with other shapes: " + listing(mismatched));
  }
  if (!problems.empty()) {
    std::string message = "pretrained weights " + path + " do not fit " + model.name() + ":";
    for (const auto& problem : problems) message += "\n  " + problem;
    HPCTRAIN_THROW(rt::Error, message);
  }

  torch::NoGradGuard no_grad;
  for (auto& item : own) {
    if (result.head_skipped && matches(item.key(), head)) continue;
    item.value().copy_(file[item.key()]);
    ++result.tensors;
  }
  return result;
}

size_t freeze(torch::nn::Module& model, const std::vector<std::string>& prefixes) {
  auto params = model.named_parameters();
  for (const auto& prefix : prefixes) {
    const bool found = std::any_of(params.begin(), params.end(),
                                   [&](const auto& item) { return matches(item.key(), prefix); });
    if (found) continue;
    std::vector<std::string> tops;
    for (const auto& child : model.named_children()) {
      if (!child.value()->parameters().empty()) tops.push_back(child.key());
    }
    for (const auto& own : model.named_parameters(/*recurse=*/false)) tops.push_back(own.key());
    HPCTRAIN_THROW(rt::Error, "freeze prefix \"" + prefix + "\" matches no parameter of " +
                                  model.name() + "; its top-level modules are: " + listing(tops));
  }
  size_t frozen = 0;
  for (auto& item : params) {
    const bool hit = std::any_of(prefixes.begin(), prefixes.end(),
                                 [&](const std::string& p) { return matches(item.key(), p); });
    if (hit && item.value().requires_grad()) {
      item.value().set_requires_grad(false);
      ++frozen;
    }
  }
  return frozen;
}

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  const auto convert = [](torch::Tensor t) {
    if (t.defined() && t.dim() == 4) t.set_data(t.contiguous(torch::MemoryFormat::ChannelsLast));
  };
  for (auto& p : module.parameters()) convert(p);
  for (auto& b : module.buffers()) convert(b);
}

}  // namespace hpctrain::model
