// The replay on divergence's plan and verdict (torch-free; train/replay_check.hpp runs it):
// which rank recomputes which rank's batches, and which node (or rank) the disagreements point
// at. Each rank r has one witness: the rank at r's place on the next node (the nodes in the order
// of their first rank, the last node's witnessed by the first's), or the next rank when every
// rank is on one node. A disagreement between r and its witness points at one of the two: the
// unit found in every disagreement is the faulty one (a node, or on one node a rank); with two
// units in every disagreement (two nodes, or two ranks) nothing can tell which.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::train {

// witness[r] for every rank r, given each rank's host (by rank; ranks of a node need not be
// contiguous). A node with fewer ranks than the next: its place wraps (r's place modulo the next
// node's rank count). With one rank: itself (nothing to compare).
std::vector<int> witnesses(const std::vector<std::string>& hosts);

// The ranks r whose batches `rank` recomputes (witness[r] == rank), in order.
std::vector<int> witnessed_by(const std::vector<int>& witness, int rank);

struct Fault {
  std::string host;        // the faulty node; empty when the unit is a rank of a single node
  std::vector<int> ranks;  // its ranks (or the rank)
};

// The faulty unit given the pairs (rank, its witness) whose results differ: the node in every
// pair (several nodes), or the rank in every pair (one node). nullopt when no pair differs, or
// when two units are in every pair.
std::optional<Fault> fault_of(const std::vector<std::pair<int, int>>& disagreeing,
                              const std::vector<std::string>& hosts);

}  // namespace hpctrain::train
