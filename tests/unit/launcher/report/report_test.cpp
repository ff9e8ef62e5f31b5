// The run report's data and page (launcher/report/): what collect() reads from a run directory,
// the JSON escaping inside the page's script element, the template's fills.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "common/records.hpp"

#include "report/report.hpp"
#include "run/run_dir.hpp"
#include "support/test_util.hpp"

namespace hpctrain::report {
namespace {

using nlohmann::json;
using test::TempDir;
using test::write_text;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Report, EscapedJsonHasNoMarkupCharactersAndParsesBack) {
  const json value = {{"dir", "/a</script><!--b/-->c"},
                      {"nodes", "n<script>x</SCRIPT>&amp;"},
                      {"line", "\xe2\x80\xa8 and ]]>"}};
  const std::string escaped = escape_for_script(value.dump());
  EXPECT_EQ(escaped.find_first_of("<>&"), std::string::npos) << escaped;
  EXPECT_EQ(json::parse(escaped), value);
}

TEST(Report, PageFillsEachMarkerOnceAndNeverInsideTheData) {
  // A marker's text inside the data stays text: fills apply to the template only.
  const json data = {{"run_dir", "/r/*@UPLOT_JS@*/ @REPORT_DATA@ </script>"},
                     {"runs", json::array()}};
  const std::string page = render_html(data);
  EXPECT_EQ(count_of(page, "<script"), 4u);
  EXPECT_EQ(count_of(page, "</script"), 4u);
  EXPECT_EQ(count_of(page, "var uPlot = (function"), 1u);
  EXPECT_EQ(page.find("/*@UPLOT_CSS@*/"), std::string::npos);
  const std::string open = R"(<script type="application/json" id="report-data">)";
  const size_t begin = page.find(open);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("</script>", begin);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(json::parse(page.substr(begin + open.size(), end - begin - open.size())), data);
}

// The page reads record fields only through the vocabulary hpctrain report generates from the
// records module: every reason has its colour, every field list is the writer's.
TEST(Report, ThePagesVocabularyIsTheRecordsModules) {
  const json v = page_vocabulary();
  const auto reasons = records::all<records::Reason>();
  ASSERT_EQ(v["reasons"].size(), reasons.size());
  std::set<std::string> colors;
  for (size_t i = 0; i < reasons.size(); ++i) {
    EXPECT_EQ(v["reasons"][i]["name"], records::name_of(reasons[i]));
    colors.insert(v["reasons"][i]["color"].get<std::string>());
  }
  EXPECT_EQ(colors.size(), reasons.size()) << "each reason its own colour";
  for (const auto& [record, names] : records::field_names()) {
    EXPECT_EQ(v["fields"][record], json(names)) << record;
  }
  EXPECT_EQ(v["kinds"].size(), records::all<records::MetricsKind>().size());
  EXPECT_EQ(v["causes"].size(), records::all<records::Cause>().size());
  EXPECT_EQ(v["causes"][0], "completed");
  EXPECT_EQ(v["losses"],
            json({"silent", "refused", "hang", "straggler", "gpu_hardware", "corruption"}));
  const std::string page = render_html({{"run_dir", "/r"}, {"runs", json::array()}});
  EXPECT_EQ(page.find("@REPORT_VOCABULARY@"), std::string::npos);
  EXPECT_NE(page.find(R"("node_lost_requeued")"), std::string::npos);
}

// Every name the page's script looks up in the vocabulary (KIND.train, TRAIN.loss, ATTEMPT.reason,
// ...) is one the records module has: the page cannot read a field no writer writes.
TEST(Report, ThePagesScriptNamesOnlyFieldsTheRecordsHave) {
  const json v = page_vocabulary();
  const std::map<std::string, json> tables = {{"KIND", v["kinds"]},
                                              {"TRAIN", v["fields"]["train"]},
                                              {"EVAL", v["fields"]["eval"]},
                                              {"ATTEMPT", v["fields"]["attempt"]},
                                              {"SUBMISSION", v["fields"]["submission"]}};
  const std::string script =
      test::read_text(test::source_dir() / "launcher" / "report" / "report.html.in");
  const std::regex use(R"(\b(KIND|TRAIN|EVAL|ATTEMPT|SUBMISSION)\.([a-z_0-9]+))");
  size_t uses = 0;
  for (auto it = std::sregex_iterator(script.begin(), script.end(), use);
       it != std::sregex_iterator(); ++it, ++uses) {
    const json& names = tables.at((*it)[1].str());
    EXPECT_NE(std::find(names.begin(), names.end(), (*it)[2].str()), names.end()) << it->str();
  }
  EXPECT_GT(uses, 40u);
}

TEST(Report, CollectRefusesADirectoryWithoutSpec) {
  TempDir dir;
  try {
    collect(dir.path());
    FAIL() << "no error";
  } catch (const run::RunDirError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path().string() + " is not a run directory"),
              std::string::npos)
        << e.what();
  }
}

TEST(Report, CollectReadsMetricsAttemptsAndCommittedCheckpoints) {
  TempDir dir;
  write_text(dir / "spec.toml",
             "[job]\nname = \"r\"\nnodes = 2\ntasks_per_node = 4\nrun_dir = \"/x/r\"\n"
             "worker = \"/bin/true\"\n[data]\nsynthetic = true\n[train]\nepochs = 7\n");
  write_text(dir / "submissions.jsonl",
             R"({"job_id":"12","submitted_at":"2026-11-23T10:00:00Z","array_tasks":0})"
             "\n");
  // Steps 10, 20, then a resume from 10 writes 20 again.
  write_text(
      dir / "metrics.jsonl",
      R"({"kind":"train","step":10,"epoch":1,"loss":2.0,"lr":0.1,"wall_time":100.5})"
      "\n"
      R"({"kind":"train","step":20,"epoch":1,"loss":1.5,"lr":0.1,"wall_time":110})"
      "\n"
      R"({"kind":"train","step":20,"epoch":1,"loss":1.4,"lr":0.1,"wall_time":150})"
      "\n"
      R"({"kind":"eval","step":20,"epoch":1,"loss":0.9,"top1":0.5,"top5":0.9,"wall_time":151})"
      "\n");
  write_text(
      dir / "attempts.jsonl",
      R"({"job_id":"12","array_task_id":null,"restart":0,"nodes":"n1","start":"2026-11-23T10:00:05Z","end":"2026-11-23T10:01:00Z","exit_status":75,"reason":"requeued","last_step":10})"
      "\n");
  // Both checkpoint formats (docs/checkpoint-format.md): 1 lists every file, 2 every node
  // manifest; the report reads what they share.
  test::fs::create_directories(dir / "checkpoints" / "step-000000005");
  write_text(dir / "checkpoints" / "step-000000005" / "manifest.json",
             R"({"committed_at":"2026-11-23T10:00:20Z","format_version":1,"step":5,"world_size":1,)"
             R"("files":{"model.pt":{"rank":0,"size":3,"xxh3_64":"0123456789abcdef"}},"meta":{}})");
  test::fs::create_directories(dir / "checkpoints" / "step-000000010");
  write_text(
      dir / "checkpoints" / "step-000000010" / "manifest.json",
      R"({"committed_at":"2026-11-23T10:00:40Z","format_version":2,"step":10,"world_size":1,)"
      R"("nodes":[{"name":".node-0.json","ranks":[[0,0]],"size":9,"xxh3_64":"0123456789abcdef",)"
      R"("file_count":1,"bytes":3}],"file_count":1,"bytes":3,"meta":{}})");
  test::fs::create_directories(dir / "checkpoints" / "step-000000020");  // no manifest
  test::fs::create_directories(dir / "checkpoints" / ".step-000000030.tmp");
  // Not step names of ours, manifest or not.
  for (const char* name : {"step-40", "step-0000000050", "step-000000060.old"}) {
    test::fs::create_directories(dir / "checkpoints" / name);
    write_text(dir / "checkpoints" / name / "manifest.json", "{}");
  }

  const json data = collect(dir.path());
  ASSERT_EQ(data["runs"].size(), 1u);
  const json& r = data["runs"][0];
  EXPECT_EQ(r["train"]["step"], json({10, 20, 20}));
  EXPECT_EQ(r["train"]["loss"], json({2.0, 1.5, 1.4}));
  EXPECT_EQ(r["train"]["images_per_s"], json({nullptr, nullptr, nullptr}));
  EXPECT_EQ(r["eval"]["top1"], json({0.5}));
  ASSERT_EQ(r["attempts"].size(), 1u);
  EXPECT_EQ(r["attempts"][0]["start_time"], 1795428005);  // 2026-11-23T10:00:05Z
  EXPECT_EQ(r["attempts"][0]["reason"], "requeued");
  ASSERT_EQ(r["checkpoints"].size(), 2u);
  EXPECT_EQ(r["checkpoints"][0]["step"], 5);
  EXPECT_EQ(r["checkpoints"][0]["time"], 1795428020);  // 2026-11-23T10:00:20Z
  EXPECT_EQ(r["checkpoints"][1]["step"], 10);
  EXPECT_EQ(r["checkpoints"][1]["time"], 1795428040);  // 2026-11-23T10:00:40Z
  EXPECT_EQ(r["uncommitted_checkpoints"], 2);
  EXPECT_EQ(r["spec"]["nodes"], 2);
  EXPECT_EQ(r["spec"]["tasks_per_node"], 4);
  EXPECT_EQ(r["spec"]["epochs"], 7);
  EXPECT_EQ(data["submission"]["job_id"], "12");
}

// A run continued by a chain of three jobs (Slurm refused the requeue): the report has every job
// of the chain, and the attempts as the ledger calls them, chained.
TEST(Report, CollectHasTheChainsJobs) {
  TempDir dir;
  write_text(dir / "spec.toml",
             "[job]\nname = \"r\"\nrun_dir = \"/x/r\"\nworker = \"/bin/true\"\n[data]\n"
             "synthetic = true\n");
  records::append_submission(dir.path(), {"7", "2026-11-23T10:00:00Z", 0});
  records::append_submission(dir.path(), {"8", "2026-11-23T10:01:00Z", 0, "7"});
  records::append_submission(dir.path(), {"9", "2026-11-23T10:02:00Z", 0, "8"});
  write_text(dir / "attempts.jsonl",
             R"({"job_id":"7","restart":0,"exit_status":75,"reason":"chained"})"
             "\n"
             R"({"job_id":"8","restart":1,"exit_status":75,"reason":"chained"})"
             "\n"
             R"({"job_id":"9","restart":2,"exit_status":0,"reason":"completed"})"
             "\n");
  const json data = collect(dir.path());
  EXPECT_EQ(data["submission"]["job_id"], "9");
  ASSERT_EQ(data["chain"].size(), 3u) << "the report shows only the last job of a chain";
  EXPECT_EQ(data["chain"][0], json({{"job_id", "7"}, {"submitted_at", "2026-11-23T10:00:00Z"}}));
  EXPECT_EQ(data["chain"][2]["job_id"], "9");
  EXPECT_EQ(data["chain"][2]["chained_from"], "8");
  const json& attempts = data["runs"][0]["attempts"];
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0]["reason"], "chained");
  EXPECT_EQ(attempts[1]["attempt"], 2);
  EXPECT_EQ(attempts[2]["reason"], "completed");
}

TEST(Report, CollectCountsTheWindowsEachNodeWasTheStraggler) {
  TempDir dir;
  write_text(dir / "spec.toml", "[job]\nname = \"r\"\n");
  // The worker's verdict ("behind_rank") is what counts, not the figures: node3 behind twice,
  // node2 once. A window whose figures look behind but carry no verdict (node4: nobody behind,
  // or an older worker) is not counted, nor is a verdict on a rank that is not the window's
  // slowest (the record names no host for it), nor one without a host (node5's).
  const auto ranks = [](int step, const char* host, double slowest, double median,
                        const char* verdict = "") {
    return R"({"kind":"ranks","step":)" + std::to_string(step) + R"(,"slowest_rank":2,)" +
           R"("slowest_host":")" + host + R"(","slowest_busy_s":)" + std::to_string(slowest) +
           R"(,"median_busy_s":)" + std::to_string(median) + verdict + R"(,"wall_time":1})" + "\n";
  };
  const char* behind = R"(,"behind_rank":2)";
  write_text(dir / "metrics.jsonl",
             ranks(10, "node3", 0.060, 0.012, behind) + ranks(20, "node2", 0.030, 0.012, behind) +
                 ranks(30, "node3", 0.100, 0.010, behind) + ranks(40, "node4", 0.100, 0.010) +
                 ranks(50, "node4", 0.100, 0.010, R"(,"behind_rank":1)") +
                 R"({"kind":"ranks","step":60,"slowest_rank":2,"behind_rank":2,)"
                 R"("median_busy_s":0.01})"
                 "\n");
  const json s = collect(dir.path())["runs"][0]["stragglers"];
  EXPECT_EQ(s["windows"], 6);
  ASSERT_EQ(s["nodes"].size(), 2u) << s.dump();
  EXPECT_EQ(s["nodes"][0]["host"], "node3");
  EXPECT_EQ(s["nodes"][0]["windows"], 2);
  EXPECT_DOUBLE_EQ(s["nodes"][0]["worst_ratio"].get<double>(), 10.0);
  EXPECT_EQ(s["nodes"][0]["last_step"], 30);
  EXPECT_EQ(s["nodes"][1]["host"], "node2");
  EXPECT_EQ(s["nodes"][1]["windows"], 1);
}

// A run written before the worker recorded its verdict: its windows count, no node is named.
TEST(Report, CollectNamesNoStragglerInRecordsWithoutTheVerdict) {
  TempDir dir;
  write_text(dir / "spec.toml", "[job]\nname = \"r\"\n");
  write_text(dir / "metrics.jsonl",
             R"({"kind":"ranks","step":10,"slowest_rank":2,"slowest_host":"node3",)"
             R"("slowest_busy_s":0.06,"median_busy_s":0.012,"wall_time":1})"
             "\n");
  const json s = collect(dir.path())["runs"][0]["stragglers"];
  EXPECT_EQ(s["windows"], 1);
  EXPECT_EQ(s["nodes"], json::array());
}

TEST(Report, CollectNumbersJobAttemptsAndDescribesNodeLosses) {
  TempDir dir;
  write_text(dir / "spec.toml", "[job]\nname = \"r\"\n");
  // An old line without "step", then one job attempt of three srun steps: a node replaced by a
  // spare, a node lost without one (the world shrinks), the end; then a loss that was requeued.
  write_text(
      dir / "attempts.jsonl",
      R"({"job_id":"12","restart":0,"nodes":"n[1-3]","start":"2026-11-23T23:30:00Z","end":"2026-11-23T23:35:00Z","exit_status":75,"reason":"requeued","last_step":20})"
      "\n"
      R"({"job_id":"12","restart":1,"nodes":"n[1-3]","start":"2026-11-23T23:40:01Z","end":"2026-11-23T23:41:10Z","exit_status":76,"reason":"node_lost","last_step":40,"step":0,"world_size":6,"lost_nodes":"n2","added_nodes":"n4","detected":"2026-11-23T23:41:08.412Z","detected_by":"slurmd on n2 refused the connection","stop_s":1.3,"recover_s":22.8})"
      "\n"
      R"({"job_id":"12","restart":1,"nodes":"n[1,3-4]","start":"2026-11-23T23:41:12Z","end":"2026-11-23T23:50:00Z","exit_status":76,"reason":"node_lost","last_step":80,"step":1,"world_size":6,"lost_nodes":"n3","added_nodes":"","detected":"2026-11-23T23:49:58Z","detected_by":"the NCCL watchdog timed out","stop_s":2.5,"recover_s":30.4})"
      "\n"
      R"({"job_id":"12","restart":1,"nodes":"n[1,4]","start":"2026-11-23T23:50:05Z","end":"2026-11-24T00:10:00Z","exit_status":0,"reason":"completed","last_step":200,"step":2,"world_size":4})"
      "\n"
      R"({"job_id":"13","restart":0,"nodes":"n[1-2]","start":"2026-11-24T01:00:00Z","end":"2026-11-24T01:05:00Z","exit_status":76,"reason":"node_lost_requeued","last_step":220,"step":0,"world_size":4,"lost_nodes":"n1","added_nodes":"","detected":"not a time","detected_by":"srun reported n1 down","stop_s":0.8,"recover_s":null})"
      "\n");
  const json r = collect(dir.path())["runs"][0];
  ASSERT_EQ(r["attempts"].size(), 5u);
  EXPECT_EQ(r["job_attempts"], 3);
  std::vector<int> attempt, step;
  for (const auto& a : r["attempts"]) {
    attempt.push_back(a["attempt"].get<int>());
    step.push_back(a["step"].get<int>());
  }
  EXPECT_EQ(attempt, std::vector<int>({1, 2, 2, 2, 3}));
  EXPECT_EQ(step, std::vector<int>({0, 0, 1, 2, 0}));
  EXPECT_FALSE(r["attempts"][0].contains("node_loss"));
  EXPECT_TRUE(r["attempts"][0]["world_size"].is_null());
  EXPECT_FALSE(r["attempts"][3].contains("node_loss"));
  EXPECT_EQ(r["attempts"][3]["world_size"], 4);

  const json& replaced = r["attempts"][1]["node_loss"];
  EXPECT_EQ(replaced["lost_nodes"], "n2");
  EXPECT_EQ(replaced["added_nodes"], "n4");
  EXPECT_EQ(replaced["detected_by"], "slurmd on n2 refused the connection");
  EXPECT_DOUBLE_EQ(replaced["detected_time"].get<double>(), 1795477268.412);
  EXPECT_EQ(replaced["stop_s"], 1.3);
  EXPECT_EQ(replaced["recover_s"], 22.8);
  EXPECT_EQ(replaced["outcome"], "replaced");
  EXPECT_EQ(replaced["recovered"], true);

  const json& shrank = r["attempts"][2]["node_loss"];
  EXPECT_EQ(shrank["lost_nodes"], "n3");
  EXPECT_EQ(shrank["added_nodes"], "");
  EXPECT_EQ(shrank["detected_time"], 1795477798);  // whole seconds
  EXPECT_EQ(shrank["outcome"], "shrank");
  EXPECT_EQ(shrank["next_world_size"], 4);
  EXPECT_EQ(shrank["recover_s"], 30.4);

  const json& requeued = r["attempts"][4]["node_loss"];
  EXPECT_EQ(requeued["outcome"], "requeued");
  EXPECT_EQ(requeued["recovered"], false);
  EXPECT_TRUE(requeued["recover_s"].is_null());
  EXPECT_TRUE(requeued["detected_time"].is_null());
  EXPECT_EQ(requeued["next_step_ended"], false);
}

}  // namespace
}  // namespace hpctrain::report
