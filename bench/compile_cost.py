#!/usr/bin/env python3
"""What a compiler flag costs: the translation units of a build, compiled as the build compiles
them (ccache bypassed) and again with extra flags appended, turn by turn, unit by unit.

  bench/compile_cost.py BUILD_DIR [--match REGEX] [--limit N] [--variant FLAGS]...

Each --variant is a set of flags appended to the build's own command line (the last -O wins);
the build's own command is always the first variant. Prints, per variant, the CPU seconds
(user + system of the compiler) summed over the units, the wall seconds, and the ratio to the
build's own flags. Objects go to a scratch folder; the build is not touched.
"""
import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time


def compiler_argv(entry, obj):
    argv = entry.get("arguments") or shlex.split(entry["command"])
    # The build's compiler launcher (cmake -E env ... ccache) goes: the compiler is measured.
    for i, a in enumerate(argv):
        if re.fullmatch(r"(c\+\+|gcc|cc|(g|clang)\+\+(-\d+)?)", os.path.basename(a)):
            argv = argv[i:]
            break
    out = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT"):  # the object goes to the scratch folder, no depfile
            if a == "-o":
                out += ["-o", obj]
            skip = True
            continue
        if a == "-MD":
            continue
        out.append(a)
    return out


def timed(argv, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    r = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.returncode, cpu, wall


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("--match", default=".", help="regex on the source path (default: every unit)")
    p.add_argument("--limit", type=int, default=0, help="at most N units, spread over the list")
    p.add_argument("--variant", action="append", default=[], help="flags appended, e.g. -O1")
    a = p.parse_args()
    db = os.path.join(a.build_dir, "compile_commands.json")
    try:
        entries = json.load(open(db))
    except OSError as e:
        sys.exit(f"compile_cost: cannot read {db}: {e.strerror}; configure the build first "
                 "(cmake -S . -B BUILD_DIR)")
    entries = [e for e in entries if re.search(a.match, e["file"])]
    entries.sort(key=lambda e: e["file"])
    if a.limit and len(entries) > a.limit:
        step = len(entries) / a.limit
        entries = [entries[int(i * step)] for i in range(a.limit)]
    if not entries:
        sys.exit(f"compile_cost: no unit of {db} matches {a.match!r}")
    variants = [""] + a.variant
    cpu = [0.0] * len(variants)
    wall = [0.0] * len(variants)
    with tempfile.TemporaryDirectory() as scratch:
        obj = os.path.join(scratch, "unit.o")
        for n, e in enumerate(entries):
            base = compiler_argv(e, obj)
            # Turn by turn, starting with a different variant each unit, so load weighs on all.
            order = [(n + k) % len(variants) for k in range(len(variants))]
            row = {}
            for v in order:
                rc, c, w = timed(base + shlex.split(variants[v]), e["directory"])
                if rc != 0:
                    sys.exit(f"compile_cost: {e['file']} does not compile with "
                             f"{variants[v] or 'the build flags'!r}")
                cpu[v] += c
                wall[v] += w
                row[v] = c
            print(f"{os.path.relpath(e['file'])}: " +
                  "  ".join(f"{variants[v] or 'build'} {row[v]:.1f} s" for v in range(len(variants))),
                  flush=True)
    print(f"\n{len(entries)} units of {a.build_dir} (load average {os.getloadavg()[0]:.2f})")
    for v, flags in enumerate(variants):
        print(f"{flags or 'build flags':>24}: CPU {cpu[v]:8.1f} s  wall {wall[v]:8.1f} s  "
              f"ratio {cpu[v] / cpu[0]:.2f}")


if __name__ == "__main__":
    main()
