#include "hostile_specs.hpp"

#include <algorithm>
#include <string_view>

#include "spec/literal.hpp"
#include "spec/spec.hpp"

namespace hpctrain::render::hostile {
namespace {

using Strings = std::vector<std::string>;

constexpr std::string_view kAlnum =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
// The spec's character sets (runtime/spec/convert.cpp), as the alphabets values are drawn from.
const std::string kNameRest = std::string(kAlnum) + "._-";
const std::string kModule = std::string(kAlnum) + "._+/@";
const std::string kPathSegment = std::string(kAlnum) + "._+@,=:~-";
const std::string kConstraint = std::string(kAlnum) + "_.&|,()*!:[]-";
const std::string kHostlist = std::string(kAlnum) + "._,[]-";
const std::string kSlurmWord = std::string(kAlnum) + "._:,?+@%-";
const std::string kExtraValue = std::string(kAlnum) + "._,:=@/+%*&|!()[]{}^~-";

// What a shell, sbatch, a TOML writer or the template would read as more than text. `pwned` is
// a recording stand-in on the test's PATH: any call of it is code a value ran; so is any file
// named PWNED* (the test looks for them).
const Strings& shell_pieces() {
  static const Strings kPieces = {
      "'", "\"", "$(pwned subst)", "`pwned tick`", ";pwned semi;", "|pwned pipe", "&pwned bg&",
      "&&pwned and", "||pwned or", ">PWNED_redirect", "<in", "2>&1", "*", "?", "[a-z]", "{a,b}",
      "~", "~root", "$HOME", "${HOME}", "$((6*7))", "$[1]", "$'x\\n'", "$\"x\"", "<(pwned in)",
      ">(pwned out)", "\\", "\\'", "'\\''", "\"'\"'\"", "!", "!!", "!$", "#", "# comment", " ",
      "   ", "-", "--", "-n", "-e", "--help", "%j", "%%", "%A_%a", "%x", "@RUN_DIR@", "@CLI@",
      "@SBATCH_LINES@", "@", "=", ",", ":", ";", "\\n", "\\t", "${IFS}", "$0", "$@", "$*", "$1",
      "$$", "$?", "$!", "$_", "${x:-pwned}", "${PATH:0:1}", "$RANDOM", "PIPESTATUS[$(pwned a)]",
      "a[$(pwned b)]", "x=$(pwned c)", "*/", ".", "..", "/", "//", "\"\"\"", "'''", "é", "✓", "🚀",
      "\u202e", "\u200b", "\u00a0", "\u2028", "ＡＢ", "日本語", "Ω", "\ufeff", "\\u0041", "\\x41",
      "{name}", "#SBATCH --wrap=pwned",
      // Builtins only, for code that runs without a PATH: each leaves a PWNED file behind.
      ";: >PWNED_colon;", "$(: >PWNED_subst)", "`: >PWNED_tick`", "\"; : >PWNED_dq; \"",
      "'; : >PWNED_sq; '"};
  return kPieces;
}

// A code point that is valid UTF-8 and not a control character (C0, DEL, C1, surrogates).
std::string unicode_char(Rng& rng) {
  uint32_t cp;
  do {
    cp = rng.chance(0.8) ? 0xa0 + static_cast<uint32_t>(rng.below(0x3000))
                         : 0xa0 + static_cast<uint32_t>(rng.below(0x10ffff - 0xa0));
  } while (cp >= 0xd800 && cp <= 0xdfff);
  std::string out;
  if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
  }
  return out + static_cast<char>(0x80 | (cp & 0x3f));
}

// Cuts `s` to at most `n` bytes at a character boundary.
void truncate_utf8(std::string& s, size_t n) {
  if (s.size() <= n) return;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  s.resize(n);
}

std::string hostile_piece(Rng& rng) {
  const size_t kind = rng.below(20);
  if (kind < 9) return rng.pick(shell_pieces());
  if (kind < 14) return std::string(1, static_cast<char>(0x20 + rng.below(0x5f)));  // printable
  if (kind < 17) return unicode_char(rng);
  std::string word;
  for (size_t i = 1 + rng.below(8); i > 0; --i) word += kAlnum[rng.below(kAlnum.size())];
  return word;
}

// Free text of 1..`max_bytes` bytes without the characters of `forbidden`; now and then as long
// as allowed.
std::string hostile_text(Rng& rng, size_t max_bytes, std::string_view forbidden = {}) {
  const bool long_text = rng.chance(0.03);
  const size_t target = long_text ? max_bytes / 2 + rng.below(max_bytes / 2 + 1) : max_bytes;
  std::string out;
  for (size_t pieces = long_text ? SIZE_MAX : 1 + rng.below(8); pieces > 0 && out.size() < target;
       --pieces) {
    out += hostile_piece(rng);
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](char c) { return forbidden.find(c) != std::string_view::npos; }),
            out.end());
  truncate_utf8(out, std::min(target, max_bytes));
  if (out.empty()) out = "x";
  return out;
}

// Random text of a character set: the first character from `first`, the rest from `rest`.
std::string charset_text(Rng& rng, std::string_view first, std::string_view rest, size_t max) {
  const size_t n = rng.chance(0.03) ? 1 + rng.below(max) : 1 + rng.below(std::min<size_t>(max, 24));
  std::string out(1, first[rng.below(first.size())]);
  while (out.size() < n) out += rest[rng.below(rest.size())];
  return out;
}

// A path of hostile segments (never "." or "..", never empty: the spec normalises those away).
std::string hostile_path(Rng& rng, bool absolute, size_t max_bytes) {
  std::string out = absolute ? "/" : "";
  const size_t segments = 1 + rng.below(4);
  const size_t each = std::max<size_t>(1, (max_bytes - segments) / segments);
  for (size_t i = 0; i < segments; ++i) {
    std::string seg = hostile_text(rng, each, "/");
    if (seg == "." || seg == "..") seg += "x";
    out += (i ? "/" : "") + seg;
  }
  return out;
}

Strings hostile_list(Rng& rng, size_t max_items, size_t max_bytes, std::string_view forbidden) {
  Strings out;
  for (size_t i = rng.below(max_items + 1); i > 0; --i) {
    out.push_back(hostile_text(rng, max_bytes, forbidden));
  }
  return out;
}

// Sets `key`; numbers, booleans and enumerations are not text the test follows.
void set(Case& c, const std::string& key, Value value, bool exact = true) {
  exact = exact && !std::holds_alternative<Toml>(value) && key != "job.container.runtime" &&
          key != "sweep.mode";
  for (auto& e : c.entries) {
    if (e.key == key) {
      e.value = std::move(value);
      e.exact = exact;
      return;
    }
  }
  c.entries.push_back({key, std::move(value), exact});
}

std::string number(int64_t n) { return std::to_string(n); }

// job: the allocation, and the names and words that reach #SBATCH lines.
void add_allocation(Rng& rng, Case& c, const std::string& run_root) {
  const std::string name = charset_text(rng, kAlnum, kNameRest, 4096);
  set(c, "job.name", name);
  // run_dir is created by the test: its segments stay within what a filesystem takes.
  std::string run_dir = run_root + "/" + number(static_cast<int64_t>(c.index));
  for (size_t i = rng.below(4); i > 0; --i) {
    std::string seg = charset_text(rng, kPathSegment, kPathSegment, 200);
    if (seg == "." || seg == "..") seg += "x";
    run_dir += "/" + seg;
  }
  if (name.size() <= 200 && rng.chance(0.5)) run_dir += rng.chance(0.5) ? "/{name}" : "/x{name}y";
  set(c, "job.run_dir", run_dir);
  const int64_t tasks = 1 + static_cast<int64_t>(rng.below(4));
  set(c, "job.nodes", Toml{number(1 + static_cast<int64_t>(rng.below(4)))});
  set(c, "job.tasks_per_node", Toml{number(tasks)});
  set(c, "job.gpus_per_node", Toml{number(rng.chance(0.3) ? tasks : 0)});
  set(c, "job.cpus_per_task", Toml{number(1 + static_cast<int64_t>(rng.below(8)))});
  set(c, "job.time", rng.pick(Strings{"90", "10", "30:00", "12:00:00", "1-00", "2-12:30"}), false);
  for (const char* key : {"job.account", "job.partition", "job.qos", "job.reservation"}) {
    if (rng.chance(0.5)) set(c, key, charset_text(rng, kAlnum, kNameRest, 4096));
  }
  if (rng.chance(0.3)) set(c, "job.mem", number(1 + rng.below(512)) + rng.pick(Strings{"", "G"}));
  if (rng.chance(0.3)) set(c, "job.constraint", charset_text(rng, kConstraint, kConstraint, 4096));
  if (rng.chance(0.3)) set(c, "job.nodelist", charset_text(rng, kHostlist, kHostlist, 4096));
  if (rng.chance(0.3)) set(c, "job.exclude", charset_text(rng, kHostlist, kHostlist, 4096));
  if (rng.chance(0.3)) set(c, "job.begin", charset_text(rng, kSlurmWord, kSlurmWord, 4096));
  if (rng.chance(0.3)) {
    set(c, "job.dependency",
        rng.pick(Strings{"singleton", "afterok:123", "afterany:123:124", "afterok:1_2+5",
                         "afterok:1,afterany:2", "afternotok:7?aftercorr:8"}));
  }
  if (rng.chance(0.3)) {
    set(c, "job.mail_type", Strings{rng.pick(Strings{"BEGIN", "END", "FAIL", "ALL"}), "REQUEUE"});
    set(c, "job.mail_user",
        charset_text(rng, kAlnum, std::string(kAlnum) + "._%+-", 60) +
            (rng.chance(0.5) ? "@example-1.org" : ""));
  }
  set(c, "preemption.enabled", Toml{rng.chance(0.7) ? "true" : "false"});
}

// Names bash treats specially: assigning some runs arithmetic on the value, some are read-only,
// some are replaced by bash before a child sees them.
const Strings& shell_variable_names() {
  static const Strings kNames = {
      "RANDOM",      "SRANDOM",       "OPTIND",       "HISTCMD",       "SECONDS",      "LINENO",
      "UID",         "EUID",          "PPID",         "BASHPID",       "SHLVL",        "_",
      "GROUPS",      "FUNCNAME",      "DIRSTACK",     "PIPESTATUS",    "BASH_ARGV",    "BASH_ARGV0",
      "BASH_COMPAT", "BASH_XTRACEFD", "EPOCHSECONDS", "EPOCHREALTIME", "BASH_VERSINFO"};
  return kNames;
}

std::string env_name(Rng& rng) {
  if (rng.chance(0.05)) return "OMP_NUM_THREADS";  // the script's own default steps aside
  if (rng.chance(0.08)) return rng.pick(shell_variable_names());
  const std::string first = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
  return charset_text(rng, first, std::string(kAlnum) + "_", 40);
}

// job: what the script runs and exports, and the worker srun starts.
void add_script_keys(Rng& rng, Case& c) {
  Strings modules;
  for (size_t i = rng.below(5); i > 0; --i) {
    modules.push_back(charset_text(rng, kModule, kModule + "-", 4096));  // '-' not first
  }
  set(c, "job.modules", modules);
  std::map<std::string, std::string> env;
  for (size_t i = rng.below(6); i > 0; --i) {
    const std::string name = env_name(rng);
    if (!spec::is_reserved_env_name(name))
      env[name] = hostile_text(rng, rng.chance(0.1) ? 32768 : 200);
  }
  set(c, "job.env", env);
  Strings extra;
  for (size_t i = rng.below(4); i > 0; --i) {
    std::string option = "--" + rng.pick(Strings{"comment", "gres", "hint", "licenses", "wckey",
                                                 "x-" + charset_text(rng, "abcxyz", "abc-19", 20)});
    if (rng.chance(0.8)) option += "=" + charset_text(rng, kExtraValue, kExtraValue, 4000);
    extra.push_back(option);
  }
  set(c, "job.extra_sbatch", extra);
  set(c, "job.srun_mpi",
      rng.pick(Strings{"", "pmix", "pmi2", "none", charset_text(rng, "abz_09", "abz_09", 12)}));
  if (rng.chance(0.7)) set(c, "job.worker", hostile_path(rng, rng.chance(0.5), 1000));
}

void add_container(Rng& rng, Case& c) {
  const size_t runtime = rng.below(3);
  if (runtime == 0) return;
  set(c, "job.container.runtime", runtime == 1 ? "pyxis" : "apptainer");
  std::string image;
  if (runtime == 1 || rng.chance(0.4)) {
    image = (runtime == 2 ? "docker://" : "") + hostile_text(rng, 1000);
  } else {
    image = hostile_path(rng, rng.chance(0.5), 1000);
  }
  set(c, "job.container.image", image);
  set(c, "job.container.mounts", hostile_list(rng, 3, 500, ","));
}

// data, model: strings the worker reads from the frozen spec; paths are resolved.
void add_worker_values(Rng& rng, Case& c) {
  set(c, "data.synthetic", Toml{"true"});
  for (const char* key : {"data.train", "data.val"}) {
    if (rng.chance(0.5)) {
      set(c, key, hostile_path(rng, rng.chance(0.5), 1000));
    } else if (rng.chance(0.5)) {
      Strings paths;
      for (size_t i = 1 + rng.below(3); i > 0; --i) paths.push_back(hostile_path(rng, false, 300));
      set(c, key, paths);
    }
  }
  if (rng.chance(0.5)) set(c, "model.pretrained", hostile_path(rng, rng.chance(0.5), 1000));
  if (rng.chance(0.5)) set(c, "model.freeze", hostile_list(rng, 3, 200, ""));
}

// A job array (zip): every task a seed, and maybe its own pretrained weights.
void add_sweep(Rng& rng, Case& c) {
  if (!rng.chance(0.15)) return;
  const size_t tasks = 1 + rng.below(4);
  std::string seeds = "[";
  Strings pretrained;
  for (size_t i = 0; i < tasks; ++i) {
    seeds += (i ? ", " : "") + number(static_cast<int64_t>(7 * i + 1));
    pretrained.push_back(hostile_path(rng, rng.chance(0.5), 300));
  }
  set(c, "sweep.mode", "zip");
  c.sweep.push_back({"train.seed", Toml{seeds + "]"}, false});
  if (rng.chance(0.5)) c.sweep.push_back({"model.pretrained", pretrained, true});
}

}  // namespace

Rng::Rng(uint64_t seed, uint64_t index) {
  // splitmix64 of both, so neighbouring indices start far apart.
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + index + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  engine_.seed(z ^ (z >> 31));
}

const Entry* Case::find(const std::string& key) const {
  for (const auto& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::string toml_text(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return spec::literal_of(*s);
  if (const auto* l = std::get_if<Strings>(&v)) return spec::literal_of(*l);
  if (const auto* m = std::get_if<std::map<std::string, std::string>>(&v)) {
    return spec::literal_of(*m);
  }
  return std::get<Toml>(v).text;
}

std::string Case::toml() const {
  std::vector<std::pair<std::string, std::string>> tables;  // table, its lines
  for (const auto& e : entries) {
    const auto dot = e.key.rfind('.');
    const std::string table = e.key.substr(0, dot);
    auto it =
        std::find_if(tables.begin(), tables.end(), [&](const auto& t) { return t.first == table; });
    if (it == tables.end()) it = tables.insert(tables.end(), {table, ""});
    it->second += e.key.substr(dot + 1) + " = " + toml_text(e.value) + "\n";
  }
  std::string out =
      "# hostile spec: seed " + std::to_string(seed) + ", case " + std::to_string(index) + "\n";
  for (const auto& [table, lines] : tables) out += "[" + table + "]\n" + lines;
  if (!sweep.empty()) {
    out += "[sweep.params]\n";
    for (const auto& e : sweep) out += spec::literal_of(e.key) + " = " + toml_text(e.value) + "\n";
  }
  return out;
}

bool is_resolved_path(const Case& c, const std::string& key) {
  if (key == "job.worker" || key == "data.train" || key == "data.val" ||
      key == "model.pretrained") {
    return true;
  }
  const Entry* runtime = c.find("job.container.runtime");
  const Entry* image = c.find("job.container.image");
  return key == "job.container.image" && runtime &&
         std::get<std::string>(runtime->value) == "apptainer" && image &&
         std::get<std::string>(image->value).find("://") == std::string::npos;
}

Case accepted_case(uint64_t seed, size_t index, const std::string& run_root) {
  Rng rng(seed, index);
  Case c;
  c.seed = seed;
  c.index = index;
  add_allocation(rng, c, run_root);
  add_script_keys(rng, c);
  add_container(rng, c);
  add_worker_values(rng, c);
  add_sweep(rng, c);
  return c;
}

namespace {

struct Broken {
  std::string key, what;
};

// Inserts `bad` into `text` at a random place.
std::string with(Rng& rng, std::string text, const std::string& bad) {
  size_t at = rng.below(text.size() + 1);
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) --at;
  return text.insert(at, bad);
}

const Strings& control_characters() {
  static const Strings kControl = {"\n", "\r", "\t", "\x01", "\x1b", "\x7f", "\u0085", "\u009b"};
  return kControl;
}

// A control character (newline, tab, escape, DEL, C1) in a free-text value.
Broken control_character(Rng& rng, Case& c) {
  const std::string bad = rng.pick(control_characters());
  // A C1 character is written as it is (the TOML writer escapes only C0 and DEL): the file is
  // refused as a whole, before any key is read.
  if (static_cast<unsigned char>(bad[0]) >= 0x80) {
    set(c, "job.worker", with(rng, hostile_path(rng, true, 200), bad));
    return {"", "a C1 control character"};
  }
  switch (rng.below(6)) {
    case 0:
      set(c, "job.worker", with(rng, hostile_path(rng, true, 200), bad));
      return {"job.worker", "control character"};
    case 1:
      set(c, "model.pretrained", with(rng, hostile_text(rng, 200), bad));
      return {"model.pretrained", "control character"};
    case 2:
      set(c, "model.freeze", Strings{"layer1", with(rng, hostile_text(rng, 200), bad)});
      return {"model.freeze", "control character"};
    case 3:
      set(c, "data.train", Strings{with(rng, hostile_path(rng, false, 200), bad)});
      return {"data.train", "control character"};
    case 4: {
      set(c, "job.container.runtime", "pyxis");
      set(c, "job.container.image", "img");
      set(c, "job.container.mounts", Strings{with(rng, hostile_text(rng, 200, ","), bad)});
      return {"job.container.mounts", "control character"};
    }
    default:
      set(c, "job.env",
          std::map<std::string, std::string>{
              {"HOSTILE_VALUE", with(rng, hostile_text(rng, 200), bad)}});
      return {"job.env.HOSTILE_VALUE", "control character"};
  }
}

// Invalid UTF-8 (a stray byte, a cut sequence, a surrogate, an overlong form), written as is:
// the file is refused before any key is read.
Broken invalid_utf8(Rng& rng, Case& c) {
  const std::string bad =
      rng.pick(Strings{"\xff", "\xc3(", "\xed\xa0\x80", "\xc0\xaf", "\xe2\x82"});
  set(c, "model.pretrained", with(rng, hostile_text(rng, 200), bad));
  return {"", "invalid UTF-8"};
}

// A string over the spec's limits: 4096 bytes, 32768 for an environment value.
Broken too_long(Rng& rng, Case& c) {
  const std::string key =
      rng.pick(Strings{"job.name", "job.worker", "model.pretrained", "job.env"});
  std::string text = key == "job.name" ? std::string(4097, 'n') : hostile_text(rng, 200);
  while (text.size() <= (key == "job.env" ? 32768u : 4096u)) text += hostile_text(rng, 4096);
  if (key == "job.env") {
    set(c, key, std::map<std::string, std::string>{{"LONG_VALUE", text}});
    return {"job.env.LONG_VALUE", "longer than 32768 bytes"};
  }
  set(c, key, text);
  return {key, "longer than 4096 bytes"};
}

// A character outside a key's character set, or a value of the right set in a wrong shape.
Broken outside_charset(Rng& rng, Case& c) {
  const std::string bad = rng.pick(
      Strings{" ", "'", "\"", "$", "`", ";", "<", ">", "\\", "#", "é", "✓", "$(pwned)", "^"});
  const std::string key = rng.pick(
      Strings{"job.name", "job.account", "job.partition", "job.qos", "job.reservation",
              "job.run_dir", "job.modules", "job.mem", "job.constraint", "job.nodelist",
              "job.exclude", "job.begin", "job.dependency", "job.mail_user", "job.srun_mpi"});
  if (key == "job.modules") {
    set(c, key, Strings{"gcc", with(rng, charset_text(rng, kModule, kModule, 30), bad)});
  } else if (key == "job.run_dir") {
    set(c, key, with(rng, std::get<std::string>(c.find(key)->value), bad));
  } else {
    set(c, key, with(rng, charset_text(rng, kAlnum, kAlnum, 30), bad));
  }
  return {key, "a character outside its set: " + bad};
}

Broken misshapen(Rng& rng, Case& c) {
  switch (rng.below(8)) {
    case 0:
      set(c, "job.run_dir", rng.pick(Strings{"runs/{name}", "~/runs", "/", "/runs/{user}"}));
      return {"job.run_dir", "not an absolute directory with only {name} in braces"};
    case 1:
      set(c, "job.name", rng.pick(Strings{"-x", ".hidden", "_x", ""}));
      return {"job.name", "a name that does not start with a letter or digit"};
    case 2:
      set(c, "job.srun_mpi", rng.pick(Strings{"PMIx", "pmi-2", "pmix;pwned", "--pwned"}));
      return {"job.srun_mpi", "not an srun --mpi plugin name"};
    case 3:
      set(c, "job.container.runtime", rng.pick(Strings{"pyxis", "apptainer"}));
      set(c, "job.container.image", "");
      return {"job.container.image", "a container runtime without an image"};
    case 4:
      set(c, "job.container.mounts",
          rng.pick(std::vector<Strings>{{"/a,/b"}, {""}, {"/x", "a,b:c"}}));
      return {"job.container.mounts", "a mount with a comma, or empty"};
    case 5:
      set(c, "job.modules", Strings{"gcc", "-" + charset_text(rng, kModule, kModule + "-", 30)});
      return {"job.modules", "a module `module load` would read as an option"};
    case 6:
      // A reference: a local image would be made an absolute path.
      set(c, "job.container.runtime", "apptainer");
      set(c, "job.container.image",
          rng.pick(Strings{"--bind=/:/x://y", "-docker://nvcr.io/x", "--nv://", "-://"}));
      return {"job.container.image", "an apptainer image apptainer would read as an option"};
    default:
      set(c, "job.time",
          with(rng, rng.pick(Strings{"90", "30:00", "1-00"}),
               rng.pick(Strings{"$(pwned)", "`pwned`", ";pwned", "'", "\"", "*", " ", "é", "x"})));
      return {"job.time", "not a Slurm time limit"};
  }
}

// An environment variable name that is not a shell name, or that is reserved.
Broken bad_env_name(Rng& rng, Case& c) {
  std::string name;
  if (rng.chance(0.5)) {
    name = rng.pick(Strings{"1X", "A-B", "A.B", "A B", "A$B", "é", "A;B", "", "A=B"});
  } else {
    Strings reserved = {"PATH",           "IFS",          "BASH_ENV",      "ENV",
                        "LD_PRELOAD",     "SLURM_JOB_ID", "HPCTRAIN_SPEC", "PS4",
                        "PROMPT_COMMAND", "SHELLOPTS",    "BASH_FUNC_x%%", "CDPATH",
                        "GLOBIGNORE"};
    // bash's own: RANDOM = "PIPESTATUS[$(cmd)]" would run cmd.
    reserved.insert(reserved.end(), shell_variable_names().begin(), shell_variable_names().end());
    name = rng.pick(reserved);
  }
  set(c, "job.env", std::map<std::string, std::string>{{name, hostile_text(rng, 100)}});
  return {"job.env." + name, "a name that is not a shell name, or reserved"};
}

// An #SBATCH option that is not one long option, or one hpctrain sets itself.
Broken bad_extra_option(Rng& rng, Case& c) {
  std::string option;
  if (rng.chance(0.5)) {
    option = with(rng, "--comment=x",
                  rng.pick(Strings{" ", "'", "\"", "$(pwned)", "`", ";", "\\", "#", "é"}));
    if (rng.chance(0.3)) option = rng.pick(Strings{"-c 4", "comment=x", "--Comment", "--"});
  } else {
    option = rng.pick(Strings{"--time=5", "--output=/tmp/x", "--wrap=pwned", "--export=ALL",
                              "--array=0-3", "--chdir=/", "--job-name=x", "--nodes=9"});
  }
  set(c, "job.extra_sbatch", Strings{"--hint=nomultithread", option});
  return {"job.extra_sbatch", "not one long option hpctrain leaves to the user: " + option};
}

}  // namespace

Refusal refused_case(uint64_t seed, size_t index, const std::string& run_root) {
  Refusal r;
  r.spec = accepted_case(seed, index, run_root);
  // Drawn after (and apart from) the accepted case's values.
  Rng rng(seed ^ 0x5bd1e995u, index);
  static const std::vector<Broken (*)(Rng&, Case&)> kBreakers = {
      control_character, invalid_utf8, too_long,        outside_charset,
      misshapen,         bad_env_name, bad_extra_option};
  const Broken b = rng.pick(kBreakers)(rng, r.spec);
  r.key = b.key;
  r.what = b.what;
  return r;
}

}  // namespace hpctrain::render::hostile
