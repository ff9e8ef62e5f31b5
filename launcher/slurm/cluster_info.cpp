#include "slurm/cluster_info.hpp"

#include <algorithm>
#include <sstream>

#include "slurm/command.hpp"

namespace hpctrain::slurm {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

// A count of digits only, or nullopt.
std::optional<int64_t> count_of(const std::string& s) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(s);
}

bool is_unlimited(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "infinite" || s == "unlimited";
}

// sinfo's %s: "1-infinite", "2-8", "4": the largest job it takes, nullopt without a limit.
std::optional<int64_t> max_job_nodes_of(const std::string& s) {
  const auto dash = s.rfind('-');
  const std::string high = dash == std::string::npos ? s : s.substr(dash + 1);
  return is_unlimited(high) ? std::nullopt : count_of(high);
}

}  // namespace

int64_t PartitionInfo::total_nodes() const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.nodes;
  return n;
}

int64_t PartitionInfo::nodes_with_gpus(int64_t gpus) const {
  int64_t n = 0;
  for (const auto& g : groups) {
    if (g.gpus >= gpus) n += g.nodes;
  }
  return n;
}

int64_t PartitionInfo::max_gpus_per_node() const {
  int64_t most = 0;
  for (const auto& g : groups) most = std::max(most, g.gpus);
  return most;
}

std::optional<int64_t> parse_slurm_time_limit(const std::string& text) {
  if (is_unlimited(text)) return std::nullopt;
  int64_t days = 0;
  std::string rest = text;
  const auto dash = text.find('-');
  if (dash != std::string::npos) {
    const auto d = count_of(text.substr(0, dash));
    if (!d) throw SlurmError("not a Slurm time limit: '" + text + "'");
    days = *d;
    rest = text.substr(dash + 1);
  }
  const auto parts = split(rest, ':');
  std::vector<int64_t> v;
  for (const auto& p : parts) {
    const auto n = count_of(p);
    if (!n) throw SlurmError("not a Slurm time limit: '" + text + "'");
    v.push_back(*n);
  }
  if (v.empty() || v.size() > 3) throw SlurmError("not a Slurm time limit: '" + text + "'");
  // With days: hours[:minutes[:seconds]]; without: minutes[:seconds] or hours:minutes:seconds.
  int64_t h = 0, m = 0, s = 0;
  if (dash != std::string::npos) {
    h = v[0];
    m = v.size() > 1 ? v[1] : 0;
    s = v.size() > 2 ? v[2] : 0;
  } else if (v.size() == 3) {
    h = v[0], m = v[1], s = v[2];
  } else {
    m = v[0];
    s = v.size() > 1 ? v[1] : 0;
  }
  return ((days * 24 + h) * 60 + m) * 60 + s;
}

int64_t gpus_in_gres(const std::string& gres) {
  int64_t gpus = 0;
  for (const auto& entry : split(gres, ',')) {
    // name[:type]:count[(S:sockets)]; the count may carry a K/M/G suffix Slurm never uses for
    // GPUs.
    const std::string e = entry.substr(0, entry.find('('));
    const auto fields = split(e, ':');
    if (fields.empty() || fields[0] != "gpu") continue;
    const auto count = fields.size() > 1 ? count_of(fields.back()) : std::nullopt;
    gpus += count ? *count : 1;
  }
  return gpus;
}

std::vector<PartitionInfo> parse_sinfo_partitions(const std::string& text) {
  std::vector<PartitionInfo> out;
  for (const auto& line : output_lines(text)) {
    const auto f = split(line, '|');
    if (f.size() < 6 || f[0].empty()) continue;
    const auto nodes = count_of(f[4]);
    if (!nodes) continue;
    PartitionInfo p;
    p.is_default = f[0].back() == '*';
    p.name = p.is_default ? f[0].substr(0, f[0].size() - 1) : f[0];
    p.availability = f[1];
    try {
      p.max_time_s = parse_slurm_time_limit(f[2]);
    } catch (const SlurmError&) {
      continue;
    }
    p.max_job_nodes = max_job_nodes_of(f[3]);
    const NodeGroup group{*nodes, gpus_in_gres(f[5]), f[5]};
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const PartitionInfo& q) { return q.name == p.name; });
    if (it == out.end()) {
      p.groups.push_back(group);
      out.push_back(std::move(p));
    } else {
      it->groups.push_back(group);
      it->is_default = it->is_default || p.is_default;
    }
  }
  return out;
}

std::vector<Association> parse_associations(const std::string& text) {
  std::vector<Association> out;
  for (const auto& line : output_lines(text)) {
    const auto f = split(line, '|');
    if (f.empty() || f[0].empty()) continue;
    Association a;
    a.account = f[0];
    if (f.size() > 1) a.partition = f[1];
    if (f.size() > 2) {
      for (const auto& q : split(f[2], ',')) {
        if (!q.empty()) a.qos.push_back(q);
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::string> parse_qos_names(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& line : output_lines(text)) out.push_back(line.substr(0, line.find('|')));
  return out;
}

const PartitionInfo* find_partition(const std::vector<PartitionInfo>& partitions,
                                    const std::optional<std::string>& name) {
  for (const auto& p : partitions) {
    if (name ? p.name == *name : p.is_default) return &p;
  }
  return nullptr;
}

}  // namespace hpctrain::slurm
