// The start of every program that runs as one rank of a job (the worker, the DDP checks, the
// benchmarks): this host's name, the launcher's environment, and the world they describe. Once
// the rank is known, every later error carries "[rank r/N host]".
// Thread safety: call detect_launch() once from the main thread, before other threads start.
#pragma once

#include <string>

#include "dist/world.hpp"

namespace hpctrain::dist {

struct Launch {
  EnvMap env;
  std::string host;
  WorldInfo world;
};

// Reads the host name and the environment, detects the world (throws rt::EnvError naming the
// variable when it is wrong) and sets the rank context of errors.
Launch detect_launch();

}  // namespace hpctrain::dist
