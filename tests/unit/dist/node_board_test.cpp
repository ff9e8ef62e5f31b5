// dist/node_board.hpp: the ranks of a node share one board; a member's beats and progress reach
// the leader, the leader's beats and its verdict reach the members; the first verdict stays; a
// board of another size, or a link in its place, is refused; the name goes with remove().
#include "dist/node_board.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/error.hpp"

namespace hpctrain::dist {
namespace {

std::string test_token() {
  return "test" + std::to_string(::getpid()) + "-" +
         testing::UnitTest::GetInstance()->current_test_info()->name();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(NodeBoard, MembersAndTheLeaderSeeEachOther) {
  const std::string path = NodeBoard::path_for(test_token(), "node7.cluster");
  EXPECT_NE(path.find("node7_cluster"), std::string::npos) << path;
  NodeBoard leader(path, 3);
  NodeBoard member(path, 3);  // another rank's mapping of the same file
  EXPECT_EQ(leader.read(2).beats, 0u);

  progress::Snapshot s;
  s.step = 41;
  s.phase = progress::Phase::kAllReduce;
  s.detail = 3;
  s.counter = 1234;
  s.first = 40;
  member.beat(2, s);
  member.beat(2, s);
  const NodeBoard::SlotView v = leader.read(2);
  EXPECT_EQ(v.beats, 2u);
  EXPECT_FALSE(v.left);
  EXPECT_EQ(v.where.step, 41);
  EXPECT_EQ(v.where.phase, progress::Phase::kAllReduce);
  EXPECT_EQ(v.where.detail, 3);
  EXPECT_EQ(v.where.counter, 1234u);
  EXPECT_EQ(v.where.first, 40);
  EXPECT_EQ(leader.read(1).beats, 0u) << "slots are separate";

  leader.leader_beat();
  EXPECT_EQ(member.leader_beats(), 1u);
  EXPECT_FALSE(member.verdict());
  leader.post_verdict("lost rank 9 (node3): no heartbeat for 10 s");
  leader.post_verdict("a later verdict");
  EXPECT_EQ(member.verdict().value_or(""), "lost rank 9 (node3): no heartbeat for 10 s");

  s.phase = progress::Phase::kFinishing;
  member.leave(2, s);
  EXPECT_TRUE(leader.read(2).left);
  EXPECT_EQ(leader.read(2).where.phase, progress::Phase::kFinishing);

  leader.remove();
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(member.read(2).beats, 3u) << "the mappings outlive the name";
}

TEST(NodeBoard, ABoardOfAnotherSizeOrALinkIsRefused) {
  const std::string path = NodeBoard::path_for(test_token(), "node1");
  {
    NodeBoard four(path, 4);
    try {
      NodeBoard eight(path, 8);
      ADD_FAILURE() << "a board of 4 ranks opened for 8";
    } catch (const rt::Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the ranks disagree on the node"), std::string::npos)
          << e.what();
    }
    four.remove();
  }
  const std::string link = NodeBoard::path_for(test_token(), "node2");
  ASSERT_EQ(::symlink("/etc/hostname", link.c_str()), 0);
  EXPECT_THROW(NodeBoard(link, 2), rt::Error);
  ::unlink(link.c_str());
}

}  // namespace
}  // namespace hpctrain::dist
