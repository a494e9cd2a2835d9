# Timelines: the per-rank writer (runtime/timeline.cpp, built here without LibTorch), the
# streaming reader, the merge, the summary and `dtrain timeline` itself.
dtrain_test(timeline_writer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_writer_test.cpp
          ${PROJECT_SOURCE_DIR}/runtime/timeline.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
dtrain_test(timeline_summary_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_summary_test.cpp
  LIBS dtrain_launcher
  TIMEOUT 60)
dtrain_test(timeline_merge_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_merge_test.cpp
          ${PROJECT_SOURCE_DIR}/runtime/timeline.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
dtrain_test(timeline_command_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/timeline_command_test.cpp
          ${PROJECT_SOURCE_DIR}/runtime/timeline.cpp
  LIBS dtrain_launcher
  TIMEOUT 120)
add_dependencies(timeline_command_test dtrain)
