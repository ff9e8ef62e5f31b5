// Every key's limits, generated from the schema (runtime/spec/schema.hpp fields()), so a key
// added there gets its tests without anyone writing them: for each number with a bound, the bound
// is accepted and a value just past it is refused with an error naming the key and its range; for
// each choice, every allowed value is accepted and an unknown one refused with the allowed list.
// The bounds themselves are pinned by tests/unit/launcher/golden/spec-limits.txt, so changing one
// is a reviewed diff (HPCTRAIN_UPDATE_GOLDENS=1 rewrites it).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "spec/document.hpp"
#include "spec/literal.hpp"
#include "spec/schema.hpp"
#include "support/test_util.hpp"

namespace hpctrain::spec {
namespace {

using test::TempDir;

// A boundary value can be valid for its key and still trip a check across keys; this table says
// which, and the overrides that make the rest of the spec fit the value (given as --set text).
struct Adjustment {
  std::string_view key;
  std::string_view check;  // the cross-key check the value would otherwise trip
  std::function<std::vector<std::string>(const std::string& value)> overrides;
};

std::vector<std::string> no_full_batch(const std::string& /*value*/) {
  return {"train.max_steps=1"};
}

const std::vector<Adjustment>& adjustments() {
  static const std::vector<Adjustment> kTable = {
      {"job.nodes", "synthetic epoch holds a global batch", no_full_batch},
      {"job.tasks_per_node", "synthetic epoch holds a global batch", no_full_batch},
      {"train.batch_size", "synthetic epoch holds a global batch", no_full_batch},
      {"data.synthetic_samples", "synthetic epoch holds a global batch", no_full_batch},
      {"job.gpus_per_node", "one rank per GPU",
       [](const std::string& v) {
         return std::vector<std::string>{"job.tasks_per_node=" + (v == "0" ? "1" : v),
                                         "train.max_steps=1"};
       }},
      {"preemption.signal_lead_s", "the signal leaves a minute of job.time",
       [](const std::string&) { return std::vector<std::string>{"job.time=2-00:00:00"}; }},
      {"train.precision", "fp16 needs GPUs",
       [](const std::string&) { return std::vector<std::string>{"job.gpus_per_node=1"}; }},
      {"job.container.runtime", "a container runtime needs an image",
       [](const std::string&) { return std::vector<std::string>{"job.container.image=i.sif"}; }},
      {"resilience.on_node_loss", "replace needs a spare node, shrink a second node",
       [](const std::string&) { return std::vector<std::string>{"resilience.spare_nodes=1"}; }},
      {"train.schedule.name", "multistep needs milestones",
       [](const std::string&) {
         return std::vector<std::string>{"train.schedule.milestones=[1, 2]"};
       }},
  };
  return kTable;
}

// How the checks write a bound: integral values without a fraction, others in shortest form.
std::string bound_text(double v) {
  return v == std::floor(v) ? std::to_string(static_cast<int64_t>(v)) : literal_of(v);
}

std::string value_text(const Field& f, double v) {
  return f.type == Type::kInt ? std::to_string(static_cast<int64_t>(v)) : literal_of(v);
}

// A value just outside a bound: the next integer, or a relative 1e-9 past it.
double past(const Field& f, double bound, double direction) {
  if (f.type == Type::kInt) return bound + direction;
  return bound + direction * 1e-9 * std::max(1.0, std::abs(bound));
}

std::vector<std::string> choices_of(const Field& f) {
  std::vector<std::string> out;
  std::string_view rest = f.choices;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    out.emplace_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return out;
}

struct Case {
  std::string name;  // for the test's name
  std::string key, value;
  bool accepted;
  std::vector<std::string> message_words;  // a refusal's message holds each
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& f : fields()) {
    const std::string key(f.path);
    std::string id = key;
    std::replace(id.begin(), id.end(), '.', '_');
    if (f.type == Type::kInt || f.type == Type::kFloat) {
      std::vector<std::string> range;
      for (double bound : {f.min, f.max}) {
        if (std::isfinite(bound)) range.push_back(bound_text(bound));
      }
      if (std::isfinite(f.min)) {
        out.push_back({id + "_min_accepted", key, value_text(f, f.min), true, {}});
        out.push_back(
            {id + "_below_min_refused", key, value_text(f, past(f, f.min, -1)), false, range});
      }
      if (std::isfinite(f.max)) {
        out.push_back({id + "_max_accepted", key, value_text(f, f.max), true, {}});
        out.push_back(
            {id + "_above_max_refused", key, value_text(f, past(f, f.max, +1)), false, range});
      }
    }
    if (!f.choices.empty()) {
      std::vector<std::string> listed;
      for (const auto& c : choices_of(f)) {
        out.push_back({id + "_" + c + "_accepted", key, c, true, {}});
        listed.push_back("\"" + c + "\"");
      }
      out.push_back({id + "_unknown_refused", key, "no-such-choice", false, listed});
    }
  }
  return out;
}

class SpecLimit : public testing::TestWithParam<Case> {};

TEST_P(SpecLimit, Holds) {
  const Case& c = GetParam();
  TempDir dir;
  test::write_text(dir / "spec.toml", test::minimal_spec());
  auto options = test::options_for(dir / "spec.toml");
  for (const auto& a : adjustments()) {
    if (a.key == c.key) options.overrides = a.overrides(c.value);
  }
  options.overrides.push_back(c.key + "=" + c.value);
  try {
    const Resolved r = load(options);
    ASSERT_TRUE(c.accepted) << c.key << " = " << c.value << " was accepted";
    // The value itself was taken, not a default in its place: the frozen spec holds it.
    const Document frozen = parse_text(freeze(r.spec), "frozen spec");
    const toml::value* value = &frozen.root;
    for (size_t start = 0, dot = 0; dot != std::string::npos; start = dot + 1) {
      dot = c.key.find('.', start);
      value = &value->as_table().at(c.key.substr(start, dot - start));
    }
    const std::string want =
        find_field(c.key)->type == Type::kString ? literal_of(c.value) : c.value;
    EXPECT_EQ(literal_of(*value), want);
  } catch (const SpecError& e) {
    ASSERT_FALSE(c.accepted) << c.key << " = " << c.value << " was refused:\n"
                             << format_all(e.diagnostics());
    const Diagnostic* d = nullptr;
    for (const auto& x : e.diagnostics()) {
      if (x.key == c.key && !d) d = &x;
    }
    ASSERT_NE(d, nullptr) << "no error names " << c.key << ":\n" << format_all(e.diagnostics());
    EXPECT_NE(d->format().find("[" + c.key + "]"), std::string::npos) << d->format();
    for (const auto& word : c.message_words) {
      EXPECT_NE(d->message.find(word), std::string::npos) << d->format() << "\nlacks " << word;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schema, SpecLimit, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& param) {
                           std::string name = param.param.name;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(SpecLimits, EveryBoundedAndChoiceKeyIsCovered) {
  size_t bounded = 0, choice = 0;
  for (const auto& f : fields()) {
    bounded += std::isfinite(f.min) || std::isfinite(f.max);
    choice += !f.choices.empty();
  }
  // Sanity: the schema has plenty of both, so a generator gone silent is noticed.
  EXPECT_GT(bounded, 30u);
  EXPECT_GT(choice, 10u);
  const auto all = cases();
  for (const auto& f : fields()) {
    const size_t n =
        std::count_if(all.begin(), all.end(), [&](const Case& c) { return c.key == f.path; });
    const size_t want = (std::isfinite(f.min) ? 2 : 0) + (std::isfinite(f.max) ? 2 : 0) +
                        (f.choices.empty() ? 0 : choices_of(f).size() + 1);
    EXPECT_EQ(n, want) << f.path;
  }
  for (const auto& a : adjustments()) EXPECT_NE(find_field(a.key), nullptr) << a.key;
}

// The bounds and choices, one key a line; the golden pins them.
TEST(SpecLimits, LimitsMatchTheGolden) {
  std::string text;
  for (const auto& f : fields()) {
    if (std::isfinite(f.min) || std::isfinite(f.max)) {
      text += std::string(f.path) + " " + std::string(type_name(f.type)) + " " +
              (std::isfinite(f.min) ? bound_text(f.min) : "-inf") + " " +
              (std::isfinite(f.max) ? bound_text(f.max) : "inf") + "\n";
    }
    if (!f.choices.empty())
      text += std::string(f.path) + " one of " + std::string(f.choices) + "\n";
  }
  const auto golden =
      test::source_dir() / "tests" / "unit" / "launcher" / "golden" / "spec-limits.txt";
  if (std::getenv("HPCTRAIN_UPDATE_GOLDENS")) test::write_text(golden, text);
  EXPECT_EQ(test::read_text(golden), text)
      << "a key's limits changed; HPCTRAIN_UPDATE_GOLDENS=1 rewrites " << golden;
}

}  // namespace
}  // namespace hpctrain::spec
