// Slurm hostlist expansion, written to give what `scontrol show hostnames` (Slurm 22.05) gives.
// The rules below were worked out against the real scontrol (tests/unit/dist/hostlist_corpus.txt
// records it); several are odd, and they are kept because a node list we expand differently from
// Slurm would put ranks on the wrong hosts:
//   - tokens are split on ',', ' ' and '\t' outside brackets; empty tokens vanish;
//   - in a token only the LAST '[' opens the final group, which must end the token ("n[1]x" is an
//     error); a token with a '[' and no ']' after it is kept as a name: "a[1-2" -> "a]",
//     "[1-2" -> "1-2" (Slurm "tacks a ']' on");
//   - a range's zero padding is the length of its lower bound as written ("n[8-010]" -> n8..n10,
//     "n[008-10]" -> n008..n010); the bounds are read with strtoul, so " 1" or "+1" have width 2;
//     with a '-', junk after the lower bound is ignored ("n[1a-3]" -> n01..n03);
//   - earlier bracket groups in the prefix expand as a cartesian product, the last prefix group
//     outermost: "x[1-2]y[3-4]z[5-6]" -> x1y3z5 x1y3z6 x2y3z5 x2y3z6 x1y4z5 ...;
//   - duplicates and order are kept; limits: 65536 names per range, 65536 ranges per bracket,
//     65536 prefix expansions per group.
// Where Slurm misbehaves we throw instead (documented deviations, also in the corpus):
//   - an invalid range in a prefix group other than the last one (three or more groups) is
//     dropped silently by Slurm (names go missing); we reject the expression;
//   - numbers >= ULONG_MAX: Slurm saturates them or crashes (segfault on a range ending there);
//   - tokens of 1024 characters or more, which Slurm truncates into a fixed buffer.
#include "dist/hostlist.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace hpctrain::dist {
namespace {

constexpr unsigned long kMaxRangeHosts = 64 * 1024;   // Slurm's MAX_RANGE
constexpr size_t kMaxRangesPerBracket = 64 * 1024;    // Slurm's MAX_RANGES
constexpr unsigned long kMaxPrefixCount = 64 * 1024;  // Slurm's MAX_PREFIX_CNT
constexpr size_t kMaxTokenLength = 1023;              // Slurm copies tokens into char[1024]

struct Range {
  unsigned long lo = 0;
  unsigned long hi = 0;
  int width = 0;
};

bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t'; }

class Expander {
 public:
  Expander(const std::string& expression, size_t max_hosts)
      : expression_(expression), max_hosts_(max_hosts) {}

  std::vector<std::string> run() {
    for (const std::string& token : tokenize()) expand_token(token);
    return std::move(names_);
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    HPCTRAIN_THROW(HostlistError, "invalid hostlist '" + expression_ + "': " + problem);
  }

  // Slurm's tokenizer: a separator inside a [...] pair does not end the token.
  std::vector<std::string> tokenize() const {
    const std::string& s = expression_;
    const size_t n = s.size();
    std::vector<std::string> tokens;
    size_t pos = 0;
    while (true) {
      while (pos < n && is_separator(s[pos])) ++pos;
      if (pos >= n) break;
      const size_t start = pos;
      size_t parse = start;
      size_t end = start;
      bool extended = true;
      while (extended) {
        while (end < n && !is_separator(s[end])) ++end;
        extended = false;
        while (true) {
          const size_t open = s.find('[', parse);
          if (open == std::string::npos || open > end) break;
          const size_t close = s.find(']', parse);
          if (close == std::string::npos || close < open) break;
          if (close < end) {
            parse = close + 1;
            continue;
          }
          end = close;
          extended = true;
          break;
        }
      }
      tokens.push_back(s.substr(start, end - start));
      pos = end;
    }
    return tokens;
  }

  // strtoul as Slurm uses it (leading blanks and a sign accepted); rejects what Slurm would
  // saturate. Returns the number of characters consumed (0: no number).
  size_t read_number(const std::string& text, unsigned long* value) const {
    errno = 0;
    char* end = nullptr;
    *value = std::strtoul(text.c_str(), &end, 10);
    const size_t used = static_cast<size_t>(end - text.c_str());
    if (used > 0 && (errno == ERANGE || *value == ULONG_MAX)) {
      fail("number too large in '" + text + "'");
    }
    return used;
  }

  Range parse_range(const std::string& text) const {
    const std::string bad = "invalid range '" + text + "'";
    if (text.find('x') != std::string::npos) fail(bad);  // Slurm reserves 'x' for boxes
    const size_t dash = text.find('-');
    const std::string lo_text = text.substr(0, dash);
    Range range;
    range.width = static_cast<int>(lo_text.size());
    const size_t lo_used = read_number(lo_text, &range.lo);
    if (lo_used == 0) fail(bad);
    if (dash != std::string::npos && dash + 1 < text.size()) {
      const std::string hi_text = text.substr(dash + 1);
      if (hi_text[0] == '-') fail(bad);  // no negative numbers
      if (read_number(hi_text, &range.hi) != hi_text.size()) fail(bad);
    } else {
      if (lo_used != lo_text.size()) fail(bad);
      range.hi = range.lo;
    }
    if (range.lo > range.hi) fail(bad + " (reversed)");
    if (range.hi - range.lo >= kMaxRangeHosts) fail("too many hosts in range '" + text + "'");
    return range;
  }

  std::vector<Range> parse_range_list(const std::string& text) const {
    std::vector<Range> ranges;
    size_t start = 0;
    while (true) {
      if (ranges.size() == kMaxRangesPerBracket) fail("too many ranges in brackets");
      const size_t comma = text.find(',', start);
      ranges.push_back(parse_range(text.substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return ranges;
  }

  static std::string padded(unsigned long value, int width) {
    std::string digits = std::to_string(value);
    if (static_cast<int>(digits.size()) < width) {
      digits.insert(0, static_cast<size_t>(width) - digits.size(), '0');
    }
    return digits;
  }

  void reserve_names(unsigned long count) const {
    if (count > max_hosts_ || names_.size() > max_hosts_ - count) {
      fail("more than " + std::to_string(max_hosts_) + " hosts");
    }
  }

  void push_name(const std::string& name) {
    // Slurm stores a trailing number as a value: reject what it could not hold.
    size_t digits = name.size();
    while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
    if (digits < name.size()) {
      unsigned long ignored = 0;
      read_number(name.substr(digits), &ignored);
    }
    reserve_names(1);
    names_.push_back(name);
  }

  // Expands the bracket groups left in `prefix` (the last one outermost), then appends each
  // of `ranges` to every resulting prefix.
  void push_with_prefix(const std::string& prefix, const std::vector<Range>& ranges) {
    const size_t open = prefix.rfind('[');
    const size_t close = prefix.rfind(']');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      const std::string head = prefix.substr(0, open);
      const std::string tail = prefix.substr(close + 1);
      unsigned long count = 0;
      for (const Range& group : parse_range_list(prefix.substr(open + 1, close - open - 1))) {
        count += group.hi - group.lo + 1;
        if (count > kMaxPrefixCount) fail("too many hosts in prefix '" + prefix + "'");
        for (unsigned long j = group.lo;; ++j) {
          push_with_prefix(head + padded(j, group.width) + tail, ranges);
          if (j == group.hi) break;
        }
      }
      return;
    }
    for (const Range& range : ranges) {
      reserve_names(range.hi - range.lo + 1);
      for (unsigned long j = range.lo;; ++j) {
        names_.push_back(prefix + padded(j, range.width));
        if (j == range.hi) break;
      }
    }
  }

  void expand_token(const std::string& token) {
    if (token.size() > kMaxTokenLength) {
      fail("a name of more than " + std::to_string(kMaxTokenLength) + " characters");
    }
    const size_t open = token.rfind('[');
    if (open == std::string::npos) {
      push_name(token);
      return;
    }
    const std::string prefix = token.substr(0, open);
    const std::string rest = token.substr(open + 1);
    const size_t close = rest.find(']');
    if (close == std::string::npos) {
      push_name(prefix.empty() ? rest : prefix + "]");
      return;
    }
    if (close + 1 < rest.size() && rest[close + 1] != ',') {
      fail("'" + rest.substr(close + 1) + "' after ']' in '" + token + "'");
    }
    push_with_prefix(prefix, parse_range_list(rest.substr(0, close)));
  }

  const std::string& expression_;
  const size_t max_hosts_;
  std::vector<std::string> names_;
};

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression, size_t max_hosts) {
  return Expander(expression, max_hosts).run();
}

std::vector<std::string> expand_nodelist(const std::string& expression, size_t max_hosts) {
  auto fail = [&](const std::string& problem) {
    HPCTRAIN_THROW(HostlistError, "invalid hostlist '" + expression + "': " + problem);
  };
  if (expression.empty()) fail("no host names");
  bool in_brackets = false;
  size_t token_start = 0;
  size_t open_at = 0;
  for (size_t i = 0; i <= expression.size(); ++i) {
    const char c = i < expression.size() ? expression[i] : ',';
    const std::string at = " at position " + std::to_string(i + 1);
    if (c == ' ' || c == '\t' || c == '\n') fail("a blank" + at);
    if (c == '[') {
      if (in_brackets) fail("'[' inside brackets" + at);
      in_brackets = true;
      open_at = i;
    } else if (c == ']') {
      if (!in_brackets) fail("']' without '['" + at);
      in_brackets = false;
    } else if (c == ',' && !in_brackets) {
      if (i == token_start) {
        fail(i == expression.size() ? "it ends with ','" : "an empty name" + at);
      }
      token_start = i + 1;
    }
  }
  if (in_brackets) fail("'[' at position " + std::to_string(open_at + 1) + " has no ']'");
  return expand_hostlist(expression, max_hosts);
}

}  // namespace hpctrain::dist
