# torch's own --numa-binding choice (torch/numa/binding.py) on a machine described under DIR:
# writes DIR/sys (a sysfs of 32 CPUs, two threads a core, on 4 NUMA nodes of 2 sockets, L3 groups
# of unequal sizes), DIR/bin/nvidia-smi (6 GPUs: three on NUMA node 0, one of them saying -1, two
# on node 2, one on node 3) and DIR/bin/taskset (answers `taskset -pc PID` with the CPUs a rank
# may use: all but 19 and 24; `taskset -c LIST PROGRAM...` says "taskset -c LIST" on stderr and
# runs PROGRAM unbound, as this machine has 2 CPUs), then prints, for each mode and GPU,
# "MODE GPU CPUS" as torch's binding code picks them, run on that sysfs.
#   python numa_cpus.py DIR
import builtins
import os
import sys
import types

import torch.numa.binding as binding

root = sys.argv[1]
sys_dir = os.path.join(root, "sys")
allowed = set(range(32)) - {19, 24}
nodes = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7], 2: [8, 9, 10, 11], 3: [12, 13, 14, 15]}  # cores
socket_of_node = {0: 0, 1: 0, 2: 1, 3: 1}
l3_groups = [[0, 1], [2, 3], [4, 5, 6, 7], [8], [9, 10, 11], [12, 13, 14, 15]]  # cores
gpus = [("00000000:17:00.0", "0"), ("00000000:2A:00.0", "0"), ("00000000:3D:00.0", "-1"),
        ("00000000:9A:00.0", "2"), ("00000000:AB:00.0", "2"), ("00000000:DC:00.0", "3")]


def write(path, text):
    path = os.path.join(sys_dir, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def threads(cores):
    return sorted([c for c in cores] + [c + 16 for c in cores])


def ranges(cpus):
    return binding._get_ranges_str_from_ints(set(cpus))


write("devices/system/node/possible", "0-3")
for node, cores in nodes.items():
    write(f"devices/system/node/node{node}/cpulist", ranges(threads(cores)))
    for core in cores:
        for cpu in (core, core + 16):
            base = f"devices/system/cpu/cpu{cpu}"
            write(f"{base}/topology/physical_package_id", str(socket_of_node[node]))
            write(f"{base}/topology/thread_siblings_list", f"{core},{core + 16}")
            group = next(g for g in l3_groups if core in g)
            for index, kind, level, shared in (("0", "Data", 1, [core]),
                                               ("1", "Instruction", 1, [core]),
                                               ("2", "Unified", 2, [core]),
                                               ("3", "Unified", 3, group)):
                write(f"{base}/cache/index{index}/type", kind)
                write(f"{base}/cache/index{index}/level", str(level))
                write(f"{base}/cache/index{index}/shared_cpu_list", ranges(threads(shared)))
for bus, node in gpus:
    write(f"bus/pci/devices/{bus[4:].lower()}/numa_node", node)

os.makedirs(os.path.join(root, "bin"), exist_ok=True)
with open(os.path.join(root, "bin", "nvidia-smi"), "w") as f:
    f.write("#!/bin/sh\n# nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader [-i N]\n"
            "gpu=\nwhile [ $# -gt 0 ]; do [ \"$1\" = -i ] && gpu=$2; shift; done\n"
            "i=0\nfor bus in " + " ".join(b for b, _ in gpus) + "; do\n"
            "  [ -z \"$gpu\" ] || [ \"$gpu\" = $i ] && echo $bus\n  i=$((i + 1))\ndone\n"
            "[ -z \"$gpu\" ] || [ \"$gpu\" -lt $i ] || { echo 'No devices were found'; exit 6; }\n")
with open(os.path.join(root, "bin", "taskset"), "w") as f:
    f.write("#!/bin/sh\n"
            "if [ \"$1\" = -pc ]; then echo \"pid $2's current affinity list: " +
            ranges(allowed) + "\"; exit 0; fi\n"
            "[ \"$1\" = -c ] || { echo \"taskset stand-in: $*\" >&2; exit 1; }\n"
            "echo \"taskset -c $2\" >&2\nshift 2\nexec \"$@\"\n")
for name in ("nvidia-smi", "taskset"):
    os.chmod(os.path.join(root, "bin", name), 0o755)

# torch's code, reading that sysfs: its open() and os.listdir() see sys_dir as /sys, its
# sched_getaffinity() the CPUs above, and its GPUs are the stand-in's (torch asks CUDA for the
# PCI address; the numa_node file is read as torch reads it, -1 as node 0).
def on_fake_sys(path):
    return sys_dir + path[len("/sys"):] if path.startswith("/sys/") else path


binding.open = lambda path, *args, **kwargs: builtins.open(on_fake_sys(path), *args, **kwargs)
binding.os = types.SimpleNamespace(listdir=lambda path: os.listdir(on_fake_sys(path)),
                                   path=os.path, sched_getaffinity=lambda pid: set(allowed))
binding._get_gpu_count = lambda: len(gpus)


def numa_node_of_gpu(*, gpu_index):
    with binding.open(f"/sys/bus/pci/devices/{gpus[gpu_index][0][4:].lower()}/numa_node") as f:
        return max(int(f.read().strip()), 0)


binding._get_numa_node_index_for_gpu_index = numa_node_of_gpu
for mode in ("node", "socket", "exclusive", "core-complex"):
    options = binding.NumaOptions(affinity_mode=binding.AffinityMode(mode))
    for gpu in range(len(gpus)):
        cpus = binding._get_logical_cpus_to_bind_to(gpu_index=gpu, numa_options=options)
        print(mode, gpu, ranges(cpus))
