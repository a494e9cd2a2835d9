// One TCP connection per try, as BasicClient._send_one: write the framed request, read the
// framed reply, check its digest under the worker's key, and look for an AckResponse.
#include "launcher/horovod_worker_notice.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/python_pickle.h"

namespace dtrain {
namespace {

constexpr size_t kDigestBytes = 32;           // secret.DIGEST_LENGTH (SHA-256)
constexpr size_t kMaxReplyBytes = 1 << 20;    // an AckResponse is a few dozen bytes
constexpr size_t kMaxRegistration = 1 << 20;  // a worker's addresses and key

std::string Base64Decode(std::string_view text) {
  std::string clean;
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ') clean += c;
  }
  if (clean.size() % 4 != 0) throw Error("not base64: its length is not a multiple of 4");
  std::string out(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) throw Error("not base64");
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Hmac(const std::string& key, const std::string& message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// "" or why not.
std::string WaitFor(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int left = MillisLeft(deadline);
    if (left == 0) return "timed out";
    const int r = ::poll(&p, 1, left);
    if (r > 0) return "";
    if (r < 0 && errno != EINTR) return std::strerror(errno);
  }
}

std::string Exchange(const std::string& address, int port, const std::string& request,
                     const std::string& key, double timeout_s) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || ::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1)
    return "not an IPv4 address and port";
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd() < 0) return std::strerror(errno);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    if (errno != EINPROGRESS) return std::strerror(errno);
    if (std::string why = WaitFor(s.fd(), POLLOUT, deadline); !why.empty()) return why;
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return std::strerror(error);
  }
  for (size_t sent = 0; sent < request.size();) {
    if (std::string why = WaitFor(s.fd(), POLLOUT, deadline); !why.empty()) return why;
    const ssize_t n =
        ::send(s.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return std::strerror(errno);
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string reply;
  size_t want = kDigestBytes + 4;
  while (reply.size() < want) {
    if (std::string why = WaitFor(s.fd(), POLLIN, deadline); !why.empty()) return why;
    char buffer[4096];
    const ssize_t n = ::recv(s.fd(), buffer, std::min(sizeof buffer, want - reply.size()), 0);
    if (n == 0) return "the worker closed the connection without an answer";
    if (n < 0 && errno != EAGAIN && errno != EINTR) return std::strerror(errno);
    if (n > 0) reply.append(buffer, static_cast<size_t>(n));
    if (reply.size() == kDigestBytes + 4 && want == kDigestBytes + 4) {
      uint32_t length = 0;
      std::memcpy(&length, reply.data() + kDigestBytes, 4);  // struct.pack('i'): native order
      if (length > kMaxReplyBytes) return fmt::format("an answer of {} bytes", length);
      want += length;
    }
  }
  const std::string message = reply.substr(kDigestBytes + 4);
  if (Hmac(key, message) != reply.substr(0, kDigestBytes))
    return "the answer's digest does not match the worker's key";
  try {
    const PickleValue answer = ReadPickle(message);
    const std::string ack = "AckResponse";
    if (answer.kind != PickleValue::Kind::kObject || answer.text.size() < ack.size() ||
        answer.text.compare(answer.text.size() - ack.size(), ack.size(), ack) != 0)
      return "the worker answered " + (answer.kind == PickleValue::Kind::kObject
                                           ? answer.text
                                           : std::string("something other than an object"));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

std::string WireFrame(const std::string& key, const std::string& message) {
  std::string out = Hmac(key, message);
  const uint32_t length = static_cast<uint32_t>(message.size());
  out.append(reinterpret_cast<const char*>(&length), 4);
  return out + message;
}

HorovodWorkerService ParseWorkerRegistration(std::string_view body) {
  if (body.size() > kMaxRegistration) throw Error("a worker registration over 1 MiB");
  const PickleValue value = ReadPickle(Base64Decode(body));
  using Kind = PickleValue::Kind;
  if (value.kind != Kind::kTuple || value.items.size() != 2 ||
      value.items[0]->kind != Kind::kDict || value.items[1]->kind != Kind::kBytes)
    throw Error("not a worker registration: want (addresses, key)");
  HorovodWorkerService service;
  service.key = value.items[1]->text;
  for (const auto& [intf, list] : value.items[0]->pairs) {
    if (list->kind != Kind::kList && list->kind != Kind::kTuple)
      throw Error("not a worker registration: an interface's addresses are not a list");
    for (const auto& address : list->items) {
      if ((address->kind != Kind::kTuple && address->kind != Kind::kList) ||
          address->items.size() != 2 || address->items[0]->kind != Kind::kString ||
          address->items[1]->kind != Kind::kInt)
        throw Error("not a worker registration: an address is not (host, port)");
      service.addresses.emplace_back(address->items[0]->text,
                                     static_cast<int>(address->items[1]->integer));
    }
  }
  if (service.addresses.empty()) throw Error("a worker registration without an address");
  return service;
}

std::string NotifyHostsUpdated(const HorovodWorkerService& service, int64_t timestamp, int res,
                               double timeout_s) {
  const std::string request =
      WireFrame(service.key, PickleObject("horovod.runner.elastic.worker", "HostsUpdatedRequest",
                                          {{"timestamp", timestamp}, {"res", res}}));
  // A loopback address reaches this machine, not the worker's, unless they are one: tried last.
  std::vector<std::pair<std::string, int>> order;
  for (int loopback = 0; loopback < 2; ++loopback) {
    for (const auto& a : service.addresses) {
      if ((a.first.rfind("127.", 0) == 0) == (loopback == 1)) order.push_back(a);
    }
  }
  std::string why;
  for (const auto& [address, port] : order) {
    const std::string failed = Exchange(address, port, request, service.key, timeout_s);
    if (failed.empty()) return "";
    if (!why.empty()) why += "; ";
    why += fmt::format("{}:{}: {}", address, port, failed);
  }
  return why;
}

}  // namespace dtrain
