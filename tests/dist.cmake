# Distributed runtime: rendezvous, collectives, gather with gradients, tensor fusion, process sets.
# dist_test starts dist_worker processes as the ranks of small jobs (Gloo over loopback).
if(TARGET dtrain_clip_train)
  # LibTorch's imported targets are scoped to the directory that found them.
  if(NOT TARGET torch)
    find_package(Torch REQUIRED)
  endif()
  add_executable(dist_worker ${CMAKE_CURRENT_SOURCE_DIR}/dist_worker.cpp)
  target_include_directories(dist_worker PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(dist_worker PRIVATE dtrain_clip_train)
  target_precompile_headers(dist_worker REUSE_FROM dtrain_clip_model)

  dtrain_test(dist_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dist_test.cpp LIBS dtrain_clip_train
              LABEL dist TIMEOUT 180)
  target_precompile_headers(dist_test REUSE_FROM dtrain_clip_model)
  add_dependencies(dist_test dist_worker)

  # The bucket planner alone (pure, no processes).
  dtrain_test(dist_bucket_plan_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dist_bucket_plan_test.cpp
              LIBS dtrain_clip_dist LABEL dist TIMEOUT 60)
  # The link bandwidth test's schedule of node pairs (pure).
  dtrain_test(dist_bandwidth_schedule_test
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dist_bandwidth_schedule_test.cpp
              LIBS dtrain_clip_dist LABEL dist TIMEOUT 60)

  # The Gloo backend is built against declarations only (runtime/dist/c10d_gloo_decls): check that
  # nothing dtrain compiled depends on gloo's layouts.
  get_target_property(runtime_defs dtrain_clip_torch INTERFACE_COMPILE_DEFINITIONS)
  if("DTRAIN_HAVE_GLOO" IN_LIST runtime_defs)
    add_test(NAME dist.gloo_abi COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gloo_abi_check.sh
                                        $<TARGET_FILE:dtrain_clip_dist>)
    set_tests_properties(dist.gloo_abi PROPERTIES LABELS dist)
  endif()

  add_executable(allreduce_bench ${PROJECT_SOURCE_DIR}/bench/allreduce_bench.cpp)
  target_include_directories(allreduce_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(allreduce_bench PRIVATE dtrain_clip_train)
  target_precompile_headers(allreduce_bench REUSE_FROM dtrain_clip_model)
endif()

# End to end through the launcher: needs both executables.
if(TARGET dtrain_clip_train AND TARGET dtrain)
  dtrain_test(dist_launch_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dist_launch_test.cpp
              LABEL dist TIMEOUT 240)
  add_dependencies(dist_launch_test dtrain dtrain-clip)
endif()

# The same across namespace nodes over ssh (root; skipped otherwise), under the ssh tests' lock.
if(TARGET dtrain_clip_train AND TARGET dtrain)
  dtrain_test(dist_ssh_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dist_ssh_test.cpp
              LIBS dtrain_launcher LABEL netns TIMEOUT 120 RESOURCE_LOCK netns)
  add_dependencies(dist_ssh_test dtrain dtrain-clip)
endif()

# Stragglers: a rank throttled by a CPU cgroup named (locally) and its node leaving (ssh nodes);
# root, under the ssh tests' lock.
if(TARGET dtrain_clip_train AND TARGET dtrain)
  dtrain_test(dist_straggler_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/dist_straggler_test.cpp
              LIBS dtrain_launcher LABEL netns TIMEOUT 400 RESOURCE_LOCK netns)
  add_dependencies(dist_straggler_test dtrain dtrain-clip)
endif()
