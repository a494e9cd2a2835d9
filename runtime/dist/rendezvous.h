// Rendezvous: every rank meets at the job's c10d TCPStore (MASTER_ADDR:MASTER_PORT): the one
// `dtrain launch` hosts (TORCHELASTIC_USE_AGENT_STORE=True, every rank a client), else rank 0's.
// It returns only when all ranks have arrived, or throws naming the ranks that did not arrive in
// time.
#pragma once

#include <chrono>
#include <cstdint>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/dist/dist_env.h"

namespace dtrain::clip {

struct Rendezvous {
  c10::intrusive_ptr<c10d::Store> store;
  int64_t clock_offset_us = 0;      // add to this rank's clock to read rank 0's
  int64_t clock_round_trip_us = 0;  // of the best of the measuring trips (0 on rank 0)
};

// Throws std::runtime_error: "rendezvous at ADDR:PORT timed out after Ns: ranks 1, 3 of 4 did
// not arrive" (or that the store could not be reached or hosted), with what to check.
Rendezvous MeetAllRanks(const DistEnv& env, std::chrono::milliseconds timeout);

// Several round trips through the store; keeps the one with the shortest round trip (NTP's rule).
// Rank 0 answers every other rank in turn. Collective: every rank calls it.
void MeasureClockOffset(c10d::Store& store, const DistEnv& env, int trips, Rendezvous& result);

}  // namespace dtrain::clip
