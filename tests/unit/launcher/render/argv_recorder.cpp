// A stand-in for any program a rendered script may start (srun, module, hpctrain, and the
// `pwned` that hostile values try to run): it records how it was started and exits 0. Each call
// writes one new file, RECORD_DIR/NNNNNN (numbered in the order of the calls), holding the argument
// count, the arguments (argv[0] first) and the environment, each ended by a NUL. Compiled rather
// than a bash script: the property test starts thousands of them.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern char** environ;

int main(int argc, char** argv) {
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
