#include "spec/toml_errors.hpp"

#include <algorithm>

namespace hpctrain::spec {
namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The line's text with a string or comment stripped: what remains is syntax.
std::string code_of(const std::string& line) {
  std::string out;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '#') break;
    if (c == '"' || c == '\'') quote = c;
    out += c;
  }
  return out;
}

int first_column(const std::string& line) {
  const auto at = line.find_first_not_of(" \t");
  return at == std::string::npos ? 1 : static_cast<int>(at) + 1;
}

// The column of the value of "key = value" (1 when there is no '=').
int value_column(const std::string& line) {
  const auto eq = line.find('=');
  if (eq == std::string::npos) return first_column(line);
  const auto at = line.find_first_not_of(" \t", eq + 1);
  return at == std::string::npos ? static_cast<int>(eq) + 2 : static_cast<int>(at) + 1;
}

// The word of the value at `column` (1-based), up to a space, ',' or ']'.
std::string value_word(const std::string& line, int column) {
  const auto from = static_cast<size_t>(std::max(column, 1) - 1);
  if (from >= line.size()) return {};
  const auto end = line.find_first_of(" \t,]}#", from);
  return line.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

// The name in toml11's `("name")`, or empty.
std::string quoted_name(const std::string& message) {
  const auto open = message.find("(\"");
  const auto close = message.find("\")", open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos) return {};
  return message.substr(open + 2, close - open - 2);
}

// The last line before `line` (1-based) that is not blank: where an unclosed value began.
int last_text_line(const std::vector<std::string>& lines, int line) {
  for (int i = std::min<int>(line, static_cast<int>(lines.size())); i >= 1; --i) {
    if (lines[i - 1].find_first_not_of(" \t") != std::string::npos) return i;
  }
  return 1;
}

SyntaxError header_error(const std::string& text, int line) {
  const auto code = code_of(text);
  const bool array = code.find("[[") != std::string::npos;
  const auto trimmed = code.substr(0, code.find_last_not_of(" \t") + 1);
  return {line, static_cast<int>(trimmed.size()) + 1,
          "the table header " + trimmed.substr(trimmed.find('[')) + " has no closing " +
              (array ? "]]" : "]"),
          "a table header is written [name] on a line of its own ([[name]] for a list of tables)"};
}

SyntaxError string_error(const std::string& message, const std::string& text, int line) {
  const bool literal = has(message, "literal");
  const bool multiline = has(message, "multiline") || has(message, "_ml_");
  const char quote = literal ? '\'' : '"';
  const auto at = text.find(quote, text.find('=') == std::string::npos ? 0 : text.find('='));
  const std::string q = multiline ? std::string(3, quote) : std::string(1, quote);
  return {line, at == std::string::npos ? value_column(text) : static_cast<int>(at) + 1,
          "a string is not closed: the " + q + " that opens it has no " + q + " after it",
          multiline ? "a multi-line string ends with " + q
                    : "a string is written between quotes on one line: name = \"my run\""};
}

SyntaxError value_error(const std::string& text, int line) {
  const int column = value_column(text);
  const std::string word = value_word(text, column);
  if (text.find('=') == std::string::npos || code_of(text).find("==") != std::string::npos) {
    return {line, first_column(text), "expected key = value",
            "one setting per line: epochs = 10; a table header is [name]"};
  }
  return {line, column, "`" + word + "` is not a value",
          "strings need quotes (name = \"" + word +
              "\"); booleans are true or false; numbers are "
              "digits (10, 0.1, 1e-4)"};
}

}  // namespace

SyntaxError plain_syntax_error(const std::string& toml_message, int line, int column,
                               const std::vector<std::string>& lines) {
  const int n = static_cast<int>(lines.size());
  const std::string text = line >= 1 && line <= n ? lines[line - 1] : std::string();
  const std::string& m = toml_message;
  const auto code = code_of(text);
  const auto first = code.find_first_not_of(" \t");
  const bool header = first != std::string::npos && code[first] == '[';
  if (header && code.find(']') == std::string::npos) return header_error(text, line);
  if (has(m, "newline required after [table.key]")) {
    return {line, column, "text after the table header",
            "a table header is written [name] on a line of its own"};
  }
  if (has(m, "not a valid string") || has(m, "not a valid literal string") ||
      has(m, "not a valid multiline")) {
    return string_error(m, text, line);
  }
  if (has(m, "missing array separator")) {
    const int open = last_text_line(lines, line - 1);
    const std::string& prev = lines.empty() ? text : lines[open - 1];
    return {open, static_cast<int>(prev.size()) + 1,
            "a list is not closed with ], or two of its values have no , between them",
            "a list is written [1, 2, 3]; it may span lines until its ]"};
  }
  if (has(m, "missing curly brace")) {
    return {line, column, "an inline table is not closed with }",
            "an inline table is written {key = value, other = value} on one line"};
  }
  if (has(m, "already exists")) {
    const std::string name = quoted_name(m);
    const bool table = has(m, "table (");
    return {line, first_column(text),
            (table ? "the table [" + name + "] is declared twice"
                   : "`" + name + "` is set twice in this table"),
            "keep one of them"};
  }
  if (has(m, "empty key")) {
    return {line, first_column(text), "a value without a key", "write key = value"};
  }
  if (has(m, "missing key-value separator")) {
    return {line, first_column(text),
            "`" + value_word(text, first_column(text)) + "` has no = value", "write key = value"};
  }
  if (has(m, "invalid line format")) {
    return {line, column, "more after the value: one key = value per line",
            "a string with spaces or commas needs quotes: name = \"my run, 2\""};
  }
  if (has(m, "leading zero")) {
    return {line, value_column(text), "a number with a leading zero",
            "write 1, not 01 (or quote it as a string)"};
  }
  if (has(m, "bad float") || has(m, "bad integer")) {
    return {line, value_column(text),
            "`" + value_word(text, value_column(text)) + "` is not a number",
            "numbers are written 10, 0.1, 1.0 or 1e-4"};
  }
  if (has(m, "date") || has(m, "time")) {
    return {line, column, "not a valid date or time", "TOML writes them 1979-05-27T07:32:00Z"};
  }
  if (has(m, "unknown value appeared") || has(m, "parse_boolean")) return value_error(text, line);
  if (has(m, "invalid key")) {
    return {line, first_column(text), "not a valid key",
            "keys are letters, digits, _ and - (or quoted), and each line is key = value"};
  }
  // Anything else: toml11's own words, without the name of its parsing function.
  std::string plain = m;
  if (plain.rfind("toml::", 0) == 0 && plain.find(": ") != std::string::npos) {
    plain = plain.substr(plain.find(": ") + 2);
  }
  return {line, column, plain, {}};
}

}  // namespace hpctrain::spec
