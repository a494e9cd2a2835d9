#include "launcher/port_reservation.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "launcher/error.h"

namespace dtrain {

bool SomethingListensOn(int port) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // "  0: 00000000:1F90 00000000:0000 0A ..." : local address:port (hex), remote, state.
      std::istringstream words(line);
      std::string slot, local, remote, state;
      if (!(words >> slot >> local >> remote >> state)) continue;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;  // 0A: TCP_LISTEN
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) return true;
    }
  }
  return false;
}

PortReservation::PortReservation() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("cannot open a socket to pick a rendezvous port: ") +
                          std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("cannot find a free rendezvous port: " + why + "; pass --master-port PORT");
  }
  port_ = ntohs(addr.sin_port);
  fd_ = fd;
  watcher_ = std::thread([this] { Watch(); });
}

PortReservation::~PortReservation() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  const int fd = fd_.exchange(-1);
  if (fd >= 0) ::close(fd);
}

void PortReservation::Watch() {
  while (!stop_) {
    if (SomethingListensOn(port_)) {
      const int fd = fd_.exchange(-1);
      if (fd >= 0) ::close(fd);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace dtrain
