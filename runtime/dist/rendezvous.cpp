#include "runtime/dist/rendezvous.h"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dist/c10d_compat.h"

namespace dtrain::clip {
namespace {

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<uint8_t> Bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

std::string Where(const DistEnv& env) {
  return env.master_addr + ":" + std::to_string(env.master_port);
}

std::string ArrivalKey(int rank) {
  return "dtrain/arrived/" + std::to_string(rank);
}

// Ranks whose arrival key is absent; empty when everyone is here.
std::vector<int> MissingRanks(c10d::Store& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    if (!store.check({ArrivalKey(r)})) missing.push_back(r);
  }
  return missing;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

// The launcher hosts the store (dtrain launch's `dtrain-clip store`, as torchrun's agent hosts
// it): every rank, rank 0 included, is then a client, and no rank's exit takes it from the others.
// (LibTorch's TCPStore, told to host, would try to bind, log the failure and become a client.)
bool LauncherHostsStore() {
  const char* value = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return value != nullptr && std::string(value) == "True";
}

c10::intrusive_ptr<c10d::Store> ConnectStore(const DistEnv& env,
                                             std::chrono::milliseconds timeout) {
  const bool launcher_hosts = LauncherHostsStore();
  try {
    return compat::MakeTcpStore(env.master_addr, env.master_port,
                                env.rank == 0 && !launcher_hosts, env.world_size, timeout);
  } catch (const std::exception& e) {
    std::string what =
        launcher_hosts ? "rank " + std::to_string(env.rank) +
                             " could not reach the job's store (hosted by the launcher) at " +
                             Where(env) + " within " + std::to_string(timeout.count() / 1000) +
                             " s (check that MASTER_ADDR is reachable from this node)"
        : env.rank == 0 ? "rank 0 could not host the rendezvous store on " + Where(env) +
                              " (is the port in use? set MASTER_PORT)"
                        : "rank " + std::to_string(env.rank) +
                              " could not reach rank 0's rendezvous store at " + Where(env) +
                              " within " + std::to_string(timeout.count() / 1000) +
                              " s: missing ranks: 0 (check that rank 0 started and that "
                              "MASTER_ADDR is reachable from this node)";
    throw std::runtime_error(what + ": " + e.what());
  }
}

}  // namespace

Rendezvous MeetAllRanks(const DistEnv& env, std::chrono::milliseconds timeout) {
  Rendezvous result;
  // Rank 0 hosts the store: it gives up a little later so the others can still ask it who is
  // missing and say so themselves.
  auto grace = env.rank == 0 ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(0);
  // The others may start up to a whole timeout before rank 0 (which then still waits a whole
  // timeout for them): they keep trying to connect for twice as long, so a slow rank-0 start is
  // not reported as a missing rank 0. Their wait for the other ranks starts once connected.
  result.store = ConnectStore(env, env.rank == 0 ? timeout : 2 * timeout);
  auto deadline = std::chrono::steady_clock::now() + timeout + grace;
  result.store->setTimeout(timeout);
  result.store->set(ArrivalKey(env.rank), Bytes(std::to_string(NowMicros())));
  std::vector<int> missing = MissingRanks(*result.store, env.world_size);
  while (!missing.empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(
          "rendezvous at " + Where(env) + " timed out after " +
          std::to_string(timeout.count() / 1000) + " s on rank " + std::to_string(env.rank) +
          ": missing ranks: " + RankList(missing) + " of " + std::to_string(env.world_size) +
          " (they never reached the store: check their logs, WORLD_SIZE and MASTER_ADDR)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      missing = MissingRanks(*result.store, env.world_size);
    } catch (const std::exception& e) {
      throw std::runtime_error("rendezvous at " + Where(env) + ": rank " +
                               std::to_string(env.rank) +
                               " lost rank 0's store while waiting (did rank 0 exit? see its "
                               "log): " +
                               e.what());
    }
  }
  return result;
}

void MeasureClockOffset(c10d::Store& store, const DistEnv& env, int trips, Rendezvous& result) {
  auto key = [](const char* what, int rank, int trip) {
    return std::string("dtrain/clock/") + what + "/" + std::to_string(rank) + "/" +
           std::to_string(trip);
  };
  if (env.rank == 0) {
    for (int r = 1; r < env.world_size; ++r) {
      for (int i = 0; i < trips; ++i) {
        store.wait({key("ping", r, i)});
        store.set(key("pong", r, i), Bytes(std::to_string(NowMicros())));
      }
    }
    return;
  }
  int64_t best_trip = -1;
  for (int i = 0; i < trips; ++i) {
    int64_t sent = NowMicros();
    store.set(key("ping", env.rank, i), Bytes("1"));
    std::vector<uint8_t> reply = store.get(key("pong", env.rank, i));
    int64_t received = NowMicros();
    int64_t rank0_time = std::stoll(std::string(reply.begin(), reply.end()));
    int64_t trip = received - sent;
    if (best_trip < 0 || trip < best_trip) {
      best_trip = trip;
      result.clock_offset_us = rank0_time - (sent + received) / 2;
    }
  }
  result.clock_round_trip_us = best_trip;
}

}  // namespace dtrain::clip
