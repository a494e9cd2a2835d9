#include "runtime/dist/c10d_compat.h"

#include <stdexcept>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef DTRAIN_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef DTRAIN_HAVE_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace dtrain::clip::compat {

c10::intrusive_ptr<c10d::Store> MakeTcpStore(const std::string& host, int port, bool is_server,
                                             int world_size, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = is_server;
  options.numWorkers = static_cast<std::size_t>(world_size);
  options.waitWorkers = false;  // the rendezvous waits itself, to name the ranks that are missing
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

c10::intrusive_ptr<c10d::Store> MakePrefixStore(const std::string& prefix,
                                                const c10::intrusive_ptr<c10d::Store>& store) {
  return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
}

c10::intrusive_ptr<C10dGroup> MakeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int size, std::chrono::milliseconds timeout,
                                            const std::string& interface,
                                            const std::string& bind_host) {
#ifdef DTRAIN_HAVE_GLOO
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (!interface.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (!bind_host.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bind_host));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout, (void)interface, (void)bind_host;
  throw std::runtime_error(
      "this dtrain-clip was built without Gloo (install libgloo-dev and rebuild), so "
      "--dist-backend gloo is not available");
#endif
}

c10::intrusive_ptr<C10dGroup> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int size, std::chrono::milliseconds timeout) {
#ifdef DTRAIN_HAVE_CUDA
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw std::runtime_error(
      "this dtrain-clip was built against a LibTorch without CUDA, so --dist-backend nccl is not "
      "available; use --dist-backend gloo");
#endif
}

}  // namespace dtrain::clip::compat
