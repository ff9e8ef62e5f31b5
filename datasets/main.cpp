// hpctrain-data: converts datasets into the hpctrain HDF5 layout and validates files.
//   hpctrain-data idx --images X --labels Y -o out.h5 [--fashion | --class-names a,b,...]
//   hpctrain-data cifar10 data_batch_1.bin ... -o out.h5
//   hpctrain-data folder ROOT -o out.h5 --size 256 [--channels 3]
//   hpctrain-data inspect FILE... [--full] [--file-locking]
// Exit codes: 0 ok, 1 bad input or failed conversion, 2 usage.
#include <CLI/CLI.hpp>

#include <iostream>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "convert.hpp"
#include "version.hpp"

namespace ds = hpctrain::datasets;

int main(int argc, char** argv) {
  CLI::App app{"Convert image datasets into the hpctrain HDF5 layout (docs/dataset-format.md)"};
  app.set_version_flag("--version", std::string("hpctrain-data ") + hpctrain::kVersion);
  app.require_subcommand(1);
  ds::ConvertOptions opts;
  opts.progress = &std::cerr;
  std::string output;
  bool quiet = false;
  auto common = [&](CLI::App* sub) {
    sub->add_option("-o,--output", output, "Output HDF5 file")->required();
    sub->add_option("--chunk-images", opts.chunk_images, "Images per HDF5 chunk (default: auto)");
    sub->add_option("--class-names", opts.class_names, "Class names in label order")
        ->delimiter(',');
    sub->add_flag("-q,--quiet", quiet, "No progress bar");
  };

  std::string images, labels;
  bool fashion = false;
  auto* idx = app.add_subcommand("idx", "MNIST / Fashion-MNIST IDX files (.gz or plain)");
  idx->add_option("--images", images, "IDX images file")->required();
  idx->add_option("--labels", labels, "IDX labels file")->required();
  idx->add_flag("--fashion", fashion, "Use the Fashion-MNIST class names");
  common(idx);

  std::vector<std::string> batches;
  auto* cifar = app.add_subcommand("cifar10", "CIFAR-10 binary batches");
  cifar->add_option("batches", batches, "data_batch_N.bin / test_batch.bin files")->required();
  common(cifar);

  std::string root;
  int64_t size = 0, channels = 3;
  auto* folder = app.add_subcommand("folder", "An image folder tree root/class_name/*.jpg|png");
  folder->add_option("root", root, "Root directory")->required();
  folder->add_option("--size", size, "Output side length (shorter side resized, center crop)")
      ->required();
  folder->add_option("--channels", channels, "1 (grey) or 3 (RGB)");
  common(folder);

  int64_t samples = 0, classes = 10;
  uint64_t seed = 0;
  auto* synth = app.add_subcommand("synthetic", "Random images and labels (for benchmarks)");
  synth->add_option("--samples", samples, "Number of images")->required();
  synth->add_option("--size", size, "Side length")->required();
  synth->add_option("--channels", channels, "Channels (1..4)");
  synth->add_option("--classes", classes, "Number of classes");
  synth->add_option("--seed", seed, "Seed (the same seed writes the same file)");
  common(synth);

  std::vector<std::string> files;
  bool full = false, locking = false;
  auto* insp = app.add_subcommand("inspect", "Validate files against the format and summarise");
  insp->add_option("files", files, "Dataset files")->required();
  insp->add_flag("--full", full, "Also read every image");
  insp->add_flag("--file-locking", locking, "Use HDF5 file locking");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? hpctrain::kExitOk : hpctrain::kExitBadInput;
  }
  if (quiet) opts.progress = nullptr;
  if (fashion) opts.class_names = ds::fashion_mnist_classes();

  try {
    if (insp->parsed()) {
      int failures = 0;
      for (const auto& f : files) {
        try {
          ds::inspect(f, full, locking, std::cout);
        } catch (const hpctrain::rt::DataError& e) {
          std::cout << f << ": INVALID: " << e.what() << "\n";
          ++failures;
        }
      }
      return failures == 0 ? hpctrain::kExitOk : hpctrain::kExitBadInput;
    }
    ds::ConvertSummary summary;
    if (idx->parsed()) summary = ds::convert_idx(images, labels, output, opts);
    if (cifar->parsed()) summary = ds::convert_cifar10(batches, output, opts);
    if (folder->parsed()) summary = ds::convert_image_folder(root, output, size, channels, opts);
    if (synth->parsed()) {
      summary = ds::convert_synthetic(samples, size, channels, classes, seed, output, opts);
    }
    ds::print_summary(std::cout, summary);
    return hpctrain::kExitOk;
  } catch (const hpctrain::rt::DataError& e) {
    std::cerr << "hpctrain-data: error: " << e.what() << "\n";
    return hpctrain::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "hpctrain-data: internal error: " << e.what() << "\n";
    return hpctrain::kExitFailure;
  }
}
