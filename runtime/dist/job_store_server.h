// `dtrain-clip store`: the job's TCPStore for a dtrain-clip job, which dtrain launch hosts on
// node 0 the way it hosts a Python job's (launcher/job_store.h), so that every rank, rank 0
// included, is a client (TORCHELASTIC_USE_AGENT_STORE=True) and no rank's exit takes the store
// from the others. It is LibTorch's own TCPStore server, the same code as the ranks' client, so
// the protocol matches by construction.
#pragma once

#include <string>

namespace dtrain::clip {

// What the store prints once it listens; dtrain launch waits for this line.
inline constexpr const char* kJobStoreReadyLine = "dtrain-job-store-ready";

// Serves a TCPStore on `port` (its own client connects through `host`) until SIGTERM, SIGINT or
// SIGHUP; prints "dtrain-job-store-ready PORT" once it listens. Returns the exit code (0).
int ServeJobStore(const std::string& host, int port);

}  // namespace dtrain::clip
