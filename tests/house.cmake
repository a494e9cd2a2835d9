# The house: runtime/'s folders keep their layering (runtime_layers_check.py says the rule).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME house.runtime_layers
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/runtime_layers_check.py
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(house.runtime_layers PROPERTIES LABELS docs TIMEOUT 30)
# A clone stands alone: no file refers to a folder beside the repository (tests/fixtures/README.md).
add_test(NAME house.self_contained
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/self_contained_check.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(house.self_contained PROPERTIES LABELS docs TIMEOUT 30)
# The LibTorch-free sources compile with clang too (the fuzz targets are built with it). Not in a
# sanitizer build: its flags change nothing clang's syntax check sees, and CI's normal build,
# run first, has checked the same files (under ASan the check took 290 s of CI's second pass).
if(NOT DTRAIN_SANITIZE)
  add_test(NAME house.clang_syntax
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/clang_syntax_check.py
                   ${PROJECT_BINARY_DIR} 2)
  set_tests_properties(house.clang_syntax PROPERTIES LABELS docs TIMEOUT 600 COST 60)
endif()
