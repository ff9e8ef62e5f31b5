#include "train/replay_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace hpctrain::train {
namespace {

// The nodes in the order of their first rank, each with its ranks in order.
std::vector<std::vector<int>> nodes_of(const std::vector<std::string>& hosts) {
  std::vector<std::vector<int>> nodes;
  std::map<std::string, size_t> index;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    const auto [it, added] = index.emplace(hosts[r], nodes.size());
    if (added) nodes.emplace_back();
    nodes[it->second].push_back(r);
  }
  return nodes;
}

}  // namespace

std::vector<int> witnesses(const std::vector<std::string>& hosts) {
  const int world = static_cast<int>(hosts.size());
  std::vector<int> witness(world);
  const std::vector<std::vector<int>> nodes = nodes_of(hosts);
  if (nodes.size() <= 1) {
    for (int r = 0; r < world; ++r) witness[r] = (r + 1) % world;
    return witness;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const std::vector<int>& next = nodes[(n + 1) % nodes.size()];
    for (size_t place = 0; place < nodes[n].size(); ++place) {
      witness[nodes[n][place]] = next[place % next.size()];
    }
  }
  return witness;
}

std::vector<int> witnessed_by(const std::vector<int>& witness, int rank) {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(witness.size()); ++r) {
    if (witness[r] == rank && r != rank) out.push_back(r);
  }
  return out;
}

std::optional<Fault> fault_of(const std::vector<std::pair<int, int>>& disagreeing,
                              const std::vector<std::string>& hosts) {
  if (disagreeing.empty()) return std::nullopt;
  const bool one_node = nodes_of(hosts).size() <= 1;
  // The units of each pair (a node's name, or a rank's number as text on one node); the units in
  // every pair.
  const auto unit = [&](int r) { return one_node ? std::to_string(r) : hosts.at(r); };
  std::set<std::string> in_all;
  for (size_t i = 0; i < disagreeing.size(); ++i) {
    const std::set<std::string> pair = {unit(disagreeing[i].first), unit(disagreeing[i].second)};
    if (i == 0) {
      in_all = pair;
    } else {
      std::set<std::string> both;
      std::set_intersection(in_all.begin(), in_all.end(), pair.begin(), pair.end(),
                            std::inserter(both, both.end()));
      in_all = std::move(both);
    }
  }
  if (in_all.size() != 1) return std::nullopt;  // none in every pair, or two that cannot be told
  Fault fault;
  const std::string& faulty = *in_all.begin();
  if (one_node) {
    fault.ranks = {std::stoi(faulty)};
    return fault;
  }
  fault.host = faulty;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (hosts[r] == faulty) fault.ranks.push_back(r);
  }
  return fault;
}

}  // namespace hpctrain::train
