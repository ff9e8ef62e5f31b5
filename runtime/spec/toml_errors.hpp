// toml11's syntax errors in the user's words: what is wrong, where, and how to write it.
#pragma once

#include <string>
#include <vector>

namespace hpctrain::spec {

struct SyntaxError {
  int line = 0;         // 1-based; 0 when unknown
  int column = 0;       // 1-based; 0 when unknown
  std::string message;  // after "not valid TOML: "
  std::string hint;
};

// `toml_message` is the first line of toml11's error ("toml::parse_key: an invalid key appeared."
// or "bad format: unknown value appeared"), `line` and `column` its location and `lines` the
// file's text: the message says what is wrong with that line, the location points at it.
SyntaxError plain_syntax_error(const std::string& toml_message, int line, int column,
                               const std::vector<std::string>& lines);

}  // namespace hpctrain::spec
