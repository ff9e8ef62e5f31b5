// Event files: the file-version record first, scalars as TensorBoard reads them, the resume scan
// (a (tag, step) written once over several attempts), damaged tails and write errors.
#include "tensorboard/event_file.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "common/host.hpp"
#include "support/temp_dir.hpp"
#include "tensorboard/record.hpp"

namespace hpctrain::tensorboard {
namespace {

std::vector<Scalar> train_values(double loss) {
  return {{"train/loss", loss},
          {"train/lr", 0.1},
          {"train/images_per_s", 1234.5},
          {"train/loss_scale", 65536}};
}

// (tag, step) -> how many times, over every event file of `dir`.
std::map<std::pair<std::string, int64_t>, int> count_points(const std::filesystem::path& dir) {
  std::map<std::pair<std::string, int64_t>, int> points;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    for (const auto& event : read_event_file(entry.path()).events) {
      for (const auto& s : event.scalars) ++points[{s.tag, event.step}];
    }
  }
  return points;
}

size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(EventWriter, FileVersionFirstThenScalars) {
  test::TempDir dir;
  std::ostringstream warn;
  EventWriter writer(dir / "run" / "tensorboard", warn);  // creates the folders
  const std::string name = writer.file().filename().string();
  EXPECT_TRUE(std::regex_match(
      name, std::regex(R"(events\.out\.tfevents\.[0-9]{10,}\.)" +
                       std::regex_replace(host_name(), std::regex(R"(\.)"), R"(\.)") + "\\." +
                       std::to_string(::getpid()))))
      << name;
  EXPECT_EQ(writer.write(4, 1700000000.25, train_values(2.3)), 4u);
  EXPECT_EQ(writer.write(4, 1700000001.0, {{"eval/top1", 0.125}}), 1u);

  const EventFile file = read_event_file(writer.file());
  EXPECT_EQ(file.damage, "");
  ASSERT_EQ(file.events.size(), 3u);
  EXPECT_EQ(file.events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(file.events[0].scalars.empty());
  EXPECT_EQ(file.events[1].step, 4);
  EXPECT_EQ(file.events[1].wall_time, 1700000000.25);
  ASSERT_EQ(file.events[1].scalars.size(), 4u);
  EXPECT_EQ(file.events[1].scalars[0].tag, "train/loss");
  EXPECT_EQ(file.events[1].scalars[0].value, static_cast<double>(2.3f));  // float32, as stored
  EXPECT_EQ(file.events[1].scalars[3].value, 65536.0);
  EXPECT_EQ(file.events[2].scalars.at(0).tag, "eval/top1");
  EXPECT_EQ(warn.str(), "");
}

TEST(EventWriter, ResumeSkipsStepsAlreadyWritten) {
  test::TempDir dir;
  std::ostringstream warn;
  {
    // The first attempt logs steps 4, 8, 12 and evaluates at 8, then dies; its checkpoint was
    // step 6, so the second attempt repeats steps 7 to 12.
    EventWriter first(dir.path(), warn);
    for (int64_t step : {4, 8, 12}) EXPECT_EQ(first.write(step, 1.0 * step, train_values(1)), 4u);
    EXPECT_EQ(first.write(8, 8.5, {{"eval/top1", 0.5}, {"eval/loss", 1.5}}), 2u);
  }
  EXPECT_EQ(last_steps(dir.path(), warn),
            (std::map<std::string, int64_t>{{"eval/loss", 8},
                                            {"eval/top1", 8},
                                            {"train/images_per_s", 12},
                                            {"train/loss", 12},
                                            {"train/loss_scale", 12},
                                            {"train/lr", 12}}));
  EventWriter second(dir.path(), warn);
  EXPECT_NE(second.file(), dir / "x");
  EXPECT_EQ(second.write(8, 108.0, train_values(9)), 0u);
  EXPECT_EQ(second.write(12, 112.0, train_values(9)), 0u);
  EXPECT_EQ(second.write(8, 108.5, {{"eval/top1", 0.9}, {"eval/loss", 0.1}}), 0u);
  // Each tag by its own last step: the eval at 12 was never written, the train step 16 is new.
  EXPECT_EQ(second.write(12, 112.5, {{"eval/top1", 0.6}, {"eval/loss", 1.2}}), 2u);
  EXPECT_EQ(second.write(16, 116.0, train_values(0.7)), 4u);
  EXPECT_EQ(second.write(16, 116.0, train_values(0.7)), 0u);  // nor twice within an attempt

  const auto points = count_points(dir.path());
  for (const auto& [point, n] : points) {
    EXPECT_EQ(n, 1) << point.first << " at step " << point.second;
  }
  EXPECT_EQ(points.size(), 4u * 4 + 2 * 2);
  // The values are the first attempt's where it wrote them.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    for (const auto& event : read_event_file(entry.path()).events) {
      for (const auto& s : event.scalars) {
        if (s.tag == "train/loss") {
          EXPECT_EQ(s.value, event.step == 16 ? 0.7f : 1.0f);
        }
      }
    }
  }
  EXPECT_EQ(warn.str(), "");
}

TEST(EventWriter, DamagedTailIsIgnoredWithAWarning) {
  for (const bool torn : {true, false}) {
    test::TempDir dir;
    std::filesystem::path old_file;
    std::ostringstream warn;
    {
      EventWriter first(dir.path(), warn);
      for (int64_t step : {4, 8, 12}) first.write(step, 1.0 * step, train_values(1));
      old_file = first.file();
    }
    std::string bytes;
    {
      std::ifstream in(old_file, std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      bytes = s.str();
    }
    const size_t last_record = read_record_file(old_file).records.back().size() + 16;
    if (torn) {
      bytes.resize(bytes.size() - 5);  // the step-12 record cut short
    } else {
      bytes[bytes.size() - last_record + 14] ^= 0x04;  // a flipped bit inside the step-12 record
    }
    std::ofstream(old_file, std::ios::binary | std::ios::trunc) << bytes;
    std::ofstream(dir / "notes.txt") << "not an event file\n";

    EventWriter second(dir.path(), warn);  // does not throw
    EXPECT_EQ(count_lines(warn.str()), 1u) << warn.str();
    EXPECT_NE(warn.str().find(old_file.string()), std::string::npos) << warn.str();
    EXPECT_NE(warn.str().find(torn ? "torn record" : "checksum mismatch"), std::string::npos)
        << warn.str();
    // Step 12 did not make it: the second attempt writes it.
    EXPECT_EQ(second.write(8, 8.0, train_values(1)), 0u);
    EXPECT_EQ(second.write(12, 12.0, train_values(1)), 4u);
  }
}

TEST(EventWriter, FolderThatCannotBeCreatedNamesThePath) {
  test::TempDir dir;
  std::ofstream(dir / "file") << "x";
  std::ostringstream warn;
  for (const auto& path : {dir / "file" / "tensorboard", dir / "file"}) {
    try {
      EventWriter writer(path, warn);
      ADD_FAILURE() << "no error for " << path;
    } catch (const rt::Error& e) {
      EXPECT_NE(e.message().find("cannot create " + path.string() + ": "), std::string::npos)
          << e.what();
    }
  }
}

TEST(EventWriter, WriteErrorWarnsOnceAndStopsWriting) {
  test::TempDir dir;
  std::ostringstream warn;
  std::filesystem::path file;
  {
    EventWriter writer(dir.path(), warn);
    file = writer.file();
    ASSERT_EQ(writer.write(4, 4.0, train_values(1)), 4u);
    // A file-size limit half-way through the next record: a short write, then EFBIG (as a full
    // disk gives ENOSPC).
    const auto size = std::filesystem::file_size(file);
    const auto record = size - read_record_file(file).records.front().size() - 16;
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    auto* previous = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old;
    limit.rlim_cur = size + record / 2;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
    const size_t written = writer.write(8, 8.0, train_values(1));
    const bool failed = writer.failed();
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, previous);
    EXPECT_EQ(written, 0u);
    EXPECT_TRUE(failed);
    EXPECT_EQ(writer.write(12, 12.0, train_values(1)), 0u);  // nothing more, no second warning
    EXPECT_EQ(count_lines(warn.str()), 1u) << warn.str();
    EXPECT_NE(warn.str().find("cannot write " + file.string()), std::string::npos) << warn.str();
  }
  // The next attempt: the half record is a torn tail; step 8 was never written.
  std::ostringstream warn2;
  EventWriter next(dir.path(), warn2);
  EXPECT_NE(warn2.str().find(file.string() + ": ignoring its tail, from a torn record"),
            std::string::npos)
      << warn2.str();
  EXPECT_EQ(next.write(8, 8.0, train_values(1)), 4u);
}

}  // namespace
}  // namespace hpctrain::tensorboard
