// The run report's data and page (launcher/report/): what collect() reads from a run directory,
// the JSON escaping inside the page's script element, the template's fills.
#include <gtest/gtest.h>

#include "report/report.hpp"
#include "run/run_dir.hpp"
#include "test_util.hpp"

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
  test::fs::create_directories(dir / "checkpoints" / "step-000000010");
  write_text(dir / "checkpoints" / "step-000000010" / "manifest.json",
             R"({"committed_at":"2026-11-23T10:00:40Z","step":10})");
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
  ASSERT_EQ(r["checkpoints"].size(), 1u);
  EXPECT_EQ(r["checkpoints"][0]["step"], 10);
  EXPECT_EQ(r["checkpoints"][0]["time"], 1795428040);  // 2026-11-23T10:00:40Z
  EXPECT_EQ(r["uncommitted_checkpoints"], 2);
  EXPECT_EQ(r["spec"]["nodes"], 2);
  EXPECT_EQ(r["spec"]["tasks_per_node"], 4);
  EXPECT_EQ(r["spec"]["epochs"], 7);
  EXPECT_EQ(data["submission"]["job_id"], "12");
}

}  // namespace
}  // namespace hpctrain::report
