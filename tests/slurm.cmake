# Slurm transport: unit tests, and integration tests against a real Slurm (munged, slurmctld and
# slurmd started by tests/slurm/slurm-cluster.sh) that fail when Slurm cannot start as root and
# skip with a message when not root.
dtrain_test(slurm_unit_test SOURCES slurm_unit_test.cpp LIBS dtrain_launcher TIMEOUT 60)

# One process for the whole integration set, so the cluster starts and stops once: the
# transport's own tests, `dtrain launch` on Slurm and --drain, with the cluster in
# slurm_integration_main.cpp.
add_executable(slurm_integration_test slurm_integration_main.cpp
               slurm_integration_transport_test.cpp slurm_integration_launch_test.cpp
               slurm_integration_node_loss_test.cpp slurm_integration_drain_test.cpp)
target_include_directories(slurm_integration_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(slurm_integration_test PRIVATE dtrain_doctor dtrain_launcher dtrain_test_paths
                      GTest::gtest)
add_test(NAME slurm_integration_test COMMAND slurm_integration_test)
set_tests_properties(slurm_integration_test PROPERTIES TIMEOUT 330 COST 170 LABELS "slurm;integration"
                     SKIP_REGULAR_EXPRESSION "SLURM UNAVAILABLE:")
if(TARGET dtrain)
  add_dependencies(slurm_integration_test dtrain)
endif()
