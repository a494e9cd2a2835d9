// The words of dtrain-clip's heartbeat file (<log dir>/<job>/heartbeat/rank-R.txt, one
// "key value" per line, rewritten by rename about once a second): what the runtime's heartbeat
// writes and the launcher's stall watch, stall report and `dtrain status` read. Torch-free.
#pragma once

namespace dtrain::heartbeat {

inline constexpr char kPid[] = "pid";
inline constexpr char kRank[] = "rank";
inline constexpr char kStep[] = "step";
inline constexpr char kActivity[] = "activity";           // a trace activity: DATA, FORWARD, ...
inline constexpr char kActivitySeconds[] = "activity_s";  // since it began
// The collective in flight (else the last one): its name, sequence number, payload, process set,
// what it carries, "waiting" or "done", and seconds since it began (waiting) or ended (done).
inline constexpr char kCollective[] = "collective";
inline constexpr char kCollectiveSeq[] = "collective_seq";
inline constexpr char kCollectiveBytes[] = "collective_bytes";
inline constexpr char kCollectiveSet[] = "collective_set";
inline constexpr char kCollectiveWhat[] = "collective_what";
inline constexpr char kCollectiveState[] = "collective_state";
inline constexpr char kCollectiveSeconds[] = "collective_s";
inline constexpr char kMissing[] = "missing";  // ranks that have not entered it, from the store
// Seconds inside the training steps done so far, and of those, seconds blocked waiting for a
// collective's result (written only where a collective's wait blocks the host: Gloo). The
// launcher's straggler watch takes their growth per step: the time a rank is busy on its own.
inline constexpr char kStepSeconds[] = "step_s";
inline constexpr char kStepWaitedSeconds[] = "step_waited_s";
inline constexpr char kWrittenUs[] = "written_us";

inline constexpr char kWaiting[] = "waiting";  // values of collective_state
inline constexpr char kDone[] = "done";

}  // namespace dtrain::heartbeat
