// Safe reading of TOML files: size cap, nesting cap and UTF-8 check before toml11 parses, so a bad
// file gives one clear diagnostic instead of a crash or a huge allocation.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <toml.hpp>

#include "spec/diagnostics.hpp"

namespace hpctrain::spec {

struct Document {
  std::string path;  // as given, for messages
  toml::value root;
  std::vector<std::string> lines;  // source lines, for key columns and carets

  // Origin of a value in this document; `key` (the last key component) moves the column to the
  // key when it can be found on the value's line.
  Origin origin_of(const toml::value& value, const std::string& key = {}) const;
};

// Reads and parses `path`. Throws SpecError naming the file on any problem.
Document read_document(const std::filesystem::path& path);

// Parses TOML text (no file); used for --set values. Throws SpecError.
Document parse_text(const std::string& text, const std::string& name);

// Checks `s` is valid UTF-8 without control characters; returns the byte offset of the first bad
// byte, or std::string::npos.
size_t find_invalid_text(const std::string& s);

}  // namespace hpctrain::spec
