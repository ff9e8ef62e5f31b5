// The C++ half of the interop check (interop_check.py): builds one model as the worker would,
// writes its fresh weights and its eval-mode logits on a given input; with --pretrained, then
// loads a file written by Python's torch.save into the same model, checks that every tensor
// arrived bit for bit, and writes the logits again.
//   model_tool --arch resnet18 --stem imagenet --in-channels 3 --num-classes 1000 --seed 1
//              --input x.pt --out-dir DIR [--pretrained py.pt] [--zero-init-residual]
//              [--channels-last]
// Writes DIR/init.pt, DIR/init_logits.pt and, with --pretrained, DIR/pretrained_logits.pt (dicts
// name -> tensor; the logits under "logits"). Exit status 1 when a pretrained tensor differs.
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "model/model.hpp"
#include "model/weights.hpp"

namespace {

using namespace hpctrain;

torch::Tensor eval_logits(model::Classifier& net, torch::Tensor x, bool channels_last) {
  net.eval();
  if (channels_last) {
    model::to_channels_last(net);
    x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  }
  torch::NoGradGuard no_grad;
  return net.forward(x);
}

void write_logits(const torch::Tensor& logits, const std::string& path) {
  model::StateDict out;
  out.insert("logits", logits);
  model::save_weights(out, path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"model_tool: C++ side of the model interop check"};
  std::string arch, stem, input, out_dir, pretrained;
  model::ModelConfig config;
  uint64_t seed = 0;
  bool channels_last = false;
  app.add_option("--arch", arch)->required();
  app.add_option("--stem", stem)->required();
  app.add_option("--in-channels", config.in_channels)->required();
  app.add_option("--num-classes", config.num_classes)->required();
  app.add_option("--seed", seed)->required();
  app.add_option("--input", input)->required();
  app.add_option("--out-dir", out_dir)->required();
  app.add_option("--pretrained", pretrained);
  app.add_flag("--zero-init-residual", config.zero_init_residual);
  app.add_flag("--channels-last", channels_last);
  CLI11_PARSE(app, argc, argv);

  // One thread: the check runs beside other builds on small machines, where OpenMP threads
  // competing for cores make a forward pass 30x slower.
  torch::set_num_threads(1);
  try {
    const auto parsed_arch = spec::parse_choice<model::Arch>(arch);
    const auto parsed_stem = spec::parse_choice<model::Stem>(stem);
    if (!parsed_arch || !parsed_stem) {
      std::cerr << "model_tool: unknown --arch or --stem\n";
      return 2;
    }
    config.arch = *parsed_arch;
    config.stem = *parsed_stem;
    const torch::Tensor x = model::load_weights(input)["x"];

    torch::manual_seed(seed);
    const auto fresh = model::build_model(config);
    model::save_weights(*fresh, out_dir + "/init.pt");
    write_logits(eval_logits(*fresh, x, channels_last), out_dir + "/init_logits.pt");

    if (!pretrained.empty()) {
      // load_pretrained() is what build_model() does with config.pretrained; one model instead of
      // two keeps the check quick for ResNet-152 and AlexNet.
      model::load_pretrained(*fresh, pretrained);
      const model::StateDict file = model::load_weights(pretrained);
      for (const auto& item : model::state_dict(*fresh)) {
        const torch::Tensor& expected = file[item.key()];
        if (item.value().scalar_type() != expected.scalar_type() ||
            !torch::equal(item.value().contiguous(), expected)) {
          std::cerr << "model_tool: " << item.key() << " differs from " << pretrained << "\n";
          return 1;
        }
      }
      write_logits(eval_logits(*fresh, x, channels_last), out_dir + "/pretrained_logits.pt");
    }
  } catch (const std::exception& e) {
    std::cerr << "model_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
