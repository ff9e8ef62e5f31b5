// Identifying the worker binary and comparing two identities (supervisor/provenance.hpp).
#include "supervisor/provenance.hpp"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/durable_file.hpp"
#include "common/error.hpp"
#include "common/time.hpp"
#include "version.hpp"

namespace hpctrain::supervisor {
namespace {

std::string hex(const unsigned char* bytes, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size_t{n} * 2);
  for (unsigned int i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
  return out;
}

std::string sha256_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the worker binary " + path + ": " + std::strerror(errno));
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                    &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw Error("cannot hash the worker binary " + path + ": OpenSSL's SHA-256 is unavailable");
  }
  std::array<char, 1 << 16> buf{};
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error("cannot read the worker binary " + path + ": read error");
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), md.data(), &n);
  return hex(md.data(), n);
}

std::string summary(const BinaryIdentity& b) {
  return b.sha256.substr(0, 12) + ", " + std::to_string(b.size) + " bytes, mtime " +
         std::to_string(b.mtime_s) + ", " + b.path;
}

}  // namespace

BinaryIdentity identify_binary(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(path, ec);
  if (ec) throw Error("cannot find the worker binary " + path + ": " + ec.message());
  struct stat st {};
  if (::stat(resolved.c_str(), &st) != 0) {
    throw Error("cannot stat the worker binary " + resolved.string() + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Error("the worker binary " + resolved.string() + " is not a regular file");
  }
  BinaryIdentity b;
  b.path = resolved.string();
  b.size = static_cast<uint64_t>(st.st_size);
  b.mtime_s = static_cast<int64_t>(st.st_mtim.tv_sec);
  b.sha256 = sha256_of(b.path);
  return b;
}

std::optional<std::string> describe_change(const BinaryIdentity& first, const BinaryIdentity& now) {
  // The hash decides: a copy with a new mtime or path is the same code, a rebuild of equal size
  // is not.
  if (first.sha256 == now.sha256) return std::nullopt;
  return "the worker binary differs from the run's first attempt: was " + summary(first) +
         "; now " + summary(now);
}

namespace {

// Writes the record; what went wrong, or "" (a full or read-only run directory must not end the
// attempt: the classifier and the ledger say what that does to the run).
std::string write_record(const std::filesystem::path& file, const nlohmann::json& record) {
  try {
    common::write_file_atomic(file, record.dump(2) + "\n");
    return "";
  } catch (const std::exception& e) {
    return std::string("; it could not be recorded: ") + e.what();
  }
}

nlohmann::json to_json(const BinaryIdentity& b, const std::string& job) {
  return {{"path", b.path},     {"size", b.size},
          {"mtime", b.mtime_s}, {"sha256", b.sha256},
          {"job_id", job},      {"launcher_version", std::string(kVersion) + "+" + kCommit},
          {"time", utc_now()}};
}

BinaryIdentity from_json(const nlohmann::json& j) {
  BinaryIdentity b;
  b.path = j.at("path").get<std::string>();
  b.size = j.at("size").get<uint64_t>();
  b.mtime_s = j.at("mtime").get<int64_t>();
  b.sha256 = j.at("sha256").get<std::string>();
  return b;
}

}  // namespace

ProvenanceCheck check_provenance(const std::filesystem::path& task_dir, const std::string& worker,
                                 bool require_same, const std::string& job) {
  // No worker there: srun says so for the step, in the words the classifier reads.
  std::error_code missing;
  if (worker.empty() || !std::filesystem::exists(worker, missing)) return {};
  const auto file = task_dir / "provenance.json";
  BinaryIdentity now;
  try {
    now = identify_binary(worker);
  } catch (const Error& e) {
    return {std::string("hpctrain: ") + e.what() + "; the worker binary is not checked", false};
  }
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    const nlohmann::json record = {{"first", to_json(now, job)},
                                   {"changes", nlohmann::json::array()}};
    const std::string failed = write_record(file, record);
    return {
        "hpctrain: worker binary " + now.path + ", sha256 " + now.sha256.substr(0, 12) +
            (failed.empty() ? " (recorded in " + file.string() + " for the run's later attempts)"
                            : failed),
        false};
  }
  nlohmann::json record;
  BinaryIdentity first;
  try {
    std::ifstream in(file);
    record = nlohmann::json::parse(in);
    first = from_json(record.at("first"));
  } catch (const std::exception& e) {
    return {"hpctrain: " + file.string() + " cannot be read (" + e.what() +
                "); the worker binary is not checked, and the file is left as it is",
            false};
  }
  const auto change = describe_change(first, now);
  if (!change) return {};
  if (require_same) {
    return {"hpctrain: the run stopped: " + *change + ". Bitwise resume needs the code that " +
                "wrote the checkpoints: put the first binary back (sha256 " + first.sha256 +
                "), or set resilience.require_same_binary = false in " +
                (task_dir / "spec.toml").string() + " to go on with this one (" + file.string() +
                " records it)",
            true};
  }
  // Let through before: the change is recorded once, when the binary is new to the record.
  const auto& changes = record["changes"];
  if (changes.is_array() && !changes.empty()) {
    try {
      if (!describe_change(from_json(changes.back()), now)) {
        return {"hpctrain: " + *change + "; let through before (" + file.string() + ")", false};
      }
    } catch (const std::exception&) {
      // A damaged change entry: this one is recorded after it.
    }
  }
  record["changes"].push_back(to_json(now, job));
  return {"hpctrain: " + *change + "; going on (resilience.require_same_binary = false)" +
              write_record(file, record),
          false};
}

}  // namespace hpctrain::supervisor
