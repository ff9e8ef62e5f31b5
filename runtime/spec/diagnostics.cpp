#include "spec/diagnostics.hpp"

#include <algorithm>
#include <sstream>
#include <tuple>

namespace hpctrain::spec {

std::string Diagnostic::format() const {
  std::ostringstream out;
  if (origin.is_default()) {
    out << "spec";
  } else if (origin.file == "--set") {
    out << "--set " << origin.text;
  } else {
    out << origin.file;
    if (origin.line > 0) out << ':' << origin.line;
    if (origin.column > 0) out << ':' << origin.column;
  }
  out << (severity == Severity::kError ? ": error: " : ": warning: ");
  if (!key.empty()) out << '[' << key << "] ";
  out << message << '\n';
  if (origin.line > 0 && !origin.text.empty()) {
    out << "    " << origin.text << '\n';
    if (origin.column > 0) out << "    " << std::string(origin.column - 1, ' ') << "^\n";
  }
  if (!hint.empty()) out << "  hint: " << hint << '\n';
  return out.str();
}

void DiagnosticSink::error(const Origin& origin, std::string key, std::string message,
                           std::string hint) {
  diagnostics_.push_back(
      {Severity::kError, origin, std::move(key), std::move(message), std::move(hint)});
}

void DiagnosticSink::warning(const Origin& origin, std::string key, std::string message,
                             std::string hint) {
  diagnostics_.push_back(
      {Severity::kWarning, origin, std::move(key), std::move(message), std::move(hint)});
}

bool DiagnosticSink::has_errors() const {
  return std::any_of(diagnostics_.begin(), diagnostics_.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::kError; });
}

std::vector<Diagnostic> DiagnosticSink::sorted() const {
  std::vector<Diagnostic> out = diagnostics_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.origin.file, a.origin.line, a.origin.column) <
           std::tie(b.origin.file, b.origin.line, b.origin.column);
  });
  return out;
}

static std::string summary(const std::vector<Diagnostic>& diagnostics) {
  size_t errors = 0;
  for (const auto& d : diagnostics) errors += d.severity == Severity::kError;
  std::ostringstream out;
  out << errors << (errors == 1 ? " error" : " errors");
  if (diagnostics.size() > errors) {
    const size_t warnings = diagnostics.size() - errors;
    out << ", " << warnings << (warnings == 1 ? " warning" : " warnings");
  }
  return out.str();
}

SpecError::SpecError(std::vector<Diagnostic> diagnostics)
    : hpctrain::Error(format_all(diagnostics)), diagnostics_(std::move(diagnostics)) {}

std::string format_all(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) out += d.format();
  out += summary(diagnostics) + '\n';
  return out;
}

}  // namespace hpctrain::spec
