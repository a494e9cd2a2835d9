# Timelines: the per-rank writer (runtime/trace, LibTorch-free), the streaming reader, the merge,
# the summary and `dtrain timeline` itself.
dtrain_test(timeline_writer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_writer_test.cpp
  LIBS dtrain_launcher dtrain_clip_trace
  TIMEOUT 120)
dtrain_test(timeline_summary_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_summary_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(timeline_merge_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_merge_test.cpp
  LIBS dtrain_launcher dtrain_clip_trace
  TIMEOUT 120)
dtrain_test(timeline_record_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_record_test.cpp
  LIBS dtrain_launcher dtrain_clip_trace
  TIMEOUT 60)
dtrain_test(timeline_command_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_command_test.cpp
  LIBS dtrain_launcher dtrain_clip_trace
  TIMEOUT 120)
add_dependencies(timeline_command_test dtrain)
# Fetching traces from ssh nodes with private disks: real sshd nodes in network namespaces
# (root; skipped otherwise), sharing the namespace lock with the other cluster tests.
dtrain_test(timeline_fetch_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_fetch_test.cpp
            LIBS dtrain_launcher LABEL netns TIMEOUT 120 RESOURCE_LOCK netns)
add_dependencies(timeline_fetch_test dtrain)
# PyTorch profiler traces: the H100 fixtures in tests/fixtures/kineto against HolisticTraceAnalysis
# (run from .venv), a 2-rank Gloo job launched by dtrain that profiles itself, clock offsets.
find_package(ZLIB REQUIRED)  # the test writes .json.gz traces
dtrain_test(timeline_kineto_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_kineto_test.cpp
  LIBS dtrain_launcher dtrain_clip_trace ZLIB::ZLIB
  TIMEOUT 180)
add_dependencies(timeline_kineto_test dtrain)
# The analyses beyond the breakdown (idle causes, launches, launch queue, GPU speed, --against),
# each against HolisticTraceAnalysis on the same fixtures.
dtrain_test(timeline_gpu_analyses_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_gpu_analyses_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 180)
# Each rank's critical path through a step, by hand-made traces and against HolisticTraceAnalysis.
dtrain_test(timeline_critical_path_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_critical_path_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 180)
add_dependencies(timeline_critical_path_test dtrain)
# Counter tracks in the merged trace (launch queues, copy bandwidth), against HolisticTraceAnalysis.
dtrain_test(timeline_counter_tracks_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_counter_tracks_test.cpp
  LIBS dtrain_launcher dtrain_clip_trace ZLIB::ZLIB
  TIMEOUT 180)
add_dependencies(timeline_counter_tracks_test dtrain)
# GPU kernel time by type and by kernel, against HolisticTraceAnalysis' GPU kernel breakdown.
dtrain_test(timeline_kernel_breakdown_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_kernel_breakdown_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 180)
# The kernels each ATen operator launches, against HolisticTraceAnalysis' ATen op kernels and delay.
dtrain_test(timeline_aten_op_kernels_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_aten_op_kernels_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 180)
# Frequent kernel sequences of an operator, against HolisticTraceAnalysis' frequent CUDA kernel
# sequences.
dtrain_test(timeline_kernel_sequences_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_kernel_sequences_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 300)
# GPU time by record_function region, against HolisticTraceAnalysis' GPU user annotation breakdown.
dtrain_test(timeline_gpu_annotations_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_gpu_annotations_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 180)
# The ranks whose GPU starts collectives last, against HolisticTraceAnalysis' potential stragglers.
dtrain_test(timeline_late_nccl_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_late_nccl_test.cpp
  LIBS dtrain_launcher ZLIB::ZLIB
  TIMEOUT 180)
