// One srun step for a set of ProcessSpecs: placement, environment, wrapper, labelled output.
#include "launcher/slurm/slurm_step.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/oom_kill.h"
#include "launcher/shm_leftovers.h"

namespace dtrain {
namespace {

constexpr const char* kPrefix = "DTRAIN_SLURM_";
constexpr const char* kPythonPathHead = "DTRAIN_PYTHONPATH_HEAD";

// The wrapper reads no value through the shell's parser: values only ever appear as "$var"
// expansions; `eval` sees nothing but variable names checked to be identifiers.
// The command's stderr joins its stdout, in order; the wrapper's own (a shell reporting that the
// command was killed) stays on srun's stderr, apart from the rank's output. A command killed by
// SIGKILL while the node's OOM kill count went up gets the line launcher/oom_kill.h describes
// (templates/oom_kill_line.sh, put in front by SlurmTaskScript). Then the shared memory segments
// the command's processes left in /dev/shm are removed (launcher/shm_leftovers.h).
// With DTRAIN_SLURM_BEAT set, a loop writes an "A" status line to the wrapper's own stderr every
// half second while the command runs, so dtrain hears from a node whose ranks print nothing. It
// ignores the signals a stop sends (a rank that takes its grace period to end is not silent) and
// is killed with the command's end: stopped first, so that its `sleep` is killed too and nothing
// of the task outlives it. Its `sleep`s carry neither DTRAIN_JOB nor RANK, so the rank probe
// (templates/rank_probe.sh) never takes one for a rank's process.
constexpr const char* kTaskScript = R"sh(r=${SLURM_PROCID-}
case $r in '' | *[!0-9]*) echo "dtrain: SLURM_PROCID is not set: this task was not started by srun"; exit 255 ;; esac
n=$DTRAIN_SLURM_NTASKS
i=0
for x in $DTRAIN_SLURM_NODES; do [ $i = "$r" ] && en=$x; i=$((i + 1)); done
i=0
for x in $DTRAIN_SLURM_LOCALS; do [ $i = "$r" ] && el=$x; i=$((i + 1)); done
if [ "${SLURM_NTASKS-}" != "$n" ] || [ "${SLURM_NODEID-}" != "${en-}" ] || [ "${SLURM_LOCALID-}" != "${el-}" ]; then
  echo "dtrain: Slurm placed task $r (of ${SLURM_NTASKS-?}) as local task ${SLURM_LOCALID-?} on node ${SLURM_NODEID-?}; the plan has $n tasks and this one as local task ${el-?} on node ${en-?}"
  exit 255
fi
for v in $DTRAIN_SLURM_VARY; do
  if eval "[ -n \"\${DTRAIN_SLURM_${r}_$v+x}\" ]"; then eval "export $v=\"\${DTRAIN_SLURM_${r}_$v}\""; fi
done
i=0
while [ $i -lt $n ]; do
  for v in $DTRAIN_SLURM_VARY; do unset "DTRAIN_SLURM_${i}_$v"; done
  i=$((i + 1))
done
if [ -n "${DTRAIN_PYTHONPATH_HEAD-}" ]; then
  PYTHONPATH=$DTRAIN_PYTHONPATH_HEAD${PYTHONPATH:+:$PYTHONPATH}
  export PYTHONPATH
fi
m=$DTRAIN_SLURM_MARK
unset DTRAIN_PYTHONPATH_HEAD DTRAIN_SLURM_MARK DTRAIN_SLURM_VARY DTRAIN_SLURM_NTASKS DTRAIN_SLURM_NODES DTRAIN_SLURM_LOCALS
printf '%sB %s.%s\n' "$m" "${SLURM_JOB_ID-}" "${SLURM_STEP_ID-}"
b=
if [ -n "${DTRAIN_SLURM_BEAT-}" ]; then
  unset DTRAIN_SLURM_BEAT
  ( unset DTRAIN_JOB RANK; trap '' INT TERM HUP; while printf '%sA\n' "$m" >&3; do sleep 0.5 3>&-; done ) 3>&2 </dev/null >/dev/null 2>&1 &
  b=$!
fi
trap 'signalled=1' INT TERM HUP
ok0=$(dtrain_oom_kills) t0=$(date +%s)
"$@" 2>&1
s=$?
[ -n "$b" ] && { kill -s STOP "$b"; pkill -KILL -P "$b"; kill -s KILL "$b"; } 2>/dev/null
[ -n "${signalled-}" ] || dtrain_oom_line "$s" "$ok0"
dtrain_shm_remove "$t0"
printf '%sE %s\n' "$m" "$s"
exit $s
)sh";

bool IsIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Distinct node indices in ascending order, and how many processes each has.
std::map<int, int> TasksPerNodeIndex(const std::vector<ProcessSpec>& procs) {
  std::map<int, int> counts;
  for (const ProcessSpec& p : procs) ++counts[p.node_index];
  return counts;
}

// The environment of one task: the spec's, plus the PYTHONPATH head under its own name.
std::map<std::string, std::string> TaskEnv(const ProcessSpec& p) {
  std::map<std::string, std::string> env = p.env;
  if (!p.python_path_head.empty()) env[kPythonPathHead] = p.python_path_head;
  return env;
}

void CheckSameForAll(const std::vector<ProcessSpec>& procs) {
  for (const ProcessSpec& p : procs) {
    const ProcessSpec& first = procs.front();
    if (p.argv != first.argv || p.cwd != first.cwd || p.stdin_data != first.stdin_data ||
        p.beside_ranks != first.beside_ranks) {
      throw Error(fmt::format(
          "transport slurm runs one srun step, so every process needs the same command, "
          "directory, stdin and overlap; process {} differs from process {}",
          p.id, first.id));
    }
  }
}

}  // namespace

const std::string& SlurmTaskScript() {
  static const std::string script =
      std::string(OomKillLineScript()) + std::string(ShmSegmentsScript()) + kTaskScript;
  return script;
}

SlurmStepPlan PlanSlurmStep(const std::vector<ProcessSpec>& procs, const ClusterSpec& spec,
                            const std::string& marker, bool heartbeat) {
  if (procs.empty()) throw Error("transport slurm: nothing to run");
  CheckSameForAll(procs);
  const std::map<int, int> per_node = TasksPerNodeIndex(procs);
  SlurmStepPlan plan;
  plan.node_count = static_cast<int>(per_node.size());
  plan.tasks_per_node = per_node.begin()->second;
  for (const auto& entry : per_node) {
    if (entry.second != plan.tasks_per_node) plan.tasks_per_node = 0;
  }
  for (const auto& entry : per_node) {
    if (entry.first < 0 || entry.first >= static_cast<int>(spec.nodes.size())) {
      throw Error(fmt::format("transport slurm: node {} is not one of the cluster's {} node(s)",
                              entry.first, spec.nodes.size()));
    }
    plan.hosts.push_back(spec.nodes[entry.first].MachineName());
  }
  plan.argv = procs.front().argv;
  plan.cwd = procs.front().cwd;
  plan.stdin_data = procs.front().stdin_data;
  plan.overlap = procs.front().beside_ranks || spec.slurm_placement.overlap_steps;
  plan.marker = marker;

  // Block order: tasks sorted by node, then by id, as srun --distribution=block places them.
  std::vector<const ProcessSpec*> order;
  for (const ProcessSpec& p : procs) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const ProcessSpec* a, const ProcessSpec* b) {
    return a->node_index != b->node_index ? a->node_index < b->node_index : a->id < b->id;
  });
  std::vector<std::map<std::string, std::string>> envs;
  std::set<std::string> names;
  for (size_t t = 0; t < order.size(); ++t) {
    plan.task_ids.push_back(order[t]->id);
    const bool same_node = t > 0 && order[t]->node_index == order[t - 1]->node_index;
    plan.task_node.push_back(t == 0 ? 0 : plan.task_node.back() + (same_node ? 0 : 1));
    plan.task_local.push_back(same_node ? plan.task_local.back() + 1 : 0);
    envs.push_back(TaskEnv(*order[t]));
    for (const auto& entry : envs.back()) names.insert(entry.first);
  }

  std::string vary;
  for (const std::string& name : names) {
    const auto first = envs.front().find(name);
    const bool same = std::all_of(envs.begin(), envs.end(), [&](const auto& env) {
      const auto it = env.find(name);
      return first != envs.front().end() && it != env.end() && it->second == first->second;
    });
    if (same) {
      plan.env[name] = first->second;
      continue;
    }
    if (!IsIdentifier(name)) {
      throw Error(
          fmt::format("transport slurm: environment variable '{}' differs between ranks "
                      "and is not a shell identifier ([A-Za-z_][A-Za-z0-9_]*)",
                      name));
    }
    vary += (vary.empty() ? "" : " ") + name;
    for (size_t t = 0; t < envs.size(); ++t) {
      const auto it = envs[t].find(name);
      if (it != envs[t].end()) plan.env[fmt::format("{}{}_{}", kPrefix, t, name)] = it->second;
    }
  }
  plan.env["DTRAIN_SLURM_VARY"] = vary;
  plan.env["DTRAIN_SLURM_NTASKS"] = std::to_string(order.size());
  plan.env["DTRAIN_SLURM_NODES"] = fmt::format("{}", fmt::join(plan.task_node, " "));
  plan.env["DTRAIN_SLURM_LOCALS"] = fmt::format("{}", fmt::join(plan.task_local, " "));
  plan.env["DTRAIN_SLURM_MARK"] = marker;
  if (heartbeat) plan.env["DTRAIN_SLURM_BEAT"] = "1";
  return plan;
}

std::string SlurmHostfile(const SlurmStepPlan& plan) {
  std::string text;
  for (int node : plan.task_node) text += plan.hosts[node] + "\n";
  return text;
}

std::vector<std::string> SrunArgv(const SlurmStepPlan& plan, const std::string& job_id,
                                  const std::string& step_name) {
  std::vector<std::string> argv = {"srun"};
  if (!job_id.empty()) argv.push_back("--jobid=" + job_id);
  argv.push_back("--job-name=" + step_name);
  argv.push_back(fmt::format("--nodes={}", plan.node_count));
  argv.push_back(fmt::format("--ntasks={}", plan.task_ids.size()));
  if (plan.tasks_per_node > 0) {
    argv.push_back(fmt::format("--ntasks-per-node={}", plan.tasks_per_node));
    argv.push_back(fmt::format("--nodelist={}", fmt::join(plan.hosts, ",")));
    argv.push_back("--distribution=block");
  } else {
    // Uneven counts: one host per task in SLURM_HOSTFILE (see SlurmHostfile), more tasks than
    // CPUs allowed where the allocation was sized for fewer (the doctor's listener).
    argv.push_back("--distribution=arbitrary");
    argv.push_back("--overcommit");
  }
  // Without it the step would wait for CPUs the job's ranks hold ("step creation temporarily
  // disabled") until they end.
  if (plan.overlap) argv.push_back("--overlap");
  argv.push_back("--label");
  argv.push_back("--kill-on-bad-exit=0");
  argv.push_back(plan.stdin_data.empty() ? "--input=none" : "--input=all");
  if (!plan.cwd.empty()) argv.push_back("--chdir=" + plan.cwd);
  argv.push_back("--export=ALL");
  argv.insert(argv.end(), {"sh", "-c", SlurmTaskScript(), "dtrain-task"});
  argv.insert(argv.end(), plan.argv.begin(), plan.argv.end());
  return argv;
}

SlurmTaskLine ParseSlurmTaskLine(std::string_view line, bool newline, const std::string& marker) {
  SlurmTaskLine parsed;
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const size_t digits = i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == digits || i + 1 >= line.size() + 1 || line.substr(i, 2) != ": ") {
    parsed.output = std::string(line) + (newline ? "\n" : "");
    return parsed;
  }
  parsed.task = std::stoi(std::string(line.substr(digits, i - digits)));
  std::string_view content = line.substr(i + 2);
  const size_t at = marker.empty() ? std::string_view::npos : content.find(marker);
  if (at == std::string_view::npos) {
    parsed.output = std::string(content) + (newline ? "\n" : "");
    return parsed;
  }
  parsed.output = std::string(content.substr(0, at));  // a last line without its newline
  const std::string_view tag = content.substr(at + marker.size());
  if (tag.substr(0, 2) == "B ") {
    parsed.started = true;
    parsed.step_id = std::string(tag.substr(2));
  } else if (tag == "A") {
    parsed.alive = true;
  } else if (tag.substr(0, 2) == "E ") {
    parsed.exited = true;
    parsed.status = std::atoi(std::string(tag.substr(2)).c_str());
  }
  return parsed;
}

}  // namespace dtrain
