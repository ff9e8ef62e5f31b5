// expand_hostlist against the real scontrol: a recorded corpus (regenerated live by the slurm-
// labelled test) and handwritten cases, each checked against scontrol 22.05 when written.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "dist/hostlist.hpp"

namespace hpctrain::dist {
namespace {

using Names = std::vector<std::string>;

std::string unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 1 < field.size()) {
      const char c = field[++i];
      out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
    } else {
      out += field[i];
    }
  }
  return out;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.push_back(unescape(line.substr(start, tab - start)));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

TEST(HostlistCorpus, MatchesScontrol) {
  const char* override_path = std::getenv("HPCTRAIN_HOSTLIST_CORPUS");
  const std::string path = override_path ? override_path : HPCTRAIN_HOSTLIST_CORPUS;
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::string line;
  int line_no = 0;
  int checked = 0;
  int ok = 0;
  int rejected = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split_tabs(line);
    ASSERT_GE(fields.size(), 2u) << path << ":" << line_no << ": malformed corpus line";
    const std::string& expression = fields[0];
    const std::string& status = fields[1];
    ++checked;
    if (status == "ok") {
      ++ok;
      const Names expected(fields.begin() + 2, fields.end());
      try {
        EXPECT_EQ(expand_hostlist(expression), expected)
            << path << ":" << line_no << ": '" << expression << "'";
      } catch (const HostlistError& e) {
        ADD_FAILURE() << path << ":" << line_no << ": scontrol accepts '" << expression
                      << "' but expand_hostlist threw: " << e.what();
      }
    } else {
      // error: scontrol rejects it; partial: scontrol drops names (we reject); crash: scontrol
      // dies (we reject).
      ASSERT_TRUE(status == "error" || status == "partial" || status == "crash")
          << path << ":" << line_no << ": unknown status '" << status << "'";
      ++rejected;
      EXPECT_THROW(expand_hostlist(expression), HostlistError)
          << path << ":" << line_no << ": scontrol says " << status << " for '" << expression
          << "'";
    }
  }
  // A truncated or empty corpus must not pass quietly.
  EXPECT_GE(checked, 200) << path;
  EXPECT_GE(ok, 100) << path;
  EXPECT_GE(rejected, 20) << path;
}

TEST(Hostlist, ZeroPaddingIsTheWidthOfTheLowerBound) {
  EXPECT_EQ(expand_hostlist("n[8-10]"), (Names{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[08-10]"), (Names{"n08", "n09", "n10"}));
  EXPECT_EQ(expand_hostlist("n[008-10]"), (Names{"n008", "n009", "n010"}));
  EXPECT_EQ(expand_hostlist("n[8-010]"), (Names{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("node[001-004,007]"),
            (Names{"node001", "node002", "node003", "node004", "node007"}));
  EXPECT_EQ(expand_hostlist("n[00-00]"), (Names{"n00"}));
  // strtoul skips blanks and a '+', but they still count towards the width.
  EXPECT_EQ(expand_hostlist("n[ 1-2]"), (Names{"n01", "n02"}));
  EXPECT_EQ(expand_hostlist("n[+1-2]"), (Names{"n01", "n02"}));
  EXPECT_EQ(expand_hostlist("n[1a-3]"), (Names{"n01", "n02", "n03"}));
  EXPECT_EQ(expand_hostlist("n[1-]"), (Names{"n1"}));
}

TEST(Hostlist, SeveralBracketGroupsInScontrolOrder) {
  EXPECT_EQ(expand_hostlist("a[1-2]b[3,5]"), (Names{"a1b3", "a1b5", "a2b3", "a2b5"}));
  EXPECT_EQ(expand_hostlist("gpu-a[1-2]-b[3,5]"),
            (Names{"gpu-a1-b3", "gpu-a1-b5", "gpu-a2-b3", "gpu-a2-b5"}));
  // The last prefix group is the outer loop, not the first.
  EXPECT_EQ(expand_hostlist("x[1-2]y[3-4]z[5-6]"), (Names{"x1y3z5", "x1y3z6", "x2y3z5", "x2y3z6",
                                                          "x1y4z5", "x1y4z6", "x2y4z5", "x2y4z6"}));
  EXPECT_EQ(expand_hostlist("n[1-2][3-4]"), (Names{"n13", "n14", "n23", "n24"}));
}

TEST(Hostlist, ListsDuplicatesAndSeparators) {
  EXPECT_EQ(expand_hostlist("n1,n1"), (Names{"n1", "n1"}));
  EXPECT_EQ(expand_hostlist("n[1-3],n2"), (Names{"n1", "n2", "n3", "n2"}));
  EXPECT_EQ(expand_hostlist("n[1,1]"), (Names{"n1", "n1"}));
  EXPECT_EQ(expand_hostlist("login1,node[1-2],gpu07"),
            (Names{"login1", "node1", "node2", "gpu07"}));
  EXPECT_EQ(expand_hostlist(" n1\tn2,, n3,"), (Names{"n1", "n2", "n3"}));
  EXPECT_EQ(expand_hostlist("123,1[2-3]"), (Names{"123", "12", "13"}));
  EXPECT_EQ(expand_hostlist("a-b-1,n1-2"), (Names{"a-b-1", "n1-2"}));
  EXPECT_EQ(expand_hostlist("n[1,\t2]"), (Names{"n1", "n02"}));
  EXPECT_EQ(expand_hostlist(""), Names{});
  EXPECT_EQ(expand_hostlist(" , "), Names{});
}

TEST(Hostlist, UnclosedBracketIsANameAsInSlurm) {
  EXPECT_EQ(expand_hostlist("a[1-2"), (Names{"a]"}));
  EXPECT_EQ(expand_hostlist("a[1-2,3"), (Names{"a]", "3"}));
  EXPECT_EQ(expand_hostlist("[1-2"), (Names{"1-2"}));
  EXPECT_EQ(expand_hostlist("["), (Names{""}));
  EXPECT_EQ(expand_hostlist("a]b[1,2]"), (Names{"a]b]", "2]"}));
  EXPECT_EQ(expand_hostlist("a[1b[2-3]"), (Names{"a[1b2", "a[1b3"}));
}

TEST(Hostlist, RejectsWhatScontrolRejects) {
  for (const char* bad : {"n[3-1]",         "n[]",         "n[-2]",
                          "n[a-b]",         "n[1-2]x",     "n[[1-2]]",
                          "n[1--2]",        "n[1-2-3]",    "n[1,]",
                          "n[,1]",          "n[,]",        "n[-]",
                          "n[1x]",          "n[1a]",       "n[1 , 2]",
                          "n[1-2 ]",        "a[1-2]]b[3]", "n[1-2][3]]",
                          "a-b[1-2]-c",     "1[2-3]4",     "a[b]",
                          "x[1-2]y[a]z[1]", "n[0-65536]",  "a[0-65535,0]b[1]"}) {
    EXPECT_THROW(expand_hostlist(bad), HostlistError) << bad;
  }
  try {
    expand_hostlist("node[4-1]");
    FAIL() << "no error";
  } catch (const HostlistError& e) {
    EXPECT_NE(std::string(e.what()).find("node[4-1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4-1"), std::string::npos) << e.what();
  }
}

TEST(Hostlist, SizeLimits) {
  const Names big = expand_hostlist("n[0-65535]");
  ASSERT_EQ(big.size(), 65536u);
  EXPECT_EQ(big.back(), "n65535");
  EXPECT_EQ(expand_hostlist("n[0-3],m[0-3]", /*max_hosts=*/8).size(), 8u);
  EXPECT_THROW(expand_hostlist("n[0-3],m[0-3]", /*max_hosts=*/7), HostlistError);
  EXPECT_THROW(expand_hostlist("n[0-999999999]"), HostlistError);
  EXPECT_THROW(expand_hostlist("a[0-60000]b[0-60000]"), HostlistError);  // max_hosts = 2^20
}

// Where scontrol misbehaves we reject rather than copy it.
TEST(Hostlist, RejectsWhereSlurmMisbehaves) {
  // scontrol drops the bad inner group silently and prints nothing for it.
  EXPECT_THROW(expand_hostlist("x[a]y[1-2]z[1]"), HostlistError);
  EXPECT_THROW(expand_hostlist("x[3-1]y[1-2]z[1],m1"), HostlistError);
  // scontrol saturates to ULONG_MAX, or segfaults on a range that reaches it.
  EXPECT_THROW(expand_hostlist("n99999999999999999999"), HostlistError);
  EXPECT_THROW(expand_hostlist("n[99999999999999999999]"), HostlistError);
  EXPECT_THROW(expand_hostlist("n[18446744073709551614-18446744073709551615]"), HostlistError);
  // scontrol copies a token into a 1024-byte buffer.
  EXPECT_THROW(expand_hostlist(std::string(1100, 'a')), HostlistError);
  EXPECT_EQ(expand_hostlist(std::string(1000, 'a')).size(), 1u);
  EXPECT_EQ(expand_hostlist("n0000000000000000000000099"), (Names{"n0000000000000000000000099"}));
}

// Slurm's own node lists are well formed; what is not is refused, not guessed at.
TEST(Nodelist, RefusesMalformedNodeLists) {
  for (const char* bad :
       {"node[1-3", "node1-3]", "node[3-1]", "node[]", "node[a-b]", "node[1-3],", ",", "node[1,,2]",
        "", "a,,b", "node[1-[2]]", "node1 node2", "[", "a]b[1,2]", "a[1b[2-3]"}) {
    try {
      expand_nodelist(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const HostlistError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
  try {
    expand_nodelist("node[1-3");
  } catch (const HostlistError& e) {
    EXPECT_NE(std::string(e.what()).find("has no ']'"), std::string::npos) << e.what();
  }
}

TEST(Nodelist, ValidFormsStillExpand) {
  EXPECT_EQ(expand_nodelist("node[01-03,7]"), (Names{"node01", "node02", "node03", "node7"}));
  EXPECT_EQ(expand_nodelist("a,b[1-2]-c[3]"), (Names{"a", "b1-c3", "b2-c3"}));
  // Text after the last group is refused by scontrol itself ("n[1-2]x" in the corpus), so
  // "a,b[1-2]c" is not a valid node list either.
  EXPECT_THROW(expand_nodelist("a,b[1-2]c"), HostlistError);
  EXPECT_EQ(expand_nodelist("login1"), (Names{"login1"}));
  EXPECT_EQ(expand_nodelist("gpu-a[1-2]-b[3,5],n9"),
            (Names{"gpu-a1-b3", "gpu-a1-b5", "gpu-a2-b3", "gpu-a2-b5", "n9"}));
}

}  // namespace
}  // namespace hpctrain::dist
