#include "checkpoint/store.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "spec/spec.hpp"

namespace hpctrain::checkpoint {
namespace {

using nlohmann::json;

constexpr const char* kManifestName = layout::kManifest;
constexpr const char* kManifestTemp = ".manifest.json.tmp";
constexpr const char* kFormatName = "hpctrain-checkpoint";
// Manifests list a few files per rank; anything this large is not one of ours.
constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;
// Hash a piece, then write it while it is still in cache: one pass over memory, not two.
constexpr size_t kChunk = size_t{1} << 20;
// Files a rank's write_part keeps open between writing and syncing them.
constexpr size_t kMaxUnsynced = 64;
// A format 2 manifest's world size is trusted only this far: its rank table is allocated.
constexpr int64_t kMaxRanks = int64_t{1} << 24;
// Lustre stripe sizes are multiples of 64 KiB.
constexpr int64_t kStripeUnit = 64 << 10;

class Xxh3 {
 public:
  Xxh3() : state_(XXH3_createState()) {
    if (!state_) throw std::bad_alloc();
    XXH3_64bits_reset(state_);
  }
  ~Xxh3() { XXH3_freeState(state_); }
  Xxh3(const Xxh3&) = delete;
  Xxh3& operator=(const Xxh3&) = delete;
  void update(std::string_view data) { XXH3_64bits_update(state_, data.data(), data.size()); }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

// Hex, not a JSON number: other readers' doubles would round a 64-bit value.
std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

std::string hash_of(std::string_view data) {
  Xxh3 hash;
  for (size_t at = 0; at < data.size(); at += kChunk) hash.update(data.substr(at, kChunk));
  return hex64(hash.digest());
}

// Creates `path` (never over an existing file) and writes `data`, not yet synced; sets `hash`
// to the XXH3-64 of what it wrote.
std::unique_ptr<WritableFile> write_file(Env& env, const std::string& path, std::string_view data,
                                         uint32_t mode, std::string* hash) {
  auto file = env.new_file(path, mode);
  Xxh3 xxh3;
  for (size_t at = 0; at < data.size(); at += kChunk) {
    const std::string_view piece = data.substr(at, kChunk);
    xxh3.update(piece);
    file->append(piece);
  }
  *hash = hex64(xxh3.digest());
  return file;
}

// write_file, then fsync and close; returns the hash.
std::string write_durably(Env& env, const std::string& path, std::string_view data, uint32_t mode) {
  std::string hash;
  auto file = write_file(env, path, data, mode, &hash);
  file->sync();
  file->close();
  return hash;
}

std::string part_name(int rank) { return ".part-" + std::to_string(rank) + ".json"; }
std::string node_name(int node) { return ".node-" + std::to_string(node) + ".json"; }

// A node's ranks as inclusive ranges, [[first, last], ...]: one pair for a node of contiguous
// ranks, so manifest.json stays O(nodes) in the usual layouts.
json rank_ranges(const std::vector<int>& ranks) {
  json out = json::array();
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out.push_back({ranks[i], ranks[j]});
    i = j + 1;
  }
  return out;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text;
  for (const auto& range : rank_ranges(ranks)) {
    if (!text.empty()) text += ", ";
    text += range[0].dump();
    if (range[1] != range[0]) text += "-" + range[1].dump();
  }
  return text;
}

bool valid_file_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.' || name == kManifestName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::string octal(uint32_t mode) {
  char text[16];
  std::snprintf(text, sizeof text, "%04o", mode & 07777);
  return text;
}

// A manifest (or part manifest) that is not what we wrote; what() says what is wrong.
struct BadManifest {
  std::string what;
};

const json& need(const json& object, const char* key, bool (json::*is_type)() const,
                 const char* type_name) {
  const auto it = object.find(key);
  if (it == object.end() || !((*it).*is_type)()) {
    throw BadManifest{std::string("\"") + key + "\" missing or not " + type_name};
  }
  return *it;
}
int64_t need_int(const json& object, const char* key, int64_t min) {
  const json& value = need(object, key, &json::is_number_integer, "an integer");
  const int64_t v = value.get<int64_t>();
  if (v < min) throw BadManifest{std::string("\"") + key + "\" below " + std::to_string(min)};
  return v;
}
const std::string& need_hash(const json& entry, const std::string& file) {
  const auto& hash =
      need(entry, "xxh3_64", &json::is_string, "a string").get_ref<const std::string&>();
  if (hash.size() != 16 || !std::all_of(hash.begin(), hash.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    throw BadManifest{"the hash of " + file + " is not 16 hex digits"};
  }
  return hash;
}

// Parses a manifest of any kind and checks the fields every kind has: a format version from
// `oldest` to kFormatVersion, the step and the world size.
json parse_common(const std::string& text, int64_t step, int64_t oldest) {
  json m;
  try {
    m = json::parse(text);
  } catch (const json::exception& e) {
    throw BadManifest{std::string("not valid JSON (") + e.what() + ")"};
  }
  if (!m.is_object()) throw BadManifest{"not a JSON object"};
  const int64_t version = need_int(m, "format_version", 0);
  if (version < oldest || version > kFormatVersion) {
    throw BadManifest{"format version " + std::to_string(version) + ", this build reads " +
                      (oldest == kFormatVersion
                           ? std::to_string(kFormatVersion)
                           : std::to_string(oldest) + " to " + std::to_string(kFormatVersion))};
  }
  if (need_int(m, "step", 0) != step) {
    throw BadManifest{"names step " + std::to_string(m["step"].get<int64_t>())};
  }
  need_int(m, "world_size", 1);
  return m;
}

// manifest.json, of any version read: format 1 lists every file ("files"), format 2 every node
// manifest ("nodes"), format 3 the node count and layout ("nodes", "layout").
json parse_manifest(const std::string& text, int64_t step) {
  json m = parse_common(text, step, kOldestFormatVersion);
  const int64_t version = m["format_version"].get<int64_t>();
  if (version == 1) {
    need(m, "files", &json::is_object, "an object");
  } else if (version == 2) {
    need(m, "nodes", &json::is_array, "an array");
  } else {
    need_int(m, "nodes", 1);
    need(m, "layout", &json::is_object, "an object");
  }
  return m;
}

// A part or node manifest of format `oldest` or newer: parts are read only by this build's
// merge (they never outlive a save's commit unread); a node manifest of format 2 is read when a
// format 2 checkpoint loads.
json parse_part(const std::string& text, int64_t step, int64_t oldest = kFormatVersion) {
  json m = parse_common(text, step, oldest);
  const json& files = need(m, "files", &json::is_object, "an object");
  for (const auto& [name, entry] : files.items()) {
    if (!valid_file_name(name)) throw BadManifest{"bad file name \"" + name + "\""};
    if (!entry.is_object()) throw BadManifest{"the entry of " + name + " is not an object"};
    need_hash(entry, name);
    need_int(entry, "size", 0);
  }
  return m;
}

// A node manifest's own XXH3 (format 3): of its compact JSON without the field, so that what
// is hashed does not depend on how the text was laid out.
constexpr const char* kSelfHash = "self_xxh3_64";
std::string content_hash(const json& manifest) {
  json body = manifest;
  body.erase(kSelfHash);
  return hash_of(body.dump());
}

// Checks a format 3 node manifest's own XXH3; what() names `path`.
void check_self_hash(const json& manifest, const std::string& path) {
  const auto it = manifest.find(kSelfHash);
  if (it == manifest.end() || !it->is_string()) {
    throw BadManifest{"node manifest " + path + " has no \"" + kSelfHash + "\""};
  }
  const std::string actual = content_hash(manifest);
  if (actual != it->get_ref<const std::string&>()) {
    throw BadManifest{"node manifest " + path + " has XXH3 " + actual + ", it says " +
                      it->get<std::string>() + " (changed since it was written)"};
  }
}

// The ranks of manifest.json's rank ranges, each below `world_size`, ascending.
std::vector<int> parse_ranges(const json& ranges, int64_t world_size) {
  if (!ranges.is_array() || ranges.empty()) throw BadManifest{"\"ranks\" not a list of ranges"};
  std::vector<int> ranks;
  for (const auto& range : ranges) {
    if (!range.is_array() || range.size() != 2 || !range[0].is_number_integer() ||
        !range[1].is_number_integer()) {
      throw BadManifest{"rank range " + range.dump() + " is not [first, last]"};
    }
    const int64_t first = range[0].get<int64_t>(), last = range[1].get<int64_t>();
    if (first < 0 || first > last || last >= world_size ||
        (!ranks.empty() && first <= ranks.back())) {
      throw BadManifest{"rank range " + range.dump() + " out of order or outside world size " +
                        std::to_string(world_size)};
    }
    for (int64_t r = first; r <= last; ++r) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

// A file a rank reads at load, as a manifest describes it.
struct Wanted {
  std::string name;
  int64_t size = 0;
  std::string hash;
  std::string source;  // which manifest said so, for the report
};

// Format 1: manifest.json lists every file with its rank.
std::vector<Wanted> wanted_v1(const json& manifest, const std::string& manifest_path,
                              const std::vector<std::string>& shared, int rank) {
  const json& files = manifest["files"];
  std::vector<Wanted> wanted;
  std::set<std::string> seen;
  const auto add = [&](const std::string& name) {
    if (!seen.insert(name).second) return;
    const json& entry = files[name];
    wanted.push_back({name, need_int(entry, "size", 0), need_hash(entry, name), "the manifest"});
  };
  for (const auto& [name, entry] : files.items()) {
    if (!valid_file_name(name) || !entry.is_object()) {
      throw BadManifest{manifest_path + ": bad entry \"" + name + "\""};
    }
    if (need_int(entry, "rank", 0) == rank) add(name);
  }
  for (const auto& name : shared) {
    if (!files.contains(name)) throw BadManifest{manifest_path + " lists no file " + name};
    add(name);
  }
  return wanted;
}

// Format 2: manifest.json's "nodes" checked; the node of each saved rank (every one in exactly
// one node).
std::vector<int> nodes_of_ranks(const json& nodes, int64_t saved_world,
                                const std::string& manifest_path) {
  if (nodes.empty()) throw BadManifest{manifest_path + ": no nodes"};
  if (saved_world > kMaxRanks) {
    throw BadManifest{manifest_path + ": world size " + std::to_string(saved_world) +
                      " is beyond any run's"};
  }
  std::vector<int> node_of(static_cast<size_t>(saved_world), -1);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const json& entry = nodes[k];
    const int node = static_cast<int>(k);
    try {
      if (!entry.is_object()) throw BadManifest{"not an object"};
      if (entry.value("name", json()) != node_name(node)) {
        throw BadManifest{"\"name\" is not " + node_name(node)};
      }
      need_int(entry, "size", 0);
      need_hash(entry, node_name(node));
      for (const int r :
           parse_ranges(need(entry, "ranks", &json::is_array, "an array"), saved_world)) {
        int& of = node_of[static_cast<size_t>(r)];
        if (of >= 0) {
          throw BadManifest{"rank " + std::to_string(r) + " is in nodes " + std::to_string(of) +
                            " and " + std::to_string(node)};
        }
        of = node;
      }
    } catch (const BadManifest& bad) {
      throw BadManifest{manifest_path + ": node " + std::to_string(node) + ": " + bad.what};
    }
  }
  for (size_t r = 0; r < node_of.size(); ++r) {
    if (node_of[r] < 0) {
      throw BadManifest{manifest_path + ": no node holds rank " + std::to_string(r)};
    }
  }
  return node_of;
}

// Format 3: the node layout manifest.json holds. {"runs": [[first_rank, ranks_per_node,
// nodes], ...]} when every node's ranks are contiguous (block distributions: one run per node
// size, whatever the node count), else {"ranks": [each node's rank ranges]}.
json layout_json(const NodeLayout& layout) {
  json runs = json::array();
  for (int node = 0; node < layout.nodes(); ++node) {
    const std::vector<int>& ranks = layout.ranks_of(node);
    const int size = static_cast<int>(ranks.size());
    if (ranks.back() - ranks.front() + 1 != size) {  // not contiguous: every node's ranges
      json all = json::array();
      for (int k = 0; k < layout.nodes(); ++k) all.push_back(rank_ranges(layout.ranks_of(k)));
      return {{"ranks", std::move(all)}};
    }
    if (!runs.empty()) {
      json& run = runs.back();
      const int64_t first = run[0], per = run[1], count = run[2];
      if (per == size && first + per * count == ranks.front()) {
        run[2] = count + 1;
        continue;
      }
    }
    runs.push_back({ranks.front(), size, 1});
  }
  return {{"runs", std::move(runs)}};
}

// Format 3: the node of each saved rank from manifest.json's "layout" (every rank in exactly
// one of its "nodes" nodes).
std::vector<int> nodes_of_layout(const json& manifest, int64_t saved_world,
                                 const std::string& manifest_path) {
  if (saved_world > kMaxRanks) {
    throw BadManifest{manifest_path + ": world size " + std::to_string(saved_world) +
                      " is beyond any run's"};
  }
  const int64_t nodes = manifest["nodes"].get<int64_t>();
  const json& layout = manifest["layout"];
  std::vector<int> node_of(static_cast<size_t>(saved_world), -1);
  int node = 0;
  const auto place = [&](int64_t r) {
    if (r < 0 || r >= saved_world || node >= nodes || node_of[static_cast<size_t>(r)] >= 0) {
      throw BadManifest{manifest_path + ": layout places rank " + std::to_string(r) + " on node " +
                        std::to_string(node) + ", outside world size " +
                        std::to_string(saved_world) + " and " + std::to_string(nodes) +
                        " nodes, or twice"};
    }
    node_of[static_cast<size_t>(r)] = node;
  };
  try {
    if (layout.contains("runs")) {
      for (const auto& run : need(layout, "runs", &json::is_array, "an array")) {
        if (!run.is_array() || run.size() != 3 || !run[0].is_number_integer() ||
            !run[1].is_number_integer() || !run[2].is_number_integer() || run[1] < 1 ||
            run[2] < 1 || run[1].get<int64_t>() * run[2].get<int64_t>() > saved_world) {
          throw BadManifest{"run " + run.dump() + " is not [first rank, ranks per node, nodes]"};
        }
        for (int64_t k = 0; k < run[2].get<int64_t>(); ++k, ++node) {
          const int64_t first = run[0].get<int64_t>() + k * run[1].get<int64_t>();
          for (int64_t r = first; r < first + run[1].get<int64_t>(); ++r) place(r);
        }
      }
    } else {
      for (const auto& ranges : need(layout, "ranks", &json::is_array, "an array")) {
        for (const int r : parse_ranges(ranges, saved_world)) place(r);
        ++node;
      }
    }
  } catch (const BadManifest& bad) {
    throw BadManifest{manifest_path + ": \"layout\": " + bad.what};
  }
  if (node != nodes) {
    throw BadManifest{manifest_path + ": the layout has " + std::to_string(node) +
                      " nodes, \"nodes\" says " + std::to_string(nodes)};
  }
  for (size_t r = 0; r < node_of.size(); ++r) {
    if (node_of[r] < 0) {
      throw BadManifest{manifest_path + ": no node holds rank " + std::to_string(r)};
    }
  }
  return node_of;
}

// The files of node manifest `text` of `node` (at `path`, of a step saved by node_of.size()
// ranks), checked: its step, node and world size, each file of one of the node's ranks; in
// format 3 its own XXH3 and its ranks.
json node_files(const std::string& text, const std::string& path, int64_t step, int node,
                const std::vector<int>& node_of, int64_t version) {
  try {
    json m = parse_part(text, step, version);
    if (version >= 3) check_self_hash(m, path);
    if (need_int(m, "node", 0) != node ||
        m["world_size"].get<int64_t>() != static_cast<int64_t>(node_of.size())) {
      throw BadManifest{"written for node " + m["node"].dump() + " of " + m["world_size"].dump() +
                        " ranks"};
    }
    if (version >= 3) {
      std::vector<int> ranks;
      for (size_t r = 0; r < node_of.size(); ++r) {
        if (node_of[r] == node) ranks.push_back(static_cast<int>(r));
      }
      if (m.value("ranks", json()) != json(ranks)) {
        throw BadManifest{"lists ranks " + m.value("ranks", json()).dump() +
                          ", manifest.json's layout " + json(ranks).dump()};
      }
    }
    for (const auto& [name, file] : m["files"].items()) {
      const int64_t r = need_int(file, "rank", 0);
      if (r >= static_cast<int64_t>(node_of.size()) || node_of[static_cast<size_t>(r)] != node) {
        throw BadManifest{"names " + name + " of rank " + std::to_string(r) + ", not of this node"};
      }
    }
    return std::move(m["files"]);
  } catch (const BadManifest& bad) {
    throw BadManifest{"node manifest " + path + ": " + bad.what};
  }
}

// Node manifest `node` of step directory `fin`, checked (format 2: against manifest.json's
// entry, its size and XXH3, so a damaged one is never parsed as if good; format 3: against its
// own XXH3), and `node_of`; its files.
json read_node_manifest(Env& env, const std::string& fin, const json& manifest, int node,
                        const std::vector<int>& node_of) {
  const int64_t version = manifest["format_version"].get<int64_t>();
  const std::string path = join_path(fin, node_name(node));
  const auto st = env.stat(path, /*follow=*/false);
  if (!st) throw BadManifest{"node manifest " + path + " is missing"};
  if (st->kind != FileStat::Kind::kFile) throw BadManifest{path + " is not a regular file"};
  if (version >= 3) {
    return node_files(env.read_file(path, kMaxManifestBytes), path, manifest["step"].get<int64_t>(),
                      node, node_of, version);
  }
  const json& entry = manifest["nodes"][static_cast<size_t>(node)];
  const int64_t size = entry["size"].get<int64_t>();
  const std::string& hash = entry["xxh3_64"].get_ref<const std::string&>();
  if (st->size != size) {
    throw BadManifest{"node manifest " + path + " is " + std::to_string(st->size) +
                      " bytes, manifest.json says " + std::to_string(size)};
  }
  const std::string text = env.read_file(path, size);
  const std::string actual = hash_of(text);
  if (static_cast<int64_t>(text.size()) != size || actual != hash) {
    throw BadManifest{"node manifest " + path + " has XXH3 " + actual + ", manifest.json says " +
                      hash + " (changed since it was written)"};
  }
  return node_files(text, path, manifest["step"].get<int64_t>(), node, node_of, version);
}

// Formats 2 and 3: manifest.json -> the node manifests holding the files -> the files. This
// rank's files are in its node's manifest; a shared name is looked for there, then in node 0's
// (rank 0's replicated state), then in the others in order, so a rank usually reads one or two
// node manifests.
std::vector<Wanted> wanted_by_node(Env& env, const json& manifest, const std::string& fin,
                                   const std::vector<std::string>& shared, int rank) {
  const std::string manifest_path = join_path(fin, kManifestName);
  const int64_t saved_world = manifest["world_size"].get<int64_t>();
  const bool v2 = manifest["format_version"].get<int64_t>() == 2;
  const std::vector<int> node_of =
      v2 ? nodes_of_ranks(manifest["nodes"], saved_world, manifest_path)
         : nodes_of_layout(manifest, saved_world, manifest_path);
  const int nodes = v2 ? static_cast<int>(manifest["nodes"].size())
                       : static_cast<int>(manifest["nodes"].get<int64_t>());
  std::map<int, json> read;                                  // node -> its manifest's files
  std::map<std::string, std::pair<int, const json*>> index;  // file -> its node and entry
  const auto read_node = [&](int node) {
    if (read.count(node)) return;
    const json& files = read[node] = read_node_manifest(env, fin, manifest, node, node_of);
    for (const auto& [name, file] : files.items()) index.emplace(name, std::pair(node, &file));
  };
  std::vector<Wanted> wanted;
  std::set<std::string> seen;
  const auto add = [&](const std::string& name, int node, const json& file) {
    if (!seen.insert(name).second) return;
    wanted.push_back({name, file["size"].get<int64_t>(), file["xxh3_64"].get<std::string>(),
                      "node manifest " + node_name(node)});
  };
  if (rank < saved_world) {
    const int own = node_of[static_cast<size_t>(rank)];
    read_node(own);
    for (const auto& [name, file] : read[own].items()) {
      if (file["rank"].get<int64_t>() == rank) add(name, own, file);
    }
  }
  for (const auto& name : shared) {
    int next = 0;  // the next node to read while the name is in none read so far
    while (!index.count(name) && next < nodes) read_node(next++);
    const auto it = index.find(name);
    if (it == index.end()) {
      throw BadManifest{manifest_path + " and its node manifests list no file " + name};
    }
    add(name, it->second.first, *it->second.second);
  }
  return wanted;
}

}  // namespace

void StoreOptions::validate() const {
  auto bad = [](const std::string& what) {
    HPCTRAIN_THROW(rt::Error, "checkpoint store options: " + what);
  };
  if (keep_last < 1) bad("keep_last " + std::to_string(keep_last) + " is below 1");
  if (keep_every < 0) bad("keep_every " + std::to_string(keep_every) + " is negative");
  if (lustre_stripe_count < -1) bad("lustre_stripe_count " + std::to_string(lustre_stripe_count));
  if (lustre_stripe_size < 0 || lustre_stripe_size % kStripeUnit != 0) {
    bad("lustre_stripe_size " + std::to_string(lustre_stripe_size) +
        " is not a multiple of 64 KiB");
  }
}

StoreOptions store_options_from_spec(const spec::Spec& spec) {
  StoreOptions o;
  o.keep_last = spec.checkpoint.keep_last;
  o.keep_every = spec.checkpoint.keep_every;
  o.lustre_stripe_count = spec.checkpoint.lustre_stripe_count;
  o.lustre_stripe_size = spec.checkpoint.lustre_stripe_size_mib << 20;
  return o;
}

NodeLayout::NodeLayout(const std::vector<int>& labels) {
  if (labels.empty()) HPCTRAIN_THROW(rt::Error, "checkpoint node layout: no ranks");
  std::map<int, int> node_of_label;
  node_of_rank_.reserve(labels.size());
  for (size_t r = 0; r < labels.size(); ++r) {
    const auto [it, added] = node_of_label.emplace(labels[r], static_cast<int>(ranks_.size()));
    if (added) ranks_.emplace_back();
    ranks_[static_cast<size_t>(it->second)].push_back(static_cast<int>(r));
    node_of_rank_.push_back(it->second);
  }
}

std::shared_ptr<const NodeLayout> NodeLayout::one_per_rank(int world_size) {
  std::vector<int> labels(static_cast<size_t>(std::max(world_size, 0)));
  for (size_t r = 0; r < labels.size(); ++r) labels[r] = static_cast<int>(r);
  return std::make_shared<const NodeLayout>(labels);
}

std::shared_ptr<const NodeLayout> NodeLayout::from_hosts(const std::vector<std::string>& hosts) {
  std::map<std::string, int> index;
  std::vector<int> labels;
  labels.reserve(hosts.size());
  for (const auto& host : hosts) {
    labels.push_back(index.emplace(host, static_cast<int>(index.size())).first->second);
  }
  return std::make_shared<const NodeLayout>(labels);
}

std::string xxh3_64_hex(std::string_view data) { return hash_of(data); }

std::string Store::step_name(int64_t step) { return layout::checkpoint_name(step); }

// Removes retired steps' folders, one at a time, on a thread of its own. Stopped between two
// files by its destructor; what is left is a leftover that clean_leftovers() removes.
class Store::Retirer {
 public:
  Retirer(Env& env, std::function<void(const std::string&)> report)
      : env_(env), report_(std::move(report)), thread_([this] { run(); }) {}

  ~Retirer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  void add(std::string path) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(path));
    }
    wake_.notify_all();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      const std::string path = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      remove(path);
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
    busy_ = false;
    queue_.clear();
    idle_.notify_all();
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stop_;
  }

  void remove(const std::string& path) {
    try {
      for (const auto& name : env_.list_dir(path)) {
        if (stopping()) return;  // the rest at the next start
        env_.remove_all(join_path(path, name));
      }
      env_.remove_all(path);
    } catch (const rt::Error& e) {
      report_("retention could not remove " + path + ": " + e.message() +
              " (clean_leftovers() retries at the next start)");
    }
  }

  Env& env_;
  std::function<void(const std::string&)> report_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::string> queue_;
  bool stop_ = false, busy_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

Store::Store(std::string dir, StoreOptions options, int rank, int world_size, Env& env)
    : Store(std::move(dir), std::move(options), rank,
            world_size >= 1 ? NodeLayout::one_per_rank(world_size) : nullptr, env) {}

Store::Store(std::string dir, StoreOptions options, int rank,
             std::shared_ptr<const NodeLayout> layout, Env& env)
    : dir_(std::move(dir)),
      options_(std::move(options)),
      rank_(rank),
      world_size_(layout ? layout->world_size() : 0),
      layout_(std::move(layout)),
      env_(env) {
  options_.validate();
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    HPCTRAIN_THROW(rt::Error, "checkpoint store: rank " + std::to_string(rank_) +
                                  " outside world size " + std::to_string(world_size_));
  }
  if (dir_.empty()) HPCTRAIN_THROW(rt::Error, "checkpoint store: empty directory name");
  // Every rank may get here first; the others find it made. Its entry in RUN_DIR is made
  // durable too, or a power loss could take every checkpoint with it.
  if (env_.create_dir(dir_, dir_mode())) {
    const size_t slash = dir_.find_last_of('/', dir_.find_last_not_of('/'));
    env_.sync_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : dir_.substr(0, slash));
  }
  const auto st = env_.stat(dir_, /*follow=*/true);
  if (!st || st->kind != FileStat::Kind::kDir) {
    HPCTRAIN_THROW(rt::EnvError, "checkpoint directory " + dir_ + " is not a directory");
  }
  // Whoever can write here can replace a checkpoint, manifest and all, and with it the weights
  // every later attempt trains from.
  if (st->uid != ::geteuid()) {
    HPCTRAIN_THROW(rt::EnvError, "checkpoint directory " + dir_ + " belongs to uid " +
                                     std::to_string(st->uid) + ", not to this user (uid " +
                                     std::to_string(::geteuid()) + "); refusing to use it");
  }
  if (st->mode & 002) {
    HPCTRAIN_THROW(rt::EnvError, "checkpoint directory " + dir_ + " is writable by others (mode " +
                                     octal(st->mode) + "); refusing to use it (chmod o-w " + dir_ +
                                     ")");
  }
}

Store::~Store() {
  retirer_.reset();
  if (inflight_.valid()) inflight_.wait();
}

void Store::wait_retired() {
  if (retirer_) retirer_->wait_idle();
}

std::string Store::path_of(const std::string& name) const { return join_path(dir_, name); }
std::string Store::temp_dir(int64_t step) const {
  return path_of(layout::checkpoint_temp_name(step));
}
std::string Store::final_dir(int64_t step) const { return path_of(step_name(step)); }
uint32_t Store::file_mode() const { return options_.group_readable ? 0640 : 0600; }
uint32_t Store::dir_mode() const { return options_.group_readable ? 0750 : 0700; }

void Store::report(const std::string& line) const {
  if (options_.report) {
    options_.report(line);
  } else {
    std::cerr << rt::rank_prefix() << "checkpoint: " << line << '\n';
  }
}

void Store::require_rank0(const char* what) const {
  if (rank_ != 0) {
    HPCTRAIN_THROW(rt::Error, std::string("checkpoint ") + what + " is rank 0's, called on rank " +
                                  std::to_string(rank_));
  }
}

void Store::require_idle(const char* what) const {
  if (inflight_.valid()) {
    HPCTRAIN_THROW(rt::Error, std::string("checkpoint ") + what +
                                  " while a write is in flight; collect it with wait() first");
  }
}

WriteResult Store::write_part(int64_t step, const Part& part) {
  const auto start = std::chrono::steady_clock::now();
  WriteResult result;
  try {
    if (step < 0) HPCTRAIN_THROW(rt::Error, "negative step " + std::to_string(step));
    for (const auto& [name, bytes] : part.files) {
      if (!valid_file_name(name)) {
        HPCTRAIN_THROW(rt::Error, "bad file name \"" + name +
                                      "\" (letters, digits, . _ -, not starting with '.', not " +
                                      kManifestName + ")");
      }
    }
    const std::string tmp = temp_dir(step);
    if (!env_.create_dir(tmp, dir_mode())) {  // another rank made it
      const auto st = env_.stat(tmp, /*follow=*/false);
      if (!st || st->kind != FileStat::Kind::kDir) {
        HPCTRAIN_THROW(rt::Error, tmp + " exists and is not a directory");
      }
    }
    // Every file written first, then every one fsynced: the device writes them all back
    // together, and on a journalling filesystem the first fsync commits the others' metadata
    // too (one journal commit, not one a file). A bound on the files held open.
    std::vector<std::unique_ptr<WritableFile>> unsynced;
    const auto sync_all = [&unsynced] {
      for (auto& file : unsynced) {
        file->sync();
        file->close();
      }
      unsynced.clear();
    };
    json files = json::object();
    for (const auto& [name, bytes] : part.files) {
      std::string hash;
      unsynced.push_back(write_file(env_, join_path(tmp, name), bytes, file_mode(), &hash));
      files[name] = {{"size", bytes.size()}, {"xxh3_64", hash}};
      result.bytes += static_cast<int64_t>(bytes.size());
      if (unsynced.size() >= kMaxUnsynced) sync_all();
    }
    sync_all();
    const json part_manifest = {{"format_version", kFormatVersion},
                                {"step", step},
                                {"rank", rank_},
                                {"world_size", world_size_},
                                {"files", files}};
    write_durably(env_, join_path(tmp, part_name(rank_)), part_manifest.dump(), file_mode());
    env_.sync_dir(tmp);
    result.ok = true;
  } catch (const rt::Error& e) {
    result.error = "checkpoint step " + std::to_string(step) + " (rank " + std::to_string(rank_) +
                   "): " + e.message();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void Store::start_write(int64_t step, Part part) {
  if (inflight_.valid()) {
    HPCTRAIN_THROW(rt::Error, "checkpoint step " + std::to_string(step) +
                                  ": a write is already in flight; collect it with poll() or "
                                  "wait() first");
  }
  inflight_ = std::async(std::launch::async,
                         [this, step, part = std::move(part)] { return write_part(step, part); });
}

std::optional<WriteResult> Store::poll() {
  if (!inflight_.valid()) HPCTRAIN_THROW(rt::Error, "checkpoint poll(): no write was started");
  if (inflight_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return std::nullopt;
  }
  return inflight_.get();
}

WriteResult Store::wait() {
  if (!inflight_.valid()) HPCTRAIN_THROW(rt::Error, "checkpoint wait(): no write was started");
  return inflight_.get();
}

WriteResult Store::merge_node(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  WriteResult result;
  const int node = layout_->node_of(rank_);
  try {
    require_idle("merge_node");
    if (node_leader()) {
      const std::string tmp = temp_dir(step);
      json files = json::object();
      for (const int r : layout_->ranks_of(node)) {
        const std::string path = join_path(tmp, part_name(r));
        json part;
        try {
          part = parse_part(env_.read_file(path, kMaxManifestBytes), step);
          if (need_int(part, "rank", 0) != r || part["world_size"].get<int64_t>() != world_size_) {
            throw BadManifest{"written by rank " + part["rank"].dump() + " of " +
                              part["world_size"].dump() + ", not rank " + std::to_string(r) +
                              " of " + std::to_string(world_size_)};
          }
        } catch (const BadManifest& bad) {
          HPCTRAIN_THROW(rt::Error, "part manifest " + path + ": " + bad.what);
        }
        for (const auto& [name, entry] : part["files"].items()) {
          if (files.contains(name)) {
            HPCTRAIN_THROW(rt::Error, "file " + name + " written by ranks " +
                                          files[name]["rank"].dump() + " and " + std::to_string(r));
          }
          // A cheap check that the rank's file is there whole; load checks the hash.
          const std::string file = join_path(tmp, name);
          const auto st = env_.stat(file, /*follow=*/false);
          const int64_t size = entry["size"].get<int64_t>();
          if (!st || st->kind != FileStat::Kind::kFile || st->size != size) {
            HPCTRAIN_THROW(rt::Error, file + " is " +
                                          (st ? std::to_string(st->size) + " bytes" : "missing") +
                                          ", rank " + std::to_string(r) + "'s part manifest says " +
                                          std::to_string(size));
          }
          files[name] = {{"rank", r}, {"size", size}, {"xxh3_64", entry["xxh3_64"]}};
        }
      }
      json manifest = {{"format_version", kFormatVersion},
                       {"step", step},
                       {"node", node},
                       {"world_size", world_size_},
                       {"ranks", layout_->ranks_of(node)},
                       {"files", std::move(files)}};
      manifest[kSelfHash] = content_hash(manifest);
      const std::string text = manifest.dump();
      write_durably(env_, join_path(tmp, node_name(node)), text, file_mode());
      env_.sync_dir(tmp);
      result.bytes = static_cast<int64_t>(text.size());
    }
    result.ok = true;
  } catch (const rt::Error& e) {
    result.error = "checkpoint step " + std::to_string(step) + " (rank " + std::to_string(rank_) +
                   ", merging node " + std::to_string(node) + "'s part manifests): " + e.message();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void Store::check_node_manifest(int64_t step, int node) const {
  const std::string tmp = temp_dir(step);
  const std::string path = join_path(tmp, node_name(node));
  const std::vector<int>& ranks = layout_->ranks_of(node);
  const std::string whose = "node " + std::to_string(node) + ": ranks " + ranks_text(ranks) +
                            ", merged by rank " + std::to_string(ranks.front());
  std::string text;
  try {
    text = env_.read_file(path, kMaxManifestBytes);
  } catch (const rt::Error& e) {
    // Say which of the node's parts are missing too (their leader's error line says why it could
    // not merge): only on this path.
    std::vector<int> missing;
    try {
      for (const int r : ranks) {
        if (!env_.stat(join_path(tmp, part_name(r)), /*follow=*/false)) missing.push_back(r);
      }
    } catch (const rt::Error&) {
    }
    std::string parts;
    for (const int r : missing) parts += (parts.empty() ? "" : ", ") + part_name(r);
    HPCTRAIN_THROW(rt::Error, "node manifest " + e.message() + " (" + whose +
                                  (parts.empty() ? "" : "; part manifests missing: " + parts) +
                                  ")");
  }
  try {
    node_files(text, path, step, node, layout_->node_of_ranks(), kFormatVersion);
  } catch (const BadManifest& bad) {
    HPCTRAIN_THROW(rt::Error, bad.what + " (" + whose + ")");
  }
}

json Store::commit_manifest(int64_t step, const json& meta) const {
  // Rank 0's own node, the one that holds the replicated state: the others' merges are the
  // vote's, and their manifests are checked by their own XXH3 where they are read.
  check_node_manifest(step, layout_->node_of(rank_));
  return {{"format", kFormatName},
          {"format_version", kFormatVersion},
          {"step", step},
          {"world_size", world_size_},
          {"hash", "xxh3_64"},
          {"committed_at", utc_now()},
          {"nodes", layout_->nodes()},
          {"layout", layout_json(*layout_)},
          {"meta", meta}};
}

void Store::move_aside(int64_t step) {
  const std::string fin = final_dir(step);
  for (int k = 1;; ++k) {
    const std::string aside = fin + ".replaced-" + std::to_string(k);
    if (env_.stat(aside, /*follow=*/false)) continue;
    env_.rename(fin, aside);
    report(fin +
           " existed already (passed over as damaged at load, or the step was saved "
           "twice); moved to " +
           aside + " and committing the new one");
    return;
  }
}

void Store::write_manifest(const std::string& step_dir, const std::string& text) {
  const std::string tmp = join_path(step_dir, kManifestTemp);
  const std::string manifest = join_path(step_dir, kManifestName);
  write_durably(env_, tmp, text, file_mode());
  env_.rename(tmp, manifest);
  try {
    env_.sync_dir(step_dir);
  } catch (const rt::Error&) {
    // The manifest is visible but not known to be durable; withdraw it, so that what readers
    // see agrees with the error the caller gets.
    try {
      env_.remove_file(manifest);
    } catch (const rt::Error& e) {
      report("could not withdraw " + manifest + " after a failed commit: " + e.message());
    }
    throw;
  }
}

void Store::commit(int64_t step, const json& meta) {
  require_rank0("commit");
  require_idle("commit");
  try {
    if (!meta.is_object()) HPCTRAIN_THROW(rt::Error, "meta is not a JSON object");
    const json manifest = commit_manifest(step, meta);
    const std::string fin = final_dir(step);
    if (env_.stat(fin, /*follow=*/false)) move_aside(step);
    env_.rename(temp_dir(step), fin);
    env_.sync_dir(dir_);
    write_manifest(fin, manifest.dump(2) + "\n");
  } catch (const rt::Error& e) {
    HPCTRAIN_THROW(rt::Error,
                   "checkpoint step " + std::to_string(step) + " not committed: " + e.message());
  }
  retain(step);
}

void Store::retain(int64_t newest) {
  std::vector<int64_t> steps;
  try {
    steps = committed_steps();
  } catch (const rt::Error& e) {
    report("retention skipped after step " + std::to_string(newest) + ": " + e.message());
    return;
  }
  int64_t kept = 0;
  std::vector<std::string> retired;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const int64_t step = *it;
    if (step > newest) continue;  // not ours to judge: only steps older than a newer commit go
    if (kept < options_.keep_last || step == newest) {
      ++kept;
      continue;
    }
    if (options_.keep_every > 0 && step % options_.keep_every == 0) continue;
    try {
      retired.push_back(retire(step));
    } catch (const rt::Error& e) {
      report("retention could not retire " + final_dir(step) + ": " + e.message());
    }
  }
  if (retired.empty()) return;
  try {
    env_.sync_dir(dir_);
  } catch (const rt::Error& e) {
    report("retention: " + e.message());
  }
  if (!retirer_)
    retirer_ = std::make_unique<Retirer>(env_, [this](const std::string& line) { report(line); });
  for (auto& path : retired) retirer_->add(std::move(path));
}

std::string Store::retire(int64_t step) {
  const std::string fin = final_dir(step);
  // Un-commit first, durably: a crash after it leaves a directory without manifest (a leftover),
  // never a committed step with files missing.
  env_.remove_file(join_path(fin, kManifestName));
  env_.sync_dir(fin);
  for (int k = 1;; ++k) {
    const std::string aside = path_of(layout::checkpoint_retired_name(step, k));
    if (env_.stat(aside, /*follow=*/false)) continue;
    env_.rename(fin, aside);
    return aside;
  }
}

void Store::abandon(int64_t step) {
  if (inflight_.valid()) {
    try {
      inflight_.get();
    } catch (...) {  // the caller is giving up on this save whatever went wrong
    }
  }
  if (rank_ != 0) return;
  try {
    env_.remove_all(temp_dir(step));
    const std::string fin = final_dir(step);
    if (env_.stat(fin, /*follow=*/false) &&
        !env_.stat(join_path(fin, kManifestName), /*follow=*/false)) {
      env_.remove_all(fin);
    }
  } catch (const rt::Error& e) {
    report("abandoning step " + std::to_string(step) + ": " + e.message() +
           " (clean_leftovers() retries at the next start)");
  }
}

std::vector<std::string> Store::clean_leftovers() {
  if (rank_ != 0) return {};
  require_idle("clean_leftovers");
  wait_retired();
  std::vector<std::string> removed;
  for (const auto& name : env_.list_dir(dir_)) {
    const bool temp = layout::parse_checkpoint_temp_name(name).has_value() ||
                      layout::parse_checkpoint_retired_name(name).has_value();
    const bool uncommitted = layout::parse_checkpoint_name(name) &&
                             !env_.stat(join_path(path_of(name), kManifestName), false);
    if (!temp && !uncommitted) continue;
    env_.remove_all(path_of(name));
    removed.push_back(name);
  }
  if (!removed.empty()) env_.sync_dir(dir_);
  std::sort(removed.begin(), removed.end());
  return removed;
}

StripePlan Store::apply_striping() {
  if (rank_ != 0) return {false, {}, "rank 0 stripes the directory"};
  try {
    const StripePlan plan = checkpoint::apply_striping(env_, dir_, options_.lustre_stripe_count,
                                                       options_.lustre_stripe_size);
    if (plan.stripe) report(plan.reason);
    return plan;
  } catch (const rt::Error& e) {
    report(e.message() + "; checkpoints keep the filesystem's default layout");
    return {false, {}, e.message()};
  }
}

std::vector<int64_t> Store::committed_steps() const {
  std::vector<int64_t> steps;
  for (const auto& name : env_.list_dir(dir_)) {
    const auto step = layout::parse_checkpoint_name(name);
    if (!step) continue;
    const std::string manifest = join_path(path_of(name), kManifestName);
    if (!env_.stat(manifest, /*follow=*/false)) continue;
    // Unreadable is an error (retention must not judge on a partial listing); damaged is not
    // committed.
    const std::string text = env_.read_file(manifest, kMaxManifestBytes);
    try {
      parse_manifest(text, *step);
      steps.push_back(*step);
    } catch (const BadManifest&) {
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<Loaded> Store::try_load(int64_t step, const std::vector<std::string>& shared,
                                      std::string* why) const {
  const std::string fin = final_dir(step);
  try {
    const auto st = env_.stat(fin, /*follow=*/false);
    if (!st || st->kind != FileStat::Kind::kDir) throw BadManifest{"not a directory"};
    if (st->uid != ::geteuid() || (st->mode & 002)) {
      throw BadManifest{"the directory is writable by others or not ours (mode " + octal(st->mode) +
                        ", uid " + std::to_string(st->uid) + ")"};
    }
    const std::string manifest_path = join_path(fin, kManifestName);
    json manifest;
    try {
      manifest = parse_manifest(env_.read_file(manifest_path, kMaxManifestBytes), step);
      need(manifest, "meta", &json::is_object, "an object");
    } catch (const BadManifest& bad) {
      throw BadManifest{manifest_path + ": " + bad.what};
    }
    Loaded loaded;
    loaded.step = step;
    loaded.world_size = manifest["world_size"].get<int64_t>();
    loaded.format_version = manifest["format_version"].get<int64_t>();
    loaded.meta = manifest["meta"];
    const std::vector<Wanted> wanted = loaded.format_version == 1
                                           ? wanted_v1(manifest, manifest_path, shared, rank_)
                                           : wanted_by_node(env_, manifest, fin, shared, rank_);
    for (const Wanted& w : wanted) {
      const std::string path = join_path(fin, w.name);
      const auto fst = env_.stat(path, /*follow=*/false);
      if (!fst) throw BadManifest{path + " is missing"};
      if (fst->kind != FileStat::Kind::kFile) throw BadManifest{path + " is not a regular file"};
      if (fst->size != w.size) {
        throw BadManifest{path + " is " + std::to_string(fst->size) + " bytes, " + w.source +
                          " says " + std::to_string(w.size)};
      }
      std::string bytes = env_.read_file(path, w.size);
      if (static_cast<int64_t>(bytes.size()) != w.size) {
        throw BadManifest{path + " shrank to " + std::to_string(bytes.size()) +
                          " bytes while being read"};
      }
      const std::string actual = hash_of(bytes);
      if (actual != w.hash) {
        throw BadManifest{path + " has XXH3 " + actual + ", " + w.source + " says " + w.hash +
                          " (changed since it was written)"};
      }
      loaded.files[w.name] = std::move(bytes);
    }
    return loaded;
  } catch (const BadManifest& bad) {
    *why = bad.what;
  } catch (const rt::Error& e) {
    *why = e.message();
  } catch (const json::exception& e) {  // a field of an unexpected type the checks let through
    *why = std::string("a manifest of ") + fin + " is malformed (" + e.what() + ")";
  }
  return std::nullopt;
}

std::optional<Loaded> Store::load_latest(const std::vector<std::string>& shared, int64_t at_most) {
  std::vector<int64_t> steps;
  for (const auto& name : env_.list_dir(dir_)) {
    const auto step = layout::parse_checkpoint_name(name);
    if (step && *step <= at_most) steps.push_back(*step);
  }
  // By step number, never by modification time: the newest step is the one trained furthest.
  std::sort(steps.rbegin(), steps.rend());
  for (const int64_t step : steps) {
    std::string why;
    if (auto loaded = try_load(step, shared, &why)) return loaded;
    report("checkpoint " + final_dir(step) + " passed over: " + why + "; trying an older one");
  }
  return std::nullopt;
}

}  // namespace hpctrain::checkpoint
