# dtrain-clip's file formats (runtime/formats, LibTorch-free): a file replaced by rename is synced
# first, and one the disk did not take replaces nothing.
dtrain_test(formats_file_sync_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/formats_file_sync_test.cpp
  LIBS dtrain_clip_formats)
