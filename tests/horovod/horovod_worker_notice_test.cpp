// The host-update notification against Horovod's own worker side (Horovod 0.28.1 from
// .venv-horovod): a WorkerNotificationManager registers with dtrain's rendezvous as
// hvd.elastic.run does, and dtrain's HostsUpdatedRequest reaches its listener through Horovod's
// BasicService (HMAC-checked, unpickled by Python). The pickle reader and writer are checked
// against what Python's pickle writes and reads, and against input that is not a pickle.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "launcher/error.h"
#include "launcher/horovod_rendezvous.h"
#include "launcher/horovod_worker_notice.h"
#include "launcher/python_pickle.h"
#include "launcher/subprocess.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/shell_run.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

const std::string kSource = DTRAIN_SOURCE_DIR;
const std::string kPython = kSource + "/.venv-horovod/bin/python3";

// What `python3 -c CODE` printed (stdout and stderr), stdin from `input` when not empty.
std::string Python(const std::string& code, const std::string& dir, const std::string& input = "") {
  const std::string script = dir + "/code.py";
  testing::WriteFile(script, code);
  std::string redirect;
  if (!input.empty()) {
    testing::WriteFile(dir + "/stdin", input);
    redirect = " < '" + dir + "/stdin'";
  }
  return testing::RunShell("'" + kPython + "' '" + script + "'" + redirect).out;
}

// The bytes Python's pickle writes for `expression` with `protocol`.
std::string Pickled(const std::string& expression, int protocol, const std::string& dir) {
  const std::string hex = Python("import pickle, sys\nsys.stdout.write(pickle.dumps(" + expression +
                                     ", protocol=" + std::to_string(protocol) + ").hex())\n",
                                 dir);
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

#define REQUIRE_HOROVOD()                                                        \
  if (!fs::exists(kPython)) {                                                    \
    FAIL() << kPython << " is missing: run scripts/install-deps.sh --tests (or " \
           << "scripts/install-horovod.sh) to build Horovod into .venv-horovod"; \
  }

// A worker's registration as Horovod writes it, in every protocol that has bytes (3 to 5;
// Horovod writes the highest): a dict of lists of (address, port) tuples and a bytes key; the
// repeated address string is read back from the memo.
TEST(PythonPickle, ReadsAWorkerRegistrationInEveryProtocol) {
  REQUIRE_HOROVOD();
  const std::string dir = testing::ScratchDirs::Make("pickle-read");
  for (int protocol = 3; protocol <= 5; ++protocol) {
    const std::string bytes = Pickled(
        "(lambda a: ({'eth0': [(a, 40123), ('10.0.0.9', 40123)], 'lo': [('127.0.0.1', 40123)]}, "
        "b'k3y\\x00\\xff', a, -7, 2**40, -2**40, 1.5, None, True, False))('192.168.1.20')",
        protocol, dir);
    ASSERT_FALSE(bytes.empty());
    const PickleValue v = ReadPickle(bytes);
    ASSERT_EQ(v.kind, PickleValue::Kind::kTuple) << protocol;
    ASSERT_EQ(v.items.size(), 10u);
    const PickleValue& addresses = *v.items[0];
    ASSERT_EQ(addresses.kind, PickleValue::Kind::kDict);
    ASSERT_EQ(addresses.pairs.size(), 2u);
    EXPECT_EQ(addresses.pairs[0].first->text, "eth0");
    const PickleValue& eth0 = *addresses.pairs[0].second;
    ASSERT_EQ(eth0.items.size(), 2u);
    EXPECT_EQ(eth0.items[0]->items[0]->text, "192.168.1.20");
    EXPECT_EQ(eth0.items[0]->items[1]->integer, 40123);
    EXPECT_EQ(eth0.items[1]->items[0]->text, "10.0.0.9");
    EXPECT_EQ(addresses.pairs[1].second->items[0]->items[0]->text, "127.0.0.1");
    EXPECT_EQ(v.items[1]->kind, PickleValue::Kind::kBytes);
    EXPECT_EQ(v.items[1]->text, std::string("k3y\0\xff", 5));
    EXPECT_EQ(v.items[2]->text, "192.168.1.20");
    EXPECT_EQ(v.items[3]->integer, -7);
    EXPECT_EQ(v.items[4]->integer, int64_t{1} << 40);
    EXPECT_EQ(v.items[5]->integer, -(int64_t{1} << 40));
    EXPECT_EQ(v.items[6]->number, 1.5);
    EXPECT_EQ(v.items[7]->kind, PickleValue::Kind::kNone);
    EXPECT_EQ(v.items[8]->integer, 1);
    EXPECT_EQ(v.items[9]->integer, 0);
  }
}

// The request dtrain writes is an instance Python rebuilds without calling __init__, its
// attributes set from the state.
TEST(PythonPickle, AnObjectWrittenIsWhatPythonReadsBack) {
  REQUIRE_HOROVOD();
  const std::string dir = testing::ScratchDirs::Make("pickle-write");
  const std::string out = Python(
      "import pickle, sys\no = pickle.loads(sys.stdin.buffer.read())\n"
      "print(type(o).__module__, type(o).__name__, sorted(vars(o).items()))\n",
      dir,
      PickleObject("argparse", "Namespace", {{"timestamp", 1764633600}, {"res", 2}, {"n", -5}}));
  EXPECT_EQ(out, "argparse Namespace [('n', -5), ('res', 2), ('timestamp', 1764633600)]\n");
  const PickleValue back = ReadPickle(PickleObject("m.sub", "C", {{"a", -1}}));
  EXPECT_EQ(back.kind, PickleValue::Kind::kObject);
  EXPECT_EQ(back.text, "m.sub.C");
  ASSERT_EQ(back.pairs.size(), 1u);
  EXPECT_EQ(back.pairs[0].second->integer, -1);
}

// Whatever comes over the network that is not such a pickle is an Error naming the byte: a cut
// pickle at every length, code to run (REDUCE), a list inside itself, values nested too deep.
TEST(PythonPickle, InputThatIsNotAPickleOfDataIsAnErrorNotACrash) {
  const std::string good = PickleObject("m", "C", {{"timestamp", 12}});
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(ReadPickle(good.substr(0, n)), Error) << n;
  }
  try {
    ReadPickle(
        std::string("\x80\x02"
                    "cos\nsystem\n"
                    "X\x02\x00\x00\x00id"
                    "\x85R.",
                    23));
    ADD_FAILURE() << "REDUCE was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("opcode 0x52, which dtrain does not read at byte 21"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ReadPickle(std::string("\x80\x04]\x94h\x00"
                                      "a.",
                                      8)),
               Error);  // in itself
  std::string deep = "\x80\x04";
  for (int i = 0; i < 5000; ++i) deep += "]";
  for (int i = 0; i < 4999; ++i) deep += "a";
  deep += ".";
  EXPECT_THROW(ReadPickle(deep), Error);
  EXPECT_THROW(ReadPickle(std::string(100000, '(')), Error);
  EXPECT_THROW(ReadPickle("\x80\x09N."), Error);  // a protocol from the future
  EXPECT_THROW(ParseWorkerRegistration("not base64!"), Error);
  EXPECT_THROW(ParseWorkerRegistration("gARdlC4="), Error);  // a list, not (addresses, key)
}

// Horovod's WorkerNotificationManager, as hvd.elastic.run starts it, registers with dtrain's
// rendezvous; the notification dtrain sends reaches the listener with its timestamp and what
// changed, and one signed with another key is refused by the worker.
TEST(HorovodWorkerNotice, HorovodsWorkerHearsThatHostsWereAdded) {
  REQUIRE_HOROVOD();
  const std::string dir = testing::ScratchDirs::Make("hvd-notice");
  HorovodRendezvous rendezvous("127.0.0.1", {});
  testing::WriteFile(dir + "/worker.py", R"(import sys, time
from horovod.runner.elastic.worker import WorkerNotificationManager

class Listener:
    def on_hosts_updated(self, timestamp, res):
        print(f"hosts-updated timestamp={timestamp} res={int(res)}", flush=True)

manager = WorkerNotificationManager()
manager.init(rendezvous_addr="127.0.0.1", rendezvous_port=int(sys.argv[1]), nic="lo",
             hostname="node-x", local_rank=3)
manager.register_listener(Listener())
print("registered", flush=True)
time.sleep(60)
)");
  SubprocessOptions options;
  options.argv = {kPython, dir + "/worker.py", std::to_string(rendezvous.port())};
  options.out = options.err = Stdio::kFile;
  options.out_file = dir + "/out";
  options.err_file = dir + "/err";
  Subprocess worker;
  ASSERT_EQ(worker.Start(options), "");
  std::optional<HorovodWorkerService> service;
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!service && std::chrono::steady_clock::now() < deadline) {
    service = rendezvous.Worker("node-x:3", why);
    if (!service) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(service) << why << "\n" << testing::ReadFile(dir + "/err");
  ASSERT_FALSE(service->addresses.empty());
  EXPECT_EQ(service->addresses[0].first, "127.0.0.1");
  EXPECT_EQ(rendezvous.Worker("node-y:0", why), std::nullopt);
  EXPECT_NE(why.find("registered no notification service"), std::string::npos) << why;

  HorovodWorkerService forged = *service;
  forged.key = "not the key";
  EXPECT_NE(NotifyHostsUpdated(forged, 1764633599, kHostsAdded, 5), "");
  EXPECT_EQ(NotifyHostsUpdated(*service, 1764633600, kHostsAdded, 5), "");
  const auto heard = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string out;
  while (std::chrono::steady_clock::now() < heard) {
    out = testing::ReadFile(dir + "/out");
    if (out.find("hosts-updated") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(out, "registered\nhosts-updated timestamp=1764633600 res=2\n")
      << testing::ReadFile(dir + "/err");
}

}  // namespace
}  // namespace dtrain
