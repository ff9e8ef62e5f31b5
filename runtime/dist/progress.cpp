#include "dist/progress.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace hpctrain::progress {
namespace {

std::atomic<int64_t> g_step{0};
std::atomic<int> g_phase{static_cast<int>(Phase::kStarting)};
std::atomic<int> g_detail{-1};
std::atomic<uint64_t> g_counter{0};
std::atomic<int64_t> g_first{-1};

constexpr std::array<const char*, kPhases> kNames = {
    "start-up", "end of step", "checkpoint", "evaluation", "data wait", "forward",
    "backward", "all-reduce",  "agreement",  "averaging",  "finishing"};

// The planted stall (tests), set once before training starts.
struct Stall {
  bool armed = false;
  bool every = false;      // every time the phase is entered from `step` on (a slow rank), not once
  bool per_batch = false;  // before each batch of the phase (batch_begins), not on entering it
  int64_t step = 0;
  Phase phase = Phase::kStarting;
  double seconds = 0;
};
Stall g_stall;
std::atomic<bool> g_stall_done{false};

// Sleeps the planted stall's time when it is planted on `phase` at this step.
void stall_at(Phase phase) {
  if (g_stall.armed && phase == g_stall.phase &&
      (g_stall.every ? g_step.load(std::memory_order_relaxed) >= g_stall.step
                     : g_step.load(std::memory_order_relaxed) == g_stall.step &&
                           !g_stall_done.exchange(true))) {
    std::this_thread::sleep_for(std::chrono::duration<double>(g_stall.seconds));
  }
}

}  // namespace

std::string phase_name(Phase phase, int detail) {
  const int i = static_cast<int>(phase);
  std::string name = i >= 0 && i < kPhases ? kNames[static_cast<size_t>(i)] : "unknown phase";
  if (phase == Phase::kAllReduce && detail >= 0) name += " bucket " + std::to_string(detail);
  return name;
}

void enter(Phase phase, int detail) {
  g_detail.store(detail, std::memory_order_relaxed);
  g_phase.store(static_cast<int>(phase), std::memory_order_relaxed);
  g_counter.fetch_add(1, std::memory_order_relaxed);
  if (!g_stall.per_batch) stall_at(phase);
}

void batch_begins(Phase phase) {
  if (g_stall.per_batch) stall_at(phase);
}

void set_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }

void begin_training(int64_t step) {
  g_step.store(step, std::memory_order_relaxed);
  g_first.store(step, std::memory_order_relaxed);
}

void tick() { g_counter.fetch_add(1, std::memory_order_relaxed); }

Snapshot snapshot() {
  Snapshot s;
  s.counter = g_counter.load(std::memory_order_relaxed);
  s.step = g_step.load(std::memory_order_relaxed);
  s.phase = static_cast<Phase>(g_phase.load(std::memory_order_relaxed));
  s.detail = g_detail.load(std::memory_order_relaxed);
  s.first = g_first.load(std::memory_order_relaxed);
  return s;
}

std::string encode(const Snapshot& s) {
  return std::to_string(s.counter) + " " + std::to_string(s.step) + " " +
         std::to_string(static_cast<int>(s.phase)) + " " + std::to_string(s.detail) + " " +
         std::to_string(s.first);
}

std::optional<Snapshot> parse(const std::string& text) {
  std::istringstream in(text);
  Snapshot s;
  int phase = 0;
  if (!(in >> s.counter >> s.step >> phase >> s.detail >> s.first) || phase < 0 ||
      phase >= kPhases) {
    return std::nullopt;
  }
  s.phase = static_cast<Phase>(phase);
  return s;
}

void plant_stall(const std::string& spec, int this_rank, const std::string& this_host) {
  const auto bad = [&](const std::string& why) {
    throw std::invalid_argument("HPCTRAIN_TEST_STALL=\"" + spec + "\": " + why +
                                " (want RANK:STEP:PHASE:SECONDS or @HOST:STEP:PHASE:SECONDS)");
  };
  long long rank = 0, step = 0;
  char when[16] = {}, phase[32] = {};
  double seconds = 0;
  std::string rest = spec;
  std::string host;  // "@HOST": every rank on that host
  if (!spec.empty() && spec[0] == '@') {
    const size_t colon = spec.find(':');
    host = spec.substr(1, colon == std::string::npos ? std::string::npos : colon - 1);
    if (host.empty()) bad("no host after @");
    rest = "0" + (colon == std::string::npos ? std::string() : spec.substr(colon));
  }
  if (std::sscanf(rest.c_str(), "%lld:%15[a-z0-9+]:%31[a-z-]:%lf", &rank, when, phase, &seconds) !=
      4) {
    bad("not four fields");
  }
  // "every", or "N+": every step from N on.
  const std::string when_text = when;
  const bool every = when_text == "every" || (!when_text.empty() && when_text.back() == '+');
  if (when_text != "every" && std::sscanf(when, "%lld", &step) != 1) {
    bad("STEP is neither a number, N+ nor every");
  }
  static const std::array<std::pair<const char*, Phase>, 8> kPlantable = {{
      {"data", Phase::kDataWait},
      {"forward", Phase::kForward},
      {"backward", Phase::kBackward},
      {"allreduce", Phase::kAllReduce},
      {"agreement", Phase::kAgreement},
      {"checkpoint", Phase::kCheckpoint},
      {"eval", Phase::kEval},
      {"eval-batch", Phase::kEval},
  }};
  Stall stall;
  for (const auto& [name, p] : kPlantable) {
    if (std::string(phase) == name) {
      stall.phase = p;
      stall.armed = true;
    }
  }
  stall.per_batch = std::string(phase) == "eval-batch";
  if (!stall.armed) bad(std::string("unknown phase ") + phase);
  if (seconds <= 0) bad("SECONDS must be above 0");
  if (host.empty() ? rank != this_rank : host != this_host) {
    g_stall = Stall{};  // another rank's: none here (a plant replaces the one before)
    return;
  }
  stall.every = every;
  stall.step = step;
  stall.seconds = seconds;
  g_stall_done.store(false);
  g_stall = stall;
}

}  // namespace hpctrain::progress
