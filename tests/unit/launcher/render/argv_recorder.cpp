// A stand-in for any program a rendered script may start (srun, module, hpctrain, and the
// `pwned` that hostile values try to run): it records how it was started and exits 0. Each call
// writes one new file, RECORD_DIR/NNNNNN (numbered in the order of the calls), holding the argument
// count, the arguments (argv[0] first) and the environment, each ended by a NUL. Compiled rather
// than a bash script: the property test starts thousands of them. As srun it also leaves what
// the workers it starts leave at the end of training: in the run directory (the folder of its last
// argument, the spec), a committed checkpoint whose trainer.json says finished; without it the step
// supervisor takes an exit 0 for no completed run.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

extern char** environ;

namespace {

void finish_as_the_workers_would(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2 || fs::path(argv[0]).filename() != "srun") return;
  const fs::path step = fs::path(argv[argc - 1]).parent_path() / "checkpoints" / "step-000000001";
  std::error_code ec;
  fs::create_directories(step, ec);
  std::ofstream(step / "trainer.json") << "{\"finished\": true}\n";
  std::ofstream(step / "manifest.json") << "{}\n";
}

}  // namespace

int main(int argc, char** argv) {
  finish_as_the_workers_would(argc, argv);
  const char* dir = std::getenv("RECORD_DIR");
  if (dir == nullptr) {
    std::fprintf(stderr, "argv_recorder: RECORD_DIR is not set\n");
    return 99;
  }
  std::string text = std::to_string(argc) + '\0';
  for (int i = 0; i < argc; ++i) text.append(argv[i]).push_back('\0');
  for (char** e = environ; *e != nullptr; ++e) text.append(*e).push_back('\0');
  for (int n = 0; n < 1000000; ++n) {
    char name[16];
    std::snprintf(name, sizeof name, "/%06d", n);
    const std::string path = std::string(dir) + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) break;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok ? 0 : 98;
  }
  std::fprintf(stderr, "argv_recorder: cannot write to %s: %s\n", dir, std::strerror(errno));
  return 98;
}
