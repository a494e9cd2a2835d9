// Where the tests find the checkout (scripts, fixtures, .venv) and the build folder (dtrain,
// dtrain-clip, helper binaries, scratch clusters). The paths are compiled into one small file,
// test_paths.cpp, rather than passed to every test as -D flags: a flag holding the clone's path
// would differ in every clone and make ccache miss on each translation unit that carries it.
#pragma once

namespace dtrain::test {

const char* SourceDir();  // the checkout the tests were built from
const char* BinaryDir();  // the build folder

}  // namespace dtrain::test

#define DTRAIN_SOURCE_DIR (::dtrain::test::SourceDir())
#define DTRAIN_BINARY_DIR (::dtrain::test::BinaryDir())
