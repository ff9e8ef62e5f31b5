#include "checkpoint/slow_env.hpp"

#include <chrono>
#include <thread>

namespace hpctrain::checkpoint {
namespace {

void wait_for(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

class SlowFile : public WritableFile {
 public:
  SlowFile(std::unique_ptr<WritableFile> file, double seconds)
      : file_(std::move(file)), seconds_(seconds) {}
  void append(std::string_view data) override { file_->append(data); }
  void sync() override {
    wait_for(seconds_);
    file_->sync();
  }
  void close() override { file_->close(); }

 private:
  std::unique_ptr<WritableFile> file_;
  double seconds_;
};

class SlowFsyncEnv : public Env {
 public:
  SlowFsyncEnv(Env& base, double seconds) : base_(base), seconds_(seconds) {}
  bool create_dir(const std::string& path, uint32_t mode) override {
    return base_.create_dir(path, mode);
  }
  std::unique_ptr<WritableFile> new_file(const std::string& path, uint32_t mode) override {
    return std::make_unique<SlowFile>(base_.new_file(path, mode), seconds_);
  }
  void sync_dir(const std::string& path) override { base_.sync_dir(path); }
  void rename(const std::string& from, const std::string& to) override { base_.rename(from, to); }
  std::string read_file(const std::string& path, int64_t max_bytes) override {
    return base_.read_file(path, max_bytes);
  }
  std::vector<std::string> list_dir(const std::string& path) override {
    return base_.list_dir(path);
  }
  void remove_file(const std::string& path) override { base_.remove_file(path); }
  void remove_all(const std::string& path) override { base_.remove_all(path); }
  std::optional<FileStat> stat(const std::string& path, bool follow) override {
    return base_.stat(path, follow);
  }
  int64_t fs_type(const std::string& path) override { return base_.fs_type(path); }

 private:
  Env& base_;
  double seconds_;
};

}  // namespace

std::unique_ptr<Env> slow_fsync_env(Env& base, double seconds) {
  return std::make_unique<SlowFsyncEnv>(base, seconds);
}

}  // namespace hpctrain::checkpoint
