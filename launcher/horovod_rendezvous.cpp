// One io_context on one thread: every connection reads one request (headers, then
// Content-Length bytes), answers it HTTP/1.0-style (Content-Length, then close) as Python's
// BaseHTTPRequestHandler does, and is cut off after kRequestTimeout.
#include "launcher/horovod_rendezvous.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <istream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <boost/asio.hpp>

#include "launcher/error.h"
#include "launcher/horovod_elastic_rounds.h"
#include "launcher/rank_plan.h"

namespace dtrain {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxBodyBytes = 64 * 1024 * 1024;
constexpr size_t kMaxStoredBytes = 512 * 1024 * 1024;
constexpr int kMaxConnections = 1024;
constexpr auto kRequestTimeout = std::chrono::seconds(10);
// How long a rank's question for its next round is held at least (HOROVOD_ELASTIC_TIMEOUT's
// default); longer when the ranks may wait longer for nodes.
constexpr auto kElasticWait = std::chrono::seconds(600);

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 501:
      return "Not Implemented";
    case 507:
      return "Insufficient Storage";
  }
  return "Error";
}

}  // namespace

std::map<std::string, int> HorovodScopeSizes(const RankPlan& plan) {
  std::map<std::string, int> sizes;
  for (const RankSlot& slot : plan.ranks) {
    sizes["global"] = plan.world_size;
    sizes["local_" + slot.env.at("HOROVOD_HOSTNAME")] = slot.local_world_size;
    sizes["cross_" + std::to_string(slot.local_rank)] =
        std::stoi(slot.env.at("HOROVOD_CROSS_SIZE"));
  }
  return sizes;
}

struct HorovodRendezvous::Server {
  // The store, touched only on the io thread; declared first so that it outlives the
  // connections the io_context still holds while it is destroyed.
  int open_connections = 0;
  std::map<std::string, std::map<std::string, std::string>> scopes;
  size_t stored_bytes = 0;
  std::map<std::string, int> scope_sizes;
  std::map<std::string, std::vector<std::string>> finished;  // scope -> ranks that DELETEd
  HorovodElasticRounds* elastic = nullptr;
  int elastic_round = 1;
  // PUT /worker_addresses/<key>: what each worker registered, or why it cannot be read.
  mutable std::mutex workers_mu;
  std::map<std::string, HorovodWorkerService> workers;
  std::map<std::string, std::string> unreadable_workers;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  struct Connection;
  std::vector<std::shared_ptr<Connection>> waiting;  // asked for their next round: not answered

  struct Connection : std::enable_shared_from_this<Connection> {
    Server& server;
    tcp::socket socket;
    asio::steady_timer deadline;
    asio::streambuf head{kMaxHeaderBytes};
    std::string method, path, body, reply;
    std::string round_key;  // GET /rank_and_size/<key>: whose next round it waits for
    size_t content_length = 0;

    Connection(Server& s, tcp::socket sock) : server(s), socket(std::move(sock)), deadline(s.io) {
      ++server.open_connections;
    }
    ~Connection() { --server.open_connections; }

    void Begin() {
      auto self = shared_from_this();
      deadline.expires_after(kRequestTimeout);
      deadline.async_wait([self](boost::system::error_code ec) {
        if (!ec) self->socket.close();
      });
      asio::async_read_until(socket, head, "\r\n\r\n",
                             [self](boost::system::error_code ec, size_t n) {
                               if (ec) return self->Answer(ec == asio::error::not_found ? 400 : 0);
                               self->ParseHead(n);
                             });
    }

    void ParseHead(size_t head_bytes) {
      std::string text(asio::buffers_begin(head.data()),
                       asio::buffers_begin(head.data()) + head_bytes);
      head.consume(head_bytes);
      std::istringstream in(text);
      std::string version, line;
      in >> method >> path >> version;
      std::getline(in, line);
      while (std::getline(in, line) && line != "\r") {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (name == "content-length") {
          try {
            content_length = std::stoull(line.substr(colon + 1));
          } catch (const std::exception&) {
            return Answer(400);
          }
        }
      }
      if (method.empty() || path.empty()) return Answer(400);
      if (content_length > kMaxBodyBytes) return Answer(413);
      // Whatever of the body came with the headers is in `head` already.
      const size_t have = std::min(head.size(), content_length);
      body.assign(asio::buffers_begin(head.data()), asio::buffers_begin(head.data()) + have);
      head.consume(have);
      if (body.size() == content_length) return Handle();
      body.resize(content_length);
      auto self = shared_from_this();
      asio::async_read(socket, asio::buffer(&body[have], content_length - have),
                       [self](boost::system::error_code ec, size_t) {
                         if (ec) return self->Answer(0);
                         self->Handle();
                       });
    }

    void Handle() {
      // http_server.py: `_, scope, key = self.path.split('/')`.
      std::vector<std::string> parts;
      for (size_t start = 0;;) {
        const size_t slash = path.find('/', start);
        parts.push_back(path.substr(start, slash - start));
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
      if (parts.size() != 3 || !parts[0].empty()) return Answer(400);
      const std::string& scope = parts[1];
      const std::string& key = parts[2];
      if (server.elastic && method == "GET" && scope == "rank_and_size") {
        if (!server.elastic->Ready(key)) return Answer(200, HorovodSlotInfo{}.Response());
        round_key = key;
        // Held at least as long as the ranks may wait for nodes (--elastic-timeout), and more.
        deadline.expires_after(std::max<std::chrono::seconds>(
            kElasticWait, server.elastic->wait() + std::chrono::seconds(60)));
        auto self = shared_from_this();
        deadline.async_wait([self](boost::system::error_code ec) {
          if (!ec) self->socket.close();
        });
        server.waiting.push_back(self);
        return server.AfterElasticChange();
      }
      if (method == "GET") {
        auto s = server.scopes.find(scope);
        if (s == server.scopes.end()) return Answer(404);
        auto k = s->second.find(key);
        if (k == s->second.end()) return Answer(404);
        return Answer(200, k->second);
      }
      if (method == "PUT" && scope == "worker_addresses") server.Register(key, body);
      if (method == "PUT") {
        std::string& value = server.scopes[scope][key];
        if (server.stored_bytes - value.size() + body.size() > kMaxStoredBytes) return Answer(507);
        server.stored_bytes = server.stored_bytes - value.size() + body.size();
        value = std::move(body);
        return Answer(200);
      }
      if (method == "DELETE") {
        server.Finish(scope, key);
        return Answer(200);
      }
      Answer(501);
    }

    // code 0: the peer is gone or too slow; just close.
    void Answer(int code, const std::string& value = "") {
      if (code == 0) {
        deadline.cancel();
        boost::system::error_code ignored;
        socket.close(ignored);
        return;
      }
      reply = fmt::format("HTTP/1.0 {} {}\r\nServer: dtrain\r\nContent-Length: {}\r\n\r\n", code,
                          Reason(code), value.size());
      reply += value;
      auto self = shared_from_this();
      asio::async_write(socket, asio::buffer(reply), [self](boost::system::error_code, size_t) {
        self->deadline.cancel();
        boost::system::error_code ignored;
        self->socket.shutdown(tcp::socket::shutdown_both, ignored);
        self->socket.close(ignored);
      });
    }
  };

  // Kept apart from the store, which a new round empties (rendezvous.py's _put_worker_addresses).
  void Register(const std::string& key, const std::string& body) {
    std::lock_guard<std::mutex> lock(workers_mu);
    try {
      workers[key] = ParseWorkerRegistration(body);
      unreadable_workers.erase(key);
    } catch (const Error& e) {
      workers.erase(key);
      unreadable_workers[key] = e.what();
    }
  }

  // A settled round starts with an empty store sized for it (RendezvousServer.init); then every
  // rank whose answer is known gets it.
  void AfterElasticChange() {
    if (const int round = elastic->round(); round != elastic_round) {
      elastic_round = round;
      scopes.clear();
      finished.clear();
      stored_bytes = 0;
      scope_sizes = elastic->ScopeSizes();
    }
    std::vector<std::shared_ptr<Connection>> still;
    for (auto& c : waiting) {
      if (std::optional<HorovodSlotInfo> answer = elastic->Answer(c->round_key)) {
        c->Answer(200, answer->Response());
      } else {
        still.push_back(std::move(c));
      }
    }
    waiting = std::move(still);
  }

  void Finish(const std::string& scope, const std::string& key) {
    auto known = scope_sizes.find(scope);
    if (known != scope_sizes.end()) {
      std::vector<std::string>& done = finished[scope];
      done.push_back(key);
      if (static_cast<int>(done.size()) == known->second) {
        Drop(scope);
        done.clear();
      }
      return;
    }
    auto s = scopes.find(scope);
    if (s == scopes.end()) return;
    if (auto k = s->second.find(key); k != s->second.end()) {
      stored_bytes -= k->second.size();
      s->second.erase(k);
    }
    if (s->second.empty()) scopes.erase(s);
  }

  void Drop(const std::string& scope) {
    auto s = scopes.find(scope);
    if (s == scopes.end()) return;
    for (const auto& [key, value] : s->second) stored_bytes -= value.size();
    scopes.erase(s);
  }

  void Accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        if (open_connections >= kMaxConnections) {
          boost::system::error_code ignored;
          socket.close(ignored);
        } else {
          std::make_shared<Connection>(*this, std::move(socket))->Begin();
        }
      }
      Accept();
    });
  }
};

HorovodRendezvous::HorovodRendezvous(const std::string& bind_address,
                                     std::map<std::string, int> scope_sizes,
                                     HorovodElasticRounds* elastic)
    : server_(std::make_unique<Server>()) {
  server_->scope_sizes = std::move(scope_sizes);
  server_->elastic = elastic;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(bind_address, ec);
  if (ec)
    throw Error(fmt::format("Horovod rendezvous: bad address {}: {}", bind_address, ec.message()));
  const tcp::endpoint endpoint(address, 0);
  server_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) server_->acceptor.bind(endpoint, ec);
  if (!ec) server_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(
        fmt::format("Horovod rendezvous: cannot listen on {}: {}", bind_address, ec.message()));
  }
  server_->Accept();
  server_->thread = std::thread([s = server_.get()] { s->io.run(); });
}

HorovodRendezvous::~HorovodRendezvous() {
  server_->io.stop();
  if (server_->thread.joinable()) server_->thread.join();
}

int HorovodRendezvous::port() const {
  return server_->acceptor.local_endpoint().port();
}

void HorovodRendezvous::RankEnded(int rank, bool ok) {
  if (!server_->elastic) return;
  server_->elastic->Ended(rank, ok);  // at once: the caller reads the verdict next
  asio::post(server_->io, [s = server_.get()] { s->AfterElasticChange(); });
}

void HorovodRendezvous::ElasticChanged() {
  if (!server_->elastic) return;
  asio::post(server_->io, [s = server_.get()] { s->AfterElasticChange(); });
}

HorovodElasticRounds* HorovodRendezvous::elastic() const {
  return server_->elastic;
}

std::optional<HorovodWorkerService> HorovodRendezvous::Worker(const std::string& key,
                                                              std::string& why) const {
  std::lock_guard<std::mutex> lock(server_->workers_mu);
  if (auto w = server_->workers.find(key); w != server_->workers.end()) return w->second;
  auto bad = server_->unreadable_workers.find(key);
  why = bad != server_->unreadable_workers.end()
            ? "its registration: " + bad->second
            : "it registered no notification service (hvd.elastic.run starts one)";
  return std::nullopt;
}

}  // namespace dtrain
