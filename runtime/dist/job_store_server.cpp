#include "runtime/dist/job_store_server.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>

#include "runtime/dist/c10d_compat.h"

namespace dtrain::clip {

int ServeJobStore(const std::string& host, int port) {
  // Blocked before the store's threads exist, so they inherit the mask and sigwait below is the
  // only taker: the store then ends by returning from here, its destructor closing the socket.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // waitWorkers is off (MakeTcpStore): the ranks come and go as they please.
  auto store = compat::MakeTcpStore(host, port, /*is_server=*/true, /*world_size=*/1,
                                    std::chrono::seconds(60));
  std::printf("%s %d\n", kJobStoreReadyLine, port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}

}  // namespace dtrain::clip
