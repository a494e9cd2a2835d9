# dtrain's --numa-binding (torchrun's, torch/numa/binding.py): binds one rank to the CPUs near
# its GPU, then runs it. Run on the rank's node as
#   sh -c <dtrain_program.sh + this> dtrain-numa-binding MODE PROGRAM_DIR -- argv...
# MODE: node (the CPUs of the GPU's NUMA node) or socket (those of every NUMA node of its
# socket). The rank's GPU is the first of its CUDA_VISIBLE_DEVICES, else its LOCAL_RANK, as torch
# counts it; nvidia-smi gives its PCI address, sysfs its NUMA node and their CPUs, and the rank
# runs under `taskset -c CPUS` (the kernel keeps it inside any cpuset it already has). A binding
# that cannot be made ends the rank with a line saying why, as torchrun's does (exit 1).
# DTRAIN_PROBE_SYSFS: the folder read as /sys (for tests). POSIX sh, nvidia-smi, taskset.
numa_main() {
  mode=$1 pdir=$2
  shift 3
  sys=${DTRAIN_PROBE_SYSFS:-/sys}
  p=$(dtrain_command "$1" "$pdir") || exit 127
  shift
  set -- "$p" "$@"
  gpu=${CUDA_VISIBLE_DEVICES%%,*}
  [ -n "$gpu" ] || gpu=${LOCAL_RANK:-0}
  command -v nvidia-smi >/dev/null 2>&1 || numa_fail "no nvidia-smi on this node (PATH=$PATH)"
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$gpu" 2>&1) ||
    numa_fail "nvidia-smi -i $gpu: $bus"
  # 00000000:DC:00.0 -> 0000:dc:00.0, as sysfs names it
  bus=$(printf %s "$bus" | tr 'A-F' 'a-f' | tr -d ' \r')
  case $bus in ????????:*) bus=${bus#????} ;; esac
  node=$(cat "$sys/bus/pci/devices/$bus/numa_node" 2>/dev/null) ||
    numa_fail "GPU $gpu ($bus): no $sys/bus/pci/devices/$bus/numa_node"
  case $node in '' | -*) numa_fail "GPU $gpu ($bus) has no NUMA node (numa_node $node)" ;; esac
  cpus=$(numa_cpus "$node") || numa_fail "NUMA node $node of GPU $gpu lists no CPUs"
  if [ "$mode" = socket ]; then
    package=$(numa_package "$cpus") || numa_fail "no socket for the CPUs $cpus of NUMA node $node"
    cpus=
    for dir in "$sys"/devices/system/node/node[0-9]*; do
      n=${dir##*/node}
      c=$(numa_cpus "$n") || continue
      [ "$(numa_package "$c")" = "$package" ] && cpus=${cpus:+$cpus,}$c
    done
  fi
  echo "dtrain: rank ${RANK:-?}: --numa-binding $mode: GPU $gpu ($bus) on NUMA node $node: CPUs $cpus" >&2
  exec taskset -c "$cpus" "$@"
}

numa_fail() {
  echo "dtrain: rank ${RANK:-?} on $(uname -n): --numa-binding $mode: $1; leave --numa-binding out to run unbound" >&2
  exit 1
}

# The CPU list of NUMA node $1 ("0-15,32-47"); fails when it has none.
numa_cpus() {
  c=$(cat "$sys/devices/system/node/node$1/cpulist" 2>/dev/null) || return 1
  [ -n "$c" ] || return 1
  echo "$c"
}

# The socket (physical package) of the first CPU of the list $1.
numa_package() {
  first=${1%%[-,]*}
  cat "$sys/devices/system/cpu/cpu$first/topology/physical_package_id" 2>/dev/null
}

numa_main "$@"
