#include "train/metrics.hpp"

#include <stdexcept>

#include "common/time.hpp"

namespace hpctrain::train {

void MetricsLog::write(const nlohmann::json& record) { write_line(record.dump()); }

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

void write_suspects(const std::filesystem::path& run_dir, const std::string& kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message) {
  const auto parsed = records::parse<records::MetricsKind>(kind);
  if (!parsed) throw std::invalid_argument("no metrics record is of kind " + kind);
  write_suspects(run_dir, *parsed, step_tag, step, ranks, hosts, message);
}

}  // namespace hpctrain::train
