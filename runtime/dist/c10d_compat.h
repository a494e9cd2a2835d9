// The one place that knows how LibTorch's c10d API differs between versions: 1.x exposes
// collectives on ProcessGroup, 2.x on Backend (ProcessGroupGloo/NCCL derive from it). Everything
// else in dtrain-clip talks to a C10dGroup and builds stores and groups through these functions.
#pragma once

#include <torch/version.h>

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace dtrain::clip::compat {

#if TORCH_VERSION_MAJOR >= 2
using C10dGroup = c10d::Backend;
#else
using C10dGroup = c10d::ProcessGroup;
#endif

// Rank 0 hosts the store (is_server); the others connect, retrying until `timeout`.
c10::intrusive_ptr<c10d::Store> MakeTcpStore(const std::string& host, int port, bool is_server,
                                             int world_size, std::chrono::milliseconds timeout);
// Keys of `store` seen under "<prefix>/": one namespace per process set.
c10::intrusive_ptr<c10d::Store> MakePrefixStore(const std::string& prefix,
                                                const c10::intrusive_ptr<c10d::Store>& store);
// `interface_or_host`: a network interface (GLOO_SOCKET_IFNAME), or an address to bind, or ""
// for LibTorch's default (this host's name, else loopback).
c10::intrusive_ptr<C10dGroup> MakeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int size, std::chrono::milliseconds timeout,
                                            const std::string& interface,
                                            const std::string& bind_host);
// Throws std::runtime_error when LibTorch was built without NCCL.
c10::intrusive_ptr<C10dGroup> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int size, std::chrono::milliseconds timeout);

}  // namespace dtrain::clip::compat
