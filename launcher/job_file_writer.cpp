// The caller's thread queues; the writer thread writes each file through ReplaceFile and says what
// the disk refused, outside the lock (stderr may be a pipe that blocks).
#include "launcher/job_file_writer.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/file_replace.h"

namespace dtrain {

using Clock = std::chrono::steady_clock;

struct JobFileWriter::State {
  struct File {
    std::string path;
    std::string text;
    std::string what;
    std::string if_refused;
    bool folder = false;  // make the folder `path`
  };

  bool Idle() const { return queue.empty() && !busy; }
  void Run();

  mutable std::mutex mu;
  std::condition_variable work;  // to the writer: a file, or the end
  std::condition_variable done;  // from the writer: a file written or refused
  std::deque<File> queue;
  bool busy = false;
  std::string busy_path;
  Clock::time_point busy_since;
  bool stuck_said = false;                     // for this hang
  std::map<std::string, std::string> refused;  // path -> why its last write was refused
  bool stop = false;
};

void JobFileWriter::State::Run() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    work.wait(lock, [&] { return stop || !queue.empty(); });
    if (queue.empty()) return;  // stop, with nothing left to write
    File file = std::move(queue.front());
    queue.pop_front();
    busy = true;
    busy_path = file.path;
    busy_since = Clock::now();
    lock.unlock();
    std::string error;
    if (file.folder) {
      std::error_code made;
      std::filesystem::create_directories(file.path, made);
      if (made) error = file.path + ": cannot create the directory: " + made.message();
    } else {
      try {
        ReplaceFile(file.path, file.text, file.what);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    const double took = std::chrono::duration<double>(Clock::now() - busy_since).count();
    lock.lock();
    std::string said;
    if (stuck_said) {
      said += fmt::format(
          "dtrain: the drive under the job's folder answers again: a write to {} took {:.1f} s\n",
          file.path, took);
      stuck_said = false;
    }
    const auto before = refused.find(file.path);
    if (!error.empty()) {
      if (before == refused.end() && !file.if_refused.empty())
        said += fmt::format("dtrain: warning: {}; {}\n", error, file.if_refused);
      refused[file.path] = error;
    } else if (before != refused.end() && !file.folder) {
      said += fmt::format("dtrain: {} {} is written again\n", file.what, file.path);
      refused.erase(before);
    }
    if (!said.empty()) {
      lock.unlock();
      std::fputs(said.c_str(), stderr);
      std::fflush(stderr);
      lock.lock();
    }
    busy = false;
    done.notify_all();
  }
}

JobFileWriter::JobFileWriter() : state_(std::make_unique<State>()) {
  thread_ = std::thread([s = state_.get()] { s->Run(); });
}

JobFileWriter::~JobFileWriter() {
  Finish();
}

void JobFileWriter::Replace(std::string path, std::string text, std::string what,
                            std::string if_refused) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stop) return;  // finished: nothing runs any more that could ask
    for (State::File& queued : s.queue) {
      if (queued.path == path && !queued.folder) {  // not begun: the newer text replaces it
        queued.text = std::move(text);
        return;
      }
    }
    s.queue.push_back({std::move(path), std::move(text), std::move(what), std::move(if_refused)});
  }
  s.work.notify_one();
}

void JobFileWriter::MakeFolder(std::string path, std::string if_refused) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stop) return;
    State::File folder{std::move(path), "", "the folder", std::move(if_refused)};
    folder.folder = true;
    s.queue.push_back(std::move(folder));
  }
  s.work.notify_one();
}

bool JobFileWriter::Flush(double wait_s) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  return s.done.wait_for(lock, std::chrono::duration<double>(wait_s), [&] { return s.Idle(); });
}

void JobFileWriter::Finish() {
  if (!thread_.joinable()) return;
  if (!Flush(kLastWaitS)) {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      path = state_->busy_path;
    }
    std::fprintf(stderr,
                 "dtrain: warning: a write to %s has not returned: the drive under it hangs; "
                 "dtrain ends once the drive answers and the job's files are written (the kernel "
                 "holds its write until then)\n",
                 path.c_str());
    std::fflush(stderr);
  }
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->done.wait(lock, [&] { return state_->Idle(); });
    state_->stop = true;
  }
  state_->work.notify_all();
  thread_.join();
}

std::string JobFileWriter::Refused(const std::string& path) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  const auto it = state_->refused.find(path);
  return it == state_->refused.end() ? "" : it->second;
}

std::optional<FileWriteStuck> JobFileWriter::TakeStuck(double after_s) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  const double seconds = std::chrono::duration<double>(Clock::now() - s.busy_since).count();
  if (s.stuck_said || !s.busy || seconds < after_s) return std::nullopt;
  s.stuck_said = true;
  return FileWriteStuck{s.busy_path, seconds};
}

}  // namespace dtrain
