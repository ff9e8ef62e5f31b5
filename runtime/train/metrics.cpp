#include "train/metrics.hpp"

#include "common/time.hpp"

namespace hpctrain::train {

void write_suspects(const std::filesystem::path& run_dir, records::MetricsKind kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message) {
  records::SuspectsRecord r;
  r.kind = kind;
  r.tag = step_tag;
  r.step = step;
  r.ranks.assign(ranks.begin(), ranks.end());
  r.hosts = records::hosts_of_ranks(r.ranks, hosts);
  r.message = message;
  r.wall_time = unix_time();
  records::append_metrics(run_dir, r);  // to_json refuses a kind other than hang and evict
}

}  // namespace hpctrain::train
