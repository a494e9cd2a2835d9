# Fuzz targets replayed over their seed corpus and regression inputs (label `fuzz`); the same
# sources fuzz for real under clang with -DDTRAIN_FUZZ=ON (bench/fuzz.sh).
add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/fuzz ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
