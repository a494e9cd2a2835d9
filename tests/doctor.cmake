# dtrain doctor: version parsing and rules (unit), the probe and the command on this machine
# through the local transport, and the namespace cluster over SSH (root; skipped otherwise).
dtrain_test(doctor_versions_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_versions_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_rules_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_rules_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
# The history rule on job records: SSH nodes by name, Slurm nodes by the machine they ran on.
dtrain_test(doctor_history_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_history_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_local_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_local_test.cpp
            LIBS dtrain_doctor LABEL integration TIMEOUT 120)
add_dependencies(doctor_local_test dtrain)

# Namespace cluster over SSH: shares the netns lock with the other namespace tests.
dtrain_test(doctor_cluster_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_cluster_test.cpp
            LIBS dtrain_launcher nlohmann_json::nlohmann_json LABEL netns TIMEOUT 180
            RESOURCE_LOCK netns)
add_dependencies(doctor_cluster_test dtrain)

# The peer connection test: the addresses picked, the probe's peers mode on loopback addresses,
# the verdict (unit).
dtrain_test(doctor_peers_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_peers_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)

# The peer test's plan: pairs per round and rounds to test every pair, the verdict on a round of
# it, the probe's peers mode in a ring on loopback addresses, the cluster file's value (unit).
dtrain_test(doctor_peer_plan_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_peer_plan_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)

# --drain: which Slurm nodes, with what reason (unit; draining is in slurm_integration_test).
dtrain_test(doctor_slurm_drain_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_slurm_drain_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)

# --bandwidth: the verdict (unit), and on four namespace nodes with one link throttled by tc
# (dtrain-clip measures, so only where the runtime is built).
dtrain_test(doctor_bandwidth_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_bandwidth_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
if(TARGET dtrain-clip)
  dtrain_test(doctor_bandwidth_cluster_test
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_bandwidth_cluster_test.cpp
              LIBS dtrain_launcher nlohmann_json::nlohmann_json LABEL netns TIMEOUT 240
              RESOURCE_LOCK netns)
  add_dependencies(doctor_bandwidth_cluster_test dtrain dtrain-clip)
endif()
# --compute: the verdict on dtrain-clip check's lines (unit), and on three namespace nodes with
# one node's check stopped by SIGSTOP (a device that stops answering).
dtrain_test(doctor_compute_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_compute_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
if(TARGET dtrain-clip)
  dtrain_test(doctor_compute_cluster_test
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_compute_cluster_test.cpp
              LIBS dtrain_launcher nlohmann_json::nlohmann_json LABEL netns TIMEOUT 240
              RESOURCE_LOCK netns)
  add_dependencies(doctor_compute_cluster_test dtrain dtrain-clip)
endif()
# Health rules (unit): the GPU rules on the recorded H100 outputs and faulty variants of them;
# the kernel log, InfiniBand and host rules; PCI paths (ACS, IOMMU) and the locked-memory limit;
# the JSON report and --exclude-bad's hostfile.
dtrain_test(doctor_health_gpu_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_health_gpu_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_health_host_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_health_host_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_health_disk_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_health_disk_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_health_pci_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_health_pci_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_link_errors_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_link_errors_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_health_report_test
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_health_report_test.cpp
            LIBS dtrain_doctor nlohmann_json::nlohmann_json TIMEOUT 60)

# Health checks on namespace nodes over SSH, with nvidia-smi, dmesg and sysfs stand-ins.
dtrain_test(doctor_health_cluster_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_health_cluster_test.cpp
            LIBS dtrain_launcher nlohmann_json::nlohmann_json LABEL netns TIMEOUT 180
            RESOURCE_LOCK netns)
add_dependencies(doctor_health_cluster_test dtrain)
# The peer test on namespace nodes: a node whose second NIC reaches no other, a shared bridge.
dtrain_test(doctor_peers_cluster_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_peers_cluster_test.cpp
            LIBS dtrain_launcher nlohmann_json::nlohmann_json LABEL netns TIMEOUT 180
            RESOURCE_LOCK netns)
add_dependencies(doctor_peers_cluster_test dtrain)
dtrain_test(doctor_host_errors_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_host_errors_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
# The node's shared memory: segments no process holds (the rule), and the probe and a rank end's
# removal on a tmpfs of the test's own over /dev/shm, in a mount namespace (root).
dtrain_test(doctor_shm_leftovers_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_shm_leftovers_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
