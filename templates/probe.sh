#!/bin/sh
# dtrain doctor's node probe. Run as `sh -s` with this text on stdin; needs POSIX sh, coreutils,
# sed, grep and awk only, and a PATH as minimal as non-interactive SSH gives. Prints one
# `key=value` per line (keys may repeat: one `gpu=` line per GPU); the doctor parses them.
#
# Environment (all optional): DTRAIN_PROBE_WORKDIR (the job's workdir), DTRAIN_PROBE_PYTHON
# (the cluster file's python), DTRAIN_PROBE_RDZV_ADDR / DTRAIN_PROBE_RDZV_PORT (the rendezvous
# listener to connect to), DTRAIN_PROBE_CLIP_DIR (where dtrain-clip sits beside dtrain),
# DTRAIN_PROBE_SKIP (space-separated parts to leave out: python torch horovod py_spy clip rdzv
# nccl_lib gpu_health kernel_log pci disk_write; shm_files: /dev/shm's files only where it is
# nearly full), DTRAIN_PROBE_LOG_DIR (where ranks write their
# logs), DTRAIN_PROBE_SMI_TIMEOUT (seconds each nvidia-smi call may take, default 10),
# DTRAIN_PROBE_WRITE_TIMEOUT (seconds the test writes where the job writes may take, default 10),
# DTRAIN_PROBE_SYSFS (the folder read as /sys, for tests), DTRAIN_PROBE_CHECKS (the cluster
# file's health checks to run: indices; DTRAIN_PROBE_CHECK_<i> each one's command,
# DTRAIN_PROBE_CHECK_<i>_TIMEOUT its limit in seconds).
# With DTRAIN_PROBE_MODE=listen it instead listens on DTRAIN_PROBE_RDZV_PORT for
# DTRAIN_PROBE_LISTEN_S seconds (the rendezvous test's other end) and prints listening=PORT.
# With DTRAIN_PROBE_MODE=peers it instead runs the peer connection test (probe_peers).
# The whole script is one function run with stdin from /dev/null, so that no command it runs
# can swallow the rest of the script from stdin.

probe_main() {
  PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  export PATH
  LC_ALL=C
  export LC_ALL
  # Debian's bash sources ~/.bashrc whenever it believes sshd started it (SHLVL < 2); bash
  # scripts the probe runs (python shims of pyenv and the like) would pay for that every time.
  SHLVL=9
  BASH_ENV=''
  export SHLVL BASH_ENV
  if [ "$DTRAIN_PROBE_MODE" = listen ]; then
    probe_listen
    return
  fi
  if [ "$DTRAIN_PROBE_MODE" = peers ]; then
    probe_peers
    return
  fi
  echo "time=$(date +%s.%N 2>/dev/null || date +%s)"
  echo "probe_version=1"
  tmp=$(mktemp -d 2>/dev/null || { d="/tmp/dtrain-probe.$$"; mkdir -m 700 "$d" && echo "$d"; })
  trap 'rm -rf "$tmp"' EXIT

  kill_after=""
  timeout -k 1 5 true 2>/dev/null && kill_after="-k 1"
  smi_limit=${DTRAIN_PROBE_SMI_TIMEOUT:-10}
  sys=${DTRAIN_PROBE_SYSFS:-/sys}

  # Slow parts first, in the background; their output lands in files printed at the end.
  waits=""
  smi=$(find_nvidia_smi)
  if [ -n "$smi" ]; then
    smi_started=$(date +%s)
    probe_nvidia_smi "$smi" >"$tmp/smi" 2>&1 &
  fi
  skipping kernel_log || { probe_kernel_log >"$tmp/kernel" 2>&1 & waits="$waits $!"; }
  if skipping rdzv; then :; else probe_rendezvous >"$tmp/rdzv" 2>&1 & waits="$waits $!"; fi
  py=$(find_python)
  if [ -n "$py" ]; then
    skipping python || { probe_python "$py" >"$tmp/python" 2>&1 & waits="$waits $!"; }
  else
    echo "python_error=no python (tried ${DTRAIN_PROBE_PYTHON:-python3, python})"
  fi
  skipping clip || { probe_clip >"$tmp/clip" 2>&1 & waits="$waits $!"; }
  [ -n "$DTRAIN_PROBE_CHECKS" ] && { probe_health_checks >"$tmp/checks" 2>&1 & waits="$waits $!"; }
  skipping disk_write || { probe_writes >"$tmp/writes" 2>&1 & waits="$waits $!"; }

  probe_system
  probe_host
  probe_gpus
  probe_infiniband
  probe_network
  skipping pci || probe_pci
  probe_cuda
  probe_nccl
  for pid in $waits; do wait "$pid"; done
  for part in python clip rdzv kernel checks writes; do
    [ -s "$tmp/$part" ] && sed -n '/^[a-z_]*=/p' "$tmp/$part"
  done
  [ -n "$smi" ] && wait_nvidia_smi
  echo "probe_end=1"
}

# The cluster file's health checks, all at once, each with `sh -c` in the workdir (else $HOME),
# stdin from /dev/null, under timeout(1): health_check=I;EXIT;MILLISECONDS;LAST LINE it printed
# (stdout and stderr; 300 bytes at most). Exit 124 or 137 past the limit: it did not end in time.
probe_health_checks() {
  dir=${DTRAIN_PROBE_WORKDIR:-$HOME}
  [ -d "$dir" ] || dir=${HOME:-/}
  for i in $DTRAIN_PROBE_CHECKS; do
    case $i in *[!0-9]*) continue ;; esac
    eval "cmd=\$DTRAIN_PROBE_CHECK_$i limit=\$DTRAIN_PROBE_CHECK_${i}_TIMEOUT"
    (
      start=$(now_ms)
      # shellcheck disable=SC2086
      (cd "$dir" && exec timeout $kill_after "${limit:-10}" sh -c "$cmd") >"$tmp/check$i" 2>&1 </dev/null
      rc=$?
      took=$(($(now_ms) - start))
      line=$(tr -d '\r' <"$tmp/check$i" | grep -v '^[[:space:]]*$' | tail -n 1 | cut -c1-300)
      echo "health_check=$i;$rc;$took;$line" >"$tmp/check$i.done"
    ) &
  done
  wait
  for i in $DTRAIN_PROBE_CHECKS; do
    [ -f "$tmp/check$i.done" ] && cat "$tmp/check$i.done"
  done
}

# write_test=WHAT;RESULT;FOLDER;PATH: 64 KiB written to a new file in FOLDER, the nearest existing
# folder of PATH (where the job writes: the workdir, the log dir, /tmp), synced and removed.
# RESULT: ok; else the step that failed and the system's reason ("fsync: Input/output error"); or
# "timeout S" when it did not end within DTRAIN_PROBE_WRITE_TIMEOUT seconds (default 10). A drive
# that failed, a file system the kernel turned read-only after errors, a full disk, a folder the
# user cannot write: the ranks' logs and checkpoints cannot be written there. The places are
# written at once; a dd stuck in the kernel (a hung disk) survives SIGKILL, so it is waited for
# until the limit and no longer (it is left behind, its output going to files, not the probe's).
probe_writes() {
  n=0
  write_start workdir "${DTRAIN_PROBE_WORKDIR:-$HOME}"
  [ -n "$DTRAIN_PROBE_LOG_DIR" ] && write_start "log dir" "$DTRAIN_PROBE_LOG_DIR"
  write_start /tmp "${TMPDIR:-/tmp}"
  limit=${DTRAIN_PROBE_WRITE_TIMEOUT:-10}
  deadline=$(($(date +%s) + limit + 1))
  while :; do
    all=1 i=0
    while [ "$i" -lt "$n" ]; do
      i=$((i + 1))
      [ -e "$tmp/write$i.rc" ] || all=""
    done
    [ -n "$all" ] || [ "$(date +%s)" -ge "$deadline" ] && break
    sleep 0.02 2>/dev/null || sleep 1
  done
  i=0
  while [ "$i" -lt "$n" ]; do
    i=$((i + 1))
    read -r what <"$tmp/write$i.what"
    if [ ! -e "$tmp/write$i.rc" ]; then
      result="timeout $limit"
    elif [ "$(cat "$tmp/write$i.rc")" = 0 ]; then
      result=ok
    else
      line=$(grep -m 1 'dd:' "$tmp/write$i.err")
      case $line in
        *"failed to open"*) step=create ;;
        *fsync* | *fdatasync*) step=fsync ;;
        *writing*) step="write" ;;
        *closing*) step=close ;;
        *) step="dd" ;;
      esac
      result="$step: ${line##*: }"
      [ -n "$line" ] || result="dd: exit $(cat "$tmp/write$i.rc")"
    fi
    echo "write_test=${what%%;*};$result;${what#*;}"
  done
}

# WHAT PATH: starts probe_writes' test of PATH, number n.
write_start() {
  n=$((n + 1))
  nearest_folder "$2"
  d=$near
  echo "$1;$d;$2" >"$tmp/write$n.what"
  (
    f="$d/.dtrain-probe-write.$$.$n"
    dd if=/dev/zero of="$f" bs=65536 count=1 conv=fsync >/dev/null 2>"$tmp/write$n.err"
    echo $? >"$tmp/write$n.rc.part" && mv "$tmp/write$n.rc.part" "$tmp/write$n.rc"
    rm -f "$f"
  ) </dev/null >/dev/null 2>&1 &
}

# Milliseconds since the epoch (whole seconds where date has no %N).
now_ms() {
  t=$(date +%s%N 2>/dev/null)
  case $t in
    *N* | "") echo $(($(date +%s) * 1000)) ;;
    *) echo $((t / 1000000)) ;;
  esac
}

skipping() {
  case " $DTRAIN_PROBE_SKIP " in *" $1 "*) return 0 ;; esac
  return 1
}

probe_system() {
  echo "hostname=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"
  if [ -r /etc/os-release ]; then
    (. /etc/os-release && echo "os=${PRETTY_NAME:-$NAME $VERSION_ID}")
  else
    echo "os=$(uname -s)"
  fi
  echo "kernel=$(uname -r)"
  echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
  while read -r key value _; do
    case $key in
      MemTotal:) echo "mem_kib=$value" ;;
      SwapTotal:) echo "swap_kib=$value" ;;
    esac
  done </proc/meminfo
  wd=${DTRAIN_PROBE_WORKDIR:-$HOME}
  echo "workdir=$wd"
  if [ -d "$wd" ]; then
    echo "workdir_exists=yes"
    # shellcheck disable=SC2046
    set -- $(df -Pk "$wd" 2>/dev/null | tail -n 1)
    [ -n "$4" ] && echo "disk_free_kib=$4"
  else
    echo "workdir_exists=no"
  fi
  echo "nofile=$(ulimit -n)"
  echo "memlock=$(ulimit -l)"
}

# Runs "$@" with a time limit when coreutils' timeout exists; a command that ignores SIGTERM gets
# SIGKILL a second later (-k, where this timeout has it). Exit status 124 or 137: timed out.
limited() {
  secs=$1
  shift
  # shellcheck disable=SC2086
  if command -v timeout >/dev/null 2>&1; then timeout $kill_after "$secs" "$@"; else "$@"; fi
}

# The host's side of a job: its clock source, and free space where the job writes.
probe_host() {
  cs="$sys/devices/system/clocksource/clocksource0"
  { read -r c <"$cs/current_clocksource" && echo "clocksource=$c"; } 2>/dev/null
  { read -r c <"$cs/available_clocksource" && echo "clocksources_available=$c"; } 2>/dev/null
  free_space workdir "${DTRAIN_PROBE_WORKDIR:-$HOME}"
  [ -n "$DTRAIN_PROBE_LOG_DIR" ] && free_space "log dir" "$DTRAIN_PROBE_LOG_DIR"
  free_space /tmp "${TMPDIR:-/tmp}"
  shared_memory
  memory_error_counts
  neighbour_table IPv4 arp_cache ipv4
  neighbour_table IPv6 ndisc_cache ipv6
}

# shm_kib=SIZE_KIB and shm_free_kib=FREE_KIB of /dev/shm; where 64 MiB or more of it is used,
# what no process holds there (shm_unheld=KIB;FILES;SEGMENT_KIB;SEGMENTS: all such files, then the
# libraries' segments among them, leftovers of processes killed before they removed them) and its
# 20 biggest files, each shm_file=KIB;UID;USER;MTIME;AGE_S;HELD;SEGMENT;NAME (templates/shm_segments.sh's
# dtrain_shm_files, put in front of this script). The listing reads every process's maps: with
# `shm_files` skipped (the launch's checks, whose rule needs it only then) it is made only where
# less than 512 MiB is free.
shared_memory() {
  [ -d /dev/shm ] || return 0
  # shellcheck disable=SC2046
  set -- $(df -Pk /dev/shm 2>/dev/null | tail -n 1)
  [ -n "$4" ] || return 0
  echo "shm_kib=$2"
  echo "shm_free_kib=$4"
  [ $(($2 - $4)) -ge 65536 ] && command -v dtrain_shm_files >/dev/null 2>&1 || return 0
  if skipping shm_files && [ "$4" -ge 524288 ]; then return 0; fi
  dtrain_shm_files >"$tmp/shm"
  awk -F';' '$6 == "0" { k += $1; n++; if ($7 == "1") { sk += $1; sn++ } }
    END { print "shm_unheld=" k + 0 ";" n + 0 ";" sk + 0 ";" sn + 0 }' "$tmp/shm"
  sort -t';' -k1,1nr "$tmp/shm" | head -n 20 | sed 's/^/shm_file=/'
}

# EDAC's memory error counters since boot, which outlast the kernel log's ring buffer:
# edac_mc=MC;CE;UE for each memory controller, then edac_dimm=MC;DIMM;CE;UE;LABEL for each of its
# DIMMs (or ranks) with an error.
memory_error_counts() {
  for mc in "$sys"/devices/system/edac/mc/mc[0-9]*; do
    [ -r "$mc/ce_count" ] || continue
    { read -r ce <"$mc/ce_count" && read -r ue <"$mc/ue_count"; } 2>/dev/null || continue
    echo "edac_mc=${mc##*/};$ce;$ue"
    for d in "$mc"/dimm[0-9]* "$mc"/rank[0-9]*; do
      [ -r "$d/dimm_ce_count" ] || continue
      { read -r dce <"$d/dimm_ce_count" && read -r due <"$d/dimm_ue_count"; } 2>/dev/null || continue
      [ "$dce" = 0 ] && [ "$due" = 0 ] && continue
      label=""
      read -r label <"$d/dimm_label" 2>/dev/null
      echo "edac_dimm=${mc##*/};${d##*/};$dce;$due;$label"
    done
  done
}

# neigh_table=FAMILY;ENTRIES;FULLS;GC_THRESH1;GC_THRESH2;GC_THRESH3: the kernel's neighbour (ARP,
# NDISC) table, one for the whole machine (every network namespace's entries count against it):
# its entries now and how often it was full since boot (table_fulls, summed over the CPUs' lines of
# /proc/net/stat, in hex there), and its limits. Only the first network namespace has the
# statistics (a container has none: nothing is printed).
neighbour_table() {
  st=/proc/net/stat/$2
  [ -r "$st" ] || return 0
  entries="" fulls=0
  { read -r _
    while read -r e rest; do
      [ -z "$entries" ] && entries=$((0x$e))
      fulls=$((fulls + 0x${rest##* }))
    done; } <"$st" 2>/dev/null
  [ -n "$entries" ] || return 0
  family=$1 t=/proc/sys/net/$3/neigh/default
  # cat, not read: a sysctl file read a byte at a time (dash) gives its first byte only.
  # shellcheck disable=SC2046
  set -- $(cat "$t/gc_thresh1" "$t/gc_thresh2" "$t/gc_thresh3" 2>/dev/null) -1 -1 -1
  echo "neigh_table=$family;$entries;$fulls;$1;$2;$3"
}

# free_space=WHAT;FREE_KIB;MOUNT;PATH for the nearest existing folder of PATH, then
# fs_type=WHAT;TYPE: the type of the file system mounted there (/proc/self/mounts' third field:
# "ext4", "nfs4", "lustre"; the last mount on that point is the one seen), which tells a drive of
# the node's own from storage the nodes share.
free_space() {
  what=$1
  path=$2
  nearest_folder "$path"
  # shellcheck disable=SC2046
  set -- $(df -Pk "$near" 2>/dev/null | tail -n 1)
  [ -n "$4" ] || return 0
  echo "free_space=$what;$4;$6;$path"
  fs=$(awk -v m="$6" '$2 == m { t = $3 } END { print t }' /proc/self/mounts 2>/dev/null)
  [ -n "$fs" ] && echo "fs_type=$what;$fs"
  return 0
}

# Sets `near` to the nearest existing folder of PATH: itself, or the first folder above it that
# exists ("/" when none of a relative path's does). A variable, not output: no subshell to fork.
nearest_folder() {
  near=$1
  while [ -n "$near" ] && [ ! -d "$near" ]; do
    case $near in */*) near=${near%/*} ;; *) near="" ;; esac
  done
  near=${near:-/}
}

# The network interfaces (always the kernel's own, /sys/class/net and `ip`): net_if=NAME;OPERSTATE;
# ADDRESSES (comma-separated CIDRs; "?" where `ip` is missing), then net_read=1; and the variables
# naming interfaces for NCCL, Gloo and Horovod as this environment sets them: net_env=NAME;VALUE.
probe_network() {
  [ -d /sys/class/net ] || return
  have_ip=""
  if command -v ip >/dev/null 2>&1; then
    ip -o addr show 2>/dev/null >"$tmp/addrs" && have_ip=1
  fi
  for d in /sys/class/net/*; do
    [ -e "$d" ] || continue
    name=${d##*/}
    state=""
    { read -r state <"$d/operstate"; } 2>/dev/null
    addrs="?"
    if [ -n "$have_ip" ]; then
      addrs=$(awk -v n="$name" '$2 == n && ($3 == "inet" || $3 == "inet6") {
        printf "%s%s", (k++ ? "," : ""), $4 }' "$tmp/addrs")
    fi
    echo "net_if=$name;${state:-unknown};$addrs"
  done
  echo "net_read=1"
  for v in NCCL_SOCKET_IFNAME NCCL_SOCKET_FAMILY NCCL_IB_HCA GLOO_SOCKET_IFNAME HOROVOD_GLOO_IFACE; do
    eval "set_=\${$v+x} value=\${$v-}"
    [ -n "$set_" ] && printf 'net_env=%s;%s\n' "$v" "$value" | tr -d '\r' | head -n 1
  done
}

# InfiniBand and RoCE ports as sysfs shows them (with the error counters a flaky link makes grow),
# each NIC's PCIe error totals (AER: ib_aer=NIC;correctable=N;nonfatal=N;fatal=N), and whether
# GPUDirect RDMA's module is loaded.
probe_infiniband() {
  ports=0
  for port in "$sys"/class/infiniband/*/ports/*; do
    [ -d "$port" ] || continue
    dev=${port%/ports/*}
    state="" phys="" rate="" layer=""
    {
      read -r state <"$port/state"
      read -r phys <"$port/phys_state"
      read -r rate <"$port/rate"
      read -r layer <"$port/link_layer"
    } 2>/dev/null
    echo "ib_port=${dev##*/}/${port##*/};$state;$phys;$rate;$layer"
    counters=""
    for counter in symbol_error link_error_recovery link_downed port_rcv_errors \
      local_link_integrity_errors; do
      value=""
      { read -r value <"$port/counters/$counter"; } 2>/dev/null
      [ -n "$value" ] && counters="$counters;$counter=$value"
    done
    [ -n "$counters" ] && echo "ib_counters=${dev##*/}/${port##*/}$counters"
    ports=$((ports + 1))
  done
  [ "$ports" -eq 0 ] && return
  for nic in "$sys"/class/infiniband/*; do
    aer=""
    for kind in correctable nonfatal fatal; do
      [ -r "$nic/device/aer_dev_$kind" ] || continue
      total=""
      while read -r name value; do
        case $name in TOTAL_ERR_*) total=$value ;; esac
      done <"$nic/device/aer_dev_$kind"
      [ -n "$total" ] && aer="$aer;$kind=$total"
    done
    [ -n "$aer" ] && echo "ib_aer=${nic##*/}$aer"
  done
  if [ -d "$sys/module/nvidia_peermem" ]; then echo "peermem=yes"; else echo "peermem=no"; fi
}

# The PCI paths of the GPUs and InfiniBand/RoCE NICs: pci_device=KIND;NAME;ADDRESS;IOMMU;BRIDGES
# (bridges from the root port down), then pci_acs=BRIDGE;CONTROL for each of those bridges that
# has Access Control Services (CONTROL in hex, or "unreadable": reading past the first 64 bytes of
# a device's configuration space takes root).
probe_pci() {
  bridges_seen=" "
  for dev in "$sys"/bus/pci/devices/*; do
    { read -r vendor <"$dev/vendor" && read -r class <"$dev/class"; } 2>/dev/null || continue
    case "$vendor:$class" in
      0x10de:0x0300* | 0x10de:0x0302*) pci_path gpu "" "$dev" ;;
    esac
  done
  for nic in "$sys"/class/infiniband/*; do
    [ -e "$nic/device" ] && pci_path nic "${nic##*/}" "$nic/device"
  done
}

# pci_path KIND NAME DEVICE_DIR: its pci_device line and the ACS lines of bridges not seen before.
pci_path() {
  real=$(cd -P "$3" 2>/dev/null && pwd) || return 0
  iommu=""
  { read -r iommu <"$3/iommu_group/type"; } 2>/dev/null
  path="" bridges="" address=""
  old_ifs=$IFS
  IFS=/
  for part in $real; do
    IFS=$old_ifs
    [ -n "$part" ] || continue
    path="$path/$part"
    case $part in
      [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]) ;;
      *) continue ;;
    esac
    if [ -n "$address" ]; then
      bridges="$bridges${bridges:+,}$address"
      case $bridges_seen in
        *" $address "*) ;;
        *)
          bridges_seen="$bridges_seen$address "
          acs=$(acs_control "$bridge_dir/config")
          [ -n "$acs" ] && echo "pci_acs=$address;$acs"
          ;;
      esac
    fi
    address=$part
    bridge_dir=$path
  done
  IFS=$old_ifs
  echo "pci_device=$1;$2;$address;$iommu;$bridges"
}

# The ACS control word of the device whose configuration space is CONFIG: its extended
# capabilities (from offset 256, each header: ID in bits 0-15, the next one's offset in bits
# 20-31) walked to ID 0x000d, whose control register is at offset 6. Prints nothing without ACS.
acs_control() {
  od -An -v -tx1 -j256 -N3840 "$1" 2>/dev/null | awk '
    function hex(s, v, k) {
      v = 0
      for (k = 1; k <= length(s); k++) v = v * 16 + index("0123456789abcdef", substr(s, k, 1)) - 1
      return v
    }
    { for (k = 1; k <= NF; k++) b[n++] = hex($k) }
    END {
      if (n < 8) { print "unreadable"; exit }
      at = 256
      for (hops = 0; hops < 64 && at >= 256 && at + 8 <= 256 + n; hops++) {
        i = at - 256
        if (b[i] + 256 * b[i + 1] == 13) { printf "%04x\n", b[i + 6] + 256 * b[i + 7]; exit }
        at = int((b[i + 2] + 256 * b[i + 3]) / 16)
        at -= at % 4
        if (at == 0) exit
      }
    }'
}

probe_gpus() {
  if [ -r /proc/driver/nvidia/version ]; then
    echo "driver_proc=$(head -n 1 /proc/driver/nvidia/version)"
  fi
  # The driver's own list, one directory per GPU: what counts when nvidia-smi is missing.
  for info in /proc/driver/nvidia/gpus/*/information; do
    [ -r "$info" ] || continue
    while IFS=: read -r key value; do
      [ "$key" = "Model" ] && echo "gpu_proc=${value#"${value%%[![:space:]]*}"}" && break
    done <"$info"
  done
  [ -n "$smi" ] && echo "nvidia_smi=$smi"
}

find_nvidia_smi() {
  s=$(command -v nvidia-smi 2>/dev/null)
  for c in /usr/bin/nvidia-smi /usr/local/nvidia/bin/nvidia-smi /usr/local/bin/nvidia-smi \
    /opt/nvidia/bin/nvidia-smi; do
    [ -z "$s" ] && [ -x "$c" ] && s=$c
  done
  echo "$s"
}

# nvidia-smi's GPU list (gpu=) and health reports (-q, topo -m, nvlink -s, nvlink -e: the links'
# error counters), five calls at once,
# each within $smi_limit seconds: a hung driver makes nvidia-smi hang. Writes $tmp/smi.done last.
probe_nvidia_smi() {
  limited "$smi_limit" "$1" --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    >"$tmp/smi.list" 2>&1 &
  list=$!
  if ! skipping gpu_health; then
    limited "$smi_limit" "$1" -q >"$tmp/smi.q" 2>&1 &
    q=$!
    limited "$smi_limit" "$1" topo -m >"$tmp/smi.topo" 2>&1 &
    topo=$!
    limited "$smi_limit" "$1" nvlink -s >"$tmp/smi.nvlink" 2>&1 &
    nvlink=$!
    limited "$smi_limit" "$1" nvlink -e >"$tmp/smi.nvlink_errors" 2>&1 &
    nvlink_errors=$!
    nvswitch=no
    for d in /dev/nvidia-nvswitch*; do [ -e "$d" ] && nvswitch=yes; done
    echo "nvswitch=$nvswitch"
    if command -v systemctl >/dev/null 2>&1; then
      echo "fabricmanager=$(limited 3 systemctl is-active nvidia-fabricmanager 2>/dev/null |
        head -n 1)"
    fi
  fi
  wait "$list"
  smi_answer $? list gpu nvidia_smi_error
  skipping gpu_health && { : >"$tmp/smi.done"; return; }
  wait "$q"
  smi_answer $? q smi_q smi_q_error
  wait "$topo"
  smi_answer $? topo smi_topo smi_topo_error
  wait "$nvlink"
  smi_answer $? nvlink smi_nvlink smi_nvlink_error
  wait "$nvlink_errors"
  smi_answer $? nvlink_errors smi_nvlink_errors smi_nvlink_errors_error
  : >"$tmp/smi.done"
}

# STATUS PART KEY ERROR_KEY: a line KEY=... per line nvidia-smi printed (padding before -q's
# colons squeezed), smi_timeout= when it did not answer in time, else its first line as the error.
smi_answer() {
  case $1 in
    0) sed -e '/^Legend:/,$d' -e 's/[[:space:]]*: /: /' -e "s/^/$3=/" "$tmp/smi.$2" ;;
    124 | 137) echo "smi_timeout=$smi_limit" ;;
    *) echo "$4=$(head -n 1 "$tmp/smi.$2")" ;;
  esac
}

# Prints what probe_nvidia_smi found. A call stuck in the kernel (a hung driver) survives even
# SIGKILL, so its job is waited for until the time limit (and the second of -k) has passed, and no
# longer: the node is then reported with smi_timeout=.
wait_nvidia_smi() {
  deadline=$((smi_started + smi_limit + 2))
  while [ ! -e "$tmp/smi.done" ] && [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 0.05 2>/dev/null || sleep 1
  done
  if [ -e "$tmp/smi.done" ]; then
    sed -n '/^[a-z_]*=/p' "$tmp/smi"
  else
    echo "smi_timeout=$smi_limit"
  fi
}

# The Xid (GPU) and SXid (NVSwitch) lines of this boot's kernel log: dmesg, else journalctl -k
# (both need privileges on many systems: kernel.dmesg_restrict, the systemd-journal group). At
# most the first and the last 200 such lines are sent. Then the host's hardware errors
# (doctor/host_error_events.h reads them): every uncorrected memory error and fatal PCIe error up to
# 200 lines, and of the other kinds (corrected errors may flood the log) the first and the last 100.
probe_kernel_log() {
  src=""
  if limited 5 dmesg >"$tmp/kmsg" 2>"$tmp/kmsg.err" && [ -s "$tmp/kmsg" ]; then
    src=dmesg
  elif limited 5 journalctl -k -b -q --no-pager >"$tmp/kmsg" 2>>"$tmp/kmsg.err" &&
    [ -s "$tmp/kmsg" ]; then
    src=journalctl
  fi
  if [ -z "$src" ]; then
    echo "kernel_log_error=$(grep . "$tmp/kmsg.err" | head -n 2 | tr '\n' ' ')"
    return
  fi
  echo "kernel_log=$src"
  grep 'Xid (' "$tmp/kmsg" >"$tmp/xid"
  n=$(wc -l <"$tmp/xid")
  echo "xid_lines_total=$((n + 0))"
  if [ "$n" -le 400 ]; then
    sed 's/^/xid_line=/' "$tmp/xid"
  else
    head -n 200 "$tmp/xid" | sed 's/^/xid_line=/'
    tail -n 200 "$tmp/xid" | sed 's/^/xid_line=/'
  fi
  grep -E 'EDAC MC[0-9]+: ([0-9]+ )?[CU]E |Memory failure: .*recovery action for|\[Hardware Error\]: (Machine check events logged|CPU [0-9]+: Machine Check|event severity: (fatal|recoverable))|PCIe Bus Error: severity=|error, dev [^,]+, sector|nvme nvme[0-9]+: .*(timeout|controller is down|Device not ready|Removing after probe failure|reset failure)|EXT4-fs error|Remounting filesystem read-only|XFS \(.*(Shutting down filesystem|metadata I/O error|Corruption)|BTRFS (error|critical)|blocked for more than [0-9]+ seconds|soft lockup|hard LOCKUP|detected stall|temperature (is )?above threshold' \
    "$tmp/kmsg" | grep -v -E '(dev|device) (loop|sr|fd|ram|zram)[0-9]|\((loop|sr)[0-9]' >"$tmp/host"
  worst='EDAC MC[0-9]+: ([0-9]+ )?UE |Memory failure: |\(Fatal\)'
  grep -E "$worst" "$tmp/host" >"$tmp/host.worst"
  grep -v -E "$worst" "$tmp/host" >"$tmp/host.rest"
  n=$(wc -l <"$tmp/host")
  echo "host_error_lines_total=$((n + 0))"
  head -n 200 "$tmp/host.worst" | sed 's/^/host_error_line=/'
  n=$(wc -l <"$tmp/host.rest")
  if [ "$n" -le 200 ]; then
    sed 's/^/host_error_line=/' "$tmp/host.rest"
  else
    head -n 100 "$tmp/host.rest" | sed 's/^/host_error_line=/'
    tail -n 100 "$tmp/host.rest" | sed 's/^/host_error_line=/'
  fi
}

probe_cuda() {
  home=${CUDA_HOME:-$CUDA_PATH}
  if [ -z "$home" ] || [ ! -d "$home" ]; then
    home=""
    if [ -d /usr/local/cuda ]; then
      home=/usr/local/cuda
    else
      for d in /usr/local/cuda-* /opt/cuda; do [ -d "$d" ] && home=$d; done
    fi
  fi
  for d in /usr/local/cuda-*; do [ -d "$d" ] && echo "cuda_installed=$d"; done
  nvcc=""
  [ -n "$home" ] && [ -x "$home/bin/nvcc" ] && nvcc="$home/bin/nvcc"
  [ -z "$nvcc" ] && nvcc=$(command -v nvcc 2>/dev/null)
  [ -z "$home" ] && [ -z "$nvcc" ] && return
  echo "cuda_home=$home"
  if [ -n "$home" ] && [ -r "$home/version.json" ]; then
    echo "cuda_version_json=$(tr '\n\r\t' '   ' <"$home/version.json")"
  elif [ -n "$home" ] && [ -r "$home/version.txt" ]; then
    echo "cuda_version_txt=$(head -n 1 "$home/version.txt")"
  fi
  if [ -n "$nvcc" ]; then
    echo "nvcc_path=$nvcc"
    echo "nvcc=$(limited 10 "$nvcc" --version 2>&1 | grep 'release' | head -n 1)"
  fi
  CUDA_FOUND_HOME=$home
}

probe_nccl() {
  for h in "$NCCL_HOME/include/nccl.h" "$CUDA_FOUND_HOME/include/nccl.h" /usr/include/nccl.h \
    /usr/local/include/nccl.h; do
    if [ -r "$h" ]; then
      echo "nccl_h=$h"
      grep -E '^#define NCCL_(MAJOR|MINOR|PATCH|SUFFIX|VERSION_CODE)[[:space:]]' "$h" |
        while IFS= read -r line; do echo "nccl_define=$line"; done
      break
    fi
  done
  lib=""
  # The dynamic loader's order: LD_LIBRARY_PATH, then the ldconfig cache, then the toolkit.
  old_ifs=$IFS
  IFS=:
  for d in $LD_LIBRARY_PATH; do
    [ -z "$lib" ] && [ -e "$d/libnccl.so.2" ] && lib="$d/libnccl.so.2"
  done
  IFS=$old_ifs
  if [ -z "$lib" ]; then
    for ldc in /sbin/ldconfig /usr/sbin/ldconfig ldconfig; do
      if command -v "$ldc" >/dev/null 2>&1; then
        lib=$("$ldc" -p 2>/dev/null | grep 'libnccl\.so\.2 ' | head -n 1 | sed 's/.*=> //')
        break
      fi
    done
  fi
  for d in "$CUDA_FOUND_HOME/lib64" "$CUDA_FOUND_HOME/lib" /usr/lib/x86_64-linux-gnu \
    /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/local/lib; do
    [ -z "$lib" ] && [ -e "$d/libnccl.so.2" ] && lib="$d/libnccl.so.2"
  done
  [ -z "$lib" ] && return
  real=$(readlink -f "$lib" 2>/dev/null || echo "$lib")
  echo "nccl_lib=$real"
  case "$real" in
    *libnccl.so.2.*) ;;
    *) skipping nccl_lib ||
      echo "nccl_lib_string=$(grep -a -o -m 1 'NCCL version [0-9][0-9.]*[+a-z0-9.]*' "$real" |
        head -n 1)" ;;
  esac
}

find_python() {
  for p in "$DTRAIN_PROBE_PYTHON" python3 python /usr/bin/python3 /usr/local/bin/python3; do
    [ -z "$p" ] && continue
    if command -v "$p" >/dev/null 2>&1; then
      command -v "$p"
      return
    fi
    # The cluster file's python is the only one that counts when it is given.
    [ -n "$DTRAIN_PROBE_PYTHON" ] && return
  done
}

# A Python for the probe's own sockets (the rendezvous listener, the peer test), where any will
# do: a system one first, as wrappers such as pyenv's shims cost seconds, else find_python's.
find_any_python() {
  for p in /usr/bin/python3 /usr/local/bin/python3; do
    [ -x "$p" ] && echo "$p" && return
  done
  find_python
}

# One interpreter for all Python facts: Horovod imports torch anyway, so a second process would
# only import torch twice. It runs beside the rest of the probe.
probe_python() {
  echo "python=$1"
  "$1" -c '
import importlib.util, os, sys
def line(key, value):
    print("%s=%s" % (key, value), flush=True)
def why(e):
    text = str(e).splitlines()[0] if str(e) else ""
    return "%s: %s" % (type(e).__name__, text)
skip = os.environ.get("DTRAIN_PROBE_SKIP", "").split()
line("python_version", "%d.%d.%d" % sys.version_info[:3])
line("python_executable", sys.executable)
wd = os.environ.get("DTRAIN_PROBE_WORKDIR", "")
if wd:
    paths = [os.path.realpath(p) for p in sys.path[1:] if p]
    line("pythonpath_workdir", "yes" if os.path.realpath(wd) in paths else "no")
line("pythonpath", os.environ.get("PYTHONPATH", ""))
if "torch" not in skip and importlib.util.find_spec("torch") is not None:
    try:
        import torch
        line("torch", torch.__version__)
        line("torch_cuda", torch.version.cuda or "")
        try:
            line("torch_nccl", torch.cuda.nccl.version())
        except Exception:
            pass
    except Exception as e:
        line("torch_error", why(e))
spec = None if "horovod" in skip else importlib.util.find_spec("horovod")
if spec is not None:
    try:
        import horovod
        line("horovod", getattr(horovod, "__version__", "unknown"))
        root = os.path.dirname(spec.origin)
        fw = []
        for name, ext in (("torch", "mpi_lib_v2"), ("tensorflow", "mpi_lib"),
                          ("mxnet", "mpi_lib")):
            d = os.path.join(root, name)
            if os.path.isdir(d) and any(f.startswith(ext + ".") for f in os.listdir(d)):
                fw.append(name)
        line("horovod_frameworks", ",".join(fw))
        if "torch" in fw:
            import horovod.torch as hvd
            line("horovod_controllers", ",".join(
                n for n, f in (("mpi", hvd.mpi_built), ("gloo", hvd.gloo_built)) if f()))
            # The tensor operations `horovodrun --check-build` lists.
            line("horovod_ops", ",".join(
                n for n, f in (("nccl", hvd.nccl_built), ("ddl", hvd.ddl_built),
                               ("ccl", hvd.ccl_built), ("mpi", hvd.mpi_built),
                               ("gloo", hvd.gloo_built)) if f()))
    except Exception as e:
        line("horovod_error", why(e))
# py-spy where the rank probe of stall reports looks for it: beside this python, on PATH,
# ~/.local/bin.
if "py_spy" not in skip:
    import shutil, subprocess
    found = ""
    for c in (os.path.join(os.path.dirname(sys.executable), "py-spy"), shutil.which("py-spy"),
              os.path.expanduser("~/.local/bin/py-spy")):
        if c and os.access(c, os.X_OK):
            found = c
            break
    version = ""
    if found:
        try:
            words = subprocess.run([found, "--version"], capture_output=True, text=True,
                                   timeout=10).stdout.split()
            version = words[-1] if words else "unknown"
        except Exception:
            version = "unknown"
    line("py_spy", (found + " " + version) if found else "")
'
  st=$?
  # A crash while importing (a broken CUDA library can take the interpreter down with it).
  if [ $st -gt 128 ]; then
    echo "python_error=$1 was killed by signal $((st - 128)) (while importing torch or horovod?)"
  elif [ $st -ne 0 ]; then
    echo "python_error=$1 exited with status $st"
  fi
}

# dtrain_program (templates/dtrain_program.sh, sent ahead of this script): the lookup launch uses.
probe_clip() {
  clip=$(dtrain_program dtrain-clip "$DTRAIN_PROBE_CLIP_DIR") || return
  echo "clip=$clip"
  # A binary that cannot load its libraries (LibTorch) says so on stderr and exits non-zero; one
  # that does not answer in time or is killed (the OOM killer: SIGKILL) is said as such
  # (doctor/node_checks.cpp reads these words), whatever it printed first. The time tells them
  # apart: timeout(1) says 137, not 124, where it had to SIGKILL after its SIGTERM.
  t0=$(date +%s)
  if out=$(limited 20 "$clip" --version 2>&1); then
    echo "clip_version=$(printf '%s\n' "$out" | head -n 1)"
  else
    st=$?
    msg=$(printf '%s\n' "$out" | grep . | head -n 1)
    if [ $st -eq 124 ] || [ $(($(date +%s) - t0)) -ge 20 ]; then
      echo "clip_error=did not answer --version within 20 s"
    elif [ $st -gt 128 ]; then
      echo "clip_error=killed by SIG$(kill -l $((st - 128)) 2>/dev/null) (signal $((st - 128)))"
    else
      echo "clip_error=${msg:-exited with status $st}"
    fi
  fi
}

# Connects to the rendezvous listener, retrying a refused connection until it is up (the
# listener starts at the same moment as this probe), for about 4 s: every 20 ms at first, as it
# is usually up within a few tries, then every 100 ms. A timeout is tried once more: the 3 s
# include starting the connecting program, which a node busy enough can take. Prints
# rdzv=ok|refused|timeout|unreachable.
probe_rendezvous() {
  host=$DTRAIN_PROBE_RDZV_ADDR
  port=$DTRAIN_PROBE_RDZV_PORT
  [ -z "$host" ] || [ -z "$port" ] && return
  tries=0 timeouts=0
  while :; do
    result=$(rdzv_connect "$host" "$port")
    case "$result" in
      refused*) tries=$((tries + 1)) ;;
      timeout*)
        timeouts=$((timeouts + 1))
        [ "$timeouts" -ge 2 ] && result="$result, twice" && break
        continue
        ;;
      *) break ;;
    esac
    [ "$tries" -ge 48 ] && break
    if [ "$tries" -le 10 ]; then
      sleep 0.02 2>/dev/null || sleep 1
    else
      sleep 0.1 2>/dev/null || sleep 1
    fi
  done
  echo "rdzv=${result%% *}"
  case "$result" in *" "*) echo "rdzv_detail=${result#* }" ;; esac
}

# One TCP connection attempt with a 3 s limit: bash's /dev/tcp under timeout, else Python.
rdzv_connect() {
  if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then
    err=$(timeout 3 bash --norc --noprofile -c 'exec 3<>"/dev/tcp/$1/$2"' rdzv "$1" "$2" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && echo "ok" && return
    [ $rc -eq 124 ] && echo "timeout no answer within 3 s" && return
  elif [ -n "$py" ]; then
    err=$("$py" -c '
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
except socket.timeout:
    print("timeout"); sys.exit(1)
except OSError as e:
    print(e.strerror or e); sys.exit(1)
' "$1" "$2" 2>&1) && echo "ok" && return
    [ "$err" = "timeout" ] && echo "timeout no answer within 3 s" && return
  else
    echo "untested neither bash with timeout nor python on this node"
    return
  fi
  err=$(printf '%s' "$err" | tail -n 1 | sed 's/^.*: //')
  case "$err" in
    *efused*) echo "refused $err" ;;
    *) echo "unreachable $err" ;;
  esac
}

# Accepts and closes connections until the time is up. Python, as neither sh nor coreutils can
# listen; without it the rendezvous test is reported as not run.
probe_listen() {
  py=$(find_any_python)
  if [ -z "$py" ]; then
    echo "listen_error=no python on this node to listen with (set python: in the cluster file)"
    return
  fi
  exec "$py" -c '
import errno, socket, sys, time
port, deadline = int(sys.argv[1]), time.time() + float(sys.argv[2])
def bound(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((addr, port))
    return s
try:
    try:
        s = bound(socket.AF_INET6, "::")
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise
        s = bound(socket.AF_INET, "")
    s.listen(128)
except OSError as e:
    print("listen_error=port %d: %s" % (port, e.strerror or e), flush=True)
    sys.exit(0)
print("listening=%d" % port, flush=True)
s.settimeout(0.2)
while time.time() < deadline:
    try:
        s.accept()[0].close()
    except socket.timeout:
        pass
' "$DTRAIN_PROBE_RDZV_PORT" "${DTRAIN_PROBE_LISTEN_S:-30}"
}

# The peer connection test, run on every node at once after the probe: listens on the addresses
# the job's collectives use here (DTRAIN_PROBE_PEERS_LISTEN, space-separated; "*" for every
# address) at DTRAIN_PROBE_PEERS_PORT, and meanwhile connects to those of the nodes it tests
# (DTRAIN_PROBE_PEERS_TARGETS: "INDEX=ADDRESS ..."), all at once, retrying a refused or unreachable
# address for DTRAIN_PROBE_PEERS_WAIT_S seconds (the others start at about the same moment). Each
# connection says "dtrain-peers TOKEN INDEX" both ways (DTRAIN_PROBE_PEERS_TOKEN: this run's,
# DTRAIN_PROBE_PEERS_INDEX: the node's), so a connection that reaches another node or another
# program is told apart. Prints peers_listen=ADDRESS;ok|WHY, one peer=INDEX;ADDRESS;RESULT;MS;DETAIL
# per target (RESULT: ok, refused, unreachable, timeout, wrong-node: another node answered,
# no-answer: something else holds the port; MS: how long the connection that was made took, else
# how long it was tried), then peers_done=1; it ends once the DTRAIN_PROBE_PEERS_CALLERS nodes
# that test it have connected to each of its addresses, or a second after the retries' end, so
# that nobody has to stop it (a session whose process was signalled is not used again).
probe_peers() {
  py=$(find_any_python)
  if [ -z "$py" ]; then
    echo "peers_error=no python on this node to test connections with (set python: in the cluster file)"
    return
  fi
  exec "$py" -c '
import errno, os, socket, sys, threading, time
env = os.environ
port, token, me = int(env["DTRAIN_PROBE_PEERS_PORT"]), env["DTRAIN_PROBE_PEERS_TOKEN"], env["DTRAIN_PROBE_PEERS_INDEX"]
wait = float(env.get("DTRAIN_PROBE_PEERS_WAIT_S", "5"))
hello = ("dtrain-peers %s %s\n" % (token, me)).encode()
targets = [t.partition("=")[::2] for t in env.get("DTRAIN_PROBE_PEERS_TARGETS", "").split()]
started = time.time()
lock = threading.Lock()
heard = set()  # (listening address, the connecting node) of each connection from another node
heard_all = threading.Event()
def say(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
def read_line(c, limit):
    got = b""
    c.settimeout(limit)
    try:
        while not got.endswith(b"\n") and len(got) < 200:
            more = c.recv(200)
            if not more:
                break
            got += more
    except OSError:
        pass
    return got.decode("ascii", "replace").split()
def bound(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6 and addr == "::":
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((addr, port))
    s.listen(128)
    return s
def answer(c, addr):
    words = read_line(c, 2)
    try:
        c.sendall(hello)
    except OSError:
        pass
    c.close()
    if len(words) == 3 and words[0] == "dtrain-peers" and words[1] == token:
        with lock:
            heard.add((addr, words[2]))
            if len(heard) >= expected:
                heard_all.set()
def serve(s, addr):
    while True:
        try:
            c = s.accept()[0]
        except OSError:
            return
        threading.Thread(target=answer, args=(c, addr), daemon=True).start()
listening = []
for a in env.get("DTRAIN_PROBE_PEERS_LISTEN", "").split():
    try:
        if a == "*":
            try:
                s = bound(socket.AF_INET6, "::")
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise
                s = bound(socket.AF_INET, "")
        else:
            s = bound(socket.AF_INET6 if ":" in a else socket.AF_INET, a)
        listening.append((s, a))
        say("peers_listen=%s;ok" % a)
    except OSError as e:
        say("peers_listen=%s;%s" % (a, e.strerror or e))
# DTRAIN_PROBE_PEERS_CALLERS nodes connect to each address listened on (without it: the targets).
callers = env.get("DTRAIN_PROBE_PEERS_CALLERS", "")
expected = len(listening) * (int(callers) if callers.isdigit() else len({j for j, _ in targets}))
if expected == 0:
    heard_all.set()
for s, a in listening:
    threading.Thread(target=serve, args=(s, a), daemon=True).start()
def connect(j, addr):
    start = time.time()
    deadline = start + wait
    result, detail = "timeout", "no answer within %g s" % wait
    while time.time() < deadline:
        tried = time.time()
        try:
            c = socket.create_connection((addr, port), timeout=max(0.05, deadline - time.time()))
        except socket.timeout:
            result, detail = "timeout", "no answer within %g s" % wait
            break
        except OSError as e:
            result = "refused" if e.errno == errno.ECONNREFUSED else "unreachable"
            detail = e.strerror or str(e)
            time.sleep(0.05)
            continue
        try:
            c.sendall(hello)
        except OSError:
            pass
        words = read_line(c, max(0.5, deadline - time.time()))
        c.close()
        if len(words) == 3 and words[0] == "dtrain-peers" and words[1] == token:
            result, detail = ("ok", "") if words[2] == j else ("wrong-node", words[2])
        else:
            result, detail = "no-answer", "something else answers on port %d" % port
        break
    # A connection made: how long its own attempt took; none: how long it was tried.
    took = time.time() - (tried if result == "ok" else start)
    say("peer=%s;%s;%s;%.1f;%s" % (j, addr, result, took * 1000, detail))
threads = [threading.Thread(target=connect, args=t, daemon=True) for t in targets]
for t in threads:
    t.start()
for t in threads:
    t.join()
say("peers_done=1")
heard_all.wait(max(0, started + wait + 1 - time.time()))
'
}

probe_main </dev/null
