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

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "convert.hpp"
#include "version.hpp"

namespace ds = hpctrain::datasets;

namespace {

// Every option of every subcommand, as CLI11 fills them.
struct Args {
  ds::ConvertOptions opts;
  std::string output;
  bool quiet = false;
  std::string images, labels;  // idx
  bool fashion = false;
  std::vector<std::string> batches;  // cifar10
  std::string root;                  // folder
  int64_t size = 0, channels = 3;    // folder, synthetic
  ds::JpegFolderOptions jpeg;        // folder --jpeg
  bool use_jpeg = false;
  int64_t samples = 0, classes = 10;  // synthetic
  uint64_t seed = 0;
  std::vector<std::string> files;  // inspect
  bool full = false, locking = false;
};

// The subcommands, to ask which one was given.
struct Subcommands {
  CLI::App *idx, *cifar, *folder, *synth, *insp;
};

// The options every converter that writes one file shares.
void add_output_options(CLI::App* sub, Args& a) {
  sub->add_option("-o,--output", a.output, "Output HDF5 file")->required();
  sub->add_option("--chunk-images", a.opts.chunk_images, "Images per HDF5 chunk (default: auto)");
  sub->add_option("--class-names", a.opts.class_names, "Class names in label order")
      ->delimiter(',');
  sub->add_flag("-q,--quiet", a.quiet, "No progress bar");
}

CLI::App* add_idx(CLI::App& app, Args& a) {
  auto* idx = app.add_subcommand("idx", "MNIST / Fashion-MNIST IDX files (.gz or plain)");
  idx->add_option("--images", a.images, "IDX images file")->required();
  idx->add_option("--labels", a.labels, "IDX labels file")->required();
  idx->add_flag("--fashion", a.fashion, "Use the Fashion-MNIST class names");
  add_output_options(idx, a);
  return idx;
}

CLI::App* add_cifar10(CLI::App& app, Args& a) {
  auto* cifar = app.add_subcommand("cifar10", "CIFAR-10 binary batches");
  cifar->add_option("batches", a.batches, "data_batch_N.bin / test_batch.bin files")->required();
  add_output_options(cifar, a);
  return cifar;
}

CLI::App* add_folder(CLI::App& app, Args& a) {
  auto* folder = app.add_subcommand("folder", "An image folder tree root/class_name/*.jpg|png");
  folder->add_option("root", a.root, "Root directory")->required();
  folder->add_option("--size", a.size,
                     "Output side length (shorter side resized, center crop); pixel files");
  folder->add_option("--channels", a.channels, "1 (grey) or 3 (RGB)");
  add_output_options(folder, a);
  ds::JpegFolderOptions& jpeg = a.jpeg;
  folder->add_flag("--jpeg", a.use_jpeg,
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
  return folder;
}

CLI::App* add_synthetic(CLI::App& app, Args& a) {
  auto* synth = app.add_subcommand("synthetic", "Random images and labels (for benchmarks)");
  synth->add_option("--samples", a.samples, "Number of images")->required();
  synth->add_option("--size", a.size, "Side length")->required();
  synth->add_option("--channels", a.channels, "Channels (1..4)");
  synth->add_option("--classes", a.classes, "Number of classes");
  synth->add_option("--seed", a.seed, "Seed (the same seed writes the same file)");
  add_output_options(synth, a);
  return synth;
}

CLI::App* add_inspect(CLI::App& app, Args& a) {
  auto* insp = app.add_subcommand("inspect", "Validate files against the format and summarise");
  insp->add_option("files", a.files, "Dataset files")->required();
  insp->add_flag("--full", a.full, "Also read every image");
  insp->add_flag("--file-locking", a.locking, "Use HDF5 file locking");
  return insp;
}

// Every file is inspected; an invalid one is reported and makes the exit code kExitBadInput.
int inspect_files(const Args& a) {
  int failures = 0;
  for (const auto& f : a.files) {
    try {
      ds::inspect(f, a.full, a.locking, std::cout);
    } catch (const hpctrain::rt::DataError& e) {
      std::cout << f << ": INVALID: " << e.what() << "\n";
      ++failures;
    }
  }
  return failures == 0 ? hpctrain::kExitOk : hpctrain::kExitBadInput;
}

// Runs the converter the command line names and prints its summary.
int convert(Args& a, const Subcommands& sub) {
  ds::ConvertSummary summary;
  if (sub.idx->parsed()) summary = ds::convert_idx(a.images, a.labels, a.output, a.opts);
  if (sub.cifar->parsed()) summary = ds::convert_cifar10(a.batches, a.output, a.opts);
  if (sub.folder->parsed() && a.use_jpeg) {
    a.jpeg.root = a.root;
    a.jpeg.output = a.output;
    a.jpeg.class_names = a.opts.class_names;
    a.jpeg.progress = a.opts.progress;
    const ds::JpegFolderSummary s = ds::convert_jpeg_folder(a.jpeg);
    ds::print_summary(std::cout, s);
    return hpctrain::kExitOk;
  }
  if (sub.folder->parsed()) {
    if (a.size < 1) {
      std::cerr << "hpctrain-data: error: folder: --size is required (or --jpeg)\n";
      return hpctrain::kExitBadInput;
    }
    summary = ds::convert_image_folder(a.root, a.output, a.size, a.channels, a.opts);
  }
  if (sub.synth->parsed()) {
    summary =
        ds::convert_synthetic(a.samples, a.size, a.channels, a.classes, a.seed, a.output, a.opts);
  }
  ds::print_summary(std::cout, summary);
  return hpctrain::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Convert image datasets into the hpctrain HDF5 layout (docs/dataset-format.md)"};
  app.set_version_flag("--version", std::string("hpctrain-data ") + hpctrain::kVersion);
  app.require_subcommand(1);
  Args a;
  a.opts.progress = &std::cerr;
  const Subcommands sub{add_idx(app, a), add_cifar10(app, a), add_folder(app, a),
                        add_synthetic(app, a), add_inspect(app, a)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? hpctrain::kExitOk : hpctrain::kExitBadInput;
  }
  if (a.quiet) a.opts.progress = nullptr;
  if (a.fashion) a.opts.class_names = ds::fashion_mnist_classes();

  try {
    return sub.insp->parsed() ? inspect_files(a) : convert(a, sub);
  } catch (const hpctrain::rt::DataError& e) {
    std::cerr << "hpctrain-data: error: " << e.what() << "\n";
    return hpctrain::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "hpctrain-data: internal error: " << e.what() << "\n";
    return hpctrain::kExitFailure;
  }
}
