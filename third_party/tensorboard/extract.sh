#!/usr/bin/env bash
# Regenerates tensorboard/compat/proto/ from the installed tensorboard package (which ships its messages compiled
# into *_pb2.py, not as .proto sources): the package's own descriptors of Event and everything it
# imports, printed as .proto source by libprotobuf, then compiled back with protoc and compared
# with the package's descriptors (equal but for json_name, which protoc fills in).
#   third_party/tensorboard/extract.sh [PYTHON]   (default: .venv/bin/python)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${1:-$here/../../.venv/bin/python}
version=$("$python" -c 'import tensorboard; print(tensorboard.__version__)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" "$here/descriptor_set.py" > "$tmp/set.pb"
g++ -std=c++17 -O1 -o "$tmp/descriptor_to_proto" "$here/descriptor_to_proto.cpp" -lprotobuf
"$tmp/descriptor_to_proto" "$tmp/out" < "$tmp/set.pb"
rm -rf "$here/tensorboard"
(cd "$tmp/out" && find . -name '*.proto' | sort) | while read -r f; do
  mkdir -p "$here/$(dirname "$f")"
  {
    echo "// From tensorboard $version (PyPI): the descriptor compiled into $(basename "${f%.proto}")_pb2.py,"
    echo "// printed by third_party/tensorboard/extract.sh. Apache-2.0: third_party/tensorboard/LICENSE."
    echo
    cat "$tmp/out/$f"
  } > "$here/$f"
done
protoc -I "$here" --include_imports --descriptor_set_out="$tmp/back.pb" \
  tensorboard/compat/proto/event.proto
"$python" - "$tmp/set.pb" "$tmp/back.pb" <<'PY'
import sys
from google.protobuf import descriptor_pb2

def load(path):
    s = descriptor_pb2.FileDescriptorSet()
    s.ParseFromString(open(path, "rb").read())
    return {f.name: f for f in s.file}

def strip(m):
    for f in m.field:
        f.ClearField("json_name")
    for n in m.nested_type:
        strip(n)

want, got = load(sys.argv[1]), load(sys.argv[2])
assert sorted(want) == sorted(got), (sorted(want), sorted(got))
for name, f in got.items():
    for m in f.message_type:
        strip(m)
    if f != want[name]:
        sys.exit(f"{name}: the printed .proto does not compile back to the package's descriptor")
print(f"{len(want)} files from tensorboard", end=" ")
PY
echo "$version: ok"
