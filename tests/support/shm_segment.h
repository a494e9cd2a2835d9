// A Python program that makes a shared memory segment as a job's processes do
// (multiprocessing.shared_memory), for the tests of what processes killed outright leave in
// /dev/shm (launcher/shm_leftovers.h, the doctor's shm-leftovers check). Run as
// `python3 segment.py NAME MIB MODE [DELAY_S]`: makes the segment NAME of MIB MiB, writes every
// page, prints "made NAME", then by MODE: `kill` SIGKILLs its own process group after DELAY_S
// seconds (itself and its resource tracker, which would otherwise remove the segment when it
// died), as a group's OOM kill does; `ignore-term` sleeps through SIGTERM (ignored from its
// start), so that a launcher's stop ends it with SIGKILL after its grace period, the resource
// tracker too; `hold` sleeps, holding the segment. It sleeps 120 s at most.
#pragma once

namespace dtrain::test {

inline constexpr const char* kShmSegmentScript = R"py(import os, signal, sys, time
from multiprocessing import shared_memory
if sys.argv[3] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
size = int(sys.argv[2]) << 20
s = shared_memory.SharedMemory(name=sys.argv[1], create=True, size=size)
for i in range(0, size, 1 << 20):
    s.buf[i:i + (1 << 20)] = b"x" * (1 << 20)
print("made", s.name, flush=True)
if sys.argv[3] == "kill":
    time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0)
    os.killpg(os.getpgid(0), signal.SIGKILL)
time.sleep(120)
)py";

}  // namespace dtrain::test
