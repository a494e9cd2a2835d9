# dtrain doctor: version parsing and rules (unit), the probe and the command on this machine
# through the local transport, and the namespace cluster over SSH (root; skipped otherwise).
dtrain_test(doctor_versions_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_versions_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_rules_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_rules_test.cpp
            LIBS dtrain_doctor TIMEOUT 60)
dtrain_test(doctor_local_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/doctor_local_test.cpp
            LIBS dtrain_doctor LABELS integration TIMEOUT 120)
add_dependencies(doctor_local_test dtrain)

# Namespace cluster over SSH: shares the netns lock with the other namespace tests.
add_executable(doctor_cluster_test ${CMAKE_CURRENT_SOURCE_DIR}/doctor_cluster_test.cpp)
target_include_directories(doctor_cluster_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(doctor_cluster_test PRIVATE dtrain_launcher nlohmann_json::nlohmann_json
                      GTest::gtest GTest::gtest_main)
target_compile_definitions(doctor_cluster_test PRIVATE
  DTRAIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}" DTRAIN_BINARY_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(doctor_cluster_test dtrain)
gtest_discover_tests(doctor_cluster_test DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 180 LABELS "doctor;netns" RESOURCE_LOCK netns)
