// What serving Horovod's rendezvous costs a job that never uses it (dtrain launch serves it to
// every job): the time to start and stop one HorovodRendezvous (done once per attempt), and the
// threads and resident memory it holds while the job runs. Built and run by
// bench/horovod_rendezvous_cost.sh with nothing but a compiler.
#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "launcher/horovod_rendezvous.h"

namespace {

int Threads() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

long RssKiB() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::map<std::string, int> scopes = {{"global", 8}, {"local_localhost", 8}};
  {  // warm-up: the first one pays for page faults of code and the allocator
    dtrain::HorovodRendezvous warm("127.0.0.1", scopes);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) dtrain::HorovodRendezvous r("127.0.0.1", scopes);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      rounds;
  const int threads_before = Threads();
  const long rss_before = RssKiB();
  auto held = std::make_unique<dtrain::HorovodRendezvous>("127.0.0.1", scopes);
  const int threads_with = Threads();
  const long rss_with = RssKiB();
  held.reset();
  std::printf("start+stop: %.0f us per rendezvous (mean of %d)\n", us, rounds);
  std::printf("while served: +%d thread(s), +%ld KiB resident (%ld -> %ld KiB)\n",
              threads_with - threads_before, rss_with - rss_before, rss_before, rss_with);
  return 0;
}
