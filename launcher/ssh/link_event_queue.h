// LinkEventQueue: what the ssh transport's NodeLinks report (output and exits of their
// processes), queued while libssh's callbacks run and handed to TransportEvents by
// SshTransport::Poll().
#pragma once

#include <deque>
#include <string>
#include <utility>

#include "launcher/transport.h"

namespace dtrain {

struct LinkEvent {
  bool exit = false;  // false: output
  int id = 0;
  OutputStream stream = OutputStream::kStdout;
  std::string bytes;
  ExitStatus status;
};

// Output and exits, in the order they happened. Consecutive output of one process is merged.
class LinkEventQueue {
 public:
  void Output(int id, OutputStream stream, const char* data, size_t size) {
    if (!events_.empty() && !events_.back().exit && events_.back().id == id &&
        events_.back().stream == stream) {
      events_.back().bytes.append(data, size);
    } else {
      events_.push_back(LinkEvent{false, id, stream, std::string(data, size), {}});
    }
  }
  void Exit(int id, ExitStatus status) {
    events_.push_back(LinkEvent{true, id, OutputStream::kStdout, "", std::move(status)});
  }
  bool empty() const { return events_.empty(); }
  std::deque<LinkEvent> TakeAll() {
    std::deque<LinkEvent> out;
    out.swap(events_);
    return out;
  }

 private:
  std::deque<LinkEvent> events_;
};

}  // namespace dtrain
