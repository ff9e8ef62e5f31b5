// The worker binary's identity (launcher/supervisor/provenance.hpp): SHA-256 against a known
// digest, a changed binary described old against new, a copy (new mtime, same bytes) not a change,
// an unreadable or missing binary an error naming its path.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "supervisor/provenance.hpp"

namespace hpctrain::supervisor {
namespace {

namespace fs = std::filesystem;

class Provenance : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hpctrain-provenance-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(Provenance, HashesWithSha256AndResolvesLinks) {
  const std::string path = write("worker", "abc");
  fs::create_symlink(path, dir_ / "link");
  const BinaryIdentity b = identify_binary((dir_ / "link").string());
  EXPECT_EQ(b.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(b.size, 3u);
  EXPECT_EQ(b.path, fs::canonical(path).string());
}

TEST_F(Provenance, ARebuiltBinaryIsAChangeNamingOldAndNew) {
  const BinaryIdentity first = identify_binary(write("worker", "version one"));
  const BinaryIdentity now = identify_binary(write("worker", "version two"));
  const auto change = describe_change(first, now);
  ASSERT_TRUE(change.has_value()) << "a worker rebuilt between attempts was not noticed";
  EXPECT_NE(change->find(first.sha256.substr(0, 12)), std::string::npos) << *change;
  EXPECT_NE(change->find(now.sha256.substr(0, 12)), std::string::npos) << *change;
  EXPECT_NE(change->find(now.path), std::string::npos) << *change;
}

TEST_F(Provenance, ACopyWithTheSameBytesIsNoChange) {
  const BinaryIdentity first = identify_binary(write("worker", "same code"));
  BinaryIdentity now = identify_binary(write("worker-copy", "same code"));
  now.mtime_s += 3600;
  EXPECT_EQ(describe_change(first, now), std::nullopt);
}

// The error's message must name the path; `what` is what identify_binary threw, or "" if nothing.
std::string error_of(const std::string& path) {
  try {
    identify_binary(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(Provenance, AMissingBinaryIsAnErrorNamingThePath) {
  const std::string missing = (dir_ / "no-such-worker").string();
  EXPECT_NE(error_of(missing).find(missing), std::string::npos)
      << "a missing worker binary was not an error naming it: '" << error_of(missing) << "'";
}

TEST_F(Provenance, ADirectoryIsAnErrorNamingThePath) {
  const std::string d = fs::canonical(dir_).string();
  EXPECT_NE(error_of(d).find(d), std::string::npos) << "'" << error_of(d) << "'";
}

TEST_F(Provenance, AnUnreadableBinaryIsAnErrorNamingThePath) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads a file without read permission";
  const std::string locked = fs::canonical(write("locked", "x")).string();
  fs::permissions(locked, fs::perms::none);
  EXPECT_NE(error_of(locked).find(locked), std::string::npos) << "'" << error_of(locked) << "'";
}

// The attempts' check (check_provenance) over a run directory: the first records, the same
// binary passes, a rebuilt one stops naming what to do, or goes on and is recorded when allowed.
TEST_F(Provenance, TheFirstAttemptRecordsALaterOneWithTheSameBinaryGoesOn) {
  const std::string worker = write("worker", "v1");
  const auto first = check_provenance(dir_, worker, true, "11");
  EXPECT_FALSE(first.stop);
  EXPECT_NE(first.line.find("recorded in"), std::string::npos) << first.line;
  ASSERT_TRUE(fs::exists(dir_ / "provenance.json"));
  std::ifstream in(dir_ / "provenance.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"job_id\": \"11\""), std::string::npos) << text;
  const auto again = check_provenance(dir_, worker, true, "12");
  EXPECT_FALSE(again.stop);
  EXPECT_EQ(again.line, "") << "the same binary: nothing to say";
}

TEST_F(Provenance, ARebuiltBinaryStopsTheAttemptSayingWhatToDo) {
  const std::string worker = write("worker", "v1");
  check_provenance(dir_, worker, true, "11");
  write("worker", "v2");
  const auto r = check_provenance(dir_, worker, true, "12");
  EXPECT_TRUE(r.stop) << "an attempt resumed with other code";
  EXPECT_NE(r.line.find("the run stopped: the worker binary differs from the run's first attempt"),
            std::string::npos)
      << r.line;
  EXPECT_NE(r.line.find("resilience.require_same_binary = false"), std::string::npos) << r.line;
  EXPECT_NE(r.line.find((dir_ / "spec.toml").string()), std::string::npos) << r.line;
  // Put back: goes on again.
  write("worker", "v1");
  EXPECT_FALSE(check_provenance(dir_, worker, true, "13").stop);
}

TEST_F(Provenance, WithTheRuleOffAChangeGoesOnAndIsRecorded) {
  const std::string worker = write("worker", "v1");
  check_provenance(dir_, worker, false, "11");
  write("worker", "v2");
  const auto r = check_provenance(dir_, worker, false, "12");
  EXPECT_FALSE(r.stop);
  EXPECT_NE(r.line.find("going on (resilience.require_same_binary = false)"), std::string::npos)
      << r.line;
  std::ifstream in(dir_ / "provenance.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"changes\": [\n    {"), std::string::npos) << text;
  // A later attempt with the binary let through: said, not recorded again; a third binary is.
  const auto again = check_provenance(dir_, worker, false, "13");
  EXPECT_FALSE(again.stop);
  EXPECT_NE(again.line.find("let through before"), std::string::npos) << again.line;
  auto changes = [&] {
    std::ifstream f(dir_ / "provenance.json");
    return nlohmann::json::parse(f).at("changes").size();
  };
  EXPECT_EQ(changes(), 1u);
  write("worker", "v3");
  check_provenance(dir_, worker, false, "14");
  EXPECT_EQ(changes(), 2u);
}

TEST_F(Provenance, ADamagedRecordOrAMissingWorkerIsSaidNotChecked) {
  const std::string worker = write("worker", "v1");
  write("provenance.json", "{not json");
  const auto r = check_provenance(dir_, worker, true, "11");
  EXPECT_FALSE(r.stop);
  EXPECT_NE(r.line.find("cannot be read"), std::string::npos) << r.line;
  std::ifstream in(dir_ / "provenance.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{not json") << "the damaged record was overwritten";
  const auto missing = check_provenance(dir_, (dir_ / "nothing").string(), true, "11");
  EXPECT_FALSE(missing.stop);
  EXPECT_EQ(missing.line, "") << "a missing worker is srun's to report";
}

TEST_F(Provenance, ARunDirectoryThatCannotBeWrittenDoesNotEndTheAttempt) {
  const std::string worker = write("worker", "v1");
  // A path under a regular file: no directory can be made there, as on a full or read-only one.
  write("not-a-dir", "");
  const auto r = check_provenance(dir_ / "not-a-dir", worker, true, "11");
  EXPECT_FALSE(r.stop);
  EXPECT_NE(r.line.find("it could not be recorded"), std::string::npos) << r.line;
}

}  // namespace
}  // namespace hpctrain::supervisor
