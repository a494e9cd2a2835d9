// The writer's cost per record on the recording thread: Begin/End pairs on a few tracks, with
// the timeline closed (the no-op path) and open, in bursts that fit the queue (as a step's
// records do) and back to back (bound by the writer thread). Prints ns per record.
// Built by bench/timeline_overhead.sh with nothing but a compiler.
#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/trace/timeline.h"

namespace {

double NsPerRecord(dtrain::clip::Timeline& t, int pairs) {
  const std::string tracks[] = {"compute", "fusion buffer 0", "fusion buffer 1",
                                "text.transformer.resblocks.0.attn.in_proj_weight"};
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < pairs; ++i) {
    const std::string& track = tracks[i % 4];
    t.Begin(track, "ALLREDUCE", "\"bytes\":4194304,\"dtype\":\"float\",\"tensors\":12");
    t.End(track, "ALLREDUCE");
  }
  auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start);
  return ns.count() / (2.0 * pairs);
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/tmp/timeline-record-cost.json";
  dtrain::clip::Timeline off;
  std::printf("closed timeline: %.1f ns per record\n", NsPerRecord(off, 200000));
  dtrain::clip::Timeline on;
  on.Open(path, 0, "bench", false);
  // Bursts that fit the queue, as a training step's records do: the recording thread's cost.
  double burst_ns = 0;
  const int bursts = 10;
  for (int i = 0; i < bursts; ++i) {
    burst_ns += NsPerRecord(on, 10000) / bursts;
    on.Flush();
  }
  std::printf(
      "open timeline, bursts of 20000 records: %.1f ns per record on the recording "
      "thread\n",
      burst_ns);
  // Far more than the queue holds: the writer's own throughput sets the pace.
  std::printf("open timeline, 400000 records back to back: %.1f ns per record (writer-bound)\n",
              NsPerRecord(on, 200000));
  on.Close();
  return 0;
}
