// HorovodRendezvous: the HTTP key-value store horovodrun runs for Horovod's Gloo controller
// (horovod/runner/http/http_server.py, RendezvousHandler), served from the launching process.
// Ranks PUT/GET /<scope>/<key> (404 until a key exists) and DELETE /<scope>/<rank> when done;
// a scope of known size ("global", "local_<host>", "cross_<local rank>") is emptied once all
// its ranks said so, any other scope loses the key. Bounded: request size, body size, stored
// bytes, open connections and time per request; stops with the object.
// For an elastic job (horovod_elastic_rounds.h) it also answers GET /rank_and_size/<key>, held
// until the rank's round is settled, and starts every new round with an empty store sized for it.
// What each elastic worker registers for its host-update notifications (PUT /worker_addresses/
// <key>, horovod_worker_notice.h) is kept across rounds, as horovodrun's driver keeps it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "launcher/horovod_worker_notice.h"

namespace dtrain {

struct RankPlan;
class HorovodElasticRounds;

// Scope -> number of ranks in it, as horovodrun's RendezvousHTTPServer.init(host_alloc_plan).
std::map<std::string, int> HorovodScopeSizes(const RankPlan& plan);

class HorovodRendezvous {
 public:
  // Listens on bind_address (e.g. "127.0.0.1", "0.0.0.0") at a free port, serving on its own
  // thread. Throws Error when it cannot listen.
  // `elastic`, when set, must outlive the object.
  HorovodRendezvous(const std::string& bind_address, std::map<std::string, int> scope_sizes,
                    HorovodElasticRounds* elastic = nullptr);
  ~HorovodRendezvous();  // closes the listener and every connection, joins the thread
  HorovodRendezvous(const HorovodRendezvous&) = delete;
  HorovodRendezvous& operator=(const HorovodRendezvous&) = delete;

  int port() const;

  // An elastic job's rank (dtrain's number) ended; answers whoever waited on its round.
  void RankEnded(int rank, bool ok);
  // The rounds changed outside the rendezvous (a node joined while the ranks waited for nodes,
  // or their wait ran out): answers whoever's answer is now known.
  void ElasticChanged();
  HorovodElasticRounds* elastic() const;
  // What the worker `key` ("<machine>:<local rank>") registered; nullopt with `why` set when it
  // registered nothing (yet) or something dtrain cannot read.
  std::optional<HorovodWorkerService> Worker(const std::string& key, std::string& why) const;

  struct Server;  // the Asio side, in horovod_rendezvous.cpp

 private:
  std::unique_ptr<Server> server_;
};

}  // namespace dtrain
