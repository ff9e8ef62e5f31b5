#include "spec/document.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "spec/spec.hpp"
#include "spec/toml_errors.hpp"

namespace hpctrain::spec {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

[[noreturn]] void fail(const std::string& file, int line, int column, std::string message,
                       std::string hint = {}, std::string text = {}) {
  throw SpecError({Diagnostic{Severity::kError,
                              Origin{file, line, column, std::move(text)},
                              {},
                              std::move(message),
                              std::move(hint)}});
}

// Rejects nesting deeper than kMaxNesting outside strings and comments. toml11 parses arrays and
// inline tables recursively; a file of 100000 '[' would otherwise overflow the stack.
void check_nesting(const std::string& text, const std::string& file) {
  int depth = 0, line = 1, column = 0;
  size_t i = 0;
  auto starts = [&](const char* s) { return text.compare(i, std::strlen(s), s) == 0; };
  while (i < text.size()) {
    const char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (starts("\"\"\"") || starts("'''")) {
      const std::string delim = text.substr(i, 3);
      i += 3;
      while (i < text.size() && !starts(delim.c_str())) {
        if (text[i] == '\\' && delim[0] == '"') ++i;
        if (i < text.size() && text[i] == '\n') ++line;
        ++i;
      }
      i += 3;
    } else if (c == '"' || c == '\'') {
      ++i;
      while (i < text.size() && text[i] != c && text[i] != '\n') {
        if (text[i] == '\\' && c == '"') ++i;
        ++i;
      }
      ++i;
    } else {
      // '[' of a table header does not nest values, but counting it too only makes the check
      // stricter by one level, which no real spec gets near.
      if (c == '[' || c == '{') {
        if (++depth > kMaxNesting) {
          fail(file, line, column,
               "values nested more than " + std::to_string(kMaxNesting) + " levels deep");
        }
      } else if (c == ']' || c == '}') {
        depth = depth > 0 ? depth - 1 : 0;
      }
      ++i;
    }
  }
}

Document parse_checked(const std::string& text, const std::string& name) {
  if (const size_t bad = find_invalid_text(text); bad != std::string::npos) {
    // Tabs, newlines and carriage returns are fine in a file, only not inside values; toml11 and
    // the per-value check below handle those. Here: invalid UTF-8 or other control bytes.
    int line = 1, column = 1;
    for (size_t i = 0; i < bad; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    fail(name, line, column, "not a text file: invalid UTF-8 or a control character",
         "a job spec is TOML text (https://toml.io)");
  }
  check_nesting(text, name);
  Document doc;
  doc.path = name;
  doc.lines = split_lines(text);
  std::istringstream in(text);
  try {
    doc.root = toml::parse(in, name);
  } catch (const toml::exception& e) {
    // toml11's message already points at the spot; keep its first line as the message and the
    // location for our own format.
    // toml11's message names its parsing functions; its first line and location are put in
    // the user's words (toml_errors.hpp).
    std::string what = e.what();
    std::string first = what.substr(0, what.find('\n'));
    if (first.rfind("[error] ", 0) == 0) first = first.substr(8);
    const auto& loc = e.location();
    const auto plain = plain_syntax_error(first, static_cast<int>(loc.line()),
                                          static_cast<int>(loc.column()), doc.lines);
    const int line = plain.line;
    fail(name, line, plain.column, "not valid TOML: " + plain.message, plain.hint,
         line > 0 && static_cast<size_t>(line) <= doc.lines.size() ? doc.lines[line - 1] : "");
  } catch (const std::exception& e) {
    fail(name, 0, 0, std::string("not valid TOML: ") + e.what());
  }
  return doc;
}

}  // namespace

size_t find_invalid_text(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) return i;
      ++i;
      continue;
    }
    int extra;
    unsigned min;
    if ((c & 0xe0) == 0xc0) {
      extra = 1;
      min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      min = 0x10000;
    } else {
      return i;
    }
    unsigned cp = c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      if (i + k >= s.size()) return i;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    // C1 control characters are control characters too.
    if (cp >= 0x80 && cp < 0xa0) return i;
    i += extra + 1;
  }
  return std::string::npos;
}

Origin Document::origin_of(const toml::value& value, const std::string& key) const {
  const auto loc = value.location();
  Origin o{path, static_cast<int>(loc.line()), static_cast<int>(loc.column()), {}};
  if (o.line > 0 && static_cast<size_t>(o.line) <= lines.size()) {
    o.text = lines[o.line - 1];
    if (!key.empty()) {
      // toml11 v3 locates values, not keys; point at the key when it is on the same line.
      const auto at = o.text.find(key);
      if (at != std::string::npos) o.column = static_cast<int>(at) + 1;
    }
  }
  return o;
}

Document read_document(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    fail(name, 0, 0, "no such file");
  }
  if (std::filesystem::is_directory(status)) fail(name, 0, 0, "is a directory, not a file");
  if (!std::filesystem::is_regular_file(status)) fail(name, 0, 0, "not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxSpecBytes) {
    fail(name, 0, 0,
         "file is " + std::to_string(size) + " bytes; specs are limited to " +
             std::to_string(kMaxSpecBytes) + " bytes",
         "is this really a job spec?");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(name, 0, 0, std::string("cannot open: ") + std::strerror(errno));
  std::string text;
  text.resize(static_cast<size_t>(kMaxSpecBytes) + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) fail(name, 0, 0, std::string("cannot read: ") + std::strerror(errno));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxSpecBytes) fail(name, 0, 0, "file grew past the size limit while reading");
  return parse_checked(text, name);
}

Document parse_text(const std::string& text, const std::string& name) {
  return parse_checked(text, name);
}

}  // namespace hpctrain::spec
