// The run directory's records (common/records.hpp): each record's writer gives the bytes the
// worker, the supervisor and submit have always written, its reader reads them (and the lines of
// docs/run-directory.md) back, malformed lines are skipped and counted, and every name parses
// back.
#include "common/records.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/durable_file.hpp"
#include "common/error.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::records {
namespace {

using test::TempDir;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

MetricsRecord parsed(const std::string& line) {
  LineStatus status = LineStatus::kMalformed;
  auto r = parse_metrics_line(line, &status);
  EXPECT_EQ(status, LineStatus::kRecord) << line;
  if (!r) throw std::runtime_error("not a record: " + line);
  return *r;
}

// The trainer's records as it writes them with nlohmann::json today: keys sorted.
TEST(Records, TrainAndEvalLinesAreTheWorkersBytes) {
  TrainRecord t;
  t.step = 40;
  t.epoch = 1;
  t.loss = 1.1581;
  t.lr = 0.1;
  t.images_per_s = 367.2;
  t.window_first_step = 31;
  t.window_seconds = 3.49;
  t.loss_scale = 1.0;
  t.wall_time = 1795915802.41;
  const std::string train =
      R"({"epoch":1,"images_per_s":367.2,"kind":"train","loss":1.1581,"loss_scale":1.0,"lr":0.1,)"
      R"("step":40,"wall_time":1795915802.41,"window_first_step":31,"window_seconds":3.49})";
  EXPECT_EQ(to_line(t), train);
  EXPECT_EQ(to_line(parsed(train)), train);

  EvalRecord e;
  e.step = 702;
  e.epoch = 3;
  e.loss = 0.2562;
  e.top1 = 0.9134;
  e.top5 = 0.9988;
  e.samples = 10000;
  e.seconds = 6.1;
  e.wall_time = 1795916251.03;
  const std::string eval =
      R"({"epoch":3,"kind":"eval","loss":0.2562,"samples":10000,"seconds":6.1,"step":702,)"
      R"("top1":0.9134,"top5":0.9988,"wall_time":1795916251.03})";
  EXPECT_EQ(to_line(e), eval);
  const auto back = std::get<EvalRecord>(parsed(eval));
  EXPECT_EQ(back.samples, 10000);
  EXPECT_EQ(back.top1, 0.9134);
  EXPECT_EQ(back.epoch, 3);
}

TEST(Records, RanksStartedAndSuspectsLinesAreTheWorkersBytes) {
  RanksRecord r;
  r.step = 40;
  r.busy_p50_s = {0.011, 0.0106, 0.061};
  r.busy_p95_s = {0.012, 0.011, 0.072};
  r.slowest_rank = 2;
  r.median_busy_s = 0.011;
  r.slowest_busy_s = 0.061;
  r.wall_time = 1.5;
  // No host known: null; no verdict: no behind_rank.
  const std::string ranks =
      R"({"busy_p50_s":[0.011,0.0106,0.061],"busy_p95_s":[0.012,0.011,0.072],"kind":"ranks",)"
      R"("median_busy_s":0.011,"slowest_busy_s":0.061,"slowest_host":null,"slowest_rank":2,)"
      R"("step":40,"wall_time":1.5})";
  EXPECT_EQ(to_line(r), ranks);
  EXPECT_EQ(to_line(parsed(ranks)), ranks);
  r.slowest_host = "node3";
  r.behind_rank = 2;
  const auto with_verdict = std::get<RanksRecord>(parsed(to_line(r)));
  EXPECT_EQ(with_verdict.slowest_host, "node3");
  EXPECT_EQ(with_verdict.behind_rank, 2);
  EXPECT_EQ(with_verdict.busy_p95_s, r.busy_p95_s);

  StartedRecord s;
  s.step = 1;
  s.epoch = 1;
  s.world_size = 4;
  s.wall_time = 2.25;
  EXPECT_EQ(to_line(s),
            R"({"epoch":1,"kind":"started","resumed_from":null,"step":1,"wall_time":2.25,)"
            R"("world_size":4})");
  s.resumed_from = 600;
  s.tag = "1.2";
  const std::string started =
      R"({"epoch":1,"kind":"started","resumed_from":600,"step":1,"tag":"1.2","wall_time":2.25,)"
      R"("world_size":4})";
  EXPECT_EQ(to_line(s), started);
  EXPECT_EQ(to_line(parsed(started)), started);

  SuspectsRecord v;
  v.kind = MetricsKind::kEvict;
  v.tag = "0.0";
  v.step = 57;
  v.ranks = {2, 3};
  v.hosts = {"node2"};
  v.message = R"(straggler: node "node2" \ slow)";
  v.wall_time = 3.5;
  const std::string evict =
      R"({"hosts":["node2"],"kind":"evict","message":"straggler: node \"node2\" \\ slow",)"
      R"("ranks":[2,3],"step":57,"tag":"0.0","wall_time":3.5})";
  EXPECT_EQ(to_line(v), evict);
  const auto back = std::get<SuspectsRecord>(parsed(evict));
  EXPECT_EQ(back.kind, MetricsKind::kEvict);
  EXPECT_EQ(back.message, v.message) << "quotes and backslashes are the message's own";
  EXPECT_EQ(back.ranks, v.ranks);
  EXPECT_EQ(kind_of(back), MetricsKind::kEvict);
  v.kind = MetricsKind::kTrain;
  EXPECT_THROW(to_line(v), std::invalid_argument);
}

TEST(Records, ARollbackLineRoundTrips) {
  RollbackRecord r;
  r.step = 52;
  r.rolled_back_to = 45;
  r.skipped_from = 46;
  r.samples_skipped = 224;
  r.rollbacks = 2;
  r.message = "the loss is -nan over steps 49-52";
  r.wall_time = 4.5;
  const std::string line =
      R"({"kind":"rollback","message":"the loss is -nan over steps 49-52","rollbacks":2,)"
      R"("rolled_back_to":45,"samples_skipped":224,"skipped_from":46,"step":52,"wall_time":4.5})";
  EXPECT_EQ(to_line(r), line);
  const auto back = std::get<RollbackRecord>(parsed(line));
  EXPECT_EQ(kind_of(back), MetricsKind::kRollback);
  EXPECT_EQ(back.rolled_back_to, 45);
  EXPECT_EQ(back.skipped_from, 46);
  EXPECT_EQ(back.samples_skipped, 224);
  EXPECT_EQ(back.rollbacks, 2);
  EXPECT_EQ(to_line(back), line);
}

// docs/run-directory.md's examples, with their keys in the documented order.
TEST(Records, TheDocumentedLinesRead) {
  const auto t = std::get<TrainRecord>(parsed(
      R"({"kind":"train","step":40,"epoch":1,"loss":1.1581,"lr":0.1,"images_per_s":367.2,)"
      R"("window_first_step":31,"window_seconds":3.49,"loss_scale":1.0,"checkpoint_seconds":0.21,)"
      R"("wall_time":1795915802.41})"));
  EXPECT_EQ(t.step, 40);
  EXPECT_EQ(t.window_first_step, 31);
  EXPECT_DOUBLE_EQ(*t.checkpoint_seconds, 0.21);
  EXPECT_DOUBLE_EQ(*t.wall_time, 1795915802.41);
  const auto r = std::get<RanksRecord>(parsed(
      R"({"kind":"ranks","step":40,"busy_p50_s":[0.011,0.0106,0.061],"busy_p95_s":[0.012,0.011,)"
      R"(0.072],"slowest_rank":2,"slowest_host":"node3","median_busy_s":0.011,)"
      R"("slowest_busy_s":0.061,"behind_rank":2,"wall_time":1795915802.40})"));
  EXPECT_EQ(r.busy_p50_s.size(), 3u);
  EXPECT_EQ(r.slowest_host, "node3");
  const auto h = std::get<SuspectsRecord>(parsed(
      R"({"kind":"hang","tag":"0.0","step":57,"ranks":[2,3],"hosts":["node2"],"message":"hang: )"
      R"(no progress for 61 s","wall_time":1795915802.40})"));
  EXPECT_EQ(h.kind, MetricsKind::kHang);
  EXPECT_EQ(h.tag, "0.0");
  EXPECT_EQ(h.hosts, std::vector<std::string>{"node2"});
  // An older worker's train line: no window, no loss scale; nothing of it is invented.
  const std::string old = R"({"epoch":1,"kind":"train","loss":2.5,"step":20})";
  const auto o = std::get<TrainRecord>(parsed(old));
  EXPECT_FALSE(o.window_first_step);
  EXPECT_FALSE(o.wall_time);
  EXPECT_EQ(to_line(o), old);
}

TEST(Records, ANonFiniteNumberIsWrittenAsNullAndReadsBackNotFinite) {
  TrainRecord t;
  t.step = 3;
  t.loss = std::nan("");
  EXPECT_EQ(to_line(t), R"({"kind":"train","loss":null,"step":3})");
  const auto back = std::get<TrainRecord>(parsed(to_line(t)));
  ASSERT_TRUE(back.loss);
  EXPECT_TRUE(std::isnan(*back.loss));
  EXPECT_FALSE(back.lr);  // absent stays absent
  // A value of another type reads as absent.
  const auto odd = std::get<TrainRecord>(parsed(R"({"kind":"train","step":3,"lr":"x"})"));
  EXPECT_FALSE(odd.lr);
}

TEST(Records, MalformedLinesAndUnknownKinds) {
  for (const char* line : {"not json", "[1,2]", R"({"step":1})", R"({"kind":7,"step":1})",
                           R"({"kind":"train","epoch":1})", R"({"kind":"train","step":1.5})",
                           R"({"kind":"train","step":"1"})", R"({"kind":"train","step":1)", ""}) {
    LineStatus status = LineStatus::kRecord;
    EXPECT_FALSE(parse_metrics_line(line, &status)) << line;
    EXPECT_EQ(status, LineStatus::kMalformed) << line;
  }
  LineStatus status = LineStatus::kRecord;
  EXPECT_FALSE(parse_metrics_line(R"({"kind":"newer","step":1})", &status));
  EXPECT_EQ(status, LineStatus::kUnknownKind);
}

TEST(Records, ReadMetricsKeepsCompleteLinesInOrderAndCountsTheMalformed) {
  TempDir dir;
  const MetricsRead none = read_metrics(dir.path());
  EXPECT_TRUE(none.records.empty());
  EXPECT_FALSE(none.last_line);
  write_text(dir / "metrics.jsonl",
             "{\"kind\":\"train\",\"step\":20,\"epoch\":1,\"loss\":2.5,\"wall_time\":100.5}\n"
             "not json\n"
             "\n"
             "{\"kind\":\"train\",\"epoch\":1}\n"
             "{\"kind\":\"eval\",\"step\":40,\"epoch\":1,\"top1\":0.75,\"wall_time\":101}\n"
             "{\"kind\":\"newer\",\"step\":41}\n"
             "{\"kind\":\"train\",\"step\":20,\"epoch\":1,\"loss\":2.4,\"wall_time\":200}\n"
             "{\"kind\":\"train\",\"step\":60,\"lo");
  const MetricsRead m = read_metrics(dir.path());
  EXPECT_EQ(m.malformed, 2u);
  ASSERT_EQ(m.records.size(), 3u);
  EXPECT_EQ(std::get<TrainRecord>(m.records[0]).step, 20);
  EXPECT_EQ(std::get<EvalRecord>(m.records[1]).top1, 0.75);
  EXPECT_EQ(std::get<TrainRecord>(m.records[2]).loss, 2.4);  // the resumed run's repeat, kept
  EXPECT_EQ(m.last_line,
            "{\"kind\":\"train\",\"step\":20,\"epoch\":1,\"loss\":2.4,\"wall_time\":200}");
  ASSERT_TRUE(last_of<TrainRecord>(m.records));
  EXPECT_EQ(last_of<TrainRecord>(m.records)->wall_time, 200);
  EXPECT_FALSE(last_of<RanksRecord>(m.records));
}

// status shows the last line as written when it is neither a train nor an eval record.
TEST(Records, TheLastLineIsTheLastCompleteOneWhateverItHolds) {
  TempDir dir;
  write_text(dir / "metrics.jsonl", "{\"step\":1}\n{\"step\":2}\n{\"step\":3");
  const MetricsRead m = read_metrics(dir.path());
  EXPECT_EQ(m.last_line, "{\"step\":2}");
  EXPECT_EQ(m.malformed, 2u);
  write_text(dir / "metrics.jsonl", "{\"step\":1}\n");
  EXPECT_EQ(read_metrics(dir.path()).last_line, "{\"step\":1}");
}

TEST(Records, TheTailSkipsItsCutFirstLine) {
  TempDir dir;
  std::string text;
  for (int step = 1; step <= 200; ++step) {
    text += R"({"kind":"train","step":)" + std::to_string(step) + "}\n";
  }
  write_text(dir / "metrics.jsonl", text + R"({"kind":"hang","step":201,"tag":"0.0")");
  const MetricsRead tail = read_metrics_tail(dir.path(), 100);
  EXPECT_EQ(tail.malformed, 0u) << "the cut line is not a malformed one";
  ASSERT_FALSE(tail.records.empty());
  EXPECT_LT(tail.records.size(), 10u);
  EXPECT_EQ(std::get<TrainRecord>(tail.records.back()).step, 200);
  EXPECT_EQ(read_metrics_tail(dir.path(), 1 << 20).records.size(), 200u);
}

TEST(Records, MetricsLogAppendsWholeLines) {
  TempDir dir;
  {
    MetricsLog log(dir / "metrics.jsonl");
    TrainRecord t;
    t.step = 1;
    log.write(t);
    StartedRecord s;
    s.step = 1;
    log.write(s);
  }
  SuspectsRecord h;
  h.step = 2;
  h.ranks = {1, 0, 1};
  h.hosts = hosts_of_ranks(h.ranks, {"a", "", "c"});
  append_metrics(dir.path(), h);
  EXPECT_EQ(h.hosts, std::vector<std::string>{"a"}) << "rank 1's host is unknown";
  EXPECT_EQ(read_text(dir / "metrics.jsonl"),
            "{\"kind\":\"train\",\"step\":1}\n"
            "{\"kind\":\"started\",\"resumed_from\":null,\"step\":1}\n"
            "{\"hosts\":[\"a\"],\"kind\":\"hang\",\"message\":\"\",\"ranks\":[1,0,1],\"step\":2,"
            "\"tag\":\"\"}\n");
  EXPECT_THROW(MetricsLog(dir / "no/such/metrics.jsonl"), rt::Error);
  EXPECT_EQ(hosts_of_ranks({3, 1, 9, -1, 2}, {"a", "b", "c", "b"}),
            (std::vector<std::string>{"b", "c"}));
}

TEST(Records, EveryNameParsesBack) {
  for (const auto kind : all<MetricsKind>()) EXPECT_EQ(parse<MetricsKind>(name_of(kind)), kind);
  for (const auto reason : all<Reason>()) EXPECT_EQ(parse<Reason>(name_of(reason)), reason);
  for (const auto cause : all<Cause>()) EXPECT_EQ(parse<Cause>(name_of(cause)), cause);
  for (const auto loss : all<LossCause>()) EXPECT_EQ(parse<LossCause>(name_of(loss)), loss);
  EXPECT_EQ(all<Reason>().size(), 13u);
  EXPECT_EQ(all<Cause>().size(), 14u);
  EXPECT_EQ(all<LossCause>().size(), 6u);
  EXPECT_EQ(name_of(LossCause::kCorruption), "corruption");
  EXPECT_EQ(name_of(LossCause::kGpuHardware), "gpu_hardware");
  EXPECT_EQ(name_of(Cause::kGpuHardware), "gpu_hardware");
  EXPECT_EQ(name_of(LossCause::kSilent), "silent");
  EXPECT_EQ(all<MetricsKind>().size(), 8u);
  EXPECT_EQ(name_of(MetricsKind::kCorrupt), "corrupt");
  EXPECT_EQ(name_of(MetricsKind::kRollback), "rollback");
  EXPECT_EQ(name_of(Reason::kNodeLostRequeued), "node_lost_requeued");
  EXPECT_EQ(name_of(Cause::kStraggler), "straggler");
  EXPECT_FALSE(parse<Reason>("Completed"));
  EXPECT_FALSE(parse<Cause>("slow"));
  EXPECT_FALSE(parse<MetricsKind>(""));
}

TEST(Records, WhatEachReasonMeans) {
  std::vector<std::string> requeue, chain, node_loss, failure, final;
  for (const auto r : all<Reason>()) {
    if (is_requeue(r)) requeue.emplace_back(name_of(r));
    if (is_chain(r)) chain.emplace_back(name_of(r));
    if (is_node_loss(r)) node_loss.emplace_back(name_of(r));
    if (is_failure(r)) failure.emplace_back(name_of(r));
    if (is_final(r)) final.emplace_back(name_of(r));
    // Every line either ends the run or is followed by another attempt or step.
    EXPECT_NE(is_final(r), is_requeue(r) || is_chain(r) || r == Reason::kNodeLost) << name_of(r);
    // A chained line is what its requeued twin would have been, in the next job of a chain.
    const Reason twin = chained(r);
    EXPECT_EQ(is_chain(twin), is_requeue(r) || is_chain(r)) << name_of(r);
    if (is_requeue(r)) {
      EXPECT_EQ(is_failure(twin), is_failure(r)) << name_of(twin) << " counts as a failure apart";
      EXPECT_EQ(is_node_loss(twin), is_node_loss(r)) << name_of(twin);
    } else {
      EXPECT_EQ(twin, r) << name_of(r) << " has no chained twin";
    }
  }
  using Names = std::vector<std::string>;
  EXPECT_EQ(requeue, (Names{"requeued", "failed_requeued", "node_lost_requeued"}));
  EXPECT_EQ(chain, (Names{"chained", "failed_chained", "node_lost_chained"}));
  EXPECT_EQ(name_of(chained(Reason::kRequeued)), "chained");
  EXPECT_EQ(name_of(chained(Reason::kFailedRequeued)), "failed_chained");
  EXPECT_EQ(name_of(chained(Reason::kNodeLostRequeued)), "node_lost_chained");
  EXPECT_EQ(node_loss, (Names{"node_lost", "node_lost_requeued", "node_lost_chained"}));
  EXPECT_EQ(failure, (Names{"failed_requeued", "failed", "failed_chained"}));
  EXPECT_EQ(final, (Names{"completed", "restart_limit", "failed", "terminated", "setup_failed",
                          "no_progress"}));
}

Attempt node_loss_line() {
  Attempt a;
  a.job_id = "12";
  a.restart = 0;
  a.nodes = "node[1-3]";
  a.start = "2026-11-23T23:40:01Z";
  a.end = "2026-11-23T23:41:10Z";
  a.exit_status = 76;
  a.reason = Reason::kNodeLost;
  a.last_step = 40;
  a.world_size = 6;
  a.lost_nodes = "node2";
  a.added_nodes = "node4";
  a.cause = Cause::kNodeLost;
  a.evidence = "slurmd on node2 refused the connection";
  a.loss = LossCause::kRefused;
  a.detected = "2026-11-23T23:41:08.412Z";
  a.detected_by = "slurmd on node2 refused the connection";
  a.stop_s = 1.3;
  a.recover_s = 22.8;
  return a;
}

TEST(Records, LedgerLinesAreTheSupervisorsBytes) {
  Attempt a;
  a.job_id = "4711";
  a.nodes = "node[01-04]";
  a.start = "2026-11-22T02:48:10Z";
  a.end = "2026-11-22T14:43:10Z";
  a.exit_status = 75;
  a.reason = Reason::kRequeued;
  a.last_step = 52000;
  const std::string requeued =
      R"({"job_id":"4711","array_task_id":null,"restart":0,"nodes":"node[01-04]",)"
      R"("start":"2026-11-22T02:48:10Z","end":"2026-11-22T14:43:10Z","exit_status":75,)"
      R"("reason":"requeued","last_step":52000,"step":0,"world_size":null})";
  EXPECT_EQ(to_line(a), requeued);
  EXPECT_EQ(to_line(*parse_attempt_line(requeued)), requeued);

  const std::string lost =
      R"({"job_id":"12","array_task_id":null,"restart":0,"nodes":"node[1-3]",)"
      R"("start":"2026-11-23T23:40:01Z","end":"2026-11-23T23:41:10Z","exit_status":76,)"
      R"("reason":"node_lost","cause":"node_lost","evidence":"slurmd on node2 refused the )"
      R"(connection","last_step":40,"step":0,"world_size":6,"lost_nodes":"node2",)"
      R"("added_nodes":"node4","loss_kind":"refused","detected":"2026-11-23T23:41:08.412Z",)"
      R"("detected_by":"slurmd on node2 refused the connection","stop_s":1.3,"recover_s":22.8})";
  EXPECT_EQ(to_line(node_loss_line()), lost);
  EXPECT_EQ(to_line(*parse_attempt_line(lost)), lost);

  // A ledger written before causes said how the node was lost as its "cause": read as the loss's
  // kind, the cause node_lost (or the hang or straggler it was).
  for (const auto& [old_cause, cause] :
       std::vector<std::pair<std::string, Cause>>{{"refused", Cause::kNodeLost},
                                                  {"silent", Cause::kNodeLost},
                                                  {"hang", Cause::kHang},
                                                  {"straggler", Cause::kStraggler}}) {
    const auto old = parse_attempt_line(
        R"({"job_id":"12","reason":"node_lost","lost_nodes":"node2","added_nodes":"node4",)"
        R"("cause":")" +
        old_cause + R"("})");
    ASSERT_TRUE(old) << old_cause;
    EXPECT_EQ(old->cause, cause) << old_cause;
    EXPECT_EQ(old->loss, parse<LossCause>(old_cause)) << old_cause;
  }

  // A requeue after a loss: no recover_s; the job's exclusion and avoided nodes when set.
  Attempt r = node_loss_line();
  r.reason = Reason::kNodeLostRequeued;
  r.cause = Cause::kHang;
  r.loss = LossCause::kHang;
  r.recover_s.reset();
  r.excluded = "node2";
  r.avoided = "node5";
  const auto back = parse_attempt_line(to_line(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->reason, Reason::kNodeLostRequeued);
  EXPECT_EQ(back->cause, Cause::kHang);
  EXPECT_EQ(back->loss, LossCause::kHang);
  EXPECT_EQ(back->excluded, "node2");
  EXPECT_EQ(back->avoided, "node5");
  EXPECT_EQ(to_line(r).find("recover_s"), std::string::npos);
  EXPECT_EQ(to_line(*back), to_line(r));
}

// docs/run-directory.md's ledger lines: the first written before steps and node losses existed.
TEST(Records, TheDocumentedLedgerLinesRead) {
  const auto old = parse_attempt_line(
      R"({"job_id":"4711","array_task_id":null,"restart":0,"nodes":"node[01-04]",)"
      R"("start":"2026-11-22T02:48:10Z","end":"2026-11-22T14:43:10Z","exit_status":75,)"
      R"("reason":"requeued","last_step":52000})");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->srun_step, 0);
  EXPECT_FALSE(old->world_size);
  EXPECT_FALSE(old->array_task_id);
  EXPECT_EQ(old->last_step, 52000);
  const auto lost = parse_attempt_line(
      R"({"job_id":"12","array_task_id":null,"restart":0,"nodes":"node[1-3]",)"
      R"("start":"2026-11-23T23:40:01Z","end":"2026-11-23T23:41:10Z","exit_status":76,)"
      R"("reason":"node_lost","last_step":40,"step":0,"world_size":6,"lost_nodes":"node2",)"
      R"("added_nodes":"node4","detected":"2026-11-23T23:41:08.412Z","detected_by":"slurmd on )"
      R"(node2 refused the connection","stop_s":1.3,"recover_s":22.8})");
  ASSERT_TRUE(lost);
  EXPECT_TRUE(is_node_loss(lost->reason));
  EXPECT_FALSE(lost->cause) << "a line without a cause";
  EXPECT_EQ(lost->recover_s, 22.8);
  EXPECT_EQ(lost->added_nodes, "node4");
}

TEST(Records, MalformedLedgerLinesAreSkippedAndCounted) {
  TempDir dir;
  write_text(dir / "attempts.jsonl",
             to_line(node_loss_line()) + "\n" + "not json\n" +
                 R"({"restart":0,"reason":"completed"})"
                 "\n" +  // no job_id
                 R"({"job_id":"1","reason":"finished"})"
                 "\n" +  // no such reason
                 R"({"job_id":"1"})"
                 "\n" +  // no reason
                 R"({"job_id":"1","reason":"completed","restart":"0"})"
                 "\n" +
                 R"({"job_id":"1","reason":"node_lost","lost_nodes":"n1","cause":"slow"})"
                 "\n" +
                 R"({"job_id":"2","reason":"completed","world_size":null,"cause":""})"
                 "\n" +
                 R"({"job_id":"3","reason":"fai)");
  size_t malformed = 0;
  const auto a = read_attempts(dir.path(), &malformed);
  EXPECT_EQ(malformed, 7u);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].cause, Cause::kNodeLost);
  EXPECT_EQ(a[0].loss, LossCause::kRefused);
  EXPECT_EQ(a[1].job_id, "2");
  EXPECT_FALSE(a[1].cause);
  EXPECT_TRUE(read_attempts(dir / "nowhere").empty());
}

TEST(Records, AppendedLedgerLinesReadBackAndCountJobAttempts) {
  TempDir dir;
  Attempt first = node_loss_line();
  Attempt second = node_loss_line();
  second.srun_step = 1;
  second.reason = Reason::kCompleted;
  second.lost_nodes.clear();
  Attempt third = second;
  third.restart = 1;
  for (const auto& a : {first, second, third}) append_attempt(dir.path(), a);
  const auto back = read_attempts(dir.path());
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(to_line(back[0]), to_line(first));
  EXPECT_EQ(to_line(back[2]), to_line(third));
  EXPECT_EQ(count_job_attempts(back), 2u);  // (12, 0) twice, (12, 1)
}

TEST(Records, TheLedgersReserveIsKeptAndGivenUpWhenTheDiskRefuses) {
  TempDir dir;
  EXPECT_TRUE(reserve_ledger_room(dir.path()));
  EXPECT_TRUE(reserve_ledger_room(dir.path()));  // kept as it is
  EXPECT_EQ(fs::file_size(dir / ".ledger-reserve"), kLedgerRoomBytes);
  append_attempt(dir.path(), node_loss_line());  // room to spare: the reserve stays
  EXPECT_TRUE(fs::exists(dir / ".ledger-reserve"));
  // A disk that refuses every write (/dev/full: ENOSPC): the reserve is given up for a second
  // try, which fails too here, and the error says why.
  fs::remove(dir / "attempts.jsonl");
  fs::create_symlink("/dev/full", dir / "attempts.jsonl");
  try {
    append_attempt(dir.path(), node_loss_line());
    ADD_FAILURE() << "no error";
  } catch (const hpctrain::common::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir / ".ledger-reserve"));
}

TEST(Records, SubmissionsReadBackTheLatestAndSurviveATornLine) {
  TempDir dir;
  EXPECT_FALSE(last_submission(dir.path()));
  append_submission(dir.path(), {"41", "2026-01-01T00:00:00Z", 0});
  append_submission(dir.path(), {"42", "2026-01-02T00:00:00Z", 3, "41"});
  EXPECT_EQ(read_text(dir / "submissions.jsonl"),
            R"({"array_tasks":0,"job_id":"41","submitted_at":"2026-01-01T00:00:00Z"})"
            "\n"
            R"({"array_tasks":3,"chained_from":"41","job_id":"42",)"
            R"("submitted_at":"2026-01-02T00:00:00Z"})"
            "\n");
  std::ofstream(dir / "submissions.jsonl", std::ios::app) << "{\"job_id\":\"4";
  size_t malformed = 0;
  EXPECT_EQ(read_submissions(dir.path(), &malformed).size(), 2u);
  EXPECT_EQ(malformed, 1u);
  const auto s = last_submission(dir.path());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->job_id, "42");
  EXPECT_EQ(s->array_tasks, 3u);
  EXPECT_EQ(s->chained_from, "41");
  // docs/run-directory.md's line, in its documented order.
  const auto doc = parse_submission_line(
      R"({"job_id":"4711","submitted_at":"2026-11-22T02:48:07Z","array_tasks":0})");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->submitted_at, "2026-11-22T02:48:07Z");
  EXPECT_TRUE(doc->chained_from.empty());
}

// The chain of the last submission: back through chained_from to the submit that began it; an
// earlier submit (and its own chain) is another run of the directory's, not this chain's.
TEST(Records, TheLastChainFollowsChainedFromBackToItsSubmit) {
  const auto ids = [](const std::vector<Submission>& chain) {
    std::vector<std::string> out;
    for (const auto& s : chain) out.push_back(s.job_id);
    return out;
  };
  using Ids = std::vector<std::string>;
  EXPECT_TRUE(last_chain({}).empty());
  EXPECT_EQ(ids(last_chain({{"5", "t", 0}})), (Ids{"5"}));
  const std::vector<Submission> two_chains = {
      {"5", "t", 0}, {"6", "t", 0, "5"}, {"7", "t", 0}, {"8", "t", 0, "7"}, {"9", "t", 0, "8"}};
  EXPECT_EQ(ids(last_chain(two_chains)), (Ids{"7", "8", "9"}));
  EXPECT_EQ(ids(last_chain({two_chains.begin(), two_chains.begin() + 2})), (Ids{"5", "6"}));
  EXPECT_EQ(ids(last_chain({two_chains.begin(), two_chains.begin() + 3})), (Ids{"7"}))
      << "a new submit begins a new chain";
  // A link whose predecessor is missing (a torn line): the chain as far as it goes.
  EXPECT_EQ(ids(last_chain({{"7", "t", 0}, {"9", "t", 0, "8"}})), (Ids{"9"}));
}

TEST(Records, FieldNamesAreWhatTheWritersWrite) {
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& [record, names] : field_names()) by[record] = names;
  ASSERT_EQ(by.size(), 10u);
  for (const auto kind : all<MetricsKind>()) ASSERT_TRUE(by.count(std::string(name_of(kind))));
  const auto has = [&by](const char* record, const char* field) {
    const auto& names = by[record];
    return std::find(names.begin(), names.end(), field) != names.end();
  };
  // Every key a fully set record's line holds is named, and nothing else.
  TrainRecord t;
  t.epoch = t.window_first_step = 1;
  t.loss = t.lr = t.images_per_s = t.window_seconds = t.loss_scale = t.checkpoint_seconds =
      t.wall_time = 1.0;
  const auto line = nlohmann::json::parse(to_line(t));
  EXPECT_EQ(line.size(), by["train"].size());
  for (const auto& item : line.items()) EXPECT_TRUE(has("train", item.key().c_str()));
  EXPECT_TRUE(has("eval", "top5"));
  EXPECT_TRUE(has("ranks", "behind_rank"));
  EXPECT_TRUE(has("started", "resumed_from"));
  EXPECT_TRUE(has("hang", "hosts"));
  EXPECT_TRUE(has("rollback", "rolled_back_to"));
  for (const char* f : {"job_id", "reason", "cause", "lost_nodes", "recover_s", "excluded",
                        "avoided", "world_size"}) {
    EXPECT_TRUE(has("attempt", f)) << f;
  }
  EXPECT_EQ(by["attempt"].front(), "job_id");
  EXPECT_TRUE(has("submission", "chained_from"));
  EXPECT_FALSE(has("train", "top1"));
}

}  // namespace
}  // namespace hpctrain::records
