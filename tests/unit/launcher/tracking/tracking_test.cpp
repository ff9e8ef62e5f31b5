// What a tracking push sends (launcher/tracking/push.hpp): each metric's steps past the server's
// newest, each step once (a resumed attempt's repeated steps left out, its first record kept);
// the frozen spec as params; the ledger as an MLflow status; tracking.json read back as written
// and a damaged one ignored; a server that cannot be reached is an error within the deadline, and
// a run whose spec has no [tracking] is refused. The server itself: tests/unit/launcher/cli/
// cli_track.sh (a real mlflow server) and tests/slurm/preempt.sh (a run requeued twice).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "spec/spec.hpp"
#include "support/temp_dir.hpp"
#include "support/test_util.hpp"
#include "tracking/push.hpp"

namespace hpctrain::tracking {
namespace {

using records::Attempt;
using records::Reason;

records::TrainRecord trained(int64_t step, double loss, double images_per_s, double wall) {
  records::TrainRecord r;
  r.step = step;
  r.loss = loss;
  r.lr = 0.1;
  r.images_per_s = images_per_s;
  r.loss_scale = 1.0;
  r.wall_time = wall;
  return r;
}

records::EvalRecord evaluated(int64_t step, double top1, double wall) {
  records::EvalRecord r;
  r.step = step;
  r.loss = 0.5;
  r.top1 = top1;
  r.top5 = 0.99;
  r.wall_time = wall;
  return r;
}

spec::Resolved load_spec(const std::string& text) {
  test::TempDir dir;
  return spec::load(test::spec_in(dir, text));
}

std::vector<MetricPoint> of_key(const std::vector<MetricPoint>& points, const std::string& key) {
  std::vector<MetricPoint> out;
  for (const auto& p : points) {
    if (p.key == key) out.push_back(p);
  }
  return out;
}

TEST(Tracking, EachStepOnceTheFirstRecordOfARepeatedStepKept) {
  // Attempt 1 logged 4, 8, 12 and died; attempt 2 resumed from 4 and logged 8 and 12 again (the
  // same loss, bitwise resume; another throughput) and 16.
  const std::vector<records::MetricsRecord> records = {
      trained(4, 2.0, 100, 1000.5), trained(8, 1.5, 110, 1001), trained(12, 1.2, 120, 1002),
      trained(8, 1.5, 90, 1100),    trained(12, 1.2, 95, 1101), trained(16, 1.0, 99, 1102),
      evaluated(16, 0.7, 1103)};
  const auto points = new_points(records, {});
  const auto loss = of_key(points, "train.loss");
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(loss[1].step, 8);
  EXPECT_EQ(loss[3].step, 16);
  const auto speed = of_key(points, "train.images_per_s");
  ASSERT_EQ(speed.size(), 4u);
  EXPECT_EQ(speed[1].value, 110) << "a repeated step must keep its first record";
  EXPECT_EQ(speed[1].timestamp_ms, 1001000);
  EXPECT_EQ(loss[0].timestamp_ms, 1000500);
  for (const char* key : {"train.lr", "train.loss_scale", "eval.loss", "eval.top1", "eval.top5"}) {
    EXPECT_FALSE(of_key(points, key).empty()) << key;
  }
  EXPECT_EQ(of_key(points, "eval.top1").at(0).value, 0.7);
}

TEST(Tracking, OnlyStepsPastTheServersNewestAreSent) {
  const std::vector<records::MetricsRecord> records = {
      trained(4, 2.0, 100, 1), trained(8, 1.5, 110, 2), trained(12, 1.2, 120, 3),
      evaluated(12, 0.5, 4)};
  const auto points = new_points(records, {{"train.loss", 8}, {"train.lr", 12}});
  const auto loss = of_key(points, "train.loss");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(loss[0].step, 12);
  EXPECT_TRUE(of_key(points, "train.lr").empty());
  EXPECT_EQ(of_key(points, "train.images_per_s").size(), 3u)
      << "a key the server lacks is sent whole";
  // Pushed again with what the server then holds: nothing.
  std::map<std::string, int64_t> held;
  for (const auto& p : new_points(records, {})) held[p.key] = std::max(held[p.key], p.step);
  EXPECT_TRUE(new_points(records, held).empty());
}

TEST(Tracking, ANonFiniteLossIsSentAndAnAbsentFieldIsNot) {
  records::TrainRecord r = trained(4, std::nan(""), 100, 1);
  r.lr.reset();
  const auto points = new_points({r}, {});
  const auto loss = of_key(points, "train.loss");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_TRUE(std::isnan(loss[0].value));
  EXPECT_TRUE(of_key(points, "train.lr").empty());
}

TEST(Tracking, ParamsAreTheFrozenSpecWithStringsUnquoted) {
  const auto resolved = load_spec(test::minimal_spec(
      "[tracking]\nmlflow_uri = \"http://127.0.0.1:5000\"\nexperiment = \"cifar \\\"q\\\"\"\n"));
  const auto params = params_of(resolved.spec);
  std::map<std::string, std::string> by_key;
  for (const auto& p : params) by_key[p.key] = p.value;
  EXPECT_EQ(by_key.at("tracking.mlflow_uri"), "http://127.0.0.1:5000");
  EXPECT_EQ(by_key.at("tracking.experiment"), "cifar \"q\"");
  EXPECT_EQ(by_key.at("job.name"), resolved.spec.job.name);
  EXPECT_EQ(by_key.at("job.nodes"), std::to_string(resolved.spec.job.nodes));
  EXPECT_EQ(by_key.count("job.profile"), 0u);
  for (const auto& p : params) EXPECT_LE(p.value.size(), kMaxParamValue) << p.key;
}

Attempt ended(Reason reason, const std::string& end) {
  Attempt a;
  a.job_id = "7";
  a.start = "2026-11-28T09:00:00Z";
  a.end = end;
  a.reason = reason;
  return a;
}

TEST(Tracking, TheLedgerGivesTheMlflowStatus) {
  EXPECT_EQ(status_of({}).status, "RUNNING");
  EXPECT_EQ(status_of({ended(Reason::kRequeued, "2026-11-28T09:01:00Z")}).status, "RUNNING");
  EXPECT_EQ(status_of({ended(Reason::kChained, "2026-11-28T09:01:00Z")}).status, "RUNNING");
  const auto done = status_of({ended(Reason::kRequeued, "2026-11-28T09:01:00Z"),
                               ended(Reason::kCompleted, "2026-11-28T09:02:00Z")});
  EXPECT_EQ(done.status, "FINISHED");
  ASSERT_TRUE(done.end_ms);
  EXPECT_EQ(*done.end_ms % 60000, 0);
  EXPECT_EQ(status_of({ended(Reason::kTerminated, "2026-11-28T09:01:00Z")}).status, "KILLED");
  EXPECT_EQ(status_of({ended(Reason::kFailed, "2026-11-28T09:01:00Z")}).status, "FAILED");
  EXPECT_EQ(status_of({ended(Reason::kNoProgress, "2026-11-28T09:01:00Z")}).status, "FAILED");
}

TEST(Tracking, StateRoundTripsAndADamagedFileReadsAsNone) {
  test::TempDir dir;
  EXPECT_EQ(read_state(dir.path()), std::nullopt);
  TrackingState s;
  s.mlflow_uri = "http://h:5000";
  s.run_id = "abc";
  s.experiment_id = "3";
  s.params_logged = true;
  s.through_step = 400;
  s.error = "down";
  write_state(dir.path(), s);
  const auto back = read_state(dir.path());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->run_id, "abc");
  EXPECT_EQ(back->through_step, 400);
  EXPECT_TRUE(back->params_logged);
  EXPECT_EQ(back->error, "down");
  std::ofstream(dir / kStateFile) << "{\"run_id\": ";
  EXPECT_EQ(read_state(dir.path()), std::nullopt);
  std::ofstream(dir / kStateFile) << "{\"run_id\": 5}";
  EXPECT_EQ(read_state(dir.path()), std::nullopt);
}

TEST(Tracking, AServerThatCannotBeReachedIsAnErrorWithinTheDeadline) {
  // Port 1 on loopback: refused at once.
  Http http("http://127.0.0.1:1", Clock::now() + std::chrono::seconds(20));
  const auto t0 = Clock::now();
  EXPECT_THROW(http.get("/api/2.0/mlflow/experiments/search"), HttpUnreachable);
  EXPECT_LT(seconds_since(t0), 10);
  Http late("http://127.0.0.1:1", Clock::now() - std::chrono::seconds(1));
  try {
    late.get("/x");
    FAIL() << "a request past its deadline was sent";
  } catch (const HttpUnreachable& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1/x"), std::string::npos) << e.what();
  }
}

TEST(Tracking, EscapeKeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(Http::escape("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(Http::escape("a b&c=/'"), "a%20b%26c%3D%2F%27");
}

TEST(Tracking, ARunWithoutTrackingIsRefusedNamingTheSpec) {
  test::TempDir dir;
  const auto resolved = load_spec(test::minimal_spec());
  std::ofstream(dir / "spec.toml") << spec::freeze(resolved.spec);
  try {
    push(dir.path(), Clock::now() + std::chrono::seconds(5));
    FAIL() << "a run without [tracking] was pushed";
  } catch (const NotTracked& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "spec.toml").string()), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / kStateFile));
}

}  // namespace
}  // namespace hpctrain::tracking
