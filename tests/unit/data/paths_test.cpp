// data/paths.hpp: a dataset's file list from paths and globs.
#include "data/paths.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "support/error_text.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::data {
namespace {

using test::bare_message_of;
using test::TempDir;

void touch(const std::string& path) { std::ofstream(path) << "x"; }

// Each glob's matches sorted (not in the directory's order), in the order of the entries.
TEST(Paths, GlobsSortedLiteralsKeptInOrder) {
  TempDir dir;
  for (const char* name : {"train-10.h5", "train-02.h5", "train-01.h5", "val.h5"}) {
    touch(dir.file(name));
  }
  EXPECT_EQ(expand_paths({dir.file("val.h5"), dir.file("train-*.h5")}),
            (std::vector<std::string>{dir.file("val.h5"), dir.file("train-01.h5"),
                                      dir.file("train-02.h5"), dir.file("train-10.h5")}));
  EXPECT_EQ(expand_paths({dir.file("train-0?.h5")}),
            (std::vector<std::string>{dir.file("train-01.h5"), dir.file("train-02.h5")}));
  // A literal path is not checked here: opening it says what is wrong.
  EXPECT_EQ(expand_paths({dir.file("missing.h5")}),
            std::vector<std::string>{dir.file("missing.h5")});
}

TEST(Paths, EmptyUnmatchedOrTwiceNamedIsAnError) {
  TempDir dir;
  touch(dir.file("a.h5"));
  EXPECT_EQ(bare_message_of<rt::DataError>([&] { expand_paths({}); }), "no dataset files given");
  const std::string pattern = dir.file("b-*.h5");
  EXPECT_EQ(bare_message_of<rt::DataError>([&] { expand_paths({pattern}); }),
            "dataset pattern '" + pattern + "' matches no files");
  EXPECT_EQ(bare_message_of<rt::DataError>([&] {
              expand_paths({dir.file("a.h5"), dir.file("*.h5")});
            }),
            dir.file("a.h5") + ": dataset file named twice");
}

}  // namespace
}  // namespace hpctrain::data
