# Launcher: the cluster-file parser and rank plan (unit), and dtrain init/launch/logs run for real
# through the built dtrain binary with the local transport (integration).
dtrain_test(launcher_cluster_spec_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_cluster_spec_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_torchrun_rendezvous_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_torchrun_rendezvous_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_cluster_health_checks_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_cluster_health_checks_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_rank_plan_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_rank_plan_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_job_python_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_job_python_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_node_history_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_node_history_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_health_watch_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_health_watch_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_idle_watch_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_idle_watch_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_node_clock_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_node_clock_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(exit_abort_note_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/exit_abort_note_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
add_dependencies(exit_abort_note_test dtrain)
dtrain_test(launcher_launch_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_launch_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
add_dependencies(launcher_launch_test dtrain)
dtrain_test(launcher_rank_cgroup_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_rank_cgroup_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
add_dependencies(launcher_rank_cgroup_test dtrain)
dtrain_test(launcher_logs_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_logs_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_job_file_writer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_job_file_writer_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_horovodrun_output_files_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_horovodrun_output_files_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
add_dependencies(launcher_logs_test dtrain)
# Subprocess, the one way dtrain starts a process.
dtrain_test(launcher_subprocess_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_subprocess_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(launcher_local_transport_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_local_transport_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
add_dependencies(launcher_local_transport_test dtrain)
# The command line as torchrun/horovodrun users type it (one test per item).
dtrain_test(launcher_ux_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_ux_test.cpp
  LIBS dtrain_doctor dtrain_launcher
  LABEL cli
  TIMEOUT 300)
add_dependencies(launcher_ux_test dtrain)
# Hangs: stall watch, stall report (py-spy stacks), --on-stall stop, dtrain status.
dtrain_test(launcher_stall_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_stall_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 400)
add_dependencies(launcher_stall_test dtrain)
# Bad input: each finding of a hostile-input run (F1..F11) has a test that failed before its fix.
dtrain_test(hardening_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/hardening_test.cpp
  LIBS dtrain_launcher
  LABEL cli
  TIMEOUT 300)
add_dependencies(hardening_test dtrain)
# Issue 27: restarts that make sense (node pool, one budget, backoff, deterministic errors).
dtrain_test(launcher_restart_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_restart_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
add_dependencies(launcher_restart_test dtrain)
# The straggler watch's judgement on heartbeat step times (unit).
dtrain_test(launcher_straggler_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_straggler_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
# horovodrun's --host-discovery-script: real scripts, their deadline, the start's wait.
dtrain_test(launcher_host_discovery_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_host_discovery_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
add_dependencies(launcher_host_discovery_test dtrain)
# torchrun's worker watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1) with torch's own FileTimerClient.
dtrain_test(launcher_file_timer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_file_timer_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 300)
add_dependencies(launcher_file_timer_test dtrain)
# torchrun's --signals-to-handle: the list, SIGQUIT, an added signal handed to every rank.
dtrain_test(launcher_handled_signals_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_handled_signals_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
add_dependencies(launcher_handled_signals_test dtrain)
# torchrun's --numa-binding (node, socket) with an nvidia-smi and a sysfs stand-in, real taskset.
dtrain_test(launcher_numa_binding_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_numa_binding_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
add_dependencies(launcher_numa_binding_test dtrain)
dtrain_test(launcher_rank_orphans_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_rank_orphans_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
# The disk holding the job's folder fills up (root: a disk of the test's own): the job goes on.
dtrain_test(launcher_full_disk_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_full_disk_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
add_dependencies(launcher_full_disk_test dtrain)
# The drive under the job's folder fails or hangs (root: disks of the test's own): the job goes on.
dtrain_test(launcher_failing_drive_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_failing_drive_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 180)
add_dependencies(launcher_failing_drive_test dtrain)
