// The renderer under random hostile specs (issue 44): thousands of generated specs
// (hostile_specs.hpp) whose free-text values mix quotes, $(...), backticks, ';', globs, unicode
// and long text. Each accepted one is loaded from its file, frozen and loaded back, rendered,
// checked with `bash -n`, and run by bash as Slurm would start it, with recording stand-ins for
// `module` and `hpctrain` (argv_recorder.cpp) and a PATH holding nothing else but `date` and
// `pwned`, the program hostile values try to run. Every value must arrive as exactly the argument
// or variable it was, and nothing else may run or print. srun's argv (the step supervisor's,
// render::srun_argv) is checked for every spec, and every 25th also runs through the real
// `hpctrain supervise` with a recording srun. Each refused spec must be refused with an error
// naming its key and line, and `hpctrain render` must print no script for it.
//
// Seeded: HPCTRAIN_HOSTILE_SEED (default 44) and HPCTRAIN_HOSTILE_SPECS (default 1200, 300 under
// the sanitizers; a quarter as many refused specs);
// HPCTRAIN_HOSTILE_CASE=I runs case I alone. A failing case is printed as a spec file and saved
// in BUILD/tests/artifacts/ for `hpctrain render`.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <regex>
#include <set>
#include <sstream>

#include "common/exit_codes.hpp"
#include "common/process.hpp"
#include "hostile_specs.hpp"
#include "render/render.hpp"
#include "spec/keys.hpp"
#include "support/test_util.hpp"

namespace hpctrain::render {
namespace {

using namespace std::chrono_literals;
using hostile::Case;
using hostile::Value;
using Strings = std::vector<std::string>;
using test::read_text;
using test::write_text;
using test::fs::path;

// HPCTRAIN_HOSTILE_DEFAULT_SPECS: fewer under the sanitizers, which look for memory errors rather
// than values out of place, and run the spec loader several times slower.
struct Settings {
  uint64_t seed = 44;
  size_t specs = HPCTRAIN_HOSTILE_DEFAULT_SPECS;
  std::optional<size_t> only;
};

Settings settings() {
  Settings s;
  if (const char* v = std::getenv("HPCTRAIN_HOSTILE_SEED")) s.seed = std::stoull(v);
  if (const char* v = std::getenv("HPCTRAIN_HOSTILE_SPECS")) s.specs = std::stoull(v);
  if (const char* v = std::getenv("HPCTRAIN_HOSTILE_CASE")) s.only = std::stoull(v);
  return s;
}

// The cases to run: all of them, or the one asked for.
std::vector<size_t> case_indices(const Settings& s, size_t count) {
  if (s.only) return {*s.only};
  std::vector<size_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = i;
  return out;
}

// What went wrong in one case, reported with the case's spec file once it is done.
class Findings {
 public:
  void add(const std::string& what) { list_.push_back(what); }
  bool empty() const { return list_.empty(); }
  const std::string& first() const { return list_.front(); }
  std::string text() const {
    std::string out;
    for (const auto& f : list_) out += "  - " + f + "\n";
    return out;
  }

 private:
  std::vector<std::string> list_;
};

// Prints a failing case: what failed, and its spec file, saved for `hpctrain render` as
// BUILD/tests/artifacts/KIND-SEED-CASE.toml.
void report(const Case& c, const char* kind, const Findings& findings, size_t& reported) {
  if (findings.empty()) return;
  if (++reported > 3) {
    ADD_FAILURE() << "hostile spec case " << c.index << " (seed " << c.seed
                  << ") failed too: " << findings.first().substr(0, 200);
    return;
  }
  const path saved =
      path(HPCTRAIN_BINARY_DIR) / "tests" / "artifacts" /
      (kind + ("-" + std::to_string(c.seed)) + "-" + std::to_string(c.index) + ".toml");
  write_text(saved, c.toml());
  ADD_FAILURE() << "hostile spec case " << c.index << " (seed " << c.seed << ") failed:\n"
                << findings.text() << "Its spec, saved as " << saved.string()
                << " (`hpctrain render` it; HPCTRAIN_HOSTILE_SEED=" << c.seed
                << " HPCTRAIN_HOSTILE_CASE=" << c.index << " reruns it alone):\n"
                << c.toml();
}

std::string shown(const std::string& s) {
  return s.size() > 300
             ? hostile::toml_text(s.substr(0, 300)) + "... (" + std::to_string(s.size()) + " bytes)"
             : hostile::toml_text(s);
}
std::string shown(const Strings& v) {
  std::string out = "[";
  for (const auto& s : v) out += (out.size() > 1 ? ", " : "") + shown(s);
  return out + "]";
}

// ---- values as the spec holds them -------------------------------------------------------

// Every text-valued key of a spec, by key.
using Flat = std::map<std::string, Value>;
Flat flatten(const spec::Spec& s) {
  Flat out;
  spec::for_each_key(s, [&](std::string_view key, const auto& member) {
    using T = std::decay_t<decltype(member)>;
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, Strings> ||
                  std::is_same_v<T, std::map<std::string, std::string>>) {
      out[std::string(key)] = member;
    } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
      if (member) out[std::string(key)] = *member;
    }
  });
  return out;
}

std::string resolved(const path& spec_dir, const std::string& p) {
  return p.rfind('/', 0) == 0 ? p : (spec_dir / p).string();
}

std::string expanded_run_dir(const Case& c) {
  std::string dir = std::get<std::string>(c.find("job.run_dir")->value);
  const std::string name = std::get<std::string>(c.find("job.name")->value);
  for (size_t at; (at = dir.find("{name}")) != std::string::npos;) dir.replace(at, 6, name);
  return dir;
}

// The value a key written as `e` must have once loaded: paths resolved against the spec's folder,
// a single path a list of one, {name} expanded.
Value expected_value(const Case& c, const hostile::Entry& e, const path& spec_dir) {
  if (e.key == "job.run_dir") return expanded_run_dir(c);
  if (!hostile::is_resolved_path(c, e.key)) return e.value;
  if (const auto* s = std::get_if<std::string>(&e.value)) {
    if (e.key == "data.train" || e.key == "data.val") return Strings{resolved(spec_dir, *s)};
    return resolved(spec_dir, *s);
  }
  Strings out;
  for (const auto& p : std::get<Strings>(e.value)) out.push_back(resolved(spec_dir, p));
  return out;
}

// The loaded spec (or array task `task`) holds every value as written.
void check_loaded(const Case& c, const spec::Spec& s, std::optional<size_t> task,
                  const path& spec_dir, Findings& f) {
  const Flat got = flatten(s);
  auto expect = [&](const hostile::Entry& e, Value want) {
    const auto it = got.find(e.key);
    if (it == got.end() || it->second != want) {
      f.add(e.key + (task ? " of array task " + std::to_string(*task) : std::string()) +
            " loaded as " + (it == got.end() ? "nothing" : hostile::toml_text(it->second)) +
            ", written " + hostile::toml_text(e.value));
    }
  };
  auto swept = [&](const std::string& key) {
    return std::any_of(c.sweep.begin(), c.sweep.end(), [&](const auto& e) { return e.key == key; });
  };
  for (const auto& e : c.entries) {
    if (!e.exact || (task && swept(e.key))) continue;
    Value want = expected_value(c, e, spec_dir);
    if (e.key == "job.run_dir" && task) {
      char name[16];
      std::snprintf(name, sizeof name, "/task-%03zu", *task);
      want = std::get<std::string>(want) + name;
    }
    expect(e, want);
  }
  for (const auto& e : c.sweep) {
    if (!e.exact || !task) continue;
    const std::string one = std::get<Strings>(e.value)[*task];
    expect({e.key, one, true}, expected_value(c, {e.key, one, true}, spec_dir));
  }
}

// ---- the harness ---------------------------------------------------------------------------

void write_executable(const path& file, const std::string& text) {
  write_text(file, text);
  ::chmod(file.c_str(), 0755);
}

// One recorded call of a stand-in: its argv (argv[0] first) and environment.
struct Call {
  Strings argv;
  std::map<std::string, std::string> env;
};

Strings split_nul(const std::string& s) {
  Strings out;
  size_t start = 0;
  for (size_t at; (at = s.find('\0', start)) != std::string::npos; start = at + 1) {
    out.push_back(s.substr(start, at - start));
  }
  return out;
}

Call parse_call(const std::string& text) {
  const Strings fields = split_nul(text);
  Call call;
  const size_t argc = fields.empty() ? 0 : std::stoul(fields[0]);
  for (size_t i = 1; i < fields.size(); ++i) {
    if (i <= argc) {
      call.argv.push_back(fields[i]);
    } else {
      const auto eq = fields[i].find('=');
      call.env[fields[i].substr(0, eq)] = fields[i].substr(eq + 1);
    }
  }
  return call;
}

// Where the test's files live: spec files, run directories, the stand-ins, their records. The
// fake `hpctrain` sits in a folder with a hostile name: the script quotes the path it was given.
class Harness {
 public:
  Harness() {
    for (const auto& d : {run_root(), bin(), cli().parent_path()}) test::fs::create_directories(d);
    for (const char* name : {"module", "pwned", "srun"}) {
      test::fs::create_symlink(ARGV_RECORDER, bin() / name);
    }
    test::fs::create_symlink("/bin/date", bin() / "date");
    test::fs::create_symlink(ARGV_RECORDER, cli());
    // For the real supervisor: the Slurm commands it asks, answering as in a running job.
    write_executable(bin() / "scontrol",
                     "#!/bin/bash\n[[ $1 == show && $2 == hostnames ]] && "
                     "echo node1\nexit 0\n");
    write_executable(bin() / "squeue", "#!/bin/bash\necho '4242|RUNNING|None|node1'\n");
    write_executable(bin() / "scancel", "#!/bin/bash\nexit 0\n");
  }

  path spec_dir() const { return dir_ / "specs"; }
  path run_root() const { return dir_ / "runs"; }
  path bin() const { return dir_ / "bin"; }
  path records() const { return dir_ / "records"; }
  path script_file() const { return dir_ / "job.sbatch"; }
  path cli() const { return dir_ / "cli 'q' $(pwned cli) `pwned` ;|&*?" / "hpctrain"; }
  path root() const { return dir_.path(); }

  // Runs `script` as Slurm starts a batch job: in the run directory, with only the job's variables
  // and the stand-ins' folder on PATH.
  common::CommandResult run(const std::string& script, const std::string& run_dir,
                            const Strings& array_env) {
    test::fs::remove_all(records());
    test::fs::create_directories(records());
    write_text(script_file(), script);
    Strings argv = {"/usr/bin/env",
                    "-i",
                    "-C",
                    run_dir,
                    "PATH=" + bin().string(),
                    "RECORD_DIR=" + records().string(),
                    "SLURM_JOB_ID=4242",
                    "SLURM_JOB_NODELIST=node1",
                    "SLURMD_NODENAME=node1",
                    "SLURM_RESTART_COUNT=0"};
    argv.insert(argv.end(), array_env.begin(), array_env.end());
    argv.insert(argv.end(), {"/bin/bash", script_file().string()});
    return common::run_command(argv, 60s);
  }

  std::vector<Call> calls() const {
    std::vector<path> files;
    for (const auto& e : test::fs::directory_iterator(records())) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<Call> out;
    for (const auto& file : files) out.push_back(parse_call(read_text(file)));
    return out;
  }

 private:
  test::TempDir dir_;
};

// ---- what the script and srun must show ----------------------------------------------------

const std::string* text_of(const Case& c, const std::string& key) {
  const hostile::Entry* e = c.find(key);
  return e ? std::get_if<std::string>(&e->value) : nullptr;
}

Strings strings_of(const Case& c, const std::string& key) {
  const hostile::Entry* e = c.find(key);
  return e ? std::get<Strings>(e->value) : Strings{};
}

std::map<std::string, std::string> env_of(const Case& c) {
  const hostile::Entry* e = c.find("job.env");
  return e ? std::get<std::map<std::string, std::string>>(e->value)
           : std::map<std::string, std::string>{};
}

// sbatch reads the #SBATCH lines up to the first command, splitting words at blanks and quotes:
// each option must be one such word, every value of the spec the option it was given as.
void check_header(const Case& c, const spec::Spec& s, size_t tasks, const std::string& script,
                  Findings& f) {
  Strings got;
  std::istringstream lines(script);
  std::string line;
  std::getline(lines, line);  // #!/bin/bash
  while (std::getline(lines, line) && line.rfind('#', 0) == 0) {
    if (line.rfind("#SBATCH ", 0) == 0) got.push_back(line.substr(8));
  }
  if (got != sbatch_options(s, tasks)) f.add("#SBATCH lines " + shown(got));
  for (const auto& o : got) {
    if (o.find_first_of(" \t'\"\\") != std::string::npos) f.add("#SBATCH word " + shown(o));
  }
  auto once = [&](const std::string& word, std::ptrdiff_t times = 1) {
    if (std::count(got.begin(), got.end(), word) != times) f.add("no #SBATCH " + shown(word));
  };
  static const std::vector<std::pair<std::string, std::string>> kOptions = {
      {"job.name", "--job-name="},           {"job.account", "--account="},
      {"job.partition", "--partition="},     {"job.qos", "--qos="},
      {"job.reservation", "--reservation="}, {"job.mem", "--mem="},
      {"job.constraint", "--constraint="},   {"job.nodelist", "--nodelist="},
      {"job.exclude", "--exclude="},         {"job.begin", "--begin="},
      {"job.dependency", "--dependency="},   {"job.mail_user", "--mail-user="}};
  for (const auto& [key, option] : kOptions) {
    if (const std::string* v = text_of(c, key)) once(option + *v);
  }
  once("--chdir=" + expanded_run_dir(c));
  const Strings extras = strings_of(c, "job.extra_sbatch");
  for (const auto& e : extras) once(e, std::count(extras.begin(), extras.end(), e));
}

// Where a run of the script found its task: the directory, srun's --job and --array-task.
struct Task {
  std::string dir, job, array_task;
  Strings env;  // SLURM_ARRAY_* for an array task
};

Task task_of(const spec::Resolved& r, size_t k) {
  if (r.tasks.empty()) return {r.spec.job.run_dir, "4242", "null", {}};
  const std::string id = std::to_string(k);
  return {r.tasks[k].job.run_dir,
          "4241_" + id,
          id,
          {"SLURM_ARRAY_JOB_ID=4241", "SLURM_ARRAY_TASK_ID=" + id}};
}

// The environment the script hands over: every job.env value exactly, and nothing a value made.
void check_environment(const Case& c, const Call& call, const Task& t, Findings& f) {
  auto env = env_of(c);
  if (!env.count("OMP_NUM_THREADS")) {
    env["OMP_NUM_THREADS"] = std::get<hostile::Toml>(c.find("job.cpus_per_task")->value).text;
  }
  env["HPCTRAIN_RUN_DIR"] = t.dir;
  env["HPCTRAIN_SPEC"] = t.dir + "/spec.toml";
  for (const auto& [name, value] : env) {
    const auto it = call.env.find(name);
    if (it == call.env.end() || it->second != value) {
      f.add(call.argv[0] + "'s " + name + " is " +
            (it == call.env.end() ? "unset" : shown(it->second)) + ", not " + shown(value));
    }
  }
  static const std::set<std::string> kJobs = {"PATH",
                                              "RECORD_DIR",
                                              "SLURM_JOB_ID",
                                              "SLURM_JOB_NODELIST",
                                              "SLURMD_NODENAME",
                                              "SLURM_RESTART_COUNT",
                                              "SLURM_ARRAY_JOB_ID",
                                              "SLURM_ARRAY_TASK_ID",
                                              "PWD",
                                              "SHLVL",
                                              "_",
                                              "HPCTRAIN_STEP_TAG",
                                              "HPCTRAIN_WORLD_SIZE"};
  for (const auto& [name, value] : call.env) {
    if (!env.count(name) && !kJobs.count(name)) f.add(call.argv[0] + " got " + name + "=" + value);
  }
}

// `module load NAME` for each module in order, then only `next`: what else ran was run by a value.
std::vector<Call> check_calls(const Case& c, const std::vector<Call>& calls,
                              const std::string& next, Findings& f) {
  const Strings modules = strings_of(c, "job.modules");
  std::vector<Call> rest;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i < modules.size()) {
      if (calls[i].argv != Strings{"module", "load", modules[i]}) {
        f.add("module call " + std::to_string(i) + " was " + shown(calls[i].argv));
      }
      if (modules[i].rfind('-', 0) == 0)
        f.add("module reads " + shown(modules[i]) + " as an option");
    } else {
      rest.push_back(calls[i]);
    }
  }
  if (calls.size() < modules.size())
    f.add(std::to_string(calls.size()) + " calls, fewer than the modules");
  if (rest.size() != 1 || rest[0].argv.empty() || rest[0].argv[0] != next) {
    Strings names;
    for (const auto& call : rest) names.push_back(call.argv.empty() ? "?" : call.argv[0]);
    f.add("after the modules ran " + shown(names) + ", not only " + shown(next));
    return {};
  }
  return rest;
}

// The hand-over: `CLI supervise` with the task's directory, spec and job.
void check_handover(const Call& call, const Task& t, Findings& f) {
  static const std::regex kStarted("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z");
  Strings want = {call.argv[0],   "supervise",          "--task-dir", t.dir,
                  "--spec",       t.dir + "/spec.toml", "--job",      t.job,
                  "--array-task", t.array_task,         "--started"};
  Strings got = call.argv;
  if (got.size() == want.size() + 3 && std::regex_match(got[want.size()], kStarted)) {
    got.erase(got.begin() + static_cast<std::ptrdiff_t>(want.size()));
    want.insert(want.end(), {"--terminated", "0"});
  }
  if (got != want) f.add("hpctrain's argv " + shown(call.argv));
}

// srun's words from the case alone: the options given once, the words it ends with.
struct Launch {
  Strings once, tail;
  bool mpi = false;
};

Launch launch_of(const Case& c, const path& spec_dir, const std::string& spec_file) {
  Launch l;
  const std::string* w = text_of(c, "job.worker");
  const std::string worker =
      w ? resolved(spec_dir, *w) : test::options_for(spec_dir).default_worker.string();
  const Strings command = {worker, "--spec", spec_file};
  const std::string* mpi = text_of(c, "job.srun_mpi");
  if (mpi && !mpi->empty()) l.once.push_back("--mpi=" + *mpi);
  l.mpi = mpi && !mpi->empty();
  const std::string* runtime = text_of(c, "job.container.runtime");
  const Strings mounts = strings_of(c, "job.container.mounts");
  l.tail = runtime && *runtime == "apptainer" ? Strings{"apptainer", "exec"} : Strings{};
  if (runtime && *runtime == "pyxis") {
    l.once.push_back("--container-image=" + *text_of(c, "job.container.image"));
    std::string joined;
    for (const auto& m : mounts) joined += (joined.empty() ? "" : ",") + m;
    if (!mounts.empty()) l.once.push_back("--container-mounts=" + joined);
  } else if (runtime && *runtime == "apptainer") {
    if (std::get<hostile::Toml>(c.find("job.gpus_per_node")->value).text != "0") {
      l.tail.push_back("--nv");
    }
    for (const auto& m : mounts) l.tail.insert(l.tail.end(), {"--bind", m});
    const std::string image = *text_of(c, "job.container.image");
    l.tail.push_back(image.find("://") == std::string::npos ? resolved(spec_dir, image) : image);
    if (l.tail.back().rfind('-', 0) == 0)
      l.tail.push_back("(apptainer reads the image as an option)");
  }
  l.tail.insert(l.tail.end(), command.begin(), command.end());
  return l;
}

// srun's options first, each one --word; then exactly the launch's words.
void check_srun(const Strings& words, const Launch& l, const std::string& what, Findings& f) {
  size_t i = 1;
  while (i < words.size() && words[i].rfind("--", 0) == 0) ++i;
  const Strings options(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(i));
  const Strings tail(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
  bool ok = !words.empty() && words[0] == "srun" && tail == l.tail;
  for (const auto& o : l.once) ok = ok && std::count(options.begin(), options.end(), o) == 1;
  const auto mpi = std::count_if(options.begin(), options.end(),
                                 [](const std::string& o) { return o.rfind("--mpi=", 0) == 0; });
  ok = ok && mpi == (l.mpi ? 1 : 0);
  if (!ok)
    f.add(what + " " + shown(words) + "; wanted options " + shown(l.once) + " and " +
          shown(l.tail));
}

// Code a value ran without a PATH (builtins only) leaves a PWNED file: in the run directory the
// script runs in, or anywhere else in the test's folder.
void check_no_files_made(const path& dir, Findings& f) {
  std::vector<path> found;
  for (const auto& e : test::fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().find("PWNED") != std::string::npos) {
      f.add("a value made " + e.path().string());
      found.push_back(e.path());
    }
  }
  for (const auto& p : found) test::fs::remove_all(p);  // not blamed on the next case
}

std::optional<spec::Resolved> load(const path& file, Findings& f) {
  try {
    return spec::load(test::options_for(file));
  } catch (const spec::SpecError& e) {
    f.add("refused: " + spec::format_all(e.diagnostics()));
    return std::nullopt;
  }
}

// The frozen spec of the task (or the job) written where submit writes it, and loaded back as the
// step supervisor and the worker load it: the same values.
std::optional<spec::Spec> frozen(const spec::Spec& s, Findings& f) {
  const path file = path(s.job.run_dir) / "spec.toml";
  write_text(file, spec::freeze(s));
  Findings again;
  const auto back = load(file, again);
  if (!back) {
    f.add("the frozen spec " + file.string() + " is refused: " + again.text());
    return std::nullopt;
  }
  const Flat want = flatten(s), got = flatten(back->spec);
  for (const auto& [key, value] : want) {
    if (!got.count(key) || got.at(key) != value) {
      f.add("frozen " + key + " reads back as " +
            (got.count(key) ? hostile::toml_text(got.at(key)) : "nothing") + ", was " +
            hostile::toml_text(value));
    }
  }
  return back->spec;
}

// The script with a recording `hpctrain`: modules loaded, the hand-over, nothing else.
void run_with_fake_cli(Harness& h, const Case& c, const spec::Resolved& r, const Task& t,
                       Findings& f) {
  const std::string script = sbatch_script(r.spec, r.tasks.size(), h.cli().string());
  write_text(h.script_file(), script);
  const auto syntax = common::run_command({"/bin/bash", "-n", h.script_file().string()}, 30s);
  if (syntax.exit_status != 0) f.add("bash -n: " + syntax.err);
  check_header(c, r.spec, r.tasks.size(), script, f);
  const auto result = h.run(script, r.spec.job.run_dir, t.env);
  if (result.exit_status != 0 || !result.out.empty() || !result.err.empty()) {
    f.add("the script exited " + std::to_string(result.exit_status) + ", printed " +
          shown(result.out) + " and " + shown(result.err));
  }
  const auto rest = check_calls(c, h.calls(), h.cli().string(), f);
  if (rest.empty()) return;
  check_handover(rest[0], t, f);
  check_environment(c, rest[0], t, f);
}

// The script handing over to the real `hpctrain supervise`, which starts the step with srun.
void run_with_supervisor(Harness& h, const Case& c, const spec::Resolved& r, const Task& t,
                         Findings& f) {
  const std::string cli = std::string(HPCTRAIN_BINARY_DIR) + "/bin/hpctrain";
  const auto result = h.run(sbatch_script(r.spec, r.tasks.size(), cli), r.spec.job.run_dir, t.env);
  for (const char* sign : {"pwned", "PWNED", "command not found", "syntax error"}) {
    if (result.err.find(sign) != std::string::npos)
      f.add("supervised run printed " + shown(result.err));
  }
  if (result.exit_status != 0) f.add("supervised run exited " + std::to_string(result.exit_status));
  const auto rest = check_calls(c, h.calls(), "srun", f);
  if (rest.empty()) return;
  check_srun(rest[0].argv, launch_of(c, h.spec_dir(), t.dir + "/spec.toml"), "supervisor's srun",
             f);
  check_environment(c, rest[0], t, f);
  if (read_text(path(t.dir) / "attempts.jsonl").find("\"reason\":\"completed\"") ==
      std::string::npos) {
    f.add("supervised run's ledger: " + read_text(path(t.dir) / "attempts.jsonl"));
  }
}

void run_case(Harness& h, const Case& c, bool supervised, Findings& f) {
  const path file = h.spec_dir() / "spec.toml";
  write_text(file, c.toml());
  const auto r = load(file, f);
  if (!r) return;
  check_loaded(c, r->spec, std::nullopt, h.spec_dir(), f);
  for (size_t i = 0; i < r->tasks.size(); ++i) check_loaded(c, r->tasks[i], i, h.spec_dir(), f);
  // An array task's script runs one task: this case's.
  const size_t k = r->tasks.empty() ? 0 : c.index % r->tasks.size();
  const auto read_back = frozen(r->tasks.empty() ? r->spec : r->tasks[k], f);
  if (!read_back) return;
  const Task t = task_of(*r, k);
  run_with_fake_cli(h, c, *r, t, f);
  const StepShape shape{read_back->job.nodes, "", false};
  check_srun(srun_argv(*read_back, t.dir + "/spec.toml", shape),
             launch_of(c, h.spec_dir(), t.dir + "/spec.toml"), "srun_argv", f);
  if (supervised) run_with_supervisor(h, c, *r, t, f);
  check_no_files_made(h.root(), f);
}

TEST(HostileSpecs, EveryValueArrivesAsItWasAndNothingElseRuns) {
  const Settings s = settings();
  Harness h;
  size_t reported = 0, supervised = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto indices = case_indices(s, s.specs);
  for (const size_t i : indices) {
    const Case c = hostile::accepted_case(s.seed, i, h.run_root().string());
    Findings f;
    const bool supervise = i % 25 == 0 || s.only;
    run_case(h, c, supervise, f);
    supervised += supervise;
    report(c, "hostile-spec", f, reported);
    for (const auto& e : test::fs::directory_iterator(h.run_root())) test::fs::remove_all(e.path());
  }
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  std::cout << indices.size() << " hostile specs (seed " << s.seed << "), " << supervised
            << " of them through hpctrain supervise, in " << seconds.count() << " s\n";
}

// Refused in the spec, naming the key and its line; `hpctrain render` prints no script.
void check_refused(Harness& h, const hostile::Refusal& r, bool via_cli, Findings& f) {
  const path file = h.spec_dir() / "spec.toml";
  write_text(file, r.spec.toml());
  try {
    const auto resolved = spec::load(test::options_for(file));
    f.add("accepted (" + r.what + "); it renders:\n" + sbatch_script(resolved.spec));
    return;
  } catch (const spec::SpecError& e) {
    bool named = false;
    for (const auto& d : e.diagnostics()) {
      named = named || (d.severity == spec::Severity::kError && d.key == r.key &&
                        d.origin.file == file.string() && d.origin.line > 0 &&
                        (!r.key.empty() || d.message.find("UTF-8") != std::string::npos));
    }
    if (!named)
      f.add("refused (" + r.what + ") without naming [" + r.key + "] and its line:\n" +
            spec::format_all(e.diagnostics()));
  }
  if (!via_cli) return;
  const auto out = common::run_command(
      {std::string(HPCTRAIN_BINARY_DIR) + "/bin/hpctrain", "render", file.string()}, 30s);
  const std::string named = r.key.empty() ? "UTF-8" : "[" + r.key + "]";
  if (out.exit_status != kExitBadInput || !out.out.empty() ||
      out.err.find(named) == std::string::npos) {
    f.add("hpctrain render exited " + std::to_string(out.exit_status) + ", printed " +
          shown(out.out) + " and " + shown(out.err));
  }
}

TEST(HostileSpecs, WhatTheSpecRefusesIsRefusedNamingTheKeyAndNeverRendered) {
  const Settings s = settings();
  Harness h;
  size_t reported = 0;
  std::map<std::string, size_t> keys;
  for (const size_t i : case_indices(s, s.specs / 4)) {
    const hostile::Refusal r = hostile::refused_case(s.seed, i, h.run_root().string());
    Findings f;
    check_refused(h, r, i % 10 == 0 || s.only, f);
    ++keys[r.key.substr(0, r.key.rfind("job.env.", 0) == 0 ? 7 : std::string::npos)];
    report(r.spec, "hostile-refusal", f, reported);
  }
  std::cout << "refused specs by key:";
  for (const auto& [key, n] : keys) std::cout << " " << (key.empty() ? "(file)" : key) << " " << n;
  std::cout << "\n";
}

}  // namespace
}  // namespace hpctrain::render
