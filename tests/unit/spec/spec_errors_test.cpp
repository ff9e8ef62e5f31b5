// Every class of spec error: reported with file, line, column and key, all at once.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/test_util.hpp"

namespace hpctrain::spec {
namespace {

using test::minimal_spec;
using test::options_for;
using test::TempDir;
using test::write_text;

std::vector<Diagnostic> errors_of(const TempDir& dir, const std::string& text,
                                  std::vector<std::string> overrides = {},
                                  bool check_paths = false) {
  auto o = test::spec_in(dir, text, std::move(overrides));
  o.check_paths = check_paths;
  try {
    load(o);
  } catch (const SpecError& e) {
    return e.diagnostics();
  }
  return {};
}

const Diagnostic* find(const std::vector<Diagnostic>& all, const std::string& key) {
  for (const auto& d : all) {
    if (d.key == key) return &d;
  }
  return nullptr;
}

#define EXPECT_ERROR_AT(all, key, want_line, want_column, want_text)                              \
  do {                                                                                            \
    const Diagnostic* d_ = find(all, key);                                                        \
    ASSERT_NE(d_, nullptr) << "no error for " << key << "\n" << format_all(all);                  \
    EXPECT_EQ(d_->origin.line, want_line) << d_->format();                                        \
    EXPECT_EQ(d_->origin.column, want_column) << d_->format();                                    \
    EXPECT_NE((d_->message + " " + d_->hint).find(want_text), std::string::npos) << d_->format(); \
  } while (0)

TEST(SpecErrors, AllProblemsReportedAtOnceInFileOrder) {
  TempDir dir;
  const auto all = errors_of(dir,
                             "[job]\n"
                             "name = \"t\"\n"
                             "run_dir = \"/r\"\n"
                             "nodse = 2\n"               // 4: unknown, suggestion
                             "nodes = 0\n"               // 5: range
                             "tasks_per_node = \"2\"\n"  // 6: type
                             "[train]\n"
                             "precision = \"fp61\"\n"  // 8: choice
                             "lr = 0.1\n"              // 9: unknown, other table
                             "[data]\nsynthetic = true\n");
  ASSERT_EQ(all.size(), 5u) << format_all(all);
  EXPECT_ERROR_AT(all, "job.nodse", 4, 1, "did you mean \"job.nodes\"");
  EXPECT_ERROR_AT(all, "job.nodes", 5, 1, "between 1 and 100000 (got 0)");
  EXPECT_ERROR_AT(all, "job.tasks_per_node", 6, 1, "expected integer, got string");
  EXPECT_ERROR_AT(all, "train.precision", 8, 1, "did you mean \"fp16\"");
  EXPECT_ERROR_AT(all, "train.lr", 9, 1, "train.optimizer.lr");
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].origin.line, all[i].origin.line);
  // The formatted message names the file, line and column and shows the line with a caret.
  const std::string text = all[0].format();
  EXPECT_NE(text.find((dir / "spec.toml").string() + ":4:1: error: [job.nodse] unknown key"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    nodse = 2\n    ^\n"), std::string::npos) << text;
}

TEST(SpecErrors, KeyColumnIsFoundOnIndentedLines) {
  TempDir dir;
  const auto all = errors_of(dir, minimal_spec("[model]\n   archh = \"resnet18\"\n"));
  EXPECT_ERROR_AT(all, "model.archh", 7, 4, "model.arch");
}

TEST(SpecErrors, MissingRequiredKeys) {
  TempDir dir;
  const auto all = errors_of(dir, "[data]\nsynthetic = true\n");
  EXPECT_NE(find(all, "job.name"), nullptr);
  EXPECT_NE(find(all, "job.run_dir"), nullptr);
}

TEST(SpecErrors, TableWhereAValueIsExpectedAndViceVersa) {
  TempDir dir;
  auto all = errors_of(dir, "job = 3\n");
  EXPECT_NE(find(all, "job"), nullptr);
  all = errors_of(dir, minimal_spec("[train.epochs]\nx = 1\n"));
  EXPECT_ERROR_AT(all, "train.epochs", 6, 8, "expected integer, got table");
}

TEST(SpecErrors, ControlCharactersAreRefusedWithTheirPlace) {
  TempDir dir;
  for (const char* value : {"a\\nb", "a\\tb", "a\\u0000b", "a\\u001bb", "a\\u0085b"}) {
    const auto all =
        errors_of(dir, minimal_spec("[job.env]\nX = \"" + std::string(value) + "\"\n"));
    SCOPED_TRACE(value);
    EXPECT_ERROR_AT(all, "job.env.X", 7, 1, "control character");
  }
  const auto all = errors_of(dir, "[job]\nname = \"t\"\nrun_dir = \"/r\"\nqos = \"a\\nb\"\n");
  EXPECT_ERROR_AT(all, "job.qos", 4, 1, "control character");
}

TEST(SpecErrors, CharsetsGuardTheSbatchLines) {
  TempDir dir;
  const auto all =
      errors_of(dir,
                "[job]\nname = \"t;rm\"\nrun_dir = \"/r/has space\"\npartition = \"gpu$(x)\"\n"
                "modules = [\"ok/1\", \"bad mod\"]\nmem = \"lots\"\nconstraint = \"a100\\\"\"\n"
                "[data]\nsynthetic = true\n");
  EXPECT_ERROR_AT(all, "job.name", 2, 1, "not allowed");
  EXPECT_ERROR_AT(all, "job.run_dir", 3, 1, "no spaces");
  EXPECT_ERROR_AT(all, "job.partition", 4, 1, "not allowed");
  EXPECT_ERROR_AT(all, "job.modules", 5, 1, "not allowed");
  EXPECT_ERROR_AT(all, "job.mem", 6, 1, "K, M, G or T");
  EXPECT_ERROR_AT(all, "job.constraint", 7, 1, "not allowed");
}

TEST(SpecErrors, ReservedAndMalformedEnvironmentNames) {
  TempDir dir;
  const auto all = errors_of(
      dir,
      minimal_spec("[job.env]\nSLURM_NTASKS = \"1\"\nLD_PRELOAD = \"x\"\nBASH_ENV = \"x\"\n"
                   "\"9x\" = \"1\"\nPATH = \"/bin\"\nRANK = \"0\"\nNUM = 3\nOK_1 = \"fine\"\n"));
  for (const char* key : {"job.env.SLURM_NTASKS", "job.env.LD_PRELOAD", "job.env.BASH_ENV",
                          "job.env.PATH", "job.env.RANK"}) {
    ASSERT_NE(find(all, key), nullptr) << key;
    EXPECT_NE(find(all, key)->message.find("reserved"), std::string::npos);
  }
  EXPECT_NE(find(all, "job.env.9x"), nullptr);
  EXPECT_NE(find(all, "job.env.NUM"), nullptr);
  EXPECT_EQ(find(all, "job.env.OK_1"), nullptr);
  EXPECT_TRUE(is_reserved_env_name("SLURM_ANYTHING"));
  EXPECT_FALSE(is_reserved_env_name("NCCL_DEBUG"));
}

// The batch script exports job.env with bash: under a name bash treats as its own, a value was
// evaluated as arithmetic (RANDOM = "PIPESTATUS[$(cmd)]" ran cmd), refused (UID) or replaced
// before the worker saw it (_, SHLVL, LINENO). Found by render_hostile_tests.
TEST(SpecErrors, ShellVariablesAreReserved) {
  TempDir dir;
  const auto all = errors_of(
      dir, minimal_spec("[job.env]\nRANDOM = \"PIPESTATUS[$(touch PWNED)]\"\nOPTIND = \"1\"\n"
                        "UID = \"1\"\n_ = \"x\"\nSHLVL = \"3\"\nBASH_ARGV0 = \"x\"\n"
                        "RANDOM_SEED = \"1\"\nBASHFUL = \"1\"\n"));
  for (const char* key : {"job.env.RANDOM", "job.env.OPTIND", "job.env.UID", "job.env._",
                          "job.env.SHLVL", "job.env.BASH_ARGV0"}) {
    ASSERT_NE(find(all, key), nullptr) << key << "\n" << format_all(all);
    EXPECT_NE(find(all, key)->message.find("reserved: bash"), std::string::npos) << key;
  }
  EXPECT_EQ(find(all, "job.env.RANDOM_SEED"), nullptr);
  EXPECT_EQ(find(all, "job.env.BASHFUL"), nullptr);
  EXPECT_TRUE(is_reserved_env_name("SRANDOM"));
  EXPECT_FALSE(is_reserved_env_name("RANDOM_SEED"));
}

// A value read where a program takes its options: `module load -f` would be a flag, and so would
// an Apptainer image reference that starts with '-' (a word of its own after `apptainer exec`).
// pyxis takes the image as --container-image=IMAGE, one word: any first character is fine there.
TEST(SpecErrors, OptionLikeValuesAreRefusedWhereAProgramReadsOptions) {
  TempDir dir;
  const std::string job = "[job]\nname = \"t\"\nrun_dir = \"/r\"\nmodules = ";
  auto all = errors_of(dir, job + "[\"gcc/12\", \"-f\"]\n[data]\nsynthetic = true\n");
  EXPECT_ERROR_AT(all, "job.modules", 4, 1, "not starting with -");
  all = errors_of(dir, minimal_spec("[job.container]\nruntime = \"apptainer\"\n"
                                    "image = \"--bind=/:/x://y\"\n"));
  EXPECT_ERROR_AT(all, "job.container.image", 8, 1, "read it as an option");
  // A local image file is resolved to an absolute path; pyxis's option is one word.
  EXPECT_TRUE(errors_of(dir, job + "[\"gcc/12\", \"a-f\"]\n[data]\nsynthetic = true\n"
                                   "[job.container]\nruntime = \"apptainer\"\n"
                                   "image = \"-x.sif\"\n")
                  .empty());
  EXPECT_TRUE(errors_of(dir, minimal_spec("[job.container]\nruntime = \"pyxis\"\nimage = \"-x\"\n"))
                  .empty());
}

TEST(SpecErrors, ExtraSbatchIsValidated) {
  TempDir dir;
  const auto all = errors_of(dir, minimal_spec(),
                             {"job.extra_sbatch=[\"--time=5\", \"-N2\", \"--x=a b\", "
                              "\"--comment=$(id)\", \"--hint=nomultithread\"]"});
  // One diagnostic per bad option, each naming it; the good one passes.
  std::vector<std::string> messages;
  for (const auto& d : all) messages.push_back(d.message + " | " + d.hint);
  ASSERT_EQ(all.size(), 4u) << format_all(all);
  EXPECT_NE(messages[0].find("--time is set by hpctrain | use job.time"), std::string::npos);
  EXPECT_NE(messages[1].find("\"-N2\" is not a long sbatch option"), std::string::npos);
  EXPECT_NE(messages[2].find("\"--x=a b\""), std::string::npos);
  EXPECT_NE(messages[3].find("\"--comment=$(id)\""), std::string::npos);
}

// Slurm's everyday options: what sbatch would refuse is refused here, naming the key; the same
// options through extra_sbatch point at the key.
TEST(SpecErrors, SlurmEverydayOptionsAreChecked) {
  TempDir dir;
  auto all = errors_of(dir, minimal_spec(), {"job.dependency=afterok:123,afterany:5"});
  EXPECT_TRUE(all.empty()) << format_all(all);
  all = errors_of(dir, minimal_spec(), {"job.dependency=singleton"});
  EXPECT_TRUE(all.empty()) << format_all(all);
  all = errors_of(dir, minimal_spec(), {"job.dependency=afterok"});
  EXPECT_ERROR_AT(all, "job.dependency", 0, 0, "\"afterok\" is not a Slurm dependency");
  all = errors_of(dir, minimal_spec(), {"job.dependency=afterok:12,afterany:3?afterok:4"});
  EXPECT_ERROR_AT(all, "job.dependency", 0, 0, "mixes ','");
  all = errors_of(dir, minimal_spec(), {"job.dependency=after:abc"});
  EXPECT_ERROR_AT(all, "job.dependency", 0, 0, "\"after:abc\" is not a Slurm dependency");
  all = errors_of(dir, minimal_spec(), {"job.dependency=afterok:1;id"});
  EXPECT_NE(find(all, "job.dependency"), nullptr) << format_all(all);
  all = errors_of(dir, minimal_spec(), {"job.mail_type=[\"END\", \"DONE\"]"});
  EXPECT_ERROR_AT(all, "job.mail_type", 0, 0, "\"DONE\" is not a Slurm mail type");
  all = errors_of(dir, minimal_spec(), {"job.mail_user=a b@c"});
  EXPECT_NE(find(all, "job.mail_user"), nullptr) << format_all(all);
  all = errors_of(dir, minimal_spec(), {"job.nodelist=node[1-2] ;x"});
  EXPECT_NE(find(all, "job.nodelist"), nullptr) << format_all(all);
  all = errors_of(dir, minimal_spec(), {"job.begin=$(date)"});
  EXPECT_NE(find(all, "job.begin"), nullptr) << format_all(all);
  all = errors_of(dir, minimal_spec(),
                  {"job.extra_sbatch=[\"--reservation=maint\", \"--dependency=singleton\"]"});
  ASSERT_EQ(all.size(), 2u) << format_all(all);
  EXPECT_EQ(all[0].hint, "use job.reservation instead") << all[0].format();
  EXPECT_EQ(all[1].hint, "use job.dependency instead") << all[1].format();
}

TEST(SpecErrors, CrossFieldChecks) {
  TempDir dir;
  auto all = errors_of(dir, minimal_spec(), {"job.gpus_per_node=4", "job.tasks_per_node=2"});
  EXPECT_NE(find(all, "job.tasks_per_node"), nullptr);
  all = errors_of(dir, minimal_spec(), {"train.precision=fp16"});
  EXPECT_NE(find(all, "train.precision"), nullptr);
  all = errors_of(dir, minimal_spec(), {"job.time=5", "preemption.signal_lead_s=300"});
  EXPECT_NE(find(all, "preemption.signal_lead_s"), nullptr);
  all = errors_of(dir, "[job]\nname = \"t\"\nrun_dir = \"/r\"\n");
  EXPECT_NE(find(all, "data.train"), nullptr);
  all = errors_of(dir, minimal_spec(),
                  {"train.schedule.name=multistep", "train.schedule.milestones=[30, 20]"});
  EXPECT_NE(find(all, "train.schedule.milestones"), nullptr);
  all = errors_of(dir, minimal_spec(), {"train.optimizer.betas=[0.9]"});
  EXPECT_NE(find(all, "train.optimizer.betas"), nullptr);
  all = errors_of(dir, minimal_spec(), {"job.container.runtime=apptainer"});
  EXPECT_NE(find(all, "job.container.image"), nullptr);
  // Batch against world size: 4 nodes x 8 ranks x 64 > 1024 synthetic samples.
  all = errors_of(dir, minimal_spec(),
                  {"job.nodes=4", "job.tasks_per_node=8", "train.batch_size=64",
                   "data.synthetic_samples=1024"});
  EXPECT_NE(find(all, "train.batch_size"), nullptr);
  all = errors_of(dir, minimal_spec(), {"job.run_dir=/r/{user}"});
  EXPECT_NE(find(all, "job.run_dir"), nullptr);
  all = errors_of(dir, minimal_spec(), {"job.run_dir=/"});
  EXPECT_NE(find(all, "job.run_dir"), nullptr);
}

TEST(SpecErrors, PathsMustExistAtSubmitTime) {
  TempDir dir;
  write_text(dir / "data/a-1.h5", "x");
  auto all = errors_of(dir,
                       "[job]\nname = \"t\"\nrun_dir = \"/r\"\nworker = \"/nonexistent/w\"\n"
                       "[data]\ntrain = \"data/a-*.h5\"\nval = \"data/missing.h5\"\n",
                       {}, /*check_paths=*/true);
  EXPECT_EQ(find(all, "data.train"), nullptr) << format_all(all);
  EXPECT_ERROR_AT(all, "data.val", 7, 1, "no file matches");
  EXPECT_ERROR_AT(all, "job.worker", 4, 1, "not an executable");
}

TEST(SpecErrors, OverrideProblemsNameTheArgument) {
  TempDir dir;
  const auto all =
      errors_of(dir, minimal_spec(), {"train.epocks=3", "train.epochs=three", "noequals"});
  ASSERT_EQ(all.size(), 3u) << format_all(all);
  const Diagnostic* unknown = find(all, "train.epocks");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->origin.file, "--set");
  EXPECT_NE(unknown->format().find("--set train.epocks=3: error"), std::string::npos);
  EXPECT_NE(unknown->hint.find("train.epochs"), std::string::npos);
  EXPECT_NE(find(all, "train.epochs"), nullptr);
}

TEST(SpecErrors, ProfileProblems) {
  TempDir dir;
  auto all = errors_of(dir, minimal_spec(), {"job.profile=nosuchsite"});
  ASSERT_NE(find(all, "job.profile"), nullptr);
  EXPECT_NE(find(all, "job.profile")->hint.find("nosuchsite.toml"), std::string::npos);
  write_text(dir / "p/bad.toml", "[job]\nname = \"x\"\npartiton = \"gpu\"\n");
  write_text(dir / "spec.toml", minimal_spec());
  auto o = options_for(dir / "spec.toml");
  o.profile_dirs = {dir / "p"};
  o.profile = "bad";
  try {
    load(o);
    FAIL() << "expected errors";
  } catch (const SpecError& e) {
    all = e.diagnostics();
  }
  EXPECT_ERROR_AT(all, "job.name", 2, 1, "profile cannot set");
  EXPECT_ERROR_AT(all, "job.partiton", 3, 1, "job.partition");
  EXPECT_EQ(find(all, "job.partiton")->origin.file, (dir / "p/bad.toml").string());
}

TEST(SpecErrors, SweepProblems) {
  TempDir dir;
  auto all = errors_of(dir, minimal_spec("[sweep.params]\n\"job.nodes\" = [1, 2]\n"));
  EXPECT_NE(find(all, "sweep.params.\"job.nodes\""), nullptr) << format_all(all);
  all = errors_of(dir, minimal_spec("[sweep.params]\n\"train.lr\" = [1, 2]\n"));
  EXPECT_NE(find(all, "train.lr"), nullptr) << format_all(all);
  all = errors_of(dir, minimal_spec("[sweep]\nmode = \"zip\"\n[sweep.params]\n"
                                    "\"train.seed\" = [1, 2]\n\"train.epochs\" = [1]\n"));
  EXPECT_NE(find(all, "sweep.params"), nullptr);
  all = errors_of(dir, minimal_spec("[sweep.params]\n\"train.seed\" = []\n"));
  EXPECT_FALSE(all.empty());
  // A value of the wrong type names the task.
  all = errors_of(dir, minimal_spec("[sweep.params]\n\"train.epochs\" = [1, \"two\"]\n"));
  ASSERT_NE(find(all, "train.epochs"), nullptr);
  EXPECT_NE(find(all, "train.epochs")->message.find("array task 1"), std::string::npos);
  all = errors_of(dir, minimal_spec(
                           "[sweep.params]\n\"train.seed\" = " + std::string("[") +
                           [] {
                             std::string v;
                             for (int i = 0; i < 40; ++i) v += std::to_string(i) + ",";
                             return v;
                           }() +
                           "]\n\"train.epochs\" = " +
                           [] {
                             std::string v = "[";
                             for (int i = 1; i <= 30; ++i) v += std::to_string(i) + ",";
                             return v + "]";
                           }() +
                           "\n"));
  EXPECT_NE(find(all, "sweep.params"), nullptr) << "1200 tasks must be refused";
}

// Files that are not specs: one clear error naming the file, never a crash.
// TOML syntax errors say what is wrong in the user's words, at the place to fix, with how to
// write it; never toml11's internal function names.
TEST(SpecErrors, SyntaxErrorsInTheUsersWords) {
  TempDir dir;
  struct Case {
    std::string text;
    int line, column;
    std::string message, hint;
  };
  const std::vector<Case> cases = {
      {"[job\nname = \"x\"\n", 1, 5, "the table header [job has no closing ]", "[name]"},
      {"  [[sweep\n", 1, 10, "the table header [[sweep has no closing ]]", "[[name]]"},
      {"[job]]\n", 1, 6, "text after the table header", "line of its own"},
      {"a = [1, 2\n", 1, 10, "a list is not closed with ]", "[1, 2, 3]"},
      {"a = [1,\n2\nb = 3\n", 2, 2, "a list is not closed with ]", "[1, 2, 3]"},
      {"a = \"x\n", 1, 5, "a string is not closed", "between quotes"},
      {"a = 'x\n", 1, 5, "a string is not closed", "between quotes"},
      {"name = myrun\n", 1, 8, "`myrun` is not a value", "name = \"myrun\""},
      {"flag = tru\n", 1, 8, "`tru` is not a value", "true or false"},
      {"a == 1\n", 1, 1, "expected key = value", "one setting per line"},
      {"epochs\n", 1, 1, "`epochs` has no = value", "key = value"},
      {"a = 1 2\n", 1, 7, "more after the value", "quotes"},
      {"= 3\n", 1, 1, "a value without a key", "key = value"},
      {"a = 1\na = 2\n", 2, 1, "`a` is set twice", "keep one"},
      {"[job]\n[job]\n", 2, 1, "the table [job] is declared twice", "keep one"},
      {"a = {x = 1\n", 1, 11, "an inline table is not closed with }", "{key = value"},
      {"a = 01\n", 1, 5, "a number with a leading zero", "write 1"},
      {"a = 1.\n", 1, 5, "`1.` is not a number", "1.0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    write_text(dir / "syntax.toml", c.text);
    try {
      load(options_for(dir / "syntax.toml"));
      ADD_FAILURE() << "no error";
    } catch (const SpecError& e) {
      ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
      const Diagnostic& d = e.diagnostics()[0];
      EXPECT_EQ(d.message.rfind("not valid TOML: " + c.message, 0), 0u) << d.format();
      EXPECT_NE(d.hint.find(c.hint), std::string::npos) << d.format();
      EXPECT_EQ(d.origin.line, c.line) << d.format();
      EXPECT_EQ(d.origin.column, c.column) << d.format();
      EXPECT_EQ(d.format().find("toml::"), std::string::npos) << d.format();
    }
  }
}

// A --set value that does not parse gets a hint for its key's type, naming the key.
TEST(SpecErrors, OverrideHintsFitTheKeysType) {
  TempDir dir;
  const auto all =
      errors_of(dir, minimal_spec(),
                {"train.epochs=abc", "train.optimizer.lr=fast", "train.channels_last=yes"});
  ASSERT_EQ(all.size(), 3u) << format_all(all);
  const Diagnostic* epochs = find(all, "train.epochs");
  ASSERT_NE(epochs, nullptr) << format_all(all);
  EXPECT_NE(epochs->hint.find("whole number, e.g. --set train.epochs=10"), std::string::npos)
      << epochs->format();
  EXPECT_EQ(epochs->hint.find("list"), std::string::npos) << epochs->format();
  const Diagnostic* lr = find(all, "train.optimizer.lr");
  ASSERT_NE(lr, nullptr) << format_all(all);
  EXPECT_NE(lr->hint.find("a number, e.g. --set train.optimizer.lr=0.1"), std::string::npos)
      << lr->format();
  const Diagnostic* flag = find(all, "train.channels_last");
  ASSERT_NE(flag, nullptr) << format_all(all);
  EXPECT_NE(flag->hint.find("true or false"), std::string::npos) << flag->format();
}

TEST(SpecErrors, BadFiles) {
  TempDir dir;
  auto first_error = [&](const test::fs::path& file) -> Diagnostic {
    try {
      load(options_for(file));
    } catch (const SpecError& e) {
      EXPECT_EQ(e.diagnostics().size(), 1u) << e.what();
      return e.diagnostics().at(0);
    }
    ADD_FAILURE() << "no error for " << file;
    return {};
  };
  EXPECT_NE(first_error(dir / "missing.toml").message.find("no such file"), std::string::npos);
  EXPECT_NE(first_error(dir.path()).message.find("directory"), std::string::npos);
  write_text(dir / "garbage.toml", "[job\nname = \n");
  auto d = first_error(dir / "garbage.toml");
  EXPECT_NE(d.message.find("not valid TOML"), std::string::npos);
  EXPECT_EQ(d.origin.file, (dir / "garbage.toml").string());
  EXPECT_EQ(d.origin.line, 1);
  write_text(dir / "binary.toml", std::string("name = \"\xff\xfe\"\n", 11));
  EXPECT_NE(first_error(dir / "binary.toml").message.find("UTF-8"), std::string::npos);
  write_text(dir / "nul.toml", std::string("a = 1\n\0\n", 8));
  EXPECT_NE(first_error(dir / "nul.toml").message.find("control"), std::string::npos);
  write_text(dir / "big.toml", "# " + std::string(kMaxSpecBytes, 'x') + "\n");
  EXPECT_NE(first_error(dir / "big.toml").message.find("limited to"), std::string::npos);
  write_text(dir / "deep.toml", "a = " + std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(first_error(dir / "deep.toml").message.find("nested"), std::string::npos);
  write_text(dir / "deep2.toml", "a = " + std::string(50000, '{'));
  EXPECT_NE(first_error(dir / "deep2.toml").message.find("nested"), std::string::npos);
  // Brackets inside strings and comments do not count as nesting.
  write_text(dir / "strings.toml",
             minimal_spec("[job.env]\nA = \"" + std::string(100, '[') + "\"\n# " +
                          std::string(100, '{') + "\nB = '''\n" + std::string(100, '[') + "'''\n"));
  EXPECT_NO_THROW(load(options_for(dir / "strings.toml")));
  // A FIFO would block a plain open(); it is refused as not a regular file.
  ASSERT_EQ(::mkfifo((dir / "fifo.toml").c_str(), 0644), 0);
  EXPECT_NE(first_error(dir / "fifo.toml").message.find("not a regular file"), std::string::npos);
  if (::getuid() != 0) {
    write_text(dir / "unreadable.toml", minimal_spec());
    test::fs::permissions(dir / "unreadable.toml", test::fs::perms::none);
    EXPECT_NE(first_error(dir / "unreadable.toml").message.find("cannot"), std::string::npos);
  }
}

TEST(SpecErrors, TrackingTakesAnHttpUrlWithoutCredentials) {
  TempDir dir;
  auto uri_error = [&](const std::string& uri) {
    return errors_of(dir, minimal_spec("[tracking]\nmlflow_uri = \"" + uri + "\"\n"));
  };
  const auto no_scheme = uri_error("mlflow:5000");
  EXPECT_ERROR_AT(no_scheme, "tracking.mlflow_uri", 7, 1, "not an http");
  const auto no_host = uri_error("http://");
  EXPECT_ERROR_AT(no_host, "tracking.mlflow_uri", 7, 1, "not an http");
  const auto space = uri_error("http://host:5000/a b");
  EXPECT_ERROR_AT(space, "tracking.mlflow_uri", 7, 1, "%20");
  const auto credentials = uri_error("https://me:secret@host");
  EXPECT_ERROR_AT(credentials, "tracking.mlflow_uri", 7, 1, "MLFLOW_TRACKING_USERNAME");
  EXPECT_TRUE(uri_error("http://127.0.0.1:5000").empty());
  EXPECT_TRUE(uri_error("https://mlflow.example.org/prefix/").empty());
  const auto empty =
      errors_of(dir, minimal_spec("[tracking]\nmlflow_uri = \"http://h\"\nexperiment = \"\"\n"));
  EXPECT_ERROR_AT(empty, "tracking.experiment", 8, 1, "is empty");
}

}  // namespace
}  // namespace hpctrain::spec
