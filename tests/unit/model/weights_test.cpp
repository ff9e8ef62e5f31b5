// Weights files, pretrained loading, freezing and channels_last. Files from Python are covered
// twice: golden data.pkl bytes from torch.save here (the OrderedDict form libtorch's own
// unpickler cannot read), real files in interop_check.py.
#include <dirent.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/utils.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/model.hpp"
#include "model/unpickler.hpp"
#include "model/weights.hpp"
#include "support/error_text.hpp"

namespace hpctrain::model {
namespace {

// POSIX rather than std::filesystem: the torch wheel's libtorch.so exports an older copy of
// std::filesystem's functions (its remove_all crashes when bound here).
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/hpctrain-model-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    ::nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); },
        /*nopenfd=*/16, FTW_DEPTH | FTW_PHYS);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    DIR* dir = ::opendir(path_.c_str());
    while (const dirent* entry = dir ? ::readdir(dir) : nullptr) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    if (dir) ::closedir(dir);
    return out;
  }

 private:
  std::string path_;
};

ModelConfig config(Arch arch, int64_t in_channels, int64_t num_classes) {
  ModelConfig c;
  c.arch = arch;
  c.stem = is_cifar_resnet(arch) ? Stem::kCifar : Stem::kImageNet;
  c.in_channels = in_channels;
  c.num_classes = num_classes;
  return c;
}

// Small and quick: ResNet-20 has projection-free blocks, ResNet-18 (cifar stem) downsample ones.
ModelConfig small(int64_t in_channels = 3, int64_t num_classes = 10) {
  ModelConfig c = config(Arch::kResNet18, in_channels, num_classes);
  c.stem = Stem::kCifar;
  return c;
}

StateDict clone(const StateDict& sd) {
  StateDict out;
  for (const auto& item : sd) out.insert(item.key(), item.value().detach().clone());
  return out;
}

void expect_identical(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& item : a) {
    const torch::Tensor& other = b[item.key()];
    EXPECT_EQ(item.value().scalar_type(), other.scalar_type()) << item.key();
    EXPECT_EQ(item.value().sizes(), other.sizes()) << item.key();
    EXPECT_TRUE(torch::equal(item.value().cpu(), other.cpu())) << item.key();
  }
}

using hpctrain::test::message_of;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

TEST(WeightsFile, RoundTripIsBitwise) {
  TempDir dir;
  torch::manual_seed(0);
  const auto net = build_model(small());
  // Non-trivial buffers: one training step's BN statistics and counters.
  net->forward(torch::randn({2, 3, 32, 32}));
  save_weights(*net, dir.file("w.pt"));
  const StateDict loaded = load_weights(dir.file("w.pt"));
  expect_identical(state_dict(*net), loaded);
  EXPECT_EQ(loaded["bn1.num_batches_tracked"].item<int64_t>(), 1);
  EXPECT_FALSE(loaded["conv1.weight"].requires_grad());
  // The same bytes every time: files can be checksummed and compared.
  save_weights(*net, dir.file("again.pt"));
  EXPECT_EQ(read_bytes(dir.file("w.pt")), read_bytes(dir.file("again.pt")));
}

TEST(WeightsFile, KeepsDtypesShapesAndOrderOfAnyDict) {
  TempDir dir;
  StateDict tensors;
  tensors.insert("z.half", torch::randn({3, 2}).to(torch::kHalf));
  tensors.insert("a.bf16", torch::randn({5}).to(torch::kBFloat16));
  tensors.insert("m.bool", torch::tensor({true, false, true}));
  tensors.insert("m.int8", torch::tensor({-3, 4}, torch::kChar));
  tensors.insert("scalar", torch::tensor(42, torch::kLong));
  tensors.insert("empty", torch::zeros({0, 4}));
  tensors.insert("double", torch::randn({2, 2}, torch::kDouble));
  // A transposed view is written as a contiguous copy of just its elements.
  tensors.insert("view", torch::arange(12, torch::kFloat).reshape({3, 4}).t().slice(0, 1, 3));
  save_weights(tensors, dir.file("t.pt"));
  const StateDict loaded = load_weights(dir.file("t.pt"));
  expect_identical(tensors, loaded);
  EXPECT_TRUE(loaded["view"].is_contiguous());
}

TEST(WeightsFile, SaveReplacesAtomicallyAndNamesTheFile) {
  TempDir dir;
  StateDict one;
  one.insert("x", torch::ones({2}));
  save_weights(one, dir.file("w.pt"));
  StateDict two;
  two.insert("y", torch::zeros({3}));
  save_weights(two, dir.file("w.pt"));
  EXPECT_EQ(load_weights(dir.file("w.pt")).keys(), std::vector<std::string>{"y"});
  // Nothing but the file itself: the temporary was renamed.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"w.pt"});
  const std::string bad = dir.file("no/such/dir/w.pt");
  const std::string error = message_of([&] { save_weights(two, bad); });
  EXPECT_NE(error.find("cannot save weights to " + bad), std::string::npos) << error;
}

TEST(WeightsFile, UnreadableFilesAreErrorsNamingTheFile) {
  TempDir dir;
  StateDict tensors;
  tensors.insert("w", torch::randn({64, 64}));
  save_weights(tensors, dir.file("good.pt"));
  const std::string good = read_bytes(dir.file("good.pt"));
  write_bytes(dir.file("truncated.pt"), good.substr(0, good.size() / 2));
  write_bytes(dir.file("empty.pt"), "");
  write_bytes(dir.file("text.pt"), "this is not a zip archive, it is a sentence of text.");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir.file("missing.pt"), "no such file"},
      {dir.path(), "a directory"},
      {dir.file("truncated.pt"), "not a torch.save zip file"},
      {dir.file("empty.pt"), "cannot load weights"},
      {dir.file("text.pt"), "not a torch.save zip file"},
  };
  for (const auto& [path, reason] : cases) {
    const std::string error = message_of([&] { load_weights(path); });
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find(reason), std::string::npos) << error;
    EXPECT_EQ(error.find("frame #"), std::string::npos) << "backtrace in: " << error;
  }
}

TEST(WeightsFile, NotAStateDictIsAnError) {
  TempDir dir;
  // A training checkpoint (a dict holding more than tensors), and a list, via libtorch's pickler.
  c10::impl::GenericDict checkpoint(c10::StringType::get(), c10::AnyType::get());
  checkpoint.insert("model", torch::ones({1}));
  checkpoint.insert("epoch", 3);
  const auto a = torch::pickle_save(checkpoint);
  write_bytes(dir.file("checkpoint.pt"), std::string(a.begin(), a.end()));
  const auto b = torch::pickle_save(c10::List<std::string>({"a", "b"}));
  write_bytes(dir.file("list.pt"), std::string(b.begin(), b.end()));

  std::string error = message_of([&] { load_weights(dir.file("checkpoint.pt")); });
  EXPECT_NE(error.find(dir.file("checkpoint.pt")), std::string::npos) << error;
  EXPECT_NE(error.find("entry 'epoch' is of type int"), std::string::npos) << error;
  error = message_of([&] { load_weights(dir.file("list.pt")); });
  EXPECT_NE(error.find("not a state dict"), std::string::npos) << error;
}

// torch.save(nn.Sequential(nn.Conv2d(1, 2, 1, bias=False), nn.BatchNorm2d(2)).state_dict()):
// protocol 2, an OrderedDict with memo references and the _metadata attribute (BUILD).
const char* const kTorchSaveStateDict =
    "800263636f6c6c656374696f6e730a4f726465726564446963740a710029527101285808000000302e7765696768"
    "74710263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a71032828580700000073"
    "746f72616765710463746f7263680a466c6f617453746f726167650a71055801000000307106580300000063707571"
    "074b02747108514b00284b024b014b014b01747109284b014b014b014b0174710a8968002952710b74710c52710d58"
    "08000000312e776569676874710e6803282868046805580100000031710f68074b02747110514b004b028571114b01"
    "857112896800295271137471145271155806000000312e6269617371166803282868046805580100000032711768"
    "074b02747118514b004b028571194b0185711a8968002952711b74711c52711d580e000000312e72756e6e696e675f"
    "6d65616e711e6803282868046805580100000033711f68074b02747120514b004b028571214b0185712289680029"
    "527123747124527125580d000000312e72756e6e696e675f76617271266803282868046805580100000034712768"
    "074b02747128514b004b028571294b0185712a8968002952712b74712c52712d5815000000312e6e756d5f626174"
    "636865735f747261636b6564712e68032828680463746f7263680a4c6f6e6753746f726167650a712f5801000000"
    "35713068074b01747131514b00292989680029527132747133527134757d713558090000005f6d65746164617461"
    "713668002952713728580000000071387d7139580700000076657273696f6e713a4b0173580100000030713b7d71"
    "3c683a4b0173580100000031713d7d713e683a4b02737573622e";

// torch.save({"a": tensor([1.5, -2.0]), "b": tensor([[7]])}, pickle_protocol=4): FRAME,
// MEMOIZE, STACK_GLOBAL, SHORT_BINUNICODE.
const char* const kTorchSaveProtocol4 =
    "800495d2000000000000007d94288c0161948c0c746f7263682e5f7574696c73948c125f72656275696c645f7465"
    "6e736f725f763294939428288c0773746f72616765948c05746f726368948c0c466c6f617453746f726167659493"
    "948c0130948c03637075944b027494514b004b0285944b018594898c0b636f6c6c656374696f6e73948c0b4f7264"
    "6572656444696374949394295294749452948c01629468042828680568068c0b4c6f6e6753746f72616765949394"
    "8c013194680a4b017494514b004b014b0186944b014b01869489681029529474945294752e";

// Storage n as a tensor of n+1 .. n+numel, so each tensor's values tell which storage it used.
torch::Tensor numbered_storage(const std::string& key, torch::ScalarType dtype, int64_t numel) {
  const int64_t first = std::stoll(key) + 1;
  return torch::arange(first, first + numel).to(dtype);
}

TEST(Unpickler, ReadsTorchSaveOrderedDict) {
  const StateDict sd = unpickle_state_dict(from_hex(kTorchSaveStateDict), numbered_storage);
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"0.weight", "1.weight", "1.bias", "1.running_mean",
                                                 "1.running_var", "1.num_batches_tracked"}));
  EXPECT_EQ(sd["0.weight"].sizes(), (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_TRUE(torch::equal(sd["0.weight"].flatten(), torch::tensor({1.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(sd["1.running_var"], torch::tensor({5.0f, 6.0f})));
  EXPECT_EQ(sd["1.num_batches_tracked"].scalar_type(), torch::kLong);
  EXPECT_EQ(sd["1.num_batches_tracked"].dim(), 0);
  EXPECT_EQ(sd["1.num_batches_tracked"].item<int64_t>(), 6);
}

TEST(Unpickler, ReadsProtocol4) {
  const StateDict sd = unpickle_state_dict(from_hex(kTorchSaveProtocol4), numbered_storage);
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(sd["b"].sizes(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sd["b"].scalar_type(), torch::kLong);
}

TEST(Unpickler, RefusesWhatAStateDictDoesNotUse) {
  const auto error = [](const std::string& pickle) {
    try {
      unpickle_state_dict(pickle, numbered_storage);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // GLOBAL builtins.print, called on ("x",).
  EXPECT_NE(error(from_hex("8002636275696c74696e730a7072696e740a58010000007885522e"))
                .find("needs builtins.print"),
            std::string::npos);
  const std::string good = from_hex(kTorchSaveStateDict);
  EXPECT_NE(error(good.substr(0, good.size() / 2)).find("truncated"), std::string::npos);
  EXPECT_NE(error("\x80\x02\xff.").find("unsupported pickle opcode 0xff"), std::string::npos);
  // A tensor reaching past its storage: size (3,) stride (1,) over a 2-element storage.
  std::string oversized = good;
  const std::string size_2111 = from_hex("284b024b014b014b0174");  // (2, 1, 1, 1)
  oversized.replace(oversized.find(size_2111), size_2111.size(), from_hex("284b034b014b014b0174"));
  EXPECT_NE(error(oversized).find("past the end of its storage"), std::string::npos);
}

TEST(Pretrained, LoadsEverythingWhenShapesMatch) {
  TempDir dir;
  torch::manual_seed(1);
  const auto source = build_model(small());
  source->forward(torch::randn({2, 3, 32, 32}));  // running stats differ from a fresh model's
  save_weights(*source, dir.file("w.pt"));
  ModelConfig c = small();
  c.pretrained = dir.file("w.pt");
  torch::manual_seed(2);
  const auto loaded = build_model(c);
  expect_identical(state_dict(*source), state_dict(*loaded));
  // Loading copies into the model's own tensors: still parameters that train.
  EXPECT_TRUE(state_dict(*loaded)["fc.weight"].requires_grad());
}

TEST(Pretrained, KeepsAFreshHeadForOtherNumClasses) {
  TempDir dir;
  torch::manual_seed(1);
  const auto imagenet = build_model(config(Arch::kAlexNet, 3, 1000));
  save_weights(*imagenet, dir.file("alexnet.pt"));
  const auto target = build_model(config(Arch::kAlexNet, 3, 10));
  const StateDict fresh = clone(state_dict(*target));
  const PretrainedLoad result = load_pretrained(*target, dir.file("alexnet.pt"));
  EXPECT_TRUE(result.head_skipped);
  EXPECT_EQ(result.tensors, 14u);
  const StateDict source = state_dict(*imagenet), loaded = state_dict(*target);
  for (const auto& item : loaded) {
    const bool head = item.key().rfind("classifier.6.", 0) == 0;
    const torch::Tensor& expected = head ? fresh[item.key()] : source[item.key()];
    EXPECT_TRUE(torch::equal(item.value(), expected)) << item.key();
  }
}

TEST(Pretrained, OtherInChannelsIsAClearError) {
  TempDir dir;
  save_weights(*build_model(small(/*in_channels=*/3)), dir.file("rgb.pt"));
  const auto grey = build_model(small(/*in_channels=*/1));
  const std::string error = message_of([&] { load_pretrained(*grey, dir.file("rgb.pt")); });
  EXPECT_NE(error.find(dir.file("rgb.pt")), std::string::npos) << error;
  EXPECT_NE(error.find("conv1.weight takes 3 input channels in the file, the model 1"),
            std::string::npos)
      << error;
}

TEST(Pretrained, NamesUnknownMissingAndMismatchedTensors) {
  TempDir dir;
  const auto net = build_model(small());
  const StateDict original = clone(state_dict(*net));
  StateDict edited = clone(original);
  StateDict file;
  for (const auto& item : edited) {
    if (item.key() == "layer1.0.bn1.running_mean") continue;  // missing
    file.insert(item.key(), item.key() == "bn1.weight" ? torch::ones({65}) : item.value());
  }
  for (int i = 0; i < 12; ++i)
    file.insert("extra" + std::to_string(i) + ".weight", torch::ones({1}));
  save_weights(file, dir.file("bad.pt"));
  const std::string error = message_of([&] { load_pretrained(*net, dir.file("bad.pt")); });
  EXPECT_NE(error.find(dir.file("bad.pt")), std::string::npos) << error;
  EXPECT_NE(error.find("1 missing from the file: layer1.0.bn1.running_mean"), std::string::npos)
      << error;
  EXPECT_NE(error.find("12 unknown to the model: extra0.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("extra9.weight (and 2 more)"), std::string::npos) << error;
  EXPECT_EQ(error.find("extra10.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("bn1.weight [65] in the file, [64] in the model"), std::string::npos)
      << error;
  // Nothing was copied.
  expect_identical(original, state_dict(*net));
}

TEST(Pretrained, HintsAtDataParallelPrefixes) {
  TempDir dir;
  const auto net = build_model(config(Arch::kResNet20, 3, 10));
  StateDict prefixed;
  for (const auto& item : state_dict(*net)) prefixed.insert("module." + item.key(), item.value());
  save_weights(prefixed, dir.file("ddp.pt"));
  const std::string error = message_of([&] { load_pretrained(*net, dir.file("ddp.pt")); });
  EXPECT_NE(error.find("save model.module.state_dict()"), std::string::npos) << error;
}

TEST(Freeze, StopsGradientsOfMatchingParametersOnly) {
  ModelConfig c = small();
  c.freeze = {"conv1", "layer1", "fc.bias"};
  const auto net = build_model(c);
  for (const auto& item : net->named_parameters()) {
    const std::string& name = item.key();
    const bool frozen =
        name == "conv1.weight" || name.rfind("layer1.", 0) == 0 || name == "fc.bias";
    EXPECT_EQ(item.value().requires_grad(), !frozen) << name;
  }
  net->forward(torch::randn({2, 3, 32, 32})).sum().backward();
  const auto params = net->named_parameters();
  EXPECT_FALSE(params["conv1.weight"].grad().defined());
  EXPECT_FALSE(params["layer1.1.bn2.weight"].grad().defined());
  EXPECT_TRUE(params["bn1.weight"].grad().defined());
  EXPECT_TRUE(params["layer2.0.conv1.weight"].grad().defined());
  EXPECT_TRUE(params["fc.weight"].grad().defined());
}

TEST(Freeze, BatchNormStatisticsStillUpdate) {
  ModelConfig c = small();
  c.freeze = {"bn1"};
  const auto net = build_model(c);
  net->forward(torch::randn({2, 3, 32, 32}));
  const auto sd = state_dict(*net);
  EXPECT_FALSE(sd["bn1.weight"].requires_grad());
  EXPECT_EQ(sd["bn1.num_batches_tracked"].item<int64_t>(), 1);
  EXPECT_GT(sd["bn1.running_mean"].abs().sum().item<double>(), 0);
}

TEST(Freeze, PrefixMatchingNothingNamesItAndTheTopLevelModules) {
  const auto net = build_model(small());
  // Whole name components only: "conv" is not "conv1", "layer1.0.bn" is not "layer1.0.bn1".
  for (const std::string prefix : {"layer5", "conv", "layer1.0.bn"}) {
    const std::string error = message_of([&] { freeze(*net, {"layer1", prefix}); });
    EXPECT_NE(error.find("freeze prefix \"" + prefix + "\" matches no parameter"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("conv1, bn1, layer1, layer2, layer3, layer4, fc"), std::string::npos)
        << error;
  }
  // Nothing frozen by the failed calls, not even "layer1".
  for (const auto& p : net->parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(freeze(*net, {"layer1.0.bn1"}), 2u);
}

TEST(ChannelsLast, ConvertsFourDimensionalTensorsKeepingValues) {
  torch::manual_seed(5);
  const auto net = build_model(small());
  net->eval();
  const StateDict before = clone(state_dict(*net));
  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = net->forward(x);
  to_channels_last(*net);
  for (const auto& item : state_dict(*net)) {
    if (item.value().dim() != 4) continue;
    EXPECT_TRUE(item.value().is_contiguous(torch::MemoryFormat::ChannelsLast)) << item.key();
    // 1x1 kernels are contiguous in both layouts.
    if (item.value().size(2) > 1) {
      EXPECT_FALSE(item.value().is_contiguous()) << item.key();
    }
  }
  expect_identical(before, state_dict(*net));
  const torch::Tensor y = net->forward(x.contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::allclose(y, expected, /*rtol=*/1e-4, /*atol=*/1e-4));
}

}  // namespace
}  // namespace hpctrain::model
