// hpctrain-data: converts datasets into the hpctrain HDF5 layout and validates files.
//   hpctrain-data idx --images X --labels Y -o out.h5 [--fashion | --class-names a,b,...]
//   hpctrain-data cifar10 data_batch_1.bin ... -o out.h5
//   hpctrain-data folder ROOT -o out.h5 --size 256 [--channels 3]
//   hpctrain-data folder ROOT -o PREFIX --jpeg [--max-side 500] [--quality 90] [--threads N]
//                 [--shards N | --shard-size K] [--val-labels FILE --classes-from TRAIN_ROOT]
//   hpctrain-data inspect FILE... [--full] [--file-locking]
// Exit codes: 0 ok, 1 an internal error, 2 bad input (a file it cannot convert, an invalid file
// for inspect) or a usage error.
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
  folder->add_option("--size", size,
                     "Output side length (shorter side resized, center crop); pixel files");
  folder->add_option("--channels", channels, "1 (grey) or 3 (RGB)");
  common(folder);
  ds::JpegFolderOptions jpeg;
  bool use_jpeg = false;
  folder->add_flag("--jpeg", use_jpeg,
                   "Encoded JPEG samples (format version 2), sharded: -o is the shards' prefix");
  folder->add_option("--max-side", jpeg.max_side,
                     "--jpeg: longer side of re-encoded images; larger JPEGs are re-encoded "
                     "(default 0: JPEGs kept as stored)");
  folder->add_option("--quality", jpeg.quality, "--jpeg: quality of re-encoded images (1-100)")
      ->default_val(90);
  folder->add_option("--threads", jpeg.threads, "--jpeg: threads (default: every core)");
  folder->add_option("--shards", jpeg.shards, "--jpeg: number of output files");
  folder->add_option("--shard-size", jpeg.shard_size,
                     "--jpeg: input images per output file (default 10000)");
  folder->add_option("--val-labels", jpeg.val_labels,
                     "--jpeg: ROOT is a flat folder; FILE has lines 'IMAGE CLASS'");
  folder->add_option("--classes-from", jpeg.classes_from,
                     "--jpeg --val-labels: the class list is this folder's sorted subfolders");

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
    if (folder->parsed() && use_jpeg) {
      jpeg.root = root;
      jpeg.output = output;
      jpeg.class_names = opts.class_names;
      jpeg.progress = opts.progress;
      const ds::JpegFolderSummary s = ds::convert_jpeg_folder(jpeg);
      ds::print_summary(std::cout, s);
      return hpctrain::kExitOk;
    }
    if (folder->parsed()) {
      if (size < 1) {
        std::cerr << "hpctrain-data: error: folder: --size is required (or --jpeg)\n";
        return hpctrain::kExitBadInput;
      }
      summary = ds::convert_image_folder(root, output, size, channels, opts);
    }
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
