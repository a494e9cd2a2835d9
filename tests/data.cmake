# dtrain-clip's data pipeline (runtime/data, LibTorch-free): idx reading, image codecs, the
# distributed sampler, shard lists and every loader on exported Fashion-MNIST.
dtrain_test(data_formats_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data_fashion_mnist_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/data_image_codec_test.cpp
  LIBS dtrain_clip_data
  TIMEOUT 120)
dtrain_test(data_sampler_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data_sampler_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/data_prefetch_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/data_tar_test.cpp
  LIBS dtrain_clip_data
  TIMEOUT 120)
dtrain_test(data_loaders_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data_loaders_test.cpp
  LIBS dtrain_clip_data
  TIMEOUT 180)

