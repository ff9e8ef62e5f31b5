#!/usr/bin/env python3
"""Generates hostlist expressions (valid and broken) and records what the real
`scontrol show hostnames` makes of each, as the corpus expand_hostlist is tested against.

  gen_hostlist_corpus.py --seed 1 --count 400 --out hostlist_corpus.txt

Needs SLURM_CONF pointing at a slurm.conf (scontrol reads it even to expand a hostlist).

Corpus format, one expression per line, fields separated by a tab, with backslash, tab and
newline escaped as \\\\, \\t, \\n:
  EXPRESSION <tab> ok [<tab> NAME]...   scontrol printed these names (possibly none)
  EXPRESSION <tab> error                 scontrol said "Invalid hostlist"
  EXPRESSION <tab> partial               scontrol logged a range error yet printed names
                                         (it drops bad inner bracket groups: we reject them)
  EXPRESSION <tab> crash                 scontrol died (numbers near ULONG_MAX: we reject them)
Lines starting with '#' are comments.
"""
import argparse
import random
import subprocess
import sys

PREFIXES = ["n", "node", "gpu-a", "c", "x.y", "r1n", "", "a_b", "n0", "9", "cn-"]
SEPARATORS = [",", ",", ",", " ", ", ", "\t", ",,"]
JUNK = "[]-,x a0 9+"
MAX_NAMES = 64


def number(rng):
    value = rng.choice([rng.randint(0, 9), rng.randint(0, 20), rng.randint(90, 110),
                        rng.randint(995, 1005)])
    text = str(value)
    if rng.random() < 0.35:
        text = "0" * rng.randint(1, 3) + text
    return value, text


def range_item(rng):
    lo, lo_text = number(rng)
    if rng.random() < 0.4:
        return lo_text
    hi = lo + rng.randint(0, 12)
    hi_text = str(hi)
    if rng.random() < 0.3:
        hi_text = "0" * rng.randint(1, 3) + hi_text
    return lo_text + "-" + hi_text


def bracket(rng):
    return "[" + ",".join(range_item(rng) for _ in range(rng.randint(1, 3))) + "]"


def host(rng):
    name = rng.choice(PREFIXES)
    shape = rng.random()
    if shape < 0.25:
        return (name or "h") + number(rng)[1]
    if shape < 0.75:
        return name + bracket(rng)
    groups = 2 if rng.random() < 0.8 else 3
    parts = [name + bracket(rng)]
    for _ in range(groups - 1):
        parts.append(rng.choice(["", "-", "b", ".s", "x"]) + bracket(rng))
    return "".join(parts)


def valid_expression(rng):
    hosts = [host(rng) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.15:
        hosts.append(rng.choice(hosts))  # duplicates
    out = hosts[0]
    for h in hosts[1:]:
        out += rng.choice(SEPARATORS) + h
    if rng.random() < 0.1:
        out = rng.choice([" ", ",", "\t"]) + out + rng.choice(["", " ", ","])
    return out


def mutate(rng, text):
    kind = rng.randrange(8)
    pos = rng.randrange(len(text) + 1)
    if kind == 0 and text:
        return text[:pos] + text[pos + 1:]  # drop a character
    if kind == 1:
        return text[:pos] + rng.choice(JUNK) + text[pos:]  # insert one
    if kind == 2:
        return text + rng.choice(["x", "]", "[", "-", "a"])  # junk at the end
    if kind == 3:
        return text.replace("-", "--", 1)
    if kind == 4:
        return "n[" + str(rng.randint(5, 20)) + "-" + str(rng.randint(0, 4)) + "]"  # reversed
    if kind == 5:
        return rng.choice(["n[]", "n[,]", "n[1,]", "n[-]", "n[a-b]", "n[1-2", "[", "]",
                           "n[0-65536]", "n[1x2]", "n[1-2][3]x", "a[b]c[1]"])
    if kind == 6:
        return text.replace("]", "", 1)
    return text.replace("[", "[ ", 1)


def expression(rng):
    while True:
        text = valid_expression(rng)
        if rng.random() < 0.4:
            text = mutate(rng, text)
        if not text.startswith("-"):  # scontrol would read it as an option
            return text


def escape(text):
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def run_scontrol(text, scontrol):
    proc = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True,
                          text=True, timeout=30)
    if proc.returncode != 0:
        return ["crash"]
    if "Invalid hostlist" in proc.stdout + proc.stderr:
        return ["error"]
    if "error:" in proc.stderr:
        return ["partial"]
    names = proc.stdout[:-1].split("\n") if proc.stdout else []
    return ["ok"] + names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--out", required=True)
    parser.add_argument("--scontrol", default="scontrol")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    seen = set()
    lines = []
    while len(lines) < args.count:
        text = expression(rng)
        if text in seen:
            continue
        seen.add(text)
        result = run_scontrol(text, args.scontrol)
        if len(result) > MAX_NAMES + 1:
            continue  # keeps the corpus small; large ranges are tested by hand
        lines.append("\t".join([escape(text)] + [escape(field) for field in result]))
    version = subprocess.run([args.scontrol, "--version"], capture_output=True, text=True).stdout
    with open(args.out, "w") as out:
        out.write("# Generated by tests/unit/dist/gen_hostlist_corpus.py --seed %d --count %d\n"
                  % (seed, args.count))
        out.write("# from %s" % (version or "scontrol (version unknown)\n"))
        out.write("\n".join(lines) + "\n")
    print("seed %d: %d expressions written to %s" % (seed, len(lines), args.out))


if __name__ == "__main__":
    sys.exit(main())
