// The one translation unit that holds the checkout's and the build folder's paths (see
// test_paths.h): only this file is compiled again when a clone lives somewhere else.
#include "tests/support/test_paths.h"

namespace dtrain::test {

const char* SourceDir() {
  return DTRAIN_TEST_SOURCE_DIR;
}
const char* BinaryDir() {
  return DTRAIN_TEST_BINARY_DIR;
}

}  // namespace dtrain::test
