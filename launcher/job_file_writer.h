// JobFileWriter: dtrain's own files in the job's folder (job.json at each event, the stall reports)
// written by a thread of their own once the ranks run, so that a drive that hangs under the folder
// holds those writes only. Written on the supervisor's thread, the first event during a hang (a
// rank that fails, a stall report, a node that leaves) would stop the job's watch there: no
// teardown, no restart, no Ctrl-C, until the drive answered. Creating a file on ext4 waits for
// the journal's commit, which waits for the drive.
//
// Each file is written whole through file_replace.h, in the order asked; a newer text of a file
// whose write has not begun replaces the older one (job.json is rewritten whole at each event, so
// only its newest text matters). A write the disk refuses is said once, with what the caller
// gave for that case, and the file's next write that succeeds is said too.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace dtrain {

// A write that has not returned.
struct FileWriteStuck {
  std::string path;
  double seconds = 0;
};

class JobFileWriter {
 public:
  JobFileWriter();
  // Finish().
  ~JobFileWriter();
  JobFileWriter(const JobFileWriter&) = delete;
  JobFileWriter& operator=(const JobFileWriter&) = delete;

  // `text` to become the file at `path`; `what` names it in an error ("the job record"),
  // `if_refused` follows the refusal's reason when the disk refuses it ("the job goes on ...");
  // empty: the refusal is not said (the caller says it, from Refused).
  void Replace(std::string path, std::string text, std::string what, std::string if_refused);
  // The folder at `path` and those above it made, in the same order; `if_refused` as above.
  void MakeFolder(std::string path, std::string if_refused);
  // Waits until everything asked is written or refused, at most `wait_s`: false if not (a write
  // is stuck on a drive that hangs).
  bool Flush(double wait_s);
  // Writes everything asked and ends the thread. A write stuck for kLastWaitS is said once, and
  // waited for: the kernel holds dtrain's end until the drive answers anyway, and a record written
  // then tells of the job's end rather than of an event before it.
  void Finish();
  // Why the last write of `path` was refused; "" when it was written or never asked for.
  std::string Refused(const std::string& path) const;
  // A write under way for `after_s` seconds or more, once for each hang.
  std::optional<FileWriteStuck> TakeStuck(double after_s);

  static constexpr double kLastWaitS = 5;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace dtrain
