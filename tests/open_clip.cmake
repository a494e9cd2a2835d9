# The real OpenCLIP (open_clip_torch in .venv, from scripts/install-deps.sh --tests) as peer: weights move
# both ways with the same features; OpenCLIP's own training runs under dtrain launch.
set(DTRAIN_VENV_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python3)
if(TARGET dtrain_clip_train)
  add_executable(clip_weights_tool open_clip/clip_weights_tool.cpp)
  target_include_directories(clip_weights_tool PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(clip_weights_tool PRIVATE dtrain_clip_train)
  target_precompile_headers(clip_weights_tool REUSE_FROM dtrain_clip_model)
  add_test(NAME open_clip.weight_interchange
           COMMAND ${DTRAIN_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/open_clip/open_clip_interchange.py
                   $<TARGET_FILE:clip_weights_tool> ${CMAKE_CURRENT_BINARY_DIR}/open_clip_scratch)
  set_tests_properties(open_clip.weight_interchange PROPERTIES TIMEOUT 300 COST 55 LABELS open_clip)
endif()
if(TARGET dtrain_clip_train AND TARGET dtrain)
  dtrain_test(open_clip_launch_test SOURCES open_clip/open_clip_launch_test.cpp
              LABEL open_clip TIMEOUT 600 RESOURCE_LOCK netns)
  add_dependencies(open_clip_launch_test dtrain dtrain-clip)
endif()
