// The file list of a dataset from the spec's `[data] train` / `val` entries: each a path or a
// glob, expanded here, once, for ImageSource::open().
// Thread safety: reentrant (glob(3) reads the directories).
#pragma once

#include <string>
#include <vector>

namespace hpctrain::data {

// Expands globs (each sorted) and keeps literal paths as given, in order; a glob that matches
// nothing, no entries at all, or a file named twice is an rt::DataError. A missing literal path
// is left for opening to report.
std::vector<std::string> expand_paths(const std::vector<std::string>& paths_or_globs);

}  // namespace hpctrain::data
