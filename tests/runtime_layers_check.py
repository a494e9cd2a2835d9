#!/usr/bin/env python3
"""usage: runtime_layers_check.py SOURCE_DIR

The runtime's folders are layered: runtime/CMakeLists.txt makes one library per folder with
dtrain_clip_part(<folder> DEPS ...), and a file in a folder may include only from its own folder
and the folders its library depends on (transitively). The LibTorch-free folders (those built
before `if(NOT DTRAIN_BUILD_RUNTIME)`) include no LibTorch header, and the launcher, doctor and
cli include nothing from runtime/ but those folders. Prints every violation; exit 1 if any."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
cmake = (root / "runtime/CMakeLists.txt").read_text()
cmake = re.sub(r"#[^\n]*", "", cmake)
parts = {}
torch_free = set()
boundary = cmake.find("if(NOT DTRAIN_BUILD_RUNTIME)")
for m in re.finditer(r"dtrain_clip_part\(\s*(\w+)([^)]*)\)", cmake):
    folder, rest = m.group(1), m.group(2)
    deps = re.findall(r"dtrain_clip_(\w+)", rest)
    parts[folder] = [d for d in deps if d != "torch"]
    if m.start() < boundary:
        torch_free.add(folder)
if not parts or not torch_free:
    sys.exit(f"{root}/runtime/CMakeLists.txt: no dtrain_clip_part() folders found")

def closure(folder, seen=None):
    seen = set() if seen is None else seen
    for d in parts.get(folder, []):
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen

include = re.compile(r'#include\s+"runtime/(\w+)/[^"]+"')
torch_include = re.compile(r"#include\s+<(torch|ATen|c10)/")
problems = []
for folder in parts:
    allowed = closure(folder) | {folder}
    for f in sorted((root / "runtime" / folder).glob("*.[ch]*")):
        text = f.read_text()
        for n, line in enumerate(text.splitlines(), 1):
            m = include.search(line)
            if m and m.group(1) not in allowed:
                problems.append(f"{f.relative_to(root)}:{n}: includes from runtime/{m.group(1)}, "
                                f"which runtime/{folder} does not depend on")
            if folder in torch_free and torch_include.search(line):
                problems.append(f"{f.relative_to(root)}:{n}: LibTorch header in a LibTorch-free "
                                "folder")
for top in ("launcher", "doctor", "cli"):
    for f in sorted((root / top).rglob("*.[ch]*")):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = include.search(line)
            if m and m.group(1) not in torch_free:
                problems.append(f"{f.relative_to(root)}:{n}: includes runtime/{m.group(1)}, "
                                "which needs LibTorch")
for p in problems:
    print(p)
print(f"{len(parts)} runtime folders ({len(torch_free)} LibTorch-free), "
      f"{len(problems)} layering violations")
sys.exit(1 if problems else 0)
