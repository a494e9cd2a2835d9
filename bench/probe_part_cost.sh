#!/usr/bin/env bash
# What one part of the doctor probe adds to a probe: the probe runs with and without PART in
# DTRAIN_PROBE_SKIP (python, clip, rdzv and the kernel log left out of both), alternately, and
# prints the median wall time of each, the difference, and the CPU seconds of all the runs each
# way. The probe reads a sysfs stand-in laid out like an 8-GPU HGX node: 4 root ports, each above
# a PCIe switch with 4 downstream ports (2 GPUs, 2 InfiniBand NICs), and 100 other devices; every
# configuration space 4,096 bytes as tests/support/pci_sysfs.h lays them out.
# PART: pci (the paths of GPUs and NICs, each bridge's ACS register; the default) or disk_write
# (the test writes where the job writes: the workdir, here $HOME, and /tmp or TMPDIR; set
# DTRAIN_PROBE_LOG_DIR to add a log dir).
# Usage: bench/probe_part_cost.sh [REPEAT] [PART]   (default 20 pci)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPEAT="${1:-20}"
PART="${2:-pci}"
WORK="$(mktemp -d /tmp/dtrain-bench-pci-XXXXXX)"; trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK/sys" <<'PYEOF'
import os, struct, sys
root = sys.argv[1]
def config(vendor, class_code, port_type, extended):
    c = bytearray(4096)
    struct.pack_into("<HHxxH", c, 0, vendor, 0x1234, 0x0010)
    struct.pack_into("<I", c, 8, class_code << 8)
    c[0x0e] = 1 if class_code >> 8 == 0x0604 else 0
    c[0x34] = 0x40
    struct.pack_into("<HH", c, 0x40, 0x0010, 0x0002 | port_type << 4)
    at = 0x100
    for i, (cap, control) in enumerate(extended):
        nxt = at + 0x48 if i + 1 < len(extended) else 0
        struct.pack_into("<I", c, at, cap | 1 << 16 | nxt << 20)
        if cap == 0x000d:
            struct.pack_into("<HH", c, at + 4, 0x005f, control)
        at = nxt
    return c
def device(path, vendor, class_code, port_type, extended, iommu="", nic=""):
    d = os.path.join(root, "devices", "pci0000:00", *path)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "config"), "wb").write(config(vendor, class_code, port_type, extended))
    open(os.path.join(d, "vendor"), "w").write("0x%04x\n" % vendor)
    open(os.path.join(d, "class"), "w").write("0x%06x\n" % class_code)
    if iommu:
        os.makedirs(os.path.join(d, "iommu_group"), exist_ok=True)
        open(os.path.join(d, "iommu_group", "type"), "w").write(iommu + "\n")
    links = os.path.join(root, "bus", "pci", "devices")
    os.makedirs(links, exist_ok=True)
    os.symlink(os.path.relpath(d, links), os.path.join(links, path[-1]))
    if nic:
        n = os.path.join(root, "class", "infiniband", nic)
        os.makedirs(n, exist_ok=True)
        os.symlink(os.path.relpath(d, n), os.path.join(n, "device"))
nics = 0
for s in range(4):
    rp = ["0000:%02x:01.0" % (0x10 + 0x20 * s)]
    up = rp + ["0000:%02x:00.0" % (0x11 + 0x20 * s)]
    device(rp, 0x8086, 0x060400, 4, [(0x0001, 0), (0x000d, 0x001d)])
    device(up, 0x10b5, 0x060400, 5, [(0x0001, 0)])
    for p in range(4):
        down = up + ["0000:%02x:%02x.0" % (0x12 + 0x20 * s, p)]
        device(down, 0x10b5, 0x060400, 6, [(0x0001, 0), (0x0019, 0), (0x000d, 0)])
        leaf = down + ["0000:%02x:00.0" % (0x13 + 0x20 * s + p)]
        if p < 2:
            device(leaf, 0x10de, 0x030200, 0, [(0x0001, 0)], "identity")
        else:
            device(leaf, 0x15b3, 0x020700, 0, [(0x0001, 0)], "identity", "mlx5_%d" % nics)
            nics += 1
for i in range(100):
    device(["0000:%02x:1f.%d" % (0x90 + i // 8, i % 8)], 0x8086, 0x088000, 0, [])
PYEOF
run() {  # SKIP -> milliseconds of one probe
  local s e
  s=$(date +%s%N)
  DTRAIN_PROBE_SYSFS="$WORK/sys" DTRAIN_PROBE_SKIP="$1" sh "$ROOT/templates/probe.sh" >"$WORK/out"
  e=$(date +%s%N)
  echo $(( (e - s) / 1000000 ))
}
cpu() {  # SKIP -> CPU seconds of REPEAT probes
  /usr/bin/env time -f '%U %S' sh -c "for i in \$(seq $REPEAT); do DTRAIN_PROBE_SYSFS='$WORK/sys' \
    DTRAIN_PROBE_SKIP='$1' sh '$ROOT/templates/probe.sh' >/dev/null; done" 2>&1 | tail -n 1 |
    awk '{printf "%.2f", $1 + $2}'
}
base="python clip rdzv kernel_log"
without=() with=()
for _ in $(seq "$REPEAT"); do
  without+=("$(run "$base $PART")")
  with+=("$(run "$base")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
a=$(median "${without[@]}"); b=$(median "${with[@]}")
case $PART in
  pci) what="$(grep -c '^pci_device=' "$WORK/out") devices, $(grep -c '^pci_acs=' "$WORK/out") ACS registers read; " ;;
  disk_write) what="$(grep '^write_test=' "$WORK/out" | cut -d';' -f1,2 | tr '\n' ' ' | sed 's/ $/; /')" ;;
  *) what="" ;;
esac
echo "probe without $PART: ${a} ms, with $PART: ${b} ms (+$((b - a)) ms; ${what}median of $REPEAT)"
echo "CPU seconds of $REPEAT probes without $PART: $(cpu "$base $PART"), with: $(cpu "$base")"
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores)"
