#include "run/logs.hpp"

#include <algorithm>

namespace hpctrain::run {

namespace {

// Reads 1 to 9 digits at `pos`, moving past them; nullopt if there are none (or too many).
std::optional<int64_t> read_digits(const std::string& s, size_t& pos) {
  const size_t from = pos;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
  if (pos == from || pos - from > 9) return std::nullopt;
  return std::stoll(s.substr(from, pos - from));
}

bool read_literal(const std::string& s, size_t& pos, const char* literal) {
  const std::string l(literal);
  if (s.compare(pos, l.size(), l) != 0) return false;
  pos += l.size();
  return true;
}

}  // namespace

// Parsed by hand rather than with std::regex, whose backtracking recurses once per character and
// can exhaust the stack on a long log line.
std::optional<int64_t> attempt_marker(const std::string& line) {
  size_t pos = 0;
  if (!read_literal(line, pos, "hpctrain: job ")) return std::nullopt;
  const size_t id_from = pos;
  while (pos < line.size() && ((line[pos] >= '0' && line[pos] <= '9') || line[pos] == '_')) ++pos;
  if (pos == id_from || !read_literal(line, pos, " attempt ")) return std::nullopt;
  const auto n = read_digits(line, pos);
  if (!n || !read_literal(line, pos, " on ") || line.find(" at ", pos - 1) == std::string::npos) {
    return std::nullopt;
  }
  return n;
}

std::optional<int64_t> line_rank(const std::string& line) {
  size_t pos = 0;
  if (!read_literal(line, pos, "[rank ")) return std::nullopt;
  const auto rank = read_digits(line, pos);
  if (!rank || !read_literal(line, pos, "/") || !read_digits(line, pos) ||
      !read_literal(line, pos, " ") || line.find("] ", pos) == std::string::npos) {
    return std::nullopt;
  }
  return rank;
}

bool LogFilter::keep(const std::string& line) {
  if (const auto n = attempt_marker(line)) {
    current_ = *n;
    highest_ = std::max(highest_, current_);
  }
  if (attempt_ && current_ != *attempt_) return false;
  if (rank_ && line_rank(line) != rank_) return false;
  return true;
}

}  // namespace hpctrain::run
