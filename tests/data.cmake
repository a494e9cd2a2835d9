# dtrain-clip's data pipeline: idx reading, image codecs, the distributed sampler, shard lists and
# every loader on exported Fashion-MNIST. The pipeline is plain C++, so it is built here without
# LibTorch (fast, and independent of the model code).
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
find_package(ZLIB REQUIRED)
set(DTRAIN_DATA_SOURCES
  csv_source.cpp data_source.cpp distributed_sampler.cpp export_data.cpp fashion_mnist.cpp
  fashion_mnist_dataset.cpp image_codec.cpp indexed_batch_source.cpp prefetch_queue.cpp
  shard_list.cpp synthetic_source.cpp tar_archive.cpp webdataset_source.cpp)
list(TRANSFORM DTRAIN_DATA_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/runtime/)
add_library(dtrain_data_for_tests STATIC ${DTRAIN_DATA_SOURCES})
target_include_directories(dtrain_data_for_tests PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(dtrain_data_for_tests PUBLIC PNG::PNG JPEG::JPEG ZLIB::ZLIB Threads::Threads)

dtrain_test(data_formats_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data_fashion_mnist_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/data_image_codec_test.cpp
  LIBS dtrain_data_for_tests
  TIMEOUT 120)
dtrain_test(data_sampler_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data_sampler_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/data_prefetch_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/data_tar_test.cpp
  LIBS dtrain_data_for_tests
  TIMEOUT 120)
dtrain_test(data_loaders_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data_loaders_test.cpp
  LIBS dtrain_data_for_tests
  TIMEOUT 180)

# Loader throughput (not a test): build/data_loader_bench [samples]; see bench/data_loader_bench.sh.
add_executable(data_loader_bench ${PROJECT_SOURCE_DIR}/bench/data_loader_bench.cpp)
target_link_libraries(data_loader_bench PRIVATE dtrain_data_for_tests)
