// The trainer's reporter (train/reporter.hpp): an event handed over once reaches every output,
// each writing it as docs/run-directory.md, docs/tensorboard.md and the log describe it.
#include "train/reporter.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "support/temp_dir.hpp"
#include "tensorboard/event_file.hpp"

namespace hpctrain::train {
namespace {

std::vector<nlohmann::json> metrics_lines(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir / layout::kMetrics);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<tensorboard::EventRecord> summaries(const std::filesystem::path& run_dir) {
  std::vector<tensorboard::EventRecord> out;
  for (const auto& f : std::filesystem::directory_iterator(run_dir / layout::kTensorBoard)) {
    for (auto& e : tensorboard::read_event_file(f.path()).events) {
      if (!e.scalars.empty()) out.push_back(e);
    }
  }
  return out;
}

Trained window() {
  Trained t;
  t.step = 40;
  t.epoch = 1;
  t.epochs = 3;
  t.total_steps = 702;
  t.first_step = 31;
  t.loss = 1.1581;
  t.lr = 0.1;
  t.images_per_s = 367.2;
  t.seconds = 3.49;
  t.loss_scale = 1;
  t.eta_s = 63.4;
  t.checkpoint_seconds = 0.25;
  t.wall_time = 1795915802.41;
  return t;
}

TEST(Reporter, ATrainWindowReachesTheLogMetricsAndTensorBoardOnce) {
  test::TempDir dir;
  std::ostringstream log;
  Reporter reporter(ReporterOptions{/*rank0=*/true, &log, dir.path()});
  reporter.report(window());

  const auto lines = metrics_lines(dir.path());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            nlohmann::json::parse(R"({"kind":"train","step":40,"epoch":1,"loss":1.1581,"lr":0.1,
              "images_per_s":367.2,"window_first_step":31,"window_seconds":3.49,"loss_scale":1.0,
              "checkpoint_seconds":0.25,"wall_time":1795915802.41})"));
  const auto events = summaries(dir.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].step, 40);
  EXPECT_DOUBLE_EQ(events[0].wall_time, 1795915802.41);
  ASSERT_EQ(events[0].scalars.size(), 4u);
  EXPECT_EQ(events[0].scalars[0].tag, "train/loss");
  EXPECT_NEAR(events[0].scalars[0].value, 1.1581, 1e-6);
  EXPECT_EQ(log.str(),
            rt::rank_prefix() +
                "epoch 1/3 step 40/702 loss 1.1581 lr 0.10000 images/s 367 (steps 31-40) scale 1 "
                "eta 1m03s\n");
}

TEST(Reporter, AnEvaluationReachesEveryOutput) {
  test::TempDir dir;
  std::ostringstream log;
  Reporter reporter(ReporterOptions{true, &log, dir.path()});
  EvalResult r;
  r.samples = 10000;
  r.loss = 0.2562;
  r.top1 = 0.9134;
  r.top5 = 0.9988;
  reporter.report(Evaluated{702, 3, r, 6.1, 1795916251.03});
  const auto lines = metrics_lines(dir.path());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["kind"], "eval");
  EXPECT_EQ(lines[0]["top1"], 0.9134);
  EXPECT_EQ(lines[0]["samples"], 10000);
  EXPECT_EQ(lines[0]["seconds"], 6.1);
  const auto events = summaries(dir.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].scalars[0].tag, "eval/top1");
  EXPECT_NE(log.str().find("eval epoch 3 step 702: top-1 91.34% top-5 99.88% loss 0.2562 (10000 "
                           "images, 6.1 s)"),
            std::string::npos)
      << log.str();
}

TEST(Reporter, RanksRecordEveryWindowAndALineOnlyForAStraggler) {
  test::TempDir dir;
  std::ostringstream log;
  Reporter reporter(ReporterOptions{true, &log, dir.path()});
  RankSpread even{/*slowest=*/1, /*slowest_s=*/0.011, /*median_s=*/0.011, /*behind=*/false};
  reporter.report(RanksCompared{10, {0.010, 0.011}, {0.012, 0.013}, even, "node1", 1.5});
  EXPECT_EQ(log.str(), "");
  RankSpread behind{2, 0.061, 0.011, true};
  reporter.report(RanksCompared{
      20, {0.010, 0.011, 0.061}, {0.012, 0.013, 0.072}, behind, std::string("node3"), 2.5});
  const auto lines = metrics_lines(dir.path());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[0].contains("behind_rank"));
  EXPECT_EQ(lines[1]["behind_rank"], 2);
  EXPECT_EQ(lines[1]["slowest_host"], "node3");
  EXPECT_NE(log.str().find("straggler: rank 2 (node3) busy 0.061 s a step (p50; p95 0.072 s), "
                           "5.5x the ranks' median 0.011 s"),
            std::string::npos)
      << log.str();
  EXPECT_TRUE(summaries(dir.path()).empty());  // not a TensorBoard scalar
}

TEST(Reporter, OtherRanksAndRunsWithoutADirectoryWriteNothing) {
  test::TempDir dir;
  std::ostringstream log;
  Reporter other(ReporterOptions{/*rank0=*/false, &log, dir.path()});
  other.report(window());
  EXPECT_EQ(log.str(), "");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / layout::kMetrics));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / layout::kTensorBoard));
  Reporter no_dir(ReporterOptions{true, &log, {}});
  no_dir.report(window());
  EXPECT_NE(log.str().find("step 40/702"), std::string::npos);
}

TEST(Reporter, EachOutputTakesEachEventOnce) {
  struct Counting : ReportOutput {
    using ReportOutput::on;
    int* trained;
    int* evaluated;
    Counting(int* t, int* e) : trained(t), evaluated(e) {}
    void on(const Trained&) override { ++*trained; }
    void on(const Evaluated&) override { ++*evaluated; }
  };
  int trained[2] = {}, evaluated[2] = {};
  std::vector<std::unique_ptr<ReportOutput>> outputs;
  outputs.push_back(std::make_unique<Counting>(&trained[0], &evaluated[0]));
  outputs.push_back(std::make_unique<Counting>(&trained[1], &evaluated[1]));
  Reporter reporter(std::move(outputs));
  reporter.report(window());
  reporter.report(window());
  reporter.report(Evaluated{});
  reporter.report(Started{});  // nobody shows it
  EXPECT_EQ(trained[0], 2);
  EXPECT_EQ(trained[1], 2);
  EXPECT_EQ(evaluated[0], 1);
  EXPECT_EQ(evaluated[1], 1);
}

}  // namespace
}  // namespace hpctrain::train
