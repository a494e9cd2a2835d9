// Flaky links (doctor/link_errors.h): the counters read from the probe (each GPU's PCIe replays in
// the recorded `nvidia-smi -q`, each InfiniBand port's sysfs counters), how their growth between
// two readings is judged, and the watch that keeps each node's last reading.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/link_errors.h"
#include "tests/support/health_probes.h"

namespace dtrain {
namespace {

using test::H100Probe;
using test::HgxProbe;
using test::HgxQuery;
using test::Node;
using test::NvlinkErrors;
using test::ProbeLines;
using test::RecordedQuery;
using test::WithField;

// The probe's lines of one InfiniBand port, up, with these counters.
std::string PortLines(const std::string& counters) {
  return "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n"
         "ib_counters=mlx5_0/1" +
         counters + "\npeermem=yes\n";
}

long long ValueOf(const std::vector<LinkCounter>& counters, const std::string& link,
                  const std::string& counter) {
  for (const LinkCounter& c : counters) {
    if (c.link == link && c.counter == counter) return c.value;
  }
  return -1;
}

TEST(LinkErrors, CountersOfTheRecordedGpuAndOfInfinibandPorts) {
  // The recorded H100, healthy, has replayed once since its reset and never rolled over.
  const NodeFacts h100 = Node("h100", H100Probe());
  std::vector<LinkCounter> counters = LinkCounters(h100.health);
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(ValueOf(counters, "GPU 0 PCIe", "replays"), 1);
  EXPECT_EQ(ValueOf(counters, "GPU 0 PCIe", "replay rollovers"), 0);

  // A port's counters as the probe prints them; what is not a count is left out, as is a line
  // for a port the probe did not list.
  const std::string probe = HgxProbe();
  const NodeFacts hgx =
      Node("hgx", probe.substr(0, probe.rfind("probe_end")) +
                      PortLines(";symbol_error=12;link_downed=1;port_rcv_errors=;link_error_"
                                "recovery=x7;=3;local_link_integrity_errors=0") +
                      "ib_counters=mlx5_9/1;link_downed=4\n"
                      "ib_aer=mlx5_0;correctable=7;nonfatal=0;fatal=-1\nprobe_end=1\n");
  counters = LinkCounters(hgx.health);
  EXPECT_EQ(counters.size(), 8u * 2 + 3 + 2);
  EXPECT_EQ(ValueOf(counters, "mlx5_0 PCIe", "AER correctable"), 7);
  EXPECT_EQ(ValueOf(counters, "mlx5_0 PCIe", "AER nonfatal"), 0);
  EXPECT_EQ(ValueOf(counters, "mlx5_0 PCIe", "AER fatal"), -1);
  EXPECT_EQ(ValueOf(counters, "GPU 7 PCIe", "replays"), 1);
  EXPECT_EQ(ValueOf(counters, "mlx5_0/1", "symbol_error"), 12);
  EXPECT_EQ(ValueOf(counters, "mlx5_0/1", "link_downed"), 1);
  EXPECT_EQ(ValueOf(counters, "mlx5_0/1", "local_link_integrity_errors"), 0);
  EXPECT_EQ(ValueOf(counters, "mlx5_0/1", "port_rcv_errors"), -1);
  EXPECT_EQ(ValueOf(counters, "mlx5_0/1", "link_error_recovery"), -1);
  EXPECT_EQ(ValueOf(counters, "mlx5_9/1", "link_downed"), -1);
}

TEST(LinkErrors, RetrainingsCountAtOnceErrorsPastEightAMinute) {
  const std::vector<LinkCounter> before = {{"GPU 3 PCIe", "replays", 100},
                                           {"GPU 3 PCIe", "replay rollovers", 0},
                                           {"mlx5_0/1", "link_downed", 2},
                                           {"mlx5_0/1", "link_error_recovery", 0},
                                           {"mlx5_0/1", "symbol_error", 50}};
  auto with = [&](const std::string& link, const std::string& counter, long long value) {
    std::vector<LinkCounter> after = before;
    for (LinkCounter& c : after) {
      if (c.link == link && c.counter == counter) c.value = value;
    }
    return after;
  };
  // Unchanged: nothing.
  EXPECT_TRUE(FlakyLinks(before, before, 30).empty());
  // Retrainings and losses count at any growth, over any time.
  for (const auto& [link, counter, value] :
       std::vector<std::tuple<std::string, std::string, long long>>{
           {"GPU 3 PCIe", "replay rollovers", 1},
           {"mlx5_0/1", "link_downed", 3},
           {"mlx5_0/1", "link_error_recovery", 1}}) {
    const std::vector<LinkErrorGrowth> g = FlakyLinks(before, with(link, counter, value), 3600);
    ASSERT_EQ(g.size(), 1u) << counter;
    EXPECT_TRUE(g[0].event);
    EXPECT_EQ(g[0].grown, 1);
  }
  // Errors: more than 8 in a reading of up to a minute, more than 8 a minute over a longer one.
  EXPECT_TRUE(FlakyLinks(before, with("GPU 3 PCIe", "replays", 108), 5).empty());
  std::vector<LinkErrorGrowth> g = FlakyLinks(before, with("GPU 3 PCIe", "replays", 109), 5);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_FALSE(g[0].event);
  EXPECT_EQ(g[0].grown, 9);
  EXPECT_DOUBLE_EQ(g[0].per_minute, 108);
  EXPECT_TRUE(FlakyLinks(before, with("GPU 3 PCIe", "replays", 180), 600).empty());  // 8/min
  EXPECT_EQ(FlakyLinks(before, with("mlx5_0/1", "symbol_error", 131), 600).size(), 1u);
  // A counter that went down was reset (a GPU reset, a reboot): not judged; nor one read once.
  EXPECT_TRUE(FlakyLinks(before, with("mlx5_0/1", "link_downed", 0), 30).empty());
  std::vector<LinkCounter> more = before;
  more.push_back({"mlx5_1/1", "link_downed", 5});
  EXPECT_TRUE(FlakyLinks(before, more, 30).empty());
  EXPECT_TRUE(FlakyLinks(before, with("mlx5_0/1", "link_downed", 9), 0).empty());
}

TEST(LinkErrors, TheWatchJudgesEachNodeAgainstItsLastReadingAndReportsALinkOnce) {
  LinkErrorWatch watch;
  const NodeFacts node = Node("node1", HgxProbe());
  const std::vector<LinkCounter> first = LinkCounters(node.health);
  EXPECT_FALSE(watch.Update("node1", first, 100)) << "a first reading has nothing to compare";
  EXPECT_FALSE(watch.Update("node2", first, 100));

  // GPU 5's link replays 500 times in 30 s; node2 stays as it was.
  const NodeFacts flaky =
      Node("node1", HgxProbe(WithField(HgxQuery(), 5, "PCI", "Replays Since Reset", "501")));
  std::optional<Finding> f = watch.Update("node1", LinkCounters(flaky.health), 130);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->check, "link-errors");
  EXPECT_EQ(f->nodes, std::vector<std::string>{"node1"});
  EXPECT_EQ(f->message, "node node1: link errors grew in 30 s: GPU 5 PCIe replays +500 (1000/min)");
  EXPECT_NE(f->remedy.find("reseat or replace"), std::string::npos);
  EXPECT_FALSE(watch.Update("node2", first, 130));

  // Still growing: said once. A rollover on the same link is news.
  const std::string worse =
      WithField(WithField(HgxQuery(), 5, "PCI", "Replays Since Reset", "2000"), 5, "PCI",
                "Replay Number Rollovers", "1");
  f = watch.Update("node1", LinkCounters(Node("node1", HgxProbe(worse)).health), 160);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message,
            "node node1: link errors grew in 30 s: GPU 5 PCIe replay rollovers +1 (retrained)");
  EXPECT_FALSE(watch.Update("node1", LinkCounters(Node("node1", HgxProbe(worse)).health), 190));

  // The doctor's bandwidth test makes a retraining an error, and errors alone stay warnings.
  LinkErrorWatch doctor(Severity::kError);
  doctor.Update("node1", LinkCounters(node.health), 0);
  f = doctor.Update("node1", LinkCounters(flaky.health), 10);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kWarning);
  f = doctor.Update("node1", LinkCounters(Node("node1", HgxProbe(worse)).health), 20);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, Severity::kError);
}

// An HGX node whose `nvidia-smi nvlink -e` printed `errors`.
NodeFacts WithNvlinkErrors(const std::string& errors) {
  const std::string probe = HgxProbe();
  return Node("hgx", probe.substr(0, probe.rfind("probe_end")) +
                         ProbeLines("smi_nvlink_errors", errors) + "probe_end=1\n");
}

TEST(LinkErrors, NvlinkCountersAndDcgmsLimitsForThem) {
  const NodeFacts node = WithNvlinkErrors(
      NvlinkErrors(8, 18, {{{2, 7, "CRC Errors"}, 41}, {{7, 17, "Replay Errors"}, 3}}) +
      "\t Link 9: Rx Errors: N/A\n\t Link x: CRC Errors: 5\n");
  ASSERT_EQ(node.health.nvlink_errors.size(), 8u * 18 * 3) << "lines without a count left out";
  const std::vector<LinkCounter> counters = LinkCounters(node.health);
  EXPECT_EQ(counters.size(), 8u * 2 + 8 * 18 * 3);
  EXPECT_EQ(ValueOf(counters, "GPU 2 NVLink 7", "CRC Errors"), 41);
  EXPECT_EQ(ValueOf(counters, "GPU 7 NVLink 17", "Replay Errors"), 3);
  EXPECT_EQ(ValueOf(counters, "GPU 7 NVLink 17", "Recovery Errors"), 0);

  const std::vector<LinkCounter> before = {{"GPU 2 NVLink 7", "Replay Errors", 3},
                                           {"GPU 2 NVLink 7", "Recovery Errors", 0},
                                           {"GPU 2 NVLink 7", "CRC Errors", 1000}};
  auto grown = [&](long long replay, long long recovery, long long crc, double seconds) {
    return FlakyLinks(before,
                      {{"GPU 2 NVLink 7", "Replay Errors", 3 + replay},
                       {"GPU 2 NVLink 7", "Recovery Errors", recovery},
                       {"GPU 2 NVLink 7", "CRC Errors", 1000 + crc}},
                      seconds);
  };
  // DCGM: more than 1 replay error between two readings; CRC errors past 100 a second; a
  // recovery (the link retrained) at once.
  EXPECT_TRUE(grown(1, 0, 3000, 30).empty());
  std::vector<LinkErrorGrowth> g = grown(2, 0, 0, 30);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].counter, "Replay Errors");
  g = grown(0, 0, 3001, 30);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].counter, "CRC Errors");
  g = grown(0, 1, 0, 3600);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_TRUE(g[0].event);
  EXPECT_EQ(FlakyLinkFinding("hgx", g, 3600).message,
            "node hgx: link errors grew in 3600 s: GPU 2 NVLink 7 Recovery Errors +1 (retrained)");
}

TEST(LinkErrors, ThePortsOwnWordsForWhatGrew) {
  const std::vector<LinkCounter> before = {{"mlx5_0/1", "link_downed", 0},
                                           {"mlx5_0/1", "symbol_error", 0},
                                           {"mlx5_0 PCIe", "AER correctable", 0},
                                           {"mlx5_0 PCIe", "AER nonfatal", 0}};
  const std::vector<LinkCounter> after = {{"mlx5_0/1", "link_downed", 1},
                                          {"mlx5_0/1", "symbol_error", 240},
                                          {"mlx5_0 PCIe", "AER correctable", 16},
                                          {"mlx5_0 PCIe", "AER nonfatal", 1}};
  const Finding f = FlakyLinkFinding("node3", FlakyLinks(before, after, 120), 120);
  EXPECT_EQ(f.message,
            "node node3: link errors grew in 120 s: mlx5_0/1 link_downed +1 (went down and came "
            "back); mlx5_0/1 symbol_error +240 (120/min); mlx5_0 PCIe AER nonfatal +1 "
            "(uncorrectable)");
}

}  // namespace
}  // namespace dtrain
