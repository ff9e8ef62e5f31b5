#include "dist/launch.hpp"

#include "common/error.hpp"
#include "common/host.hpp"

namespace hpctrain::dist {

Launch detect_launch() {
  Launch launch;
  launch.host = host_name();
  launch.env = current_environment();
  launch.world = detect_world(launch.env, launch.host);
  rt::set_rank_context(launch.world.rank, launch.world.world_size, launch.host);
  return launch;
}

}  // namespace hpctrain::dist
