// Who may touch a checkpoint: directories writable by others or owned by someone else are
// refused, our files are private, nothing is created over an existing file or through a
// symlink, and nothing is read through one.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/store.hpp"
#include "common/error.hpp"
#include "mem_env.hpp"
#include "payload.hpp"
#include "support/error_text.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::make_part;
using test::shared_files;

constexpr uint64_t kSeed = 3;

StoreOptions options(std::vector<std::string>* reports = nullptr, bool group = false) {
  StoreOptions o;
  o.keep_last = 2;
  o.group_readable = group;
  if (reports) o.report = [reports](const std::string& line) { reports->push_back(line); };
  return o;
}

uint32_t mode_of(const fs::path& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void save(Store& store, int64_t step) {
  const WriteResult w = store.write_part(step, make_part(kSeed, step, 0));
  ASSERT_TRUE(w.ok) << w.error;
  const WriteResult m = store.merge_node(step);
  ASSERT_TRUE(m.ok) << m.error;
  store.commit(step, json::object());
}

// Sets the umask for one test and restores it.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

using hpctrain::test::message_of;

TEST(CheckpointPermissions, DirectoryWritableByOthersIsRefused) {
  hpctrain::test::TempDir tmp;
  const fs::path dir = tmp / "checkpoints";
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const std::string message = message_of([&] { Store store(dir.string(), options(), 0, 1); });
  EXPECT_NE(message.find(dir.string() + " is writable by others (mode 0777)"), std::string::npos)
      << message;
  // The worker's exit status 2 (bad input, not retried): an EnvError, not any runtime error.
  EXPECT_THROW(Store(dir.string(), options(), 0, 1), hpctrain::rt::EnvError);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);  // others may read, not write: fine
  EXPECT_NO_THROW(Store(dir.string(), options(), 0, 1));
}

TEST(CheckpointPermissions, DirectoryOfAnotherUserIsRefused) {
  test::MemEnv env;
  env.create_dir("/run", 0700);
  env.create_dir("/run/checkpoints", 0700);
  env.set_owner("/run/checkpoints", ::geteuid() + 1, 0700);
  const std::string message =
      message_of([&] { Store store("/run/checkpoints", options(), 0, 1, env); });
  EXPECT_NE(message.find("/run/checkpoints belongs to uid " + std::to_string(::geteuid() + 1)),
            std::string::npos)
      << message;
}

TEST(CheckpointPermissions, StepDirectoryWritableByOthersIsNotLoaded) {
  hpctrain::test::TempDir tmp;
  std::vector<std::string> reports;
  Store store(tmp.file("checkpoints"), options(&reports), 0, 1);
  save(store, 1);
  save(store, 2);
  ASSERT_EQ(::chmod((tmp / "checkpoints" / "step-000000002").c_str(), 0777), 0);
  EXPECT_EQ(store.load_latest(shared_files())->step, 1);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("step-000000002"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("writable by others"), std::string::npos) << reports[0];
}

TEST(CheckpointPermissions, FilesAndDirectoriesArePrivate) {
  Umask umask(0);  // the modes are the store's own, not a lenient umask's
  for (const bool group : {false, true}) {
    SCOPED_TRACE(group ? "group_readable" : "private");
    hpctrain::test::TempDir tmp;
    const fs::path dir = tmp / "checkpoints";
    Store store(dir.string(), options(nullptr, group), 0, 1);
    save(store, 1);
    const uint32_t file_mode = group ? 0640 : 0600, dir_mode = group ? 0750 : 0700;
    EXPECT_EQ(mode_of(dir), dir_mode);
    EXPECT_EQ(mode_of(dir / "step-000000001"), dir_mode);
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir / "step-000000001")) {
      EXPECT_EQ(mode_of(entry.path()), file_mode) << entry.path();
      ++files;
    }
    // model.bin state.json rng-0.bin .part-0.json .node-0.json manifest.json
    EXPECT_EQ(files, 6);
  }
}

TEST(CheckpointPermissions, ExistingFileIsAnErrorNotOverwritten) {
  hpctrain::test::TempDir tmp;
  const fs::path dir = tmp / "checkpoints";
  Store store(dir.string(), options(), 0, 1);
  fs::create_directory(dir / ".step-000000001.tmp");
  std::ofstream(dir / ".step-000000001.tmp" / "model.bin") << "old";
  const WriteResult w = store.write_part(1, make_part(kSeed, 1, 0));
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.error.find("create " + (dir / ".step-000000001.tmp" / "model.bin").string() +
                         ": File exists"),
            std::string::npos)
      << w.error;
  std::ifstream in(dir / ".step-000000001.tmp" / "model.bin");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "old");
}

TEST(CheckpointPermissions, SymlinkInPlaceOfAFileIsRefused) {
  hpctrain::test::TempDir tmp;
  const fs::path dir = tmp / "checkpoints";
  std::vector<std::string> reports;
  Store store(dir.string(), options(&reports), 0, 1);

  // Writing: a symlink where a file is to be created is not followed.
  fs::create_directory(dir / ".step-000000001.tmp");
  const fs::path target = tmp / "elsewhere.bin";
  fs::create_symlink(target, dir / ".step-000000001.tmp" / "model.bin");
  const WriteResult w = store.write_part(1, make_part(kSeed, 1, 0));
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.error.find("model.bin"), std::string::npos) << w.error;
  EXPECT_FALSE(fs::exists(target)) << "written through the symlink";
  store.abandon(1);

  // Reading: a committed file replaced by a symlink to identical bytes is still refused.
  save(store, 1);
  save(store, 2);
  const fs::path file = dir / "step-000000002" / "model.bin";
  fs::copy_file(file, target);
  fs::remove(file);
  fs::create_symlink(target, file);
  EXPECT_EQ(store.load_latest(shared_files())->step, 1);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find(file.string() + " is not a regular file"), std::string::npos)
      << reports[0];
}

// The POSIX Env itself: O_EXCL | O_NOFOLLOW on create, O_NOFOLLOW on read.
TEST(CheckpointPermissions, PosixEnvNeverGoesThroughASymlink) {
  hpctrain::test::TempDir tmp;
  const fs::path target = tmp / "target", link = tmp / "link";
  std::ofstream(target) << "secret";
  fs::create_symlink(target, link);
  Env& env = default_env();
  EXPECT_NE(message_of([&] { env.read_file(link.string(), 100); }).find("it is a symlink"),
            std::string::npos);
  EXPECT_NE(message_of([&] { env.new_file(link.string(), 0600); }).find("File exists"),
            std::string::npos);
  EXPECT_NE(message_of([&] { env.new_file(target.string(), 0600); }).find("File exists"),
            std::string::npos);
  // remove_all removes the link, not what it points to.
  fs::create_directory(tmp / "d");
  fs::create_directory_symlink(tmp.path(), tmp / "d" / "up");
  env.remove_all((tmp / "d").string());
  EXPECT_FALSE(fs::exists(tmp / "d"));
  EXPECT_TRUE(fs::exists(target));
}

}  // namespace
}  // namespace hpctrain::checkpoint
