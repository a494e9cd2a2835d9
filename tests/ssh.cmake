# SSH transport: quoting and the remote wrapper (unit, run locally), then the transport and
# `dtrain launch` against real sshd nodes in network namespaces (root; skipped otherwise).
# The namespace tests share one lock so they never run beside each other.
dtrain_test(shell_quote_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/shell_quote_test.cpp
            LIBS dtrain_launcher LABELS ssh TIMEOUT 60)

foreach(t ssh_transport_test ssh_launch_test)
  add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.cpp)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${t} PRIVATE dtrain_launcher GTest::gtest GTest::gtest_main)
  target_compile_definitions(${t} PRIVATE
    DTRAIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}" DTRAIN_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${t} DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 60 LABELS "ssh;netns" RESOURCE_LOCK netns)
endforeach()
add_dependencies(ssh_launch_test dtrain)
