// The slurmd probe (launcher/supervisor/node_probe.hpp) against loopback ports: a listener answers,
// a closed port and a name that does not resolve are refused; the answer keeps the nodes' order.
#include "supervisor/node_probe.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/unique_fd.hpp"

namespace hpctrain::supervisor {
namespace {

using namespace std::chrono_literals;

// A socket bound to a free loopback port, listening when `listen` is set.
struct Port {
  UniqueFd fd;
  int number = 0;
  explicit Port(bool listen) : fd(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    number = ntohs(a.sin_port);
    if (listen) {
      EXPECT_EQ(::listen(fd.get(), 16), 0);
    }
  }
};

TEST(NodeProbe, ListenerAnswersClosedPortAndUnknownNameAreRefused) {
  Port open(/*listen=*/true);
  EXPECT_TRUE(probe_slurmds({"127.0.0.1", "localhost"}, open.number, 2s).empty());
  Port closed(/*listen=*/false);  // bound, not listening: the connection is refused
  EXPECT_EQ(probe_slurmds({"127.0.0.1"}, closed.number, 2s),
            (Unanswered{{"127.0.0.1", records::LossCause::kRefused}}));
  const auto mixed = probe_slurmds({"no-such-node.invalid", "127.0.0.1"}, open.number, 2s);
  EXPECT_EQ(mixed, (Unanswered{{"no-such-node.invalid", records::LossCause::kRefused}}));
}

}  // namespace
}  // namespace hpctrain::supervisor
