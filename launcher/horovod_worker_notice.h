// The host-update notification of an elastic Horovod job, as horovodrun's elastic driver sends
// it (horovod/runner/elastic/driver.py, worker.py and common/util/network.py). Every worker of
// an elastic job starts a notification service inside hvd.elastic.run and registers it with the
// rendezvous (PUT /worker_addresses/<host>:<local rank>: base64 of a pickle of its addresses,
// interface by interface, and a secret key). When hosts join, the driver sends the round's first
// rank a HostsUpdatedRequest (the message's HMAC-SHA256 under that key, its length in 4 bytes,
// the pickle) and reads an AckResponse back the same way; the ranks then raise
// HostsUpdatedInterrupt at their next state.commit() and meet again at the rendezvous, the new
// ones with them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrain {

// What a worker registered: where its notification service listens and the key it checks.
struct HorovodWorkerService {
  std::vector<std::pair<std::string, int>> addresses;  // (IPv4 address, port), in the order given
  std::string key;
};

// horovod.runner.elastic.worker.HostUpdateResult: what changed.
constexpr int kHostsRemoved = 1;
constexpr int kHostsAdded = 2;

// The body of a worker's PUT /worker_addresses/...; throws Error saying what is wrong.
HorovodWorkerService ParseWorkerRegistration(std::string_view body);

// Tells the worker that hosts changed (HostsUpdatedRequest(timestamp, res)) and waits for its
// AckResponse, trying its addresses in turn, each for at most `timeout_s`. Returns "" once one
// acknowledged, otherwise why none did. Blocks: call it off the supervisor's loop.
std::string NotifyHostsUpdated(const HorovodWorkerService& service, int64_t timestamp, int res,
                               double timeout_s);

// The Wire framing of one message: HMAC-SHA256 of `message` under `key`, the length as a 4-byte
// little-endian int, the message.
std::string WireFrame(const std::string& key, const std::string& message);

}  // namespace dtrain
