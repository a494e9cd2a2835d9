#!/usr/bin/env python3
"""usage: clang_syntax_check.py BUILD_DIR [JOBS]

The sources that build without LibTorch (launcher/, doctor/, cli/, runtime/'s torch-free folders)
must compile with clang as well as with gcc: the fuzz targets (bench/fuzz.sh, libFuzzer) are
built with clang, and gcc accepts some code that C++17 does not allow (a lambda capturing a
structured binding broke the fuzz build once, unseen). Each such file of BUILD_DIR's
compile_commands.json is checked with `clang++ -fsyntax-only` and the same flags. Prints every
error; exit 1 if any, 0 (saying so) where clang++ is not installed. Where ccache is installed the
checks go through it, as the build's compilations do (same base folder, so clones in other folders
share its entries): a file whose command, source and headers are unchanged since a check that
passed is not parsed again; ccache keeps no failed check, so an error is always shown afresh."""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys

build = sys.argv[1]
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
clang = shutil.which("clang++")
ccache = shutil.which("ccache")
if clang is None:
    print("clang++ not installed: nothing checked (scripts/install-deps.sh --tests installs it)")
    sys.exit(0)
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
folders = tuple(os.path.join(root, d) + os.sep for d in ("launcher", "doctor", "cli", "runtime"))
commands = []
with open(os.path.join(build, "compile_commands.json")) as f:
    for entry in json.load(f):
        args = entry.get("arguments") or shlex.split(entry["command"])
        source = entry["file"]
        if not source.startswith(folders) or any("torch" in a or "cuda" in a.lower() for a in args):
            continue
        kept, skip = [clang], False
        for a in args[1:]:
            if skip:
                skip = False
            elif a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                skip = True
            elif a in ("-MD", "-MMD") or a == source or os.path.basename(a) == "ccache":
                continue
            elif os.path.basename(a) in ("c++", "g++", "clang++"):
                continue
            else:
                kept.append(a)
        command = kept + ["-fsyntax-only", source]
        commands.append((source, [ccache] + command if ccache else command, entry["directory"]))

# As CMakeLists.txt sets them for the build's own ccache calls.
environment = dict(os.environ, CCACHE_BASEDIR=root, CCACHE_NOHASHDIR="1",
                   CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime")


def check(item):
    source, command, directory = item
    run = subprocess.run(command, cwd=directory, capture_output=True, text=True, env=environment)
    return source, run.returncode, run.stderr


failed = 0
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for source, code, err in pool.map(check, commands):
        if code != 0:
            failed += 1
            print(f"{os.path.relpath(source, root)}: clang++ -fsyntax-only failed:\n{err}")
print(f"{len(commands)} files checked with {clang}{' through ' + ccache if ccache else ''}, "
      f"{failed} failed")
sys.exit(1 if failed or not commands else 0)
