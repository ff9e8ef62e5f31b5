// Diagnostics for job specs: every problem found in a spec, with where it came from (file, line,
// column; a --set argument; a default), collected so that all are reported at once.
// Thread safety: plain values; a DiagnosticSink is not shared between threads.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace hpctrain::spec {

// Where a value came from.
struct Origin {
  std::string file;  // spec or profile path; "--set" for overrides; empty for defaults
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;    // 1-based; 0 when unknown
  std::string text;  // the source line (files) or the argument (--set), for the caret display

  static Origin default_value() { return {}; }
  static Origin override_arg(std::string arg) { return {"--set", 0, 0, std::move(arg)}; }
  bool is_default() const { return file.empty(); }
};

enum class Severity { kError, kWarning };

struct Diagnostic {
  Severity severity = Severity::kError;
  Origin origin;
  std::string key;      // dotted key path, e.g. "job.nodes"; empty for file-level problems
  std::string message;  // what is wrong, in words a user can act on
  std::string hint;     // optional: how to fix it

  // "file:line:col: error: [job.nodes] must be >= 1 (got 0)" followed by the source line and a
  // caret when known, and a "hint:" line when there is one.
  std::string format() const;
};

// Collects diagnostics; errors() tells whether any error (not warning) was reported.
class DiagnosticSink {
 public:
  void error(const Origin& origin, std::string key, std::string message, std::string hint = {});
  void warning(const Origin& origin, std::string key, std::string message, std::string hint = {});
  bool has_errors() const;
  const std::vector<Diagnostic>& all() const { return diagnostics_; }
  // Sorted by file, line, column: the order a user reads the spec in.
  std::vector<Diagnostic> sorted() const;

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Thrown when a spec (or a file it needs) has errors; carries every diagnostic found.
class SpecError : public hpctrain::Error {
 public:
  explicit SpecError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Formats all diagnostics, one block each, followed by a count line.
std::string format_all(const std::vector<Diagnostic>& diagnostics);

}  // namespace hpctrain::spec
