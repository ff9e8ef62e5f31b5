#!/usr/bin/env python3
"""Structure rules that keep the code's shape (scripts/check-function-length.sh runs this):

  - class size: a class holds at most MAX_FIELDS data members (members end in '_': house
    style). A class past it absorbs features: compose parts instead.
  - no spec reads in components: under runtime/ (but runtime/spec/, the spec library itself) and
    launcher/supervisor/, only a function named *_from_spec (a component's adapter) may take a spec
    (spec::Spec or one of its sections, spec::*Spec) or read one (spec.train..., spec_.job...),
    and no class may hold one. Components get their options from their adapter.

Each rule has an allowlist below, of reviewed exceptions with the reason. Usage:
check_structure.py FILE... (C++ files; others are ignored). Exits 1 naming every breach.
"""
import re
import sys

import lizard

MAX_FIELDS = 15

# PATH:CLASS allowed more fields, with why.
ALLOWED_CLASSES = {}

# PATH (every function in it) or PATH:FUNCTION (lizard's name) allowed to take or read the spec
# outside an adapter, with why.
ALLOWED_SPEC_READERS = {
    # The worker's entry: it checks the launch against the spec (world size, GPUs, the stop
    # signal) and hands the spec to the trainer and the heartbeat's adapters.
    "runtime/worker/run.cpp": "the worker's entry, where the spec meets the launch",
    # The trainer's entry: hands the spec to trainer_from_spec, which builds the parts through
    # their adapters, and runs the Trainer (which never sees the spec).
    "runtime/train/trainer.cpp:hpctrain::train::train": "the trainer's entry",
}

SPEC_SCOPE = ("runtime/", "launcher/supervisor/")
SPEC_EXEMPT = ("runtime/spec/",)
SECTIONS = "job|data|model|train|checkpoint|preemption|resilience|sweep"
SPEC_READ = re.compile(r"\bspec_?\s*(?:\.|->)\s*(?:%s)\b" % SECTIONS)
SPEC_TYPE = re.compile(r"\bspec::(?:\w*Spec)\b")
SPEC_MEMBER = re.compile(r"\bspec::\w*Spec\b[^;(){}]*\b\w+_\s*(?:;|=|\{)")


def strip_comments_and_strings(text):
    """The text with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or c == "'":
            if c == '"' and i > 0 and text[i - 1] == "R":  # raw string R"delim( ... )delim"
                m = re.match(r'"([^(]*)\(', text[i:])
                end = text.find(")" + (m.group(1) if m else "") + '"', i)
                end = n if end < 0 else end + len(m.group(1) if m else "") + 2
                out.append('""' + "\n" * text.count("\n", i, end))
                i = end
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def class_bodies(code):
    """(name, line, body) of every class or struct defined in `code` (not enum class, not forward
    declarations); body is the text between its braces. A struct of plain fields (no trailing
    '_') counts none."""
    for m in re.finditer(r"\b(?:class|struct)\s+(\w+)[^;{()]*\{", code):
        if re.search(r"\benum\s+$", code[: m.start()][-20:]):
            continue
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        yield m.group(1), code.count("\n", 0, m.start()) + 1, code[m.end() : i - 1]


def fields(body):
    """The data members (names ending in '_') declared at the top level of a class body."""
    top, depth = [], 0
    for c in body:
        if c == "{":
            depth += 1
            top.append(";" if depth == 1 else "")  # a nested body ends a statement
        elif c == "}":
            depth -= 1
        elif depth == 0:
            top.append(c)
    names = []
    for statement in "".join(top).split(";"):
        s = re.sub(r"\b(public|private|protected)\s*:", "", statement).strip()
        if not s or re.match(r"(using|typedef|friend|static|enum|struct|class|template)\b", s):
            continue
        if re.search(r"\)\s*(const\s*)?(override|noexcept|=\s*(0|default|delete))?\s*$", s):
            continue  # a function declaration
        # Top-level comma-separated declarators: the name before '=', '{', '[' or the end.
        depth, part, parts = 0, "", []
        for c in s:
            depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(c, 0)
            if c == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += c
        parts.append(part)
        for p in parts:
            m = re.search(r"(\w+_)\s*(?:=.*|\[.*\])?$", p.strip())
            if m:
                names.append(m.group(1))
    return names


def check_classes(path, code, problems):
    for name, line, body in class_bodies(code):
        members = fields(body)
        limit = ALLOWED_CLASSES.get(f"{path}:{name}", (MAX_FIELDS,))[0]
        if len(members) > limit:
            problems.append(
                f"  {path}:{line}: class {name} has {len(members)} fields (at most {limit}): "
                "compose it of parts"
            )


def check_spec_reads(path, code, problems):
    if not path.startswith(SPEC_SCOPE) or path.startswith(SPEC_EXEMPT):
        return
    if path in ALLOWED_SPEC_READERS:
        return
    lines = code.split("\n")
    for name, line, body in class_bodies(code):
        for m in SPEC_MEMBER.finditer(body):
            problems.append(
                f"  {path}:{line}: class {name} holds a spec ({m.group(0).strip()}): give it "
                "options from its *_from_spec adapter"
            )
    analysis = lizard.analyze_file.analyze_source_code(path, code)
    for f in analysis.function_list:
        short = f.name.split("::")[-1]
        if short.endswith("_from_spec") or f"{path}:{f.name}" in ALLOWED_SPEC_READERS:
            continue
        body = "\n".join(lines[f.start_line - 1 : f.end_line])
        takes = SPEC_TYPE.search(re.sub(r"\s*::\s*", "::", f.long_name))
        reads = SPEC_READ.search(body)
        if takes or reads:
            what = "takes " + takes.group(0) if takes else "reads " + reads.group(0)
            problems.append(
                f"  {path}:{f.start_line}: {f.name} {what}: only a *_from_spec adapter may"
            )


def main(paths):
    problems = []
    count = 0
    for path in paths:
        if not re.search(r"\.(cpp|hpp|h|cu|cuh)$", path) or path.startswith(("tests/", "third_party/", "bench/")):
            continue
        count += 1
        with open(path, encoding="utf-8", errors="replace") as f:
            code = strip_comments_and_strings(f.read())
        check_classes(path, code, problems)
        check_spec_reads(path, code, problems)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"check_structure: {len(problems)} problem(s) in {count} files", file=sys.stderr)
        return 1
    print(f"check_structure: {count} files, no class over {MAX_FIELDS} fields, "
          "no spec read outside a *_from_spec adapter")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
