# dtrain's --numa-binding (torchrun's, torch/numa/binding.py): binds one rank to the CPUs near
# its GPU, then runs it. Run on the rank's node as
#   sh -c <dtrain_program.sh + this> dtrain-numa-binding MODE PROGRAM_DIR -- argv...
# MODE, as torch's AffinityMode: node (the CPUs of the GPU's NUMA node), socket (those of every
# NUMA node of its socket), exclusive (the node's physical cores split evenly among the GPUs on
# that node, the lower GPUs taking one more where they do not divide) or core-complex (one group
# of cores sharing the last-level cache, a different one per GPU of the node while there are
# enough). The rank's GPU is the first of its CUDA_VISIBLE_DEVICES, else its LOCAL_RANK, as torch
# counts it; nvidia-smi gives its PCI address (and the node's GPUs), sysfs its NUMA node (-1, as
# a machine of one NUMA node often says, is node 0, as torch reads it) and the CPUs, only those
# the rank may already use are taken (taskset -p, as torch's sched_getaffinity), and the rank
# runs under `taskset -c CPUS`. A binding that cannot be made ends the rank with a line saying
# why, as torchrun's does (exit 1).
# DTRAIN_PROBE_SYSFS: the folder read as /sys (for tests). POSIX sh, awk, nvidia-smi, taskset.
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
  bus=$(numa_bus "$bus")
  node=$(numa_node "$bus") || numa_fail "GPU $gpu ($bus): no $sys/bus/pci/devices/$bus/numa_node"
  cpus=$(numa_cpus "$node") || numa_fail "NUMA node $node of GPU $gpu lists no CPUs"
  allowed=$(taskset -pc $$ 2>&1) || numa_fail "taskset -pc: $allowed"
  allowed=${allowed##*: }
  place=0 gpus=1
  case $mode in
  socket)
    package=$(numa_package "$cpus") || numa_fail "no socket for the CPUs $cpus of NUMA node $node"
    cpus=
    for dir in "$sys"/devices/system/node/node[0-9]*; do
      n=${dir##*/node}
      c=$(numa_cpus "$n") || continue
      [ "$(numa_package "$c")" = "$package" ] && cpus=${cpus:+$cpus,}$c
    done
    ;;
  exclusive | core-complex)
    # The GPUs on the same NUMA node, in nvidia-smi's order, and this one's place among them.
    list=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>&1) ||
      numa_fail "nvidia-smi --query-gpu=pci.bus_id: $list"
    gpus=0 place=
    for b in $list; do
      b=$(numa_bus "$b")
      [ "$(numa_node "$b")" = "$node" ] || continue
      [ "$b" = "$bus" ] && place=$gpus
      gpus=$((gpus + 1))
    done
    [ -n "$place" ] || numa_fail "GPU $gpu ($bus) is not among the GPUs nvidia-smi lists"
    ;;
  esac
  share=$(numa_share "$mode" "$cpus" "$allowed" "$place" "$gpus") || numa_fail "NUMA node $node: $share"
  echo "dtrain: rank ${RANK:-?}: --numa-binding $mode: GPU $gpu ($bus) on NUMA node $node: CPUs $share" >&2
  exec taskset -c "$share" "$@"
}

numa_fail() {
  echo "dtrain: rank ${RANK:-?} on $(uname -n): --numa-binding $mode: $1; leave --numa-binding out to run unbound" >&2
  exit 1
}

# 00000000:DC:00.0 (nvidia-smi) -> 0000:dc:00.0, as sysfs names it.
numa_bus() {
  b=$(printf %s "$1" | tr 'A-F' 'a-f' | tr -d ' \r')
  case $b in ????????:*) b=${b#????} ;; esac
  echo "$b"
}

# The NUMA node of PCI device $1; -1 (no node given) is node 0, as torch reads it.
numa_node() {
  n=$(cat "$sys/bus/pci/devices/$1/numa_node" 2>/dev/null) || return 1
  case $n in '' | -*) n=0 ;; esac
  echo "$n"
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

# The CPUs of list $2 the rank may use (list $3), as a list; for exclusive and core-complex the
# share of GPU number $4 (from 0) of the $5 on the node, as torch's binding.py makes it: cores
# grouped by thread_siblings_list (exclusive) or by the shared_cpu_list of the highest-level data
# or unified cache (core-complex), each group named by its lowest CPU. Prints why on failure.
numa_share() {
  awk -v mode="$1" -v cpus="$2" -v allowed="$3" -v place="$4" -v gpus="$5" -v sys="$sys" '
function expand(list, out,   parts, range, n, i, k) {
  n = 0
  for (i = 1; i <= split(list, parts, ","); i++) {
    gsub(/[ \t\r\n]/, "", parts[i])
    if (parts[i] == "") continue
    if (split(parts[i], range, "-") == 2) {
      for (k = range[1] + 0; k <= range[2] + 0; k++) out[++n] = k
    } else {
      out[++n] = parts[i] + 0
    }
  }
  return n
}
function first_line(path,   line) {
  if ((getline line < path) <= 0) line = ""
  close(path)
  return line
}
function lowest(list,   arr, n, i, m) {
  n = expand(list, arr)
  if (n == 0) return ""
  m = arr[1]
  for (i = 2; i <= n; i++) if (arr[i] < m) m = arr[i]
  return m
}
function group_of(cpu,   base, i, dir, type, level, best, list) {
  base = sys "/devices/system/cpu/cpu" cpu
  if (mode == "exclusive") return lowest(first_line(base "/topology/thread_siblings_list"))
  best = -1
  list = ""
  for (i = 0; i < 32; i++) {
    dir = base "/cache/index" i
    type = first_line(dir "/type")
    if (type != "Unified" && type != "Data") continue
    level = first_line(dir "/level") + 0
    if (level <= best) continue
    best = level
    list = first_line(dir "/shared_cpu_list")
  }
  return lowest(list)
}
function before(a, b) {
  if (mode == "core-complex" && size[a] != size[b]) return size[a] > size[b]
  return a < b
}
function ranges(list,   arr, n, i, j, v, out, start) {
  n = expand(list, arr)
  for (i = 2; i <= n; i++) {
    v = arr[i]
    for (j = i - 1; j > 0 && arr[j] > v; j--) arr[j + 1] = arr[j]
    arr[j + 1] = v
  }
  out = ""
  for (i = 1; i <= n; i = j + 1) {
    for (j = i; j < n && arr[j + 1] == arr[j] + 1; j++) ;
    out = out (out == "" ? "" : ",") (j == i ? arr[i] : arr[i] "-" arr[j])
  }
  return out
}
BEGIN {
  n = expand(allowed, a)
  for (i = 1; i <= n; i++) may[a[i]] = 1
  n = expand(cpus, c)
  kept = ""
  groups = 0
  for (i = 1; i <= n; i++) {
    if (!(c[i] in may)) continue
    kept = kept "," c[i]
    if (mode != "exclusive" && mode != "core-complex") continue
    g = group_of(c[i])
    if (g == "") {
      print "CPU " c[i] " has no " (mode == "exclusive" ? "topology/thread_siblings_list" : "cache level with a shared_cpu_list") " under " sys "/devices/system/cpu"
      exit 1
    }
    if (!(g in size)) { key[++groups] = g; size[g] = 0 }
    members[g] = members[g] "," c[i]
    size[g]++
  }
  if (kept == "") {
    print "none of its CPUs (" cpus ") is one this rank may use (" allowed ")"
    exit 1
  }
  if (mode == "exclusive" || mode == "core-complex") {
    for (i = 2; i <= groups; i++) {
      v = key[i]
      for (j = i - 1; j > 0 && before(v, key[j]); j--) key[j + 1] = key[j]
      key[j + 1] = v
    }
  }
  if (mode == "exclusive") {
    each = int(groups / gpus)
    extra = groups % gpus
    if (each < 1) {
      print "it has " groups " physical core(s) this rank may use for its " gpus " GPUs, fewer than one each (--numa-binding node shares them)"
      exit 1
    }
    start = place * each + (place < extra ? place : extra)
    end = start + each + (place < extra ? 1 : 0)
    kept = ""
    for (i = start + 1; i <= end; i++) kept = kept members[key[i]]
  } else if (mode == "core-complex") {
    kept = members[key[place % groups + 1]]
  }
  print ranges(substr(kept, 2))
}'
}

numa_main "$@"
