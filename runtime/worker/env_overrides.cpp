#include "worker/env_overrides.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/error.hpp"

namespace hpctrain::worker {
namespace {

// The variable's value, or nullopt when it is unset or empty.
std::optional<std::string> value(const dist::EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

[[noreturn]] void bad(const std::string& name, const std::string& text, const std::string& want) {
  HPCTRAIN_THROW(rt::EnvError, name + "='" + text + "' is not " + want);
}

// "1" on, "0" off; anything else is a typo that would otherwise switch nothing on.
bool flag(const dist::EnvMap& env, const std::string& name) {
  const auto v = value(env, name);
  if (!v || *v == "0") return false;
  if (*v != "1") bad(name, *v, "1 or 0");
  return true;
}

// An integer of at least `least` (0 or 1), or nullopt when unset.
std::optional<int64_t> integer_from(const dist::EnvMap& env, const std::string& name,
                                    long long least) {
  const auto v = value(env, name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || n < least ||
      !std::isdigit(static_cast<unsigned char>((*v)[0]))) {
    bad(name, *v, least > 0 ? "a positive integer" : "an integer of 0 or more");
  }
  return n;
}

// A comma-separated list of integers of 0 or more; empty when unset.
std::vector<int64_t> integers_from(const dist::EnvMap& env, const std::string& name) {
  std::vector<int64_t> out;
  const auto v = value(env, name);
  if (!v) return out;
  std::stringstream list(*v);
  std::string item;
  while (std::getline(list, item, ',')) {
    const dist::EnvMap one = {{name, item}};
    const auto n = item.empty() ? std::nullopt : integer_from(one, name, 0);
    if (!n) bad(name, *v, "a comma-separated list of integers of 0 or more");
    out.push_back(*n);
  }
  if (out.empty()) bad(name, *v, "a comma-separated list of integers of 0 or more");
  return out;
}

std::optional<int64_t> positive_integer(const dist::EnvMap& env, const std::string& name) {
  return integer_from(env, name, 1);
}

std::optional<double> positive_number(const dist::EnvMap& env, const std::string& name) {
  const auto v = value(env, name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (*end != '\0' || !(x > 0) || !std::isfinite(x)) bad(name, *v, "a positive number");
  return x;
}

int cuda_sync_debug(const dist::EnvMap& env) {
  const std::string name = "HPCTRAIN_CUDA_SYNC_DEBUG";
  const auto v = value(env, name);
  if (!v || *v == "off") return 0;
  if (*v == "warn") return 1;
  if (*v == "error") return 2;
  HPCTRAIN_THROW(rt::EnvError, name + " must be warn, error or off, not '" + *v + "'");
}

std::set<std::string> comma_list(const dist::EnvMap& env, const std::string& name) {
  std::set<std::string> out;
  std::stringstream pieces(value(env, name).value_or(""));
  for (std::string piece; std::getline(pieces, piece, ',');) {
    if (!piece.empty()) out.insert(piece);
  }
  return out;
}

}  // namespace

EnvOverrides read_env_overrides(const dist::EnvMap& env) {
  EnvOverrides o;
  o.user.run_dir = value(env, "HPCTRAIN_RUN_DIR").value_or("");
  o.user.srun_step_tag = value(env, "HPCTRAIN_STEP_TAG").value_or("");
  o.user.world_size = positive_integer(env, "HPCTRAIN_WORLD_SIZE");
  o.user.torch_log_level = env.count("TORCH_CPP_LOG_LEVEL") > 0;

  o.test.stall = value(env, "HPCTRAIN_TEST_STALL").value_or("");
  o.test.trace_samples = value(env, "HPCTRAIN_TRACE_SAMPLES").value_or("");
  o.test.gpu_path_on_cpu = flag(env, "HPCTRAIN_GPU_PATH_ON_CPU");
  o.test.cuda_sync_debug = cuda_sync_debug(env);
  o.test.fp16_on_cpu = flag(env, "HPCTRAIN_FP16_ON_CPU");
  o.test.fp16_init_scale = positive_number(env, "HPCTRAIN_FP16_INIT_SCALE");
  o.test.fp16_growth_interval = positive_integer(env, "HPCTRAIN_FP16_GROWTH_INTERVAL");
  o.test.resume_skip = comma_list(env, "HPCTRAIN_RESUME_SKIP");
  o.test.resume_pieces_file = value(env, "HPCTRAIN_RESUME_PIECES").value_or("");
  o.test.slow_fsync_seconds = positive_number(env, "HPCTRAIN_TEST_SLOW_FSYNC");
  o.test.poison_samples = integers_from(env, "HPCTRAIN_TEST_POISON_SAMPLE");
  o.test.faulty_rank = integer_from(env, "HPCTRAIN_TEST_FAULTY_RANK", 0);
  o.test.host_read_in_step = flag(env, "HPCTRAIN_TEST_HOST_READ");
  o.test.static_step_eager = flag(env, "HPCTRAIN_TEST_STATIC_EAGER");
  return o;
}

}  // namespace hpctrain::worker
