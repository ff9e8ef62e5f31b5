#!/usr/bin/env bash
# scripts/check_structure.py against planted breaches: a class of 16 fields, a component that
# reads the spec, one that takes it, one that holds it; and what it must let pass: 15 fields, a
# struct of plain fields, an adapter named *_from_spec, code outside its scope, comments and
# strings that only mention the spec.
#   check_structure_test.sh SOURCE_DIR PYTHON
set -euo pipefail
src=$1 python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir -p runtime/train launcher/supervisor launcher/render tests/unit

fields() {  # N: a class body of N fields
  local i
  for ((i = 0; i < $1; i++)); do printf '  int f%d_ = 0;\n' "$i"; done
}
check() { "$python" "$src/scripts/check_structure.py" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

{ echo 'class Wide {'; echo ' public:'; echo '  int size() const;'; fields 16; echo '};'; } \
  > runtime/train/wide.hpp
{ echo 'class Fits {'; fields 15; echo '  std::function<void(int)> cb;'; echo '};'
  echo 'struct Record {'; for i in $(seq 30); do echo "  int x$i = 0;"; done; echo '};'; } \
  > runtime/train/fits.hpp
cat > runtime/train/reads.cpp <<'CPP'
int lr_of(const Options& o) { return o.lr; }
// spec.train.lr in a comment, and in a string, is no read:
const char* kText = "spec.train.lr";
int bad(const hpctrain::spec::Spec& spec) { return spec.train.batch_size; }
CPP
cat > runtime/train/adapter.cpp <<'CPP'
Options options_from_spec(const spec::Spec& spec) { Options o; o.lr = spec.train.lr; return o; }
CPP
cat > runtime/train/takes.cpp <<'CPP'
void build(const spec::TrainSpec& train, int rank) { use(train, rank); }
CPP
cat > launcher/supervisor/holds.hpp <<'CPP'
class Holder {
  const spec::Spec& spec_;
};
CPP
cat > launcher/render/render.cpp <<'CPP'
std::string render(const spec::Spec& spec) { return spec.job.name; }
CPP

out=$(check runtime/train/wide.hpp 2>&1) && fail "16 fields passed"
grep -q 'class Wide has 16 fields (at most 15)' <<<"$out" || fail "16 fields: $out"
check runtime/train/fits.hpp >/dev/null || fail "15 fields and a plain struct failed"
out=$(check runtime/train/reads.cpp 2>&1) && fail "a spec read passed"
grep -q 'bad takes spec::Spec' <<<"$out" || fail "the read was not named: $out"
[[ $(grep -c 'only a \*_from_spec adapter may' <<<"$out") == 1 ]] \
  || fail "comments, strings or another function counted: $out"
check runtime/train/adapter.cpp >/dev/null || fail "an adapter failed"
out=$(check runtime/train/takes.cpp 2>&1) && fail "taking a spec section passed"
grep -q 'build takes spec::TrainSpec' <<<"$out" || fail "taking a section: $out"
out=$(check launcher/supervisor/holds.hpp 2>&1) && fail "holding the spec passed"
grep -q 'class Holder holds a spec' <<<"$out" || fail "holding: $out"
check launcher/render/render.cpp >/dev/null || fail "the renderer is out of scope but failed"
echo "check_structure_test: every planted breach named, nothing else"
