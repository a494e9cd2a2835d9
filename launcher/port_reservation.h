// A rendezvous port for a local job that no other job can be handed: dtrain binds a free port
// (SO_REUSEADDR, never listening) and holds it until a listener appears on it, i.e. until rank 0
// (torch's TCPStore, which also sets SO_REUSEADDR) has bound it, or until the job ends. While it
// is held the kernel gives it to no other bind(port 0) and no other dtrain job; a program that
// binds MASTER_PORT *without* SO_REUSEADDR would be refused while it is held, so such programs
// take --master-port instead.
#pragma once

#include <atomic>
#include <thread>

namespace dtrain {

class PortReservation {
 public:
  // Binds a free TCP port. Throws Error if the machine has none to give.
  PortReservation();
  // Stops watching and releases the port if it is still held.
  ~PortReservation();
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  int port() const { return port_; }
  // Whether the port is still held by dtrain (false once a listener took it).
  bool held() const { return fd_.load() >= 0; }

 private:
  void Watch();

  int port_ = 0;
  std::atomic<int> fd_{-1};
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

// Whether some socket on this machine (this network namespace) listens on TCP `port`, from
// /proc/net/tcp and /proc/net/tcp6.
bool SomethingListensOn(int port);

}  // namespace dtrain
