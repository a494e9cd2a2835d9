# The house: runtime/'s folders keep their layering (runtime_layers_check.py says the rule).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME house.runtime_layers
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/runtime_layers_check.py
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(house.runtime_layers PROPERTIES LABELS docs TIMEOUT 30)
