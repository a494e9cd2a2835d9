# SSH transport: quoting and the remote wrapper (unit, run locally), then the transport and
# `dtrain launch` against real sshd nodes in network namespaces (root; skipped otherwise).
# The namespace tests share one lock so they never run beside each other.
dtrain_test(shell_quote_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/shell_quote_test.cpp
            LIBS dtrain_launcher LABEL ssh TIMEOUT 60)

foreach(t ssh_transport_test ssh_launch_test ssh_launch_rank_tree_test)
  dtrain_test(${t} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/${t}.cpp LIBS dtrain_launcher
              LABEL netns TIMEOUT 60 RESOURCE_LOCK netns)
endforeach()
add_dependencies(ssh_launch_test dtrain)
add_dependencies(ssh_launch_rank_tree_test dtrain)
# torchrun/horovodrun habits over SSH: -x, -H, --hostfile, dtrain-clip lookup, stderr and 127 on namespace nodes.
dtrain_test(ssh_ux_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ssh_ux_test.cpp LIBS dtrain_launcher
            LABEL netns TIMEOUT 180 RESOURCE_LOCK netns)
add_dependencies(ssh_ux_test dtrain)
# ~/.ssh/config aliases, bastions (ProxyJump), results from private storage.
dtrain_test(ssh_real_cluster_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ssh_real_cluster_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 300 RESOURCE_LOCK netns)
add_dependencies(ssh_real_cluster_test dtrain)
# `dtrain sync` into private storage: what moves, links, links going down, a dead sync's staging.
dtrain_test(ssh_sync_real_cluster_test
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ssh_sync_real_cluster_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 300 RESOURCE_LOCK netns)
add_dependencies(ssh_sync_real_cluster_test dtrain)
dtrain_test(ssh_sync_plan_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ssh_sync_plan_test.cpp
            LIBS dtrain_launcher LABEL ssh TIMEOUT 60)
dtrain_test(ssh_config_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ssh_config_test.cpp
            LIBS dtrain_launcher LABEL ssh TIMEOUT 60)
# Issue 27: a node's link cut and left cut (node timeout, dead-man switch, spares, --nnodes).
dtrain_test(launcher_node_loss_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_node_loss_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 240 RESOURCE_LOCK netns)
add_dependencies(launcher_node_loss_test dtrain)
# dtrain-clip on nodes without shared storage: rank 0's node cut, the job resumes from the copy
# of its checkpoint another node kept.
if(TARGET dtrain-clip)
  dtrain_test(launcher_clip_node_loss_test
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_clip_node_loss_test.cpp
              LIBS dtrain_launcher LABEL netns TIMEOUT 240 RESOURCE_LOCK netns)
  add_dependencies(launcher_clip_node_loss_test dtrain dtrain-clip)
  # A node's drive fails during the run: its checkpoint write fails, the check before the restart
  # leaves the node out, the spare takes its place.
  dtrain_test(launcher_clip_disk_failure_test
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_clip_disk_failure_test.cpp
              LIBS dtrain_launcher LABEL netns TIMEOUT 240 RESOURCE_LOCK netns)
  add_dependencies(launcher_clip_disk_failure_test dtrain dtrain-clip)
endif()
# Nodes reachable but unfit (a lost GPU, the driver asking for a reset, a site check failing),
# found by the health checks before a start or restart and by the health watch during the run.
dtrain_test(launcher_unfit_node_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_unfit_node_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 240 RESOURCE_LOCK netns)
add_dependencies(launcher_unfit_node_test dtrain)
# A node's drive that fails or hangs during the run (a disk of the node's own, taken away or held
# back): the health watch's test write, and the spare in the node's place.
dtrain_test(launcher_unfit_drive_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_unfit_drive_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 240 RESOURCE_LOCK netns)
add_dependencies(launcher_unfit_drive_test dtrain)
# Nodes whose network is unfit for the job's collectives (a NIC's switch port down, or off the
# bridge with its link up): the interface rule and the peer test, before the start and in the watch.
dtrain_test(launcher_unfit_link_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_unfit_link_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 300 RESOURCE_LOCK netns)
add_dependencies(launcher_unfit_link_test dtrain)
# A lost node that answers again returns to a job running short of nodes (--nnodes MIN:MAX).
dtrain_test(launcher_node_return_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_node_return_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 120 RESOURCE_LOCK netns)
add_dependencies(launcher_node_return_test dtrain)
# A job short of nodes waits for one to return (--rdzv-conf join_timeout), at its start too.
dtrain_test(launcher_node_wait_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_node_wait_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 120 RESOURCE_LOCK netns)
add_dependencies(launcher_node_wait_test dtrain)
# A link whose errors grow during the run (PCIe replays, an InfiniBand port going down and up):
# the health watch warns, and the job goes on.
dtrain_test(launcher_flaky_link_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_flaky_link_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 120 RESOURCE_LOCK netns)
add_dependencies(launcher_flaky_link_test dtrain)
# A rank the kernel's OOM killer ends (a real memory cgroup), on this machine and over SSH.
dtrain_test(launcher_oom_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_oom_test.cpp
            LIBS dtrain_launcher nlohmann_json::nlohmann_json LABEL netns TIMEOUT 180
            RESOURCE_LOCK netns)
add_dependencies(launcher_oom_test dtrain)
# Shared memory segments processes killed outright leave in a node's /dev/shm: a rank end removes
# them; a node they fill is left out at the start.
dtrain_test(launcher_shm_leftovers_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/launcher_shm_leftovers_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 180 RESOURCE_LOCK netns)
add_dependencies(launcher_shm_leftovers_test dtrain)
