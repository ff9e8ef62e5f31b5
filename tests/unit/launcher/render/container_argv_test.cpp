// Container specs (pyxis and Apptainer) with hostile images, mounts, worker paths and run
// directories. The rendered script runs under bash (and hands over to `hpctrain supervise`, which
// starts the step) with stand-in srun, apptainer, scontrol and
// squeue first on PATH, each recording its argv: every value must reach srun or apptainer byte for
// byte as one argument. What cannot be passed safely is refused by the checks `hpctrain check`
// runs (spec::load with path checks), with an error naming the key.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/process.hpp"
#include "render/render.hpp"
#include "spec/literal.hpp"
#include "support/test_util.hpp"

namespace hpctrain::render {
namespace {

using namespace std::chrono_literals;
using Argv = std::vector<std::string>;
using test::read_text;
using test::TempDir;
using test::write_text;
using test::fs::path;

// Stand-ins: srun records its argv and runs the program after its own --options, as srun does;
// apptainer records its argv, refuses a local image it cannot open from the job's working
// directory, and runs the command after the image; the worker records its argv.
constexpr const char* kSrun = R"(#!/bin/bash
printf '%s\0' "$@" > "$ARGV_DIR/srun"
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
exec "$@"
)";
constexpr const char* kApptainer = R"(#!/bin/bash
printf '%s\0' "$@" > "$ARGV_DIR/apptainer"
[[ $1 == exec ]] || { echo "apptainer: expected exec" >&2; exit 255; }
shift
while [[ $1 == --nv || $1 == --bind ]]; do [[ $1 == --bind ]] && shift; shift; done
if [[ $1 != *://* && ! -f $1 ]]; then echo "FATAL: could not open image $1" >&2; exit 255; fi
shift
exec "$@"
)";
// The worker records its argv and leaves what a worker leaves at the end of training in the run
// directory (the spec's folder): a committed checkpoint whose trainer.json says finished.
constexpr const char* kWorker = R"(#!/bin/bash
printf '%s\0' "$0" "$@" > "$ARGV_DIR/worker"
step=$(dirname -- "$2")/checkpoints/step-000000001
mkdir -p -- "$step" && echo '{"finished": true}' > "$step/trainer.json" && : > "$step/manifest.json"
)";
constexpr const char* kScontrol = R"(#!/bin/bash
printf '%s\0' "$@" >> "$ARGV_DIR/scontrol"
)";
constexpr const char* kSqueue = "#!/bin/bash\necho '4242|RUNNING|None|node[1-2]'\n";

void write_executable(const path& file, const std::string& text) {
  write_text(file, text);
  ::chmod(file.c_str(), 0755);
}

Argv split_nul(const std::string& s) {
  Argv out;
  size_t start = 0;
  for (size_t at; (at = s.find('\0', start)) != std::string::npos; start = at + 1) {
    out.push_back(s.substr(start, at - start));
  }
  return out;
}

std::string join(const Argv& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// One container spec: the values under test, as written in the spec file.
struct Values {
  std::string runtime, image;
  Argv mounts;
  std::string worker;   // relative to the spec file
  std::string run_dir;  // relative to the test directory (run_dir must be absolute)
};

Values values(std::string runtime, std::string image = "image.sif", Argv mounts = {},
              std::string worker = "worker", std::string run_dir = "run") {
  return {std::move(runtime), std::move(image), std::move(mounts), std::move(worker),
          std::move(run_dir)};
}

class Harness {
 public:
  Harness() {
    for (const auto& [name, text] : {std::pair{"srun", kSrun},
                                     {"apptainer", kApptainer},
                                     {"scontrol", kScontrol},
                                     {"squeue", kSqueue}}) {
      write_executable(dir_ / "bin" / name, text);
    }
    test::fs::create_directories(dir_ / "argv");
  }

  const path& dir() const { return dir_.path(); }
  path spec_dir() const { return dir_ / "specs"; }

  // Writes the spec (the worker stand-in and a local image under the given names beside it) and
  // loads it as `hpctrain check` does.
  spec::Resolved load(const Values& v) {
    test::fs::remove_all(spec_dir());
    write_executable(spec_dir() / v.worker, kWorker);
    if (v.image.find("://") == std::string::npos && !v.image.empty()) {
      write_text(spec_dir() / v.image, "not really an image");
    }
    std::string mounts;
    for (const auto& m : v.mounts) mounts += (mounts.empty() ? "" : ", ") + spec::literal_of(m);
    write_text(spec_dir() / "spec.toml",
               "[job]\nname = \"c\"\nrun_dir = " + spec::literal_of((dir() / v.run_dir).string()) +
                   "\nworker = " + spec::literal_of(v.worker) + "\n[job.container]\nruntime = " +
                   spec::literal_of(v.runtime) + "\nimage = " + spec::literal_of(v.image) +
                   "\nmounts = [" + mounts + "]\n[data]\nsynthetic = true\n");
    auto options = test::options_for(spec_dir() / "spec.toml");
    options.check_paths = true;
    return spec::load(options);
  }

  // Runs the rendered script as Slurm would start it: in the run directory, with the job's
  // variables, the stand-ins first on PATH. Returns the script's result.
  common::CommandResult run(const spec::Spec& s) {
    test::fs::remove_all(s.job.run_dir);
    for (const auto& e : test::fs::directory_iterator(dir() / "argv")) test::fs::remove(e.path());
    write_text(path(s.job.run_dir) / "spec.toml", spec::freeze(s));
    // The script hands over to `hpctrain supervise`, which runs srun: the one built beside.
    write_text(dir() / "job.sbatch",
               sbatch_script(s, 0, std::string(HPCTRAIN_BINARY_DIR) + "/bin/hpctrain"));
    return common::run_command(
        {"env", "-i", "-C", s.job.run_dir, "PATH=" + (dir() / "bin").string() + ":/usr/bin:/bin",
         "ARGV_DIR=" + (dir() / "argv").string(), "SLURM_JOB_ID=4242",
         "SLURM_JOB_NODELIST=node[1-2]", "SLURM_RESTART_COUNT=0", "bash",
         (dir() / "job.sbatch").string()},
        30s);
  }

  Argv argv_of(const std::string& program) const {
    return split_nul(read_text(dir() / "argv" / program));
  }

 private:
  TempDir dir_;
};

// Loads, renders and runs `v`; checks that srun (and apptainer) got the values as single arguments
// and the worker was started with the frozen spec.
void expect_byte_exact(Harness& h, const Values& v) {
  SCOPED_TRACE("runtime " + v.runtime + ", image [" + v.image + "], mounts [" +
               join(v.mounts, "] [") + "], worker [" + v.worker + "], run_dir [" + v.run_dir + "]");
  spec::Resolved r;
  try {
    r = h.load(v);
  } catch (const spec::SpecError& e) {
    FAIL() << "refused: " << spec::format_all(e.diagnostics());
  }
  const auto result = h.run(r.spec);
  ASSERT_EQ(result.exit_status, 0) << result.err << "\n" << read_text(h.dir() / "job.sbatch");

  const std::string worker = (h.spec_dir() / v.worker).string();
  const std::string spec_file = (h.dir() / v.run_dir / "spec.toml").string();
  const Argv worker_command = {worker, "--spec", spec_file};
  const Argv srun = h.argv_of("srun");
  // srun's own options come first, each one --option[=value] word; the command follows.
  size_t command = 0;
  while (command < srun.size() && srun[command].rfind("--", 0) == 0) ++command;
  const Argv options(srun.begin(), srun.begin() + static_cast<std::ptrdiff_t>(command));
  const Argv tail(srun.begin() + static_cast<std::ptrdiff_t>(command), srun.end());
  auto count = [&](const std::string& word) {
    return std::count(options.begin(), options.end(), word);
  };
  if (v.runtime == "pyxis") {
    EXPECT_EQ(count("--container-image=" + v.image), 1) << join(srun, " | ");
    if (!v.mounts.empty()) {
      EXPECT_EQ(count("--container-mounts=" + join(v.mounts, ",")), 1) << join(srun, " | ");
    }
    EXPECT_EQ(tail, worker_command) << join(srun, " | ");
  } else {
    // A local image is found from wherever the job runs: resolved against the spec file.
    const std::string image =
        v.image.find("://") == std::string::npos ? (h.spec_dir() / v.image).string() : v.image;
    Argv apptainer = {"exec"};
    for (const auto& m : v.mounts) apptainer.insert(apptainer.end(), {"--bind", m});
    apptainer.push_back(image);
    apptainer.insert(apptainer.end(), worker_command.begin(), worker_command.end());
    EXPECT_EQ(h.argv_of("apptainer"), apptainer);
    apptainer.insert(apptainer.begin(), "apptainer");
    EXPECT_EQ(tail, apptainer) << join(srun, " | ");
  }
  EXPECT_EQ(h.argv_of("worker"), worker_command);
  // The attempt was recorded as completed and nothing a value spelled was executed.
  EXPECT_NE(read_text(h.dir() / v.run_dir / "attempts.jsonl").find("\"reason\":\"completed\""),
            std::string::npos);
  for (const auto& e : test::fs::recursive_directory_iterator(h.dir())) {
    EXPECT_EQ(e.path().filename().string().rfind("PWNED", 0), std::string::npos) << e.path();
  }
}

// Loads `v` and expects it refused with an error on `key` whose text contains `words`.
void expect_refused(Harness& h, const Values& v, const std::string& key, const std::string& words) {
  SCOPED_TRACE("runtime " + v.runtime + ", key " + key);
  try {
    h.load(v);
    ADD_FAILURE() << "accepted";
  } catch (const spec::SpecError& e) {
    bool found = false;
    for (const auto& d : e.diagnostics()) {
      found =
          found || (d.key == key && (d.message + " " + d.hint).find(words) != std::string::npos);
    }
    EXPECT_TRUE(found) << spec::format_all(e.diagnostics());
  }
}

const Argv kHostile = {"it's",
                       "a b",
                       "$(touch PWNED_subst)",
                       "`touch PWNED_tick`",
                       "x;touch PWNED_semi",
                       "\"dq\" 'sq'",
                       "back\\slash",
                       "*",
                       "~root",
                       "-x.sif",
                       "#hash",
                       "a|b&c>d",
                       "$HOME ${HOME}",
                       " lead",
                       "trail ",
                       "!bang",
                       "héllo ✓",
                       "x' ; touch PWNED_q ; echo '"};

const Argv kRuntimes = {"pyxis", "apptainer"};

TEST(ContainerArgv, HostileImagesArriveAsOneArgument) {
  Harness h;
  for (const auto& runtime : kRuntimes) {
    for (const auto& image : kHostile) expect_byte_exact(h, values(runtime, image));
    expect_byte_exact(h, values(runtime, "docker://nvcr.io/nvidia/pytorch:24.01-py3"));
  }
  expect_byte_exact(h, values("pyxis", "nvcr.io#nvidia/pytorch:24.01-py3"));
}

TEST(ContainerArgv, HostileMountsArriveAsOneArgumentEach) {
  Harness h;
  Argv all;
  for (const auto& m : kHostile) all.push_back(m + ":/mnt/" + m);
  for (const auto& runtime : kRuntimes) {
    for (const auto& m : all) expect_byte_exact(h, values(runtime, "image.sif", {m}));
    expect_byte_exact(h, values(runtime, "image.sif", all));
    expect_byte_exact(h, values(runtime, "image.sif", {"/data:/data:ro", "-x", "/scratch"}));
  }
}

TEST(ContainerArgv, HostileWorkerPathsAndRunDirsArriveAsOneArgument) {
  Harness h;
  for (const auto& runtime : kRuntimes) {
    for (const auto& worker : kHostile)
      expect_byte_exact(h, values(runtime, "image.sif", {}, worker));
    // Every character run_dir allows (it also appears unquoted in #SBATCH lines).
    expect_byte_exact(h, values(runtime, "image.sif", {}, "worker", "run,a=b:c+d@e~f-g_h.i"));
  }
}

TEST(ContainerArgv, WhatCannotPassSafelyIsRefusedNamingTheKey) {
  Harness h;
  for (const auto& runtime : kRuntimes) {
    expect_refused(h, values(runtime, ""), "job.container.image", "needs an image");
    expect_refused(h, values(runtime, "line\nbreak"), "job.container.image", "control character");
    expect_refused(h, values(runtime, "tab\there"), "job.container.image", "control character");
    // pyxis takes one comma-separated list; a comma inside an item would split it.
    expect_refused(h, values(runtime, "image.sif", {"/a,/b"}), "job.container.mounts",
                   "without commas");
    expect_refused(h, values(runtime, "image.sif", {""}), "job.container.mounts", "without commas");
    expect_refused(h, values(runtime, "image.sif", {"/a\n/b"}), "job.container.mounts",
                   "control character");
    for (const std::string dir : {"a b", "it's", "$(touch PWNED)", "%j", "a\"b", "a;b", "*"}) {
      expect_refused(h, values(runtime, "image.sif", {}, "worker", dir), "job.run_dir",
                     "characters not allowed here");
    }
  }
  // An Apptainer image file that is not there (a URI is not checked).
  h.load(values("apptainer"));
  test::fs::remove(h.spec_dir() / "image.sif");
  auto options = test::options_for(h.spec_dir() / "spec.toml");
  options.check_paths = true;
  try {
    spec::load(options);
    ADD_FAILURE() << "a missing image file was accepted";
  } catch (const spec::SpecError& e) {
    EXPECT_NE(spec::format_all(e.diagnostics()).find("no such image file"), std::string::npos);
  }
}

}  // namespace
}  // namespace hpctrain::render
