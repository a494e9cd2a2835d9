// ssh_config(5) reading and merging (launcher/ssh/ssh_config.cpp), sync ignore rules and the tar
// stream, run locally: the namespace tests (ssh_real_cluster_test) show them working end to end.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh/sync_ignore.h"
#include "launcher/ssh/tar_stream.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::string Scratch(const std::string& name) {
  const std::string dir = std::string(DTRAIN_BINARY_DIR) + "/sshconf-unit/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(SshConfig, FirstValueWinsPatternsNegationIncludeAndTokens) {
  const std::string dir = Scratch("config");
  std::ofstream(dir + "/extra") << "Host gpu-*\n  Port 2201\n";
  std::ofstream(dir + "/config")
      << "# comment\nHost gpu-* !gpu-x\n  HostName %h.lab\n  User=alice\n  IdentityFile ~/a\n"
      << "Include " << dir << "/extra\n"
      << "Host gpu-a\n  User bob\n  IdentityFile \"/keys/b c\"\n  IdentitiesOnly yes\n"
      << "Host *\n  ConnectTimeout 7\n  StrictHostKeyChecking accept-new\n  ProxyJump jump\n"
      << "  UserKnownHostsFile /kh/%h\n";
  const SshHostSettings a = ReadSshConfig(dir + "/config", "gpu-a");
  EXPECT_EQ(a.hostname, "%h.lab");
  EXPECT_EQ(a.user, "alice");  // the first value obtained wins, as in ssh
  EXPECT_EQ(a.port, 2201);
  EXPECT_THAT(a.identity_files, ElementsAre("~/a", "/keys/b c"));
  EXPECT_EQ(a.identities_only, true);
  EXPECT_EQ(a.connect_timeout_s, 7);
  EXPECT_EQ(a.proxy_jump, "jump");
  const SshHostSettings x = ReadSshConfig(dir + "/config", "gpu-x");
  EXPECT_FALSE(x.hostname.has_value());  // negated
  EXPECT_FALSE(x.user.has_value());

  std::ofstream(dir + "/bad") << "Host *\n  Port many\n";
  EXPECT_THAT([&] { ReadSshConfig(dir + "/bad", "a"); },
              ThrowsMessage<Error>(HasSubstr(dir + "/bad:2: Port")));
}

TEST(SshConfig, MatchBlocksByHostOriginalHostUserAndNegation) {
  const std::string dir = Scratch("match");
  std::ofstream(dir + "/config")
      << "Host gpu-*\n  HostName %h.cluster.lab\n"
      << "Match host *.cluster.lab !originalhost gpu-9\n  Port 2200\n"
      << "Match originalhost gpu-9\n  Port 2209\n"
      << "Match user alice host gpu-1.cluster.lab\n  IdentityFile /keys/alice\n"
      << "Match !user alice\n  IdentityFile /keys/other\n"
      << "Match localuser no-such-local-user-here\n  ConnectTimeout 99\n"
      << "Match canonical\n  ProxyJump never\n"
      << "Match exec \"test %n = gpu-9\"\n  User nine\n"
      << "Match originalhost gpu-1 exec \"exit 3\"\n  User never\n"
      << "Match all\n  ConnectTimeout 5\n";
  // host is matched against the HostName so far, %h expanded; originalhost against the name.
  const SshHostSettings one = ReadSshConfig(dir + "/config", "gpu-1", "alice");
  EXPECT_EQ(one.port, 2200);
  EXPECT_THAT(one.identity_files, ElementsAre("/keys/alice"));
  EXPECT_EQ(one.connect_timeout_s, 5);
  EXPECT_FALSE(one.proxy_jump.has_value());  // dtrain does not canonicalise
  EXPECT_FALSE(one.user.has_value());        // neither exec holds for gpu-1
  const SshHostSettings nine = ReadSshConfig(dir + "/config", "gpu-9", "bob");
  EXPECT_EQ(nine.port, 2209);
  EXPECT_EQ(nine.user, "nine");  // Match exec ran `test gpu-9 = gpu-9`
  EXPECT_THAT(nine.identity_files, ElementsAre("/keys/other"));
  const SshHostSettings other = ReadSshConfig(dir + "/config", "login");
  EXPECT_FALSE(other.port.has_value());  // no HostName: host is the name, not *.cluster.lab

  std::ofstream(dir + "/bad") << "Match host\n  Port 1\n";
  EXPECT_THAT([&] { ReadSshConfig(dir + "/bad", "a"); },
              ThrowsMessage<Error>(HasSubstr(dir + "/bad:1: Match host needs a value")));
}

TEST(SshConfig, ClusterFileKeysWinAndJumpsResolve) {
  const std::string dir = Scratch("resolve");
  std::ofstream(dir + "/config") << "Host gpu-a\n  HostName 10.0.0.11\n  User alice\n  Port 2200\n"
                                 << "  ProxyJump carol@bastion:2222,hop2\n"
                                 << "Host bastion\n  HostName 1.2.3.4\n  User nobody\n"
                                 << "Host hop2\n  HostName 5.6.7.8\n  Port 23\n"
                                 << "Host *\n  UserKnownHostsFile /kh/%h\n  StrictHostKeyChecking no\n";
  SshOptions options;
  options.config = dir + "/config";
  NodeSpec node;
  node.host = node.address = "gpu-a";
  SshTarget t = ResolveSshTarget(node, options);
  EXPECT_EQ(t.address, "10.0.0.11");
  EXPECT_EQ(t.user, "alice");
  EXPECT_EQ(t.port, 2200);
  EXPECT_EQ(t.known_hosts, "/kh/gpu-a");
  EXPECT_EQ(t.host_key_policy, HostKeyPolicy::kAcceptNew);
  ASSERT_EQ(t.jumps.size(), 2u);
  EXPECT_EQ(t.jumps[0].address, "1.2.3.4");
  EXPECT_EQ(t.jumps[0].user, "carol");  // user@ in ProxyJump wins over the config's User
  EXPECT_EQ(t.jumps[0].port, 2222);
  EXPECT_EQ(t.jumps[1].address, "5.6.7.8");
  EXPECT_EQ(t.jumps[1].port, 23);
  EXPECT_EQ(t.Where(), "node gpu-a (10.0.0.11 via bastion, hop2)");

  options.user = "root";
  options.port = 22;
  options.port_given = true;
  options.host_key_policy_given = true;  // strict, explicitly
  options.proxy_jump = "none";
  node.address = "192.168.1.1";
  node.address_given = true;
  t = ResolveSshTarget(node, options);
  EXPECT_EQ(t.address, "192.168.1.1");
  EXPECT_EQ(t.user, "root");
  EXPECT_EQ(t.port, 22);
  EXPECT_EQ(t.host_key_policy, HostKeyPolicy::kStrict);
  EXPECT_TRUE(t.jumps.empty());

  options.config = dir + "/missing";
  EXPECT_THROW(ResolveSshTarget(node, options), Error);
  options.config = "none";
  node.address_given = false;
  node.address = node.host;
  EXPECT_EQ(ResolveSshTarget(node, options).address, "gpu-a");
}

TEST(SyncIgnore, GitignoreRules) {
  EXPECT_TRUE(GlobMatch("*.py", "a.py"));
  EXPECT_FALSE(GlobMatch("*.py", "d/a.py"));
  EXPECT_TRUE(GlobMatch("**/x", "a/b/x"));
  EXPECT_TRUE(GlobMatch("**/x", "x"));
  EXPECT_TRUE(GlobMatch("a/**", "a/b/c"));
  EXPECT_TRUE(GlobMatch("f[0-9].txt", "f3.txt"));
  EXPECT_FALSE(GlobMatch("f[0-9].txt", "fx.txt"));
  const std::string dir = Scratch("ignore");
  fs::create_directories(dir + "/sub");
  std::ofstream(dir + "/.gitignore") << "*.log\n!keep.log\n/build/\ndata/\n";
  std::ofstream(dir + "/sub/.dtrainignore") << "local.cfg\n";
  SyncIgnore ignore;
  ignore.ReadFolder(dir, "");
  ignore.ReadFolder(dir + "/sub", "sub");
  EXPECT_TRUE(ignore.Ignored("a.log", false));
  EXPECT_TRUE(ignore.Ignored("sub/b.log", false));
  EXPECT_FALSE(ignore.Ignored("keep.log", false));
  EXPECT_TRUE(ignore.Ignored("build", true));
  EXPECT_FALSE(ignore.Ignored("sub/build", true));  // anchored to the top
  EXPECT_FALSE(ignore.Ignored("data", false));      // folders only
  EXPECT_TRUE(ignore.Ignored("x/data", true));
  EXPECT_TRUE(ignore.Ignored("sub/local.cfg", false));
  EXPECT_FALSE(ignore.Ignored("local.cfg", false));
  EXPECT_TRUE(ignore.Ignored(".git", true));
}

// The stream is a tar archive GNU tar reads back byte for byte, long names included, with each
// file's SHA-256 recorded as it streamed.
TEST(TarStream, GnuTarReadsItBack) {
  const std::string dir = Scratch("tar");
  const std::string long_name = std::string(150, 'n') + "/" + std::string(120, 'f') + ".py";
  std::ofstream(dir + "/small") << "hello\n";
  std::string big(700000, 'x');
  for (size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>(i);
  std::ofstream(dir + "/big", std::ios::binary) << big;
  auto hashes = std::make_shared<ContentHashes>();
  TarStream stream({{"a/small", dir + "/small", "", 6, 1700000000, 0644, ""},
                    {long_name, dir + "/big", "", big.size(), 1700000001, 0755, ""}},
                   hashes, [] {
                     return std::vector<TarEntry>{{"last", "", "end", 3, 1, 0644, ""}};
                   });
  std::string archive;
  while (stream.Next(archive, 4096)) {
  }
  std::ofstream(dir + "/out.tar", std::ios::binary) << archive;
  fs::create_directories(dir + "/x");
  const std::string out = test::RunOutput("tar -xf " + dir + "/out.tar -C " + dir + "/x 2>&1 && echo ok");
  ASSERT_EQ(out, "ok\n");
  EXPECT_EQ(test::ReadText(dir + "/x/a/small"), "hello\n");
  EXPECT_EQ(test::ReadText(dir + "/x/" + long_name), big);
  EXPECT_EQ(test::ReadText(dir + "/x/last"), "end");
  EXPECT_EQ((*hashes)["a/small"], FileSha256(dir + "/small"));
  EXPECT_EQ((*hashes)["a/small"],
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
}

}  // namespace
}  // namespace dtrain
