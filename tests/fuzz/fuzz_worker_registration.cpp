// What an elastic Horovod worker PUTs to /worker_addresses/<key> (base64 of a pickle), and a
// pickle as such: a HorovodWorkerService, a PickleValue, or a dtrain::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "launcher/error.h"
#include "launcher/horovod_worker_notice.h"
#include "launcher/python_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dtrain::ReadPickle(text);
  } catch (const dtrain::Error&) {
  }
  try {
    dtrain::ParseWorkerRegistration(text);
  } catch (const dtrain::Error&) {
  }
  return 0;
}
