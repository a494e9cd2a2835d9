// The rendezvous server against horovodrun's RendezvousHandler semantics, over real sockets:
// PUT then GET, 404 for a missing key, a known scope emptied only once all its ranks DELETEd,
// an ad-hoc scope losing just the key, and 400 for a path that is not /<scope>/<key>.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "launcher/cluster_spec.h"
#include "launcher/horovod_elastic_rounds.h"
#include "launcher/horovod_gloo.h"
#include "launcher/horovod_rendezvous.h"
#include "launcher/rank_plan.h"

namespace dtrain {
namespace {

struct Reply {
  int status = 0;
  std::string body;
};

// One HTTP/1.1 request as Horovod's HTTPRequest client sends it; reads until the server closes.
Reply Send(int port, const std::string& method, const std::string& path,
           const std::string& body = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) raw.append(buf, n);
  ::close(fd);
  Reply reply;
  if (raw.rfind("HTTP/1.", 0) == 0) reply.status = std::stoi(raw.substr(9, 3));
  const size_t end = raw.find("\r\n\r\n");
  if (end != std::string::npos) reply.body = raw.substr(end + 4);
  return reply;
}

TEST(HorovodRendezvous, StoresAndReturnsBytesAndSays404Until) {
  HorovodRendezvous server("127.0.0.1", {{"global", 2}});
  EXPECT_EQ(Send(server.port(), "GET", "/global/rank_0").status, 404);
  std::string value("addr\0\x01\xff", 7);
  EXPECT_EQ(Send(server.port(), "PUT", "/global/rank_0", value).status, 200);
  const Reply got = Send(server.port(), "GET", "/global/rank_0");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, value);
  EXPECT_EQ(Send(server.port(), "GET", "/local_a/rank_0").status, 404) << "scopes are separate";
}

TEST(HorovodRendezvous, KnownScopeIsEmptiedWhenAllItsRanksFinished) {
  HorovodRendezvous server("127.0.0.1", {{"global", 2}});
  Send(server.port(), "PUT", "/global/k", "v");
  EXPECT_EQ(Send(server.port(), "DELETE", "/global/0").status, 200);
  EXPECT_EQ(Send(server.port(), "GET", "/global/k").status, 200) << "rank 1 has not finished";
  EXPECT_EQ(Send(server.port(), "DELETE", "/global/1").status, 200);
  EXPECT_EQ(Send(server.port(), "GET", "/global/k").status, 404);
}

TEST(HorovodRendezvous, AdHocScopeLosesOnlyTheNamedKey) {
  HorovodRendezvous server("127.0.0.1", {{"global", 2}});
  Send(server.port(), "PUT", "/global_ps1/a", "1");
  Send(server.port(), "PUT", "/global_ps1/b", "2");
  EXPECT_EQ(Send(server.port(), "DELETE", "/global_ps1/a").status, 200);
  EXPECT_EQ(Send(server.port(), "GET", "/global_ps1/a").status, 404);
  EXPECT_EQ(Send(server.port(), "GET", "/global_ps1/b").body, "2");
}

TEST(HorovodRendezvous, RejectsPathsThatAreNotScopeAndKey) {
  HorovodRendezvous server("127.0.0.1", {});
  EXPECT_EQ(Send(server.port(), "GET", "/onlyscope").status, 400);
  EXPECT_EQ(Send(server.port(), "PUT", "/a/b/c", "x").status, 400);
  EXPECT_EQ(Send(server.port(), "POST", "/a/b", "x").status, 501);
}

TEST(HorovodRendezvous, ScopeSizesFollowThePlan) {
  ClusterSpec spec;
  spec.nodes = {{"a", "a", 2, {}, {}}, {"b", "b", 1, {}, {}}};
  const RankPlan plan = MakeRankPlan(spec, {});
  const std::map<std::string, int> want = {
      {"global", 3}, {"local_a", 2}, {"local_b", 1}, {"cross_0", 2}, {"cross_1", 1}};
  EXPECT_EQ(HorovodScopeSizes(plan), want);
}

TEST(HorovodGloo, InterfaceComesFromIpRouteGet) {
  EXPECT_EQ(RouteInterface("10.231.0.11 dev eth0 src 10.231.0.10 uid 0 \\    cache \n"), "eth0");
  EXPECT_EQ(RouteInterface("local 127.0.0.1 dev lo table local src 127.0.0.1 uid 0\n"), "lo");
  EXPECT_EQ(RouteInterface("RTNETLINK answers: Network is unreachable\n"), "");
}

TEST(HorovodGloo, OnlyAnExactHorovodArgumentTurnsItOn) {
  EXPECT_TRUE(CommandAsksForHorovod({"python", "-m", "open_clip_train.main", "--horovod"}));
  EXPECT_FALSE(CommandAsksForHorovod({"python", "train_horovod.py", "--horovod-fusion=1"}));
}

TEST(HorovodGloo, EveryRankGetsTheGlooVariablesUnlessTheClusterFileSetsThem) {
  const ClusterSpec spec = ParseClusterText(
      "nodes:\n  - {host: a, address: 10.0.0.1, slots: 2}\n"
      "  - {host: b, address: 10.0.0.2, env: {HOROVOD_GLOO_IFACE: ib0}}\n"
      "job: {horovod: true}\n",
      "test");
  EXPECT_TRUE(spec.job.horovod);
  RankPlan plan = MakeRankPlan(spec, {});
  HorovodGlooNetwork net;
  net.rendezvous_addr = {{"a", "10.0.0.9"}, {"b", "10.0.1.9"}};
  net.iface = {{"a", "eth0"}, {"b", "eth1"}};
  AddHorovodGlooEnv(plan, net, 4242);
  ASSERT_EQ(plan.ranks.size(), 3u);
  for (const RankSlot& slot : plan.ranks) {
    EXPECT_EQ(slot.env.at("HOROVOD_CONTROLLER"), "gloo");
    EXPECT_EQ(slot.env.at("HOROVOD_CPU_OPERATIONS"), "gloo");
    EXPECT_EQ(slot.env.at("HOROVOD_GLOO_RENDEZVOUS_PORT"), "4242");
    EXPECT_EQ(slot.env.at("HOROVOD_GLOO_RENDEZVOUS_ADDR"), net.rendezvous_addr.at(slot.host));
  }
  EXPECT_EQ(plan.ranks[1].env.at("HOROVOD_GLOO_IFACE"), "eth0");
  EXPECT_EQ(plan.ranks[1].env.at("NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(plan.ranks[2].env.at("HOROVOD_GLOO_IFACE"), "ib0") << "the node's env wins";
}

// Without --horovod nothing asks the SSH nodes before the launch: each rank's remote command
// looks its interface up (kGlooIfaceTowards), except where the node's env names one.
TEST(HorovodGloo, SshRanksFindTheirInterfaceAtStartWithoutTheFlag) {
  const ClusterSpec spec = ParseClusterText(
      "transport: ssh\nnodes:\n  - {host: a, address: 127.0.0.1, slots: 2}\n"
      "  - {host: b, address: 127.0.0.2, env: {HOROVOD_GLOO_IFACE: ib0}}\n",
      "test");
  const HorovodGlooNetwork net = FindHorovodGlooNetwork(spec, false);
  const std::map<std::string, std::string> towards = {{"a", "127.0.0.2"}, {"b", "127.0.0.1"}};
  EXPECT_EQ(net.iface_towards, towards);
  RankPlan plan = MakeRankPlan(spec, {});
  AddHorovodGlooEnv(plan, net, 4242, false);
  ASSERT_EQ(plan.ranks.size(), 3u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(plan.ranks[r].env.at(kGlooIfaceTowards), "127.0.0.2");
    EXPECT_EQ(plan.ranks[r].env.count("HOROVOD_GLOO_IFACE"), 0u);
  }
  EXPECT_EQ(plan.ranks[2].env.count(kGlooIfaceTowards), 0u);
  EXPECT_EQ(plan.ranks[2].env.at("HOROVOD_GLOO_IFACE"), "ib0");
  EXPECT_EQ(plan.ranks[0].env.count("NCCL_SOCKET_IFNAME"), 0u);
  // A local job: loopback, nothing to look up.
  const HorovodGlooNetwork local =
      FindHorovodGlooNetwork(ParseClusterText("nodes:\n  - {host: localhost}\n", "t"), false);
  EXPECT_TRUE(local.iface_towards.empty());
}

// An elastic job's GET /rank_and_size/<key> waits, over a real socket, until every rank of the
// round asked or ended; the new round then starts with an empty store sized for it.
TEST(HorovodRendezvous, ElasticRankAndSizeWaitsForTheRoundAndTheStoreStartsAfresh) {
  const ClusterSpec spec = ParseClusterText(
      "transport: ssh\nnodes:\n  - {host: a, address: 127.0.0.1}\n"
      "  - {host: b, address: 127.0.0.2}\n",
      "test");
  const RankPlan plan = MakeRankPlan(spec, {});
  HorovodElasticRounds rounds(plan, 1, -1);
  HorovodRendezvous server("127.0.0.1", HorovodScopeSizes(plan), &rounds);
  const std::string a = plan.ranks[0].env.at("HOROVOD_HOSTNAME") + ":0";
  ASSERT_EQ(Send(server.port(), "PUT", "/global/rank_0", "old round").status, 200);
  std::future<Reply> asked = std::async(
      std::launch::async, [&] { return Send(server.port(), "GET", "/rank_and_size/" + a); });
  EXPECT_EQ(asked.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "rank 1 has neither asked nor ended";
  server.RankEnded(1, false);
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Reply reply = asked.get();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "0,1,0,1,0,1");
  EXPECT_EQ(Send(server.port(), "GET", "/global/rank_0").status, 404) << "a new round's store";
  // The new round's global scope has one rank: its DELETE empties it.
  ASSERT_EQ(Send(server.port(), "PUT", "/global/rank_0", "new").status, 200);
  ASSERT_EQ(Send(server.port(), "DELETE", "/global/0").status, 200);
  EXPECT_EQ(Send(server.port(), "GET", "/global/rank_0").status, 404);
  // A key that is no rank of the job is told at once that it is out.
  EXPECT_EQ(Send(server.port(), "GET", "/rank_and_size/nowhere:0").body, "-1,-1,-1,-1,-1,-1");
}

}  // namespace
}  // namespace dtrain
