#include "launcher/this_machine.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <climits>

namespace dtrain {

std::string ThisHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

namespace {

bool IsInterfaceAddress(const std::string& address) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* it = list; it && !found; it = it->ifa_next) {
    if (!it->ifa_addr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const int family = it->ifa_addr->sa_family;
    if (family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text,
                  sizeof(text));
    } else if (family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr, text,
                  sizeof(text));
    } else {
      continue;
    }
    found = address == text;
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace

bool IsThisMachine(const std::string& address) {
  if (address == "localhost" || address == "::1" || address.rfind("127.", 0) == 0) return true;
  const std::string host = ThisHostName();
  if (!host.empty() && (address == host || address.rfind(host + ".", 0) == 0)) return true;
  return IsInterfaceAddress(address);
}

}  // namespace dtrain
