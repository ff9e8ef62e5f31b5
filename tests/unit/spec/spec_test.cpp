// Spec resolution: defaults, profiles, --set overrides, sweeps, freezing, time limits.
#include <gtest/gtest.h>

#include <sstream>
#include <toml.hpp>

#include "spec/keys.hpp"
#include "spec/profile.hpp"
#include "spec/schema.hpp"
#include "support/test_util.hpp"

namespace hpctrain::spec {
namespace {

using test::minimal_spec;
using test::options_for;
using test::TempDir;
using test::write_text;

Resolved load_text(const TempDir& dir, const std::string& text,
                   std::vector<std::string> overrides = {}) {
  return load(test::spec_in(dir, text, std::move(overrides)));
}

TEST(Spec, DefaultsFillEveryDefaultedKey) {
  TempDir dir;
  const auto r = load_text(dir, minimal_spec());
  const Spec& s = r.spec;
  EXPECT_EQ(s.job.name, "t");
  EXPECT_EQ(s.job.run_dir, "/var/tmp/runs/t");
  EXPECT_EQ(s.job.nodes, 1);
  EXPECT_EQ(s.job.time, "01:00:00");
  EXPECT_EQ(s.job.time_seconds, 3600);
  EXPECT_EQ(s.job.worker, "/opt/hpctrain/bin/hpctrain-worker");
  EXPECT_EQ(s.train.precision, Precision::kFp32);
  EXPECT_EQ(s.train.optimizer.betas, (std::vector<double>{0.9, 0.999}));
  EXPECT_EQ(s.preemption.signal, Signal::kUsr2);
  EXPECT_EQ(s.checkpoint.keep_last, 3);
  EXPECT_FALSE(s.is_array());
  // The frozen spec holds every defaulted key.
  std::istringstream frozen(freeze(s));
  const auto doc = toml::parse(frozen, "frozen");
  for (const auto& f : fields()) {
    if (f.presence != Presence::kDefault) continue;
    const toml::value* v = &doc;
    std::string path(f.path);
    for (size_t start = 0;;) {
      const size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot - start);
      ASSERT_TRUE(v->is_table() && v->as_table().count(part)) << f.path;
      v = &v->as_table().at(part);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
}

TEST(Spec, TheMemberBindingCoversTheSchemaInOrder) {
  // keys.hpp binds each schema key to one member; building and freezing both walk it.
  Spec s;
  std::vector<std::string_view> bound;
  for_each_key(s, [&](std::string_view key, auto& /*member*/) { bound.push_back(key); });
  std::vector<std::string_view> schema;
  for (const auto& f : fields()) schema.push_back(f.path);
  EXPECT_EQ(bound, schema);
}

TEST(Spec, ChoiceNamesParseAndListOnce) {
  EXPECT_EQ(parse_choice<TailPolicy>("pad"), TailPolicy::kPad);
  EXPECT_EQ(parse_choice<TailPolicy>("drop"), TailPolicy::kDrop);
  EXPECT_EQ(parse_choice<TailPolicy>("keep"), std::nullopt);
  EXPECT_EQ(parse_choice<Augment>("random_resized_crop"), Augment::kRandomResizedCrop);
  EXPECT_EQ(parse_choice<Augment>("none"), Augment::kNone);
  EXPECT_EQ(parse_choice<Augment>("flip"), std::nullopt);
  EXPECT_EQ(parse_choice<Signal>("KILL"), std::nullopt);
  EXPECT_EQ(name_of(Arch::kResNet110), "resnet110");
  // The schema's allowed values are the enum's names.
  EXPECT_EQ(find_field("train.precision")->choices, "fp32|fp16|bf16");
  EXPECT_EQ(find_field("data.shard_tail")->choices, choices_of<TailPolicy>());
}

TEST(Spec, EveryDefaultPassesItsOwnChecks) {
  // A default outside its own range or choices would make every spec fail.
  TempDir dir;
  EXPECT_NO_THROW(load_text(dir, minimal_spec()));
}

TEST(Spec, RelativePathsResolveAgainstTheSpecFile) {
  TempDir dir;
  const auto r = load_text(dir,
                           "[job]\nname = \"t\"\nrun_dir = \"/r\"\nworker = \"bin/w\"\n"
                           "[data]\ntrain = [\"d/a-*.h5\", \"/abs/b.h5\"]\nval = \"v.h5\"\n");
  EXPECT_EQ(r.spec.job.worker, (dir.path() / "bin/w").string());
  EXPECT_EQ(r.spec.data.train,
            (std::vector<std::string>{(dir.path() / "d/a-*.h5").string(), "/abs/b.h5"}));
  EXPECT_EQ(r.spec.data.val, std::vector<std::string>{(dir.path() / "v.h5").string()});
}

TEST(Spec, OverridesWinAndParseByType) {
  TempDir dir;
  const auto r =
      load_text(dir, minimal_spec("[train]\nepochs = 3\n"),
                {"train.epochs=7", "job.name=run7", "job.modules=[\"a\", \"b/1.0\"]",
                 "train.optimizer.lr = 0.25", "job.env.FOO=bar baz", "job.exclusive=true"});
  EXPECT_EQ(r.spec.train.epochs, 7);
  EXPECT_EQ(r.spec.job.name, "run7");
  EXPECT_EQ(r.spec.job.run_dir, "/var/tmp/runs/run7");  // {name} expands after overrides
  EXPECT_EQ(r.spec.job.modules, (std::vector<std::string>{"a", "b/1.0"}));
  EXPECT_DOUBLE_EQ(r.spec.train.optimizer.lr, 0.25);
  EXPECT_EQ(r.spec.job.env.at("FOO"), "bar baz");
  EXPECT_TRUE(r.spec.job.exclusive);
}

TEST(Spec, StringOverrideKeepsTextThatLooksLikeANumber) {
  TempDir dir;
  const auto r = load_text(dir, minimal_spec(), {"job.account=12345", "job.env.N=007"});
  EXPECT_EQ(r.spec.job.account, "12345");
  EXPECT_EQ(r.spec.job.env.at("N"), "007");
}

TEST(Spec, ProfileSuppliesDefaultsTheSpecOverrides) {
  TempDir dir;
  write_text(dir / "profiles/site.toml",
             "[job]\npartition = \"gpu\"\naccount = \"site\"\nmodules = [\"cuda\"]\n"
             "extra_sbatch = [\"--hint=nomultithread\"]\nenv = { A = \"1\", B = \"2\" }\n");
  write_text(
      dir / "spec.toml",
      "[job]\nname = \"t\"\nrun_dir = \"/r\"\nprofile = \"site\"\naccount = \"mine\"\n"
      "extra_sbatch = [\"--gres-flags=enforce-binding\"]\nenv = { B = \"spec\", C = \"3\" }\n"
      "[data]\nsynthetic = true\n");
  auto o = options_for(dir / "spec.toml");
  o.profile_dirs = {dir / "nonexistent", dir / "profiles"};
  const auto r = load(o);
  EXPECT_EQ(r.spec.job.partition, "gpu");
  EXPECT_EQ(r.spec.job.account, "mine");
  EXPECT_EQ(r.spec.job.modules, std::vector<std::string>{"cuda"});
  EXPECT_EQ(r.spec.job.extra_sbatch,
            (std::vector<std::string>{"--hint=nomultithread", "--gres-flags=enforce-binding"}));
  EXPECT_EQ(r.spec.job.env,
            (std::map<std::string, std::string>{{"A", "1"}, {"B", "spec"}, {"C", "3"}}));
  // --profile wins over job.profile.
  write_text(dir / "profiles/other.toml", "[job]\npartition = \"cpu\"\n");
  o.profile = "other";
  EXPECT_EQ(load(o).spec.job.partition, "cpu");
  // The environment's default (HPCTRAIN_PROFILE) yields to job.profile and --profile, and
  // applies when neither names one.
  o.default_profile = "other";
  o.profile.reset();
  EXPECT_EQ(load(o).spec.job.partition, "gpu");
  write_text(dir / "plain.toml",
             "[job]\nname = \"t\"\nrun_dir = \"/r\"\n[data]\nsynthetic = true\n");
  auto plain = options_for(dir / "plain.toml");
  plain.profile_dirs = {dir / "profiles"};
  plain.default_profile = "other";
  const auto from_env = load(plain).spec;
  EXPECT_EQ(from_env.job.partition, "cpu");
  EXPECT_EQ(from_env.job.profile, "other");
  plain.default_profile = "missing";
  try {
    load(plain);
    ADD_FAILURE() << "no error for HPCTRAIN_PROFILE=missing";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("HPCTRAIN_PROFILE"), std::string::npos) << e.what();
  }
}

// hpctrain --host: a profile's login_host is for the machine a user submits from; the loader
// leaves it out of the spec, checked, and profile_login_host finds it.
TEST(Spec, ProfileLoginHostIsNoSpecKey) {
  TempDir dir;
  write_text(dir / "profiles/site.toml",
             "login_host = \"me@login.example.org\"\n[job]\npartition = \"gpu\"\n");
  auto o = test::spec_in(
      dir, "[job]\nname = \"t\"\nrun_dir = \"/r\"\nprofile = \"site\"\n[data]\nsynthetic = true\n");
  o.profile_dirs = {dir / "profiles"};
  EXPECT_EQ(load(o).spec.job.partition, "gpu");
  const auto found = profile_login_host("site", {dir / "none", dir / "profiles"});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->host, "me@login.example.org");
  EXPECT_EQ(found->file, (dir / "profiles/site.toml").string());
  EXPECT_FALSE(profile_login_host("missing", {dir / "profiles"}));
  write_text(dir / "profiles/plain.toml", "[job]\npartition = \"cpu\"\n");
  EXPECT_FALSE(profile_login_host("plain", {dir / "profiles"}));
  // A value ssh would take for an option, or a shell for syntax, is refused by both, with its
  // file, line and column; so is one that is no string.
  write_text(dir / "profiles/bad.toml", "login_host = \"-oProxyCommand=x\"\n");
  try {
    profile_login_host("bad", {dir / "profiles"});
    ADD_FAILURE() << "no error for login_host = \"-oProxyCommand=x\"";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:1:1: error: [login_host] \"-oProxyCommand=x\" "
                                         "is not a login host"),
              std::string::npos)
        << e.what();
  }
  o.profile = "bad";
  EXPECT_THROW(load(o), SpecError);
  write_text(dir / "profiles/bad.toml", "login_host = 7\n");
  EXPECT_THROW(profile_login_host("bad", {dir / "profiles"}), SpecError);
  for (const char* ok :
       {"login", "me@login-1.example.org", "10.0.0.1", "[::1]", "fe80::1%eth0", "cluster_alias"}) {
    EXPECT_TRUE(is_login_host(ok)) << ok;
  }
  for (const char* bad : {"", "-p", "a b", "a;b", "$(x)", "`x`", "a'b", "a\nb", "a|b", "a/b"}) {
    EXPECT_FALSE(is_login_host(bad)) << bad;
  }
}

// hpctrain --host checks a copy of the spec in a staging folder: its relative paths start in the
// remote working directory (--paths-relative-to), not beside the copy.
TEST(Spec, PathsRelativeToAnotherFolder) {
  TempDir dir;
  auto o = test::spec_in(dir,
                         "[job]\nname = \"t\"\nrun_dir = \"/r\"\nworker = \"bin/w\"\n"
                         "[data]\ntrain = [\"d/t.h5\"]\n");
  o.paths_relative_to = "/login/home/me/./";
  const auto s = load(o).spec;
  EXPECT_EQ(s.data.train, std::vector<std::string>{"/login/home/me/d/t.h5"});
  EXPECT_EQ(s.job.worker, "/login/home/me/bin/w");
  o.check_paths = true;
  try {
    load(o);
    ADD_FAILURE() << "no error for a missing data file";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("relative paths start in /login/home/me/./ "
                                         "(--paths-relative-to)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Spec, SourceTreeProfilesLoad) {
  TempDir dir;
  const auto r = load_text(dir, minimal_spec(), {"job.profile=local"});
  EXPECT_EQ(r.spec.job.partition, "debug");
}

TEST(Spec, TheFrozenStemOfACifarResNetLoadsAgain) {
  // A spec with model.stem left to its default freezes the stem the model has; the frozen spec
  // (which the worker reads) must pass the same checks.
  TempDir dir;
  const auto r = load_text(dir, minimal_spec("[model]\narch = \"resnet20\"\n"));
  EXPECT_EQ(r.spec.model.stem, Stem::kCifar);
  const std::string frozen = freeze(r.spec);
  EXPECT_NE(frozen.find("stem = \"cifar\""), std::string::npos) << frozen;
  TempDir other;
  write_text(other / "spec.toml", frozen);
  EXPECT_NO_THROW(load(options_for(other / "spec.toml")));
  // Asked for explicitly, a stem the architecture does not have is an error.
  EXPECT_THROW(load_text(dir, minimal_spec("[model]\narch = \"resnet20\"\nstem = \"imagenet\"\n")),
               SpecError);
  EXPECT_THROW(load_text(dir, minimal_spec("[model]\narch = \"alexnet\"\nstem = \"cifar\"\n")),
               SpecError);
  EXPECT_NO_THROW(load_text(dir, minimal_spec("[model]\narch = \"alexnet\"\n")));
  EXPECT_NO_THROW(load_text(dir, minimal_spec("[model]\narch = \"resnet18\"\nstem = \"cifar\"\n")));
}

TEST(Spec, FreezeIsCanonicalAndRoundTrips) {
  TempDir dir;
  const auto r = load_text(dir,
                           "[job]\nname = \"t\"\nrun_dir = \"/r/{name}\"\ntime = \"90\"\n"
                           "env = { Z = \"it's \\\"q\\\" \\\\ ✓\", A = \"$(x)\" }\n"
                           "[data]\ntrain = \"x.h5\"\n[train.optimizer]\nlr = 0.1\n"
                           "weight_decay = 5e-5\n");
  const std::string frozen = freeze(r.spec);
  EXPECT_NE(frozen.find("time = \"01:30:00\""), std::string::npos) << frozen;
  EXPECT_NE(frozen.find("lr = 0.1\n"), std::string::npos) << frozen;
  EXPECT_NE(frozen.find("weight_decay = 5e-05\n"), std::string::npos) << frozen;
  // Loading the frozen spec gives the same spec, and freezing that gives the same bytes.
  TempDir other;
  write_text(other / "spec.toml", frozen);
  const auto again = load(options_for(other / "spec.toml"));
  EXPECT_EQ(freeze(again.spec), frozen);
  EXPECT_EQ(again.spec.job.env, r.spec.job.env);
  EXPECT_EQ(again.spec.data.train, r.spec.data.train);
  // The same input twice gives the same bytes.
  EXPECT_EQ(freeze(load_text(dir, test::read_text(dir / "spec.toml")).spec), frozen);
}

TEST(Spec, SweepGridMakesEveryCombinationInItsOwnDirectory) {
  TempDir dir;
  const auto r = load_text(
      dir,
      minimal_spec("[sweep]\nmax_parallel = 2\n[sweep.params]\n"
                   "\"train.optimizer.lr\" = [0.1, 0.2, 0.4]\n\"train.batch_size\" = [16, 32]\n"));
  ASSERT_EQ(r.tasks.size(), 6u);
  std::set<std::pair<double, int64_t>> seen;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const auto& t = r.tasks[i];
    char dir_name[32];
    std::snprintf(dir_name, sizeof dir_name, "task-%03zu", i);
    EXPECT_EQ(t.job.run_dir, "/var/tmp/runs/t/" + std::string(dir_name));
    EXPECT_FALSE(t.is_array());
    EXPECT_EQ(freeze(t).find("[sweep.params]"), std::string::npos);
    seen.insert({t.train.optimizer.lr, t.train.batch_size});
  }
  EXPECT_EQ(seen.size(), 6u);
}

TEST(Spec, SweepZipPairsValues) {
  TempDir dir;
  const auto r = load_text(
      dir, minimal_spec("[sweep]\nmode = \"zip\"\n[sweep.params]\n"
                        "\"train.optimizer.lr\" = [0.1, 0.2]\n\"train.seed\" = [1, 2]\n"));
  ASSERT_EQ(r.tasks.size(), 2u);
  EXPECT_DOUBLE_EQ(r.tasks[0].train.optimizer.lr, 0.1);
  EXPECT_EQ(r.tasks[0].train.seed, 1);
  EXPECT_DOUBLE_EQ(r.tasks[1].train.optimizer.lr, 0.2);
  EXPECT_EQ(r.tasks[1].train.seed, 2);
}

struct TimeCase {
  const char* text;
  int64_t seconds;  // -1: invalid
};

TEST(Spec, SlurmTimeFormats) {
  const TimeCase cases[] = {{"90", 5400},     {"5:30", 330},      {"1:00:00", 3600},
                            {"2-12", 216000}, {"1-02:03", 93780}, {"1-02:03:04", 93784},
                            {"0", 0},         {"", -1},           {"1:60", -1},
                            {"1:00:60", -1},  {"1-24", -1},       {"-5", -1},
                            {"1:2:3:4", -1},  {"12h", -1},        {"UNLIMITED", -1},
                            {"1- 2", -1},     {"99999999999", -1}};
  for (const auto& c : cases) {
    const auto got = parse_slurm_time(c.text);
    if (c.seconds < 0) {
      EXPECT_FALSE(got) << c.text;
    } else {
      ASSERT_TRUE(got) << c.text;
      EXPECT_EQ(*got, c.seconds) << c.text;
    }
  }
  EXPECT_EQ(format_slurm_time(93784), "1-02:03:04");
  EXPECT_EQ(format_slurm_time(330), "00:05:30");
}

TEST(Spec, SuggestionsFindCloseKeys) {
  EXPECT_EQ(suggest_key("job.nodse"), "job.nodes");
  EXPECT_EQ(suggest_key("train.lr"), "train.optimizer.lr");
  EXPECT_EQ(suggest_key("jobb"), "job");
  EXPECT_EQ(suggest_key("job.partiton"), "job.partition");
  EXPECT_EQ(suggest_key("completely.unrelated.thing"), "");
}

TEST(Spec, EveryKeyIsDocumented) {
  // docs/job-spec.md carries the table `hpctrain keys --markdown` prints; every key must be there.
  const std::string doc = test::read_text(test::source_dir() / "docs" / "job-spec.md");
  for (const auto& f : fields()) {
    EXPECT_NE(doc.find("`" + std::string(f.path) + "`"), std::string::npos) << f.path;
  }
}

}  // namespace
}  // namespace hpctrain::spec
