// The sbatch renderer: goldens, #SBATCH options as a set, bash syntax, and quoting that no spec
// value can escape.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/process.hpp"
#include "render/render.hpp"
#include "spec/literal.hpp"
#include "supervisor/decide.hpp"
#include "support/test_util.hpp"

namespace hpctrain::render {
namespace {

using namespace std::chrono_literals;
using test::options_for;
using test::read_text;
using test::source_dir;
using test::TempDir;
using test::write_text;

spec::Resolved load_config(const std::string& name, std::vector<std::string> overrides = {}) {
  auto o = options_for(source_dir() / "configs" / name);
  o.overrides = std::move(overrides);
  return spec::load(o);
}

common::CommandResult bash(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"bash"};
  argv.insert(argv.end(), args.begin(), args.end());
  return common::run_command(argv, 30s);
}

// Goldens: tests/unit/launcher/golden/NAME.sbatch. HPCTRAIN_UPDATE_GOLDENS=1 rewrites them.
void expect_golden(const std::string& golden, const std::string& script) {
  const auto path = source_dir() / "tests" / "unit" / "launcher" / "golden" / golden;
  if (std::getenv("HPCTRAIN_UPDATE_GOLDENS")) write_text(path, script);
  EXPECT_EQ(read_text(path), script)
      << "golden " << path << " differs; HPCTRAIN_UPDATE_GOLDENS=1 rewrites it";
  const auto r = bash({"-n", path.string()});
  EXPECT_EQ(r.exit_status, 0) << "bash -n " << path << ": " << r.err;
}

TEST(Render, GoldenScripts) {
  const auto smoke = load_config("smoke-cpu.toml", {"job.profile=local"});
  expect_golden("smoke-cpu.sbatch", sbatch_script(smoke.spec));
  const auto imagenet = load_config("resnet50-imagenet.toml");
  expect_golden("resnet50-imagenet.sbatch", sbatch_script(imagenet.spec));
  TempDir dir;
  write_text(
      dir / "sweep.toml",
      "[job]\nname = \"sweep\"\nrun_dir = \"/var/tmp/runs/{name}\"\n"
      "container = { runtime = \"apptainer\", image = \"/images/train.sif\", "
      "mounts = [\"/scratch:/scratch\", \"/data\"] }\n"
      "modules = [\"gcc/12\"]\n[data]\nsynthetic = true\n[preemption]\nenabled = false\n"
      "[sweep]\nmax_parallel = 2\n[sweep.params]\n\"train.optimizer.lr\" = [0.1, 0.2, 0.4]\n");
  const auto sweep = spec::load(options_for(dir / "sweep.toml"));
  ASSERT_EQ(sweep.tasks.size(), 3u);
  expect_golden("sweep-apptainer.sbatch", sbatch_script(sweep.spec, sweep.tasks.size()));
}

TEST(Render, Deterministic) {
  const auto a = load_config("resnet50-imagenet.toml");
  const auto b = load_config("resnet50-imagenet.toml");
  EXPECT_EQ(sbatch_script(a.spec), sbatch_script(b.spec));
}

// As ReFrame does: compare the #SBATCH options as a set, independent of their order.
TEST(Render, SbatchOptionsAsASet) {
  const auto r = load_config("resnet50-imagenet.toml");
  const auto options = sbatch_options(r.spec);
  const std::set<std::string> got(options.begin(), options.end());
  const std::string rd = "/lustre/proj123/runs/resnet50-imagenet";
  const std::set<std::string> want = {"--job-name=resnet50-imagenet",
                                      "--account=proj123",
                                      "--partition=gpu",
                                      "--qos=normal",
                                      "--nodes=4",
                                      "--ntasks-per-node=4",
                                      "--cpus-per-task=16",
                                      "--gpus-per-node=4",
                                      "--mem=0",
                                      "--time=12:00:00",
                                      "--constraint=a100",
                                      "--exclusive",
                                      "--chdir=" + rd,
                                      "--output=" + rd + "/logs/slurm-%j.out",
                                      "--error=" + rd + "/logs/slurm-%j.err",
                                      "--open-mode=append",
                                      "--requeue",
                                      "--signal=USR2@300",
                                      "--hint=nomultithread"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(options.size(), got.size()) << "duplicate options";
  // All #SBATCH lines come before the first command: sbatch stops reading at it.
  const std::string script = sbatch_script(r.spec);
  const auto last_sbatch = script.rfind("#SBATCH ");
  const auto first_command = script.find("\nset -uo pipefail");
  EXPECT_LT(last_sbatch, first_command);
}

// Slurm's everyday options are spec keys, each one #SBATCH line as sbatch spells it.
TEST(Render, SlurmEverydayOptions) {
  const auto r = load_config(
      "smoke-cpu.toml",
      {"job.reservation=maint", "job.nodelist=node[01-02]", "job.exclude=node07,gpu[1-2]",
       "job.begin=now+1hour", "job.dependency=afterok:123:124?afterany:99_3",
       "job.mail_type=[\"END\", \"FAIL\"]", "job.mail_user=me@example.org"});
  const auto options = sbatch_options(r.spec);
  const std::set<std::string> got(options.begin(), options.end());
  for (const char* want :
       {"--reservation=maint", "--nodelist=node[01-02]", "--exclude=node07,gpu[1-2]",
        "--begin=now+1hour", "--dependency=afterok:123:124?afterany:99_3", "--mail-type=END,FAIL",
        "--mail-user=me@example.org"}) {
    EXPECT_TRUE(got.count(want)) << want;
  }
  const std::string script = sbatch_script(r.spec);
  EXPECT_NE(script.find("#SBATCH --dependency=afterok:123:124?afterany:99_3\n"), std::string::npos);
  // None by default.
  const auto plain = sbatch_options(load_config("smoke-cpu.toml").spec);
  for (const auto& o : plain) {
    for (const char* key : {"--reservation", "--nodelist", "--exclude", "--begin", "--dependency",
                            "--mail-type", "--mail-user"}) {
      EXPECT_NE(o.rfind(key, 0), 0u) << o;
    }
  }
}

TEST(Render, PreemptionOffMeansNoRequeueAndNoSignal) {
  const auto r = load_config("smoke-cpu.toml", {"preemption.enabled=false"});
  const auto options = sbatch_options(r.spec);
  const std::set<std::string> got(options.begin(), options.end());
  EXPECT_TRUE(got.count("--no-requeue"));
  for (const auto& o : options) EXPECT_EQ(o.rfind("--signal", 0), std::string::npos) << o;
  const auto arr =
      load_config("smoke-cpu.toml", {"preemption.signal=URG", "preemption.signal_lead_s=90"});
  const auto o2 = sbatch_options(arr.spec);
  EXPECT_TRUE(std::set<std::string>(o2.begin(), o2.end()).count("--signal=URG@90"));
}

// Spares are part of the allocation; --no-kill only where the step supervisor recovers in it.
TEST(Render, SpareNodesAndNoKill) {
  auto options_of = [](std::vector<std::string> overrides) {
    const auto r = load_config("smoke-cpu.toml", std::move(overrides));
    const auto o = sbatch_options(r.spec);
    // The recovery knobs reach the step supervisor the script hands over to through the spec.
    return std::make_pair(std::set<std::string>(o.begin(), o.end()),
                          supervisor::knobs_from_spec(r.spec));
  };
  const auto [plain, plain_knobs] = options_of({"job.nodes=3"});
  EXPECT_TRUE(plain.count("--nodes=3"));
  EXPECT_FALSE(plain.count("--no-kill"));
  EXPECT_EQ(plain_knobs.policy, spec::OnNodeLoss::kRequeue);
  const auto [spare, spare_knobs] = options_of({"job.nodes=3", "resilience.spare_nodes=1"});
  EXPECT_TRUE(spare.count("--nodes=4"));
  EXPECT_TRUE(spare.count("--no-kill"));
  EXPECT_EQ(spare_knobs.train_nodes, 3);
  EXPECT_EQ(spare_knobs.policy, spec::OnNodeLoss::kReplace);
  const auto [shrink, shrink_knobs] =
      options_of({"job.nodes=3", "resilience.on_node_loss=shrink", "resilience.max_node_losses=1",
                  "resilience.heartbeat_timeout_s=7"});
  EXPECT_TRUE(shrink.count("--nodes=3"));
  EXPECT_TRUE(shrink.count("--no-kill"));
  EXPECT_EQ(shrink_knobs.policy, spec::OnNodeLoss::kShrink);
  EXPECT_EQ(shrink_knobs.max_node_losses, 1);
  EXPECT_EQ(shrink_knobs.heartbeat_timeout_s, 7);
}

// The step's srun command: the supervisor's node choice as --nodelist, --overlap for a step that
// follows a lost one, the worker with the frozen spec last.
TEST(Render, SrunArgvOfAStep) {
  const auto r = load_config("smoke-cpu.toml", {"job.nodes=2", "job.srun_mpi=pmix"});
  const auto first = srun_argv(r.spec, "/runs/a/spec.toml", {2, "", false});
  const std::vector<std::string> want = {
      "srun",
      "--kill-on-bad-exit=1",
      "--mpi=pmix",
      "--nodes=2",
      "--ntasks=" + std::to_string(2 * r.spec.job.tasks_per_node),
      "--ntasks-per-node=" + std::to_string(r.spec.job.tasks_per_node),
      "--cpus-per-task=" + std::to_string(r.spec.job.cpus_per_task),
      r.spec.job.worker,
      "--spec",
      "/runs/a/spec.toml"};
  EXPECT_EQ(first, want);
  const auto next = srun_argv(r.spec, "/runs/a/spec.toml", {1, "n3", true});
  EXPECT_EQ(std::count(next.begin(), next.end(), "--nodelist=n3"), 1);
  EXPECT_EQ(std::count(next.begin(), next.end(), "--overlap"), 1);
  EXPECT_EQ(std::count(next.begin(), next.end(), "--nodes=1"), 1);
}

TEST(Render, ShellQuoteRoundTripsArbitraryBytes) {
  std::mt19937 rng(7);
  std::vector<std::string> values = {"",   "'", "''",           "a'b", "\\", "$(id)", "`id`",
                                     "\"", "!", "\x01\x7f\xff", "*",   "~",  "-n",    "\n"};
  for (int i = 0; i < 50; ++i) {
    std::string v(rng() % 40, '\0');
    for (auto& c : v) c = static_cast<char>(1 + rng() % 255);  // any byte but NUL
    values.push_back(v);
  }
  TempDir dir;
  std::string script = "cd " + shell_quote(dir.path().string()) + " || exit 9\n";
  for (const auto& v : values) script += "printf '%s\\0' " + shell_quote(v) + "\n";
  write_text(dir / "q.sh", script);
  const auto r = bash({(dir / "q.sh").string()});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  std::vector<std::string> got;
  size_t start = 0;
  for (size_t i = 0; i < r.out.size(); ++i) {
    if (r.out[i] == '\0') {
      got.push_back(r.out.substr(start, i - start));
      start = i + 1;
    }
  }
  EXPECT_EQ(got, values);
}

// The issue's safety test: hostile values go through a real spec file, the rendered script's
// export section runs under bash, nothing executes and every value comes back byte for byte.
TEST(Render, HostileEnvironmentValuesCannotInjectCode) {
  TempDir dir;
  const std::vector<std::string> values = {
      "it's",
      "\"double\" 'single'",
      "$(touch PWNED_subst)",
      "`touch PWNED_backtick`",
      "a; touch PWNED_semicolon",
      "x' ; touch PWNED_quote ; echo '",
      "# not a comment",
      "$HOME ${HOME} $((1+1)) $$",
      "back\\slash \\\\n",
      "non-ASCII: héllo ✓ 日本語 🚀",
      "| touch PWNED_pipe & touch PWNED_bg",
      "> PWNED_redirect",
      "*",
      "~root",
      "-e \\x41",
      "",
      " leading and trailing ",
  };
  std::string env;
  for (size_t i = 0; i < values.size(); ++i) {
    env += "V" + std::to_string(i) + " = " + spec::literal_of(values[i]) + "\n";
  }
  write_text(dir / "spec.toml", test::minimal_spec("[job.env]\n" + env));
  const auto r = spec::load(options_for(dir / "spec.toml"));
  const std::string script = sbatch_script(r.spec);
  const auto begin = script.find("# >>> environment\n");
  const auto end = script.find("# <<< environment\n");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::string section = script.substr(begin, end - begin);
  std::string check = "set -u\ncd " + shell_quote(dir.path().string()) + " || exit 9\n" + section;
  for (size_t i = 0; i < values.size(); ++i)
    check += "printf '%s\\0' \"$V" + std::to_string(i) + "\"\n";
  write_text(dir / "check.sh", check);
  const auto out = bash({(dir / "check.sh").string()});
  ASSERT_EQ(out.exit_status, 0) << out.err;
  std::vector<std::string> got;
  size_t start = 0;
  for (size_t i = 0; i < out.out.size(); ++i) {
    if (out.out[i] == '\0') {
      got.push_back(out.out.substr(start, i - start));
      start = i + 1;
    }
  }
  EXPECT_EQ(got, values);
  for (const auto& entry : test::fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find("PWNED"), std::string::npos)
        << "code ran: " << entry.path();
  }
  // The whole script is valid bash too.
  write_text(dir / "job.sbatch", script);
  EXPECT_EQ(bash({"-n", (dir / "job.sbatch").string()}).exit_status, 0);
}

TEST(Render, TemplatePlaceholdersMustAllBeFilled) {
  EXPECT_EQ(fill_template("a @X@ b @Y@", {{"X", "1"}, {"Y", "2"}}), "a 1 b 2");
  EXPECT_EQ(fill_template("mail me@host or --signal=USR2@300", {}),
            "mail me@host or --signal=USR2@300");
  EXPECT_THROW(fill_template("a @MISSING@", {{"X", "1"}}), std::logic_error);
  // Values are not scanned again: a spec value with @NAME@ in it stays literal.
  EXPECT_EQ(fill_template("@X@", {{"X", "@Y@"}, {"Y", "no"}}), "@Y@");
}

TEST(Render, ScriptRefusesToRunOutsideSlurm) {
  const auto r = load_config("smoke-cpu.toml");
  TempDir dir;
  write_text(dir / "job.sbatch", sbatch_script(r.spec));
  const auto out = common::run_command(
      {"env", "-u", "SLURM_JOB_ID", "bash", (dir / "job.sbatch").string()}, 30s);
  EXPECT_EQ(out.exit_status, 2);
  EXPECT_NE(out.err.find("only as a Slurm batch job"), std::string::npos) << out.err;
}

}  // namespace
}  // namespace hpctrain::render
