// torchrun's --signals-to-handle: the signals on which dtrain stops a job. SIGINT, SIGTERM,
// SIGHUP and SIGQUIT always (torchrun's default list; a launcher ended by one would leave its
// ranks to their guards); others may be named, such as SIGUSR1 or SIGUSR2, the warning
// `sbatch --signal` sends before an allocation ends. On one of those the ranks get that same
// signal as their closing signal, as torchrun's workers do, so they can checkpoint; on the four
// they get SIGTERM, as before. SIGKILL follows after the grace period either way.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// The default list, and what every rank sees in TORCHELASTIC_SIGNALS_TO_HANDLE without the option.
constexpr const char* kDefaultHandledSignals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";

// "SIGTERM,SIGUSR1" -> signal numbers, in order, no repeats. Throws UsageError naming the word
// that is not a signal dtrain can handle (an unknown name, SIGKILL, SIGSTOP, SIGCHLD, ...).
std::vector<int> ParseHandledSignals(const std::string& list);

// The signal the ranks get first when dtrain received `received`.
int ClosingSignal(int received);

}  // namespace dtrain
