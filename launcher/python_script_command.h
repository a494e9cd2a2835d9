// torchrun's training_script, for dtrain launch: `dtrain launch train.py` runs `python3 train.py`
// and `dtrain launch -m pkg.train` runs `python3 -m pkg.train`, as torchrun (and deepspeed) run
// them, with the job's Python: the cluster file's `python:`, else python3 on the node's PATH.
// --no-python runs the first word as a program, as torchrun's --no-python does.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

struct PythonScriptCommand {
  std::vector<std::string> command;  // what every rank runs
  std::string note;                  // "train.py runs as `python3 train.py` ..."; "" if unchanged
};

// `command` as the ranks run it. `python`: the cluster file's python ("" = python3).
// `module`: -m; `no_python`: --no-python. Throws UsageError for -m with --no-python, and for -m
// without a module name.
PythonScriptCommand RunPythonScripts(const std::vector<std::string>& command,
                                     const std::string& python, bool module, bool no_python);

}  // namespace dtrain
