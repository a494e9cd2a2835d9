// DeviceSpanRing with a fake device clock: spans come out in record order, only once their end
// event has completed, without waiting except when the ring is full; device times land on the
// host clock through the anchor, which moves along without changing the figures. (The CUDA
// events behind it on a GPU, train/cuda_event_clock.cpp, are not run here: no GPU.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "runtime/trace/device_span_ring.h"
#include "runtime/trace/timeline.h"

namespace dtrain::clip {
namespace {

// A device whose work the test enqueues (Launch) and lets run (RunUntil). An event completes
// when the device has run past the point where it was recorded.
class FakeDevice : public DeviceEventClock {
 public:
  int64_t queued_us = 1000;  // device time at which the next recorded event completes
  int64_t device_now_us = 1000;
  int64_t host_offset_us = 50'000;  // host clock = device clock + this (one clock, two origins)
  int waits = 0;
  std::map<int, int64_t> live;  // recorded, not yet released: id -> device time
  int next_id = 0;
  std::set<int> released;

  void Launch(int64_t us) { queued_us += us; }
  void RunUntil(int64_t device_us) { device_now_us = device_us; }
  void RunAll() { device_now_us = queued_us; }

  int Record() override {
    live[next_id] = queued_us;
    return next_id++;
  }
  bool Done(int event) override { return live.at(event) <= device_now_us; }
  void Wait(int event) override {
    ++waits;
    if (live.at(event) > device_now_us) device_now_us = live.at(event);
  }
  double ElapsedUs(int from, int to) override {
    EXPECT_TRUE(Done(from) && Done(to)) << "elapsed time of an unfinished event";
    return static_cast<double>(live.at(to) - live.at(from));
  }
  void Release(int event) override {
    EXPECT_EQ(live.erase(event), 1u) << "event " << event << " released twice";
  }
  int64_t HostNowUs() override { return device_now_us + host_offset_us; }
};

struct Collected {
  std::vector<DeviceSpan> spans;
  DeviceSpanRing::Sink Sink() {
    return [this](const DeviceSpan& span) { spans.push_back(span); };
  }
};

// A span of `us` device time on the compute track.
void Phase(DeviceSpanRing& ring, FakeDevice& device, const char* activity, int64_t us) {
  ring.Begin("gpu", activity);
  device.Launch(us);
  ring.End("gpu", activity);
}

TEST(DeviceSpanRing, SpansComeOutInRecordOrderOnlyWhenTheDeviceIsPastThem) {
  FakeDevice device;
  Collected out;
  DeviceSpanRing ring(device, 64, out.Sink());
  EXPECT_EQ(device.waits, 1);  // the anchor, once
  Phase(ring, device, "FORWARD", 100);
  Phase(ring, device, "BACKWARD", 200);
  Phase(ring, device, "OPTIMIZER", 30);
  EXPECT_EQ(ring.Poll(), 0u);   // the device has run nothing yet
  device.RunUntil(1000 + 150);  // FORWARD done, BACKWARD running
  EXPECT_EQ(ring.Poll(), 1u);
  device.RunAll();
  EXPECT_EQ(ring.Poll(), 2u);
  EXPECT_EQ(device.waits, 1) << "Poll must never wait for the device";
  ASSERT_EQ(out.spans.size(), 3u);
  EXPECT_STREQ(out.spans[0].activity, "FORWARD");
  EXPECT_STREQ(out.spans[1].activity, "BACKWARD");
  EXPECT_STREQ(out.spans[2].activity, "OPTIMIZER");
  // Device times on the host clock: the anchor completed at device 1000 = host 51000.
  EXPECT_EQ(out.spans[0].begin_us, 51000);
  EXPECT_EQ(out.spans[0].end_us, 51100);
  EXPECT_EQ(out.spans[1].begin_us, 51100);
  EXPECT_EQ(out.spans[1].end_us, 51300);
  EXPECT_EQ(out.spans[2].end_us, 51330);
  EXPECT_EQ(ring.forced_waits(), 0);
}

TEST(DeviceSpanRing, AnUnfinishedOrOpenSpanHoldsBackTheOnesAfterIt) {
  FakeDevice device;
  Collected out;
  DeviceSpanRing ring(device, 64, out.Sink());
  ring.Begin("gpu", "FORWARD");  // open: nothing after it may come out first
  Phase(ring, device, "DATA", 10);
  device.RunAll();
  EXPECT_EQ(ring.Poll(), 0u);
  device.Launch(40);
  ring.End("gpu", "FORWARD");
  EXPECT_EQ(ring.Poll(), 0u);  // FORWARD's end is still queued
  device.RunAll();
  EXPECT_EQ(ring.Poll(), 2u);
  ASSERT_EQ(out.spans.size(), 2u);
  EXPECT_STREQ(out.spans[0].activity, "FORWARD");
  EXPECT_EQ(out.spans[0].end_us - out.spans[0].begin_us, 50);
  EXPECT_STREQ(out.spans[1].activity, "DATA");
}

TEST(DeviceSpanRing, AFullRingWaitsForItsOldestSpanOnly) {
  FakeDevice device;
  Collected out;
  DeviceSpanRing ring(device, 2, out.Sink());
  Phase(ring, device, "FORWARD", 100);
  Phase(ring, device, "BACKWARD", 100);
  EXPECT_EQ(ring.pending(), 2u);
  Phase(ring, device, "OPTIMIZER", 100);  // full: waits for FORWARD, not for BACKWARD
  EXPECT_EQ(ring.forced_waits(), 1);
  EXPECT_EQ(device.device_now_us, 1100);
  ASSERT_EQ(out.spans.size(), 1u);
  EXPECT_STREQ(out.spans[0].activity, "FORWARD");
  device.RunUntil(1200);  // BACKWARD done meanwhile: making room needs no wait then
  Phase(ring, device, "DATA", 5);
  EXPECT_EQ(ring.forced_waits(), 1);
  EXPECT_EQ(out.spans.size(), 2u);
}

TEST(DeviceSpanRing, TheAnchorMovesAlongAndTheFiguresStay) {
  FakeDevice device;
  Collected out;
  DeviceSpanRing ring(device, 8, out.Sink(), /*reanchor_after_us=*/1000);
  for (int step = 0; step < 50; ++step) {
    Phase(ring, device, "FORWARD", 300);
    Phase(ring, device, "BACKWARD", 400);
    device.RunAll();
    ring.Poll();
  }
  ASSERT_EQ(out.spans.size(), 100u);
  for (size_t i = 0; i < out.spans.size(); ++i) {
    const int64_t begin = 51000 + static_cast<int64_t>(i / 2) * 700 + (i % 2 ? 300 : 0);
    EXPECT_EQ(out.spans[i].begin_us, begin) << i;
    EXPECT_EQ(out.spans[i].end_us, begin + (i % 2 ? 400 : 300)) << i;
  }
  // Events are handed back: only the anchor is still held.
  EXPECT_EQ(device.live.size(), 1u);
  EXPECT_EQ(device.waits, 1);
}

TEST(DeviceSpanRing, DrainWaitsForClosedSpansAndDropsOpenOnes) {
  FakeDevice device;
  Collected out;
  {
    DeviceSpanRing ring(device, 64, out.Sink());
    Phase(ring, device, "FORWARD", 100);
    ring.Begin("gpu", "BACKWARD");  // never ended (an exception mid-step)
    ring.End("gpu", "OPTIMIZER");   // never begun: ignored
  }
  ASSERT_EQ(out.spans.size(), 1u);
  EXPECT_STREQ(out.spans[0].activity, "FORWARD");
  EXPECT_TRUE(device.live.empty());
}

// What the trainer's sink does with a resolved span: written with the times it carries, not
// stamped with the time it was written.
TEST(DeviceSpanRing, ResolvedSpansKeepTheirTimesInTheTrace) {
  const std::string path =
      ::testing::TempDir() + "/device-span-ring-" + std::to_string(::getpid()) + ".json";
  Timeline timeline;
  timeline.Open(path, 0, "localhost", false);
  FakeDevice device;
  device.host_offset_us = -1000 + 7;  // the anchor lands at trace time 7 us
  {
    DeviceSpanRing ring(device, 4, [&](const DeviceSpan& span) {
      timeline.SpanAt(span.track, span.activity, span.begin_us, span.end_us);
    });
    Phase(ring, device, "FORWARD", 123456);
  }
  timeline.Close();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  EXPECT_NE(text.str().find("\"ts\": 7,"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"ts\": 123463,"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace dtrain::clip
