// train/replay_plan.hpp: who witnesses whom, and which unit the disagreements point at.
#include "train/replay_plan.hpp"

#include <gtest/gtest.h>

namespace hpctrain::train {
namespace {

using Hosts = std::vector<std::string>;

TEST(ReplayPlan, EachRankIsWitnessedOnTheNextNode) {
  // Three nodes of two ranks, by block.
  const Hosts hosts = {"n1", "n1", "n2", "n2", "n3", "n3"};
  EXPECT_EQ(witnesses(hosts), (std::vector<int>{2, 3, 4, 5, 0, 1}));
  // Cyclic placement: the same places, the ranks interleaved.
  EXPECT_EQ(witnesses({"n1", "n2", "n1", "n2"}), (std::vector<int>{1, 0, 3, 2}));
  // A smaller next node: the places wrap.
  EXPECT_EQ(witnesses({"n1", "n1", "n1", "n2"}), (std::vector<int>{3, 3, 3, 0}));
  EXPECT_EQ(witnessed_by(witnesses({"n1", "n1", "n1", "n2"}), 3), (std::vector<int>{0, 1, 2}));
}

TEST(ReplayPlan, OnOneNodeTheNextRankWitnesses) {
  EXPECT_EQ(witnesses({"vm", "vm", "vm"}), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(witnessed_by({1, 2, 0}, 0), (std::vector<int>{2}));
  EXPECT_EQ(witnesses({"vm"}), (std::vector<int>{0}));
  EXPECT_TRUE(witnessed_by({0}, 0).empty()) << "a rank does not witness itself";
}

TEST(ReplayPlan, TheNodeInEveryDisagreementIsFaulty) {
  const Hosts hosts = {"n1", "n1", "n2", "n2", "n3", "n3"};
  // n2 computes wrong: its ranks' own results (witnessed on n3) and what it witnesses (n1's).
  const auto fault = fault_of({{0, 2}, {1, 3}, {2, 4}, {3, 5}}, hosts);
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->host, "n2");
  EXPECT_EQ(fault->ranks, (std::vector<int>{2, 3}));
  // One rank of n2 only: still n2.
  const auto one = fault_of({{0, 2}, {2, 4}}, hosts);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->host, "n2");
}

TEST(ReplayPlan, OnOneNodeTheRankInEveryDisagreementIsFaulty) {
  const auto fault = fault_of({{0, 1}, {1, 2}}, {"vm", "vm", "vm"});
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->host, "");
  EXPECT_EQ(fault->ranks, (std::vector<int>{1}));
}

TEST(ReplayPlan, NoDisagreementOrNoSingleSuspectNamesNobody) {
  const Hosts hosts = {"n1", "n1", "n2", "n2", "n3", "n3"};
  EXPECT_FALSE(fault_of({}, hosts).has_value());
  // One pair: two nodes in it, no telling which.
  EXPECT_FALSE(fault_of({{0, 2}}, hosts).has_value());
  // Two nodes only: every disagreement holds both.
  EXPECT_FALSE(fault_of({{0, 2}, {2, 0}}, {"n1", "n1", "n2", "n2"}).has_value());
  // Disagreements with no node in common (two faults at once): nobody named.
  EXPECT_FALSE(fault_of({{0, 2}, {4, 0}, {2, 4}}, hosts).has_value());
}

}  // namespace
}  // namespace hpctrain::train
