// ccoll_perf/gloo_peer.cpp: --peer gloo (gloo_peer.hpp).
#include "gloo_peer.hpp"

#if CCOLL_HAVE_GLOO

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/transport/address.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/op.hpp"

#ifndef CCOLL_GLOO_PACKAGE
#define CCOLL_GLOO_PACKAGE "Gloo"
#endif

namespace ccoll_perf {
namespace {

// A gloo::Context whose full mesh of pairs is connected through MPI: every rank makes one pair per
// peer, and one MPI_Alltoall hands rank j the address of rank i's pair for j.
class MpiConnectedContext final : public gloo::Context {
 public:
  MpiConnectedContext(int my_rank, int nranks) : gloo::Context(my_rank, nranks) {}

  void connect_full_mesh(const std::shared_ptr<gloo::transport::Device>& device) {
    auto transport = device->createContext(rank, size);
    transport->setTimeout(getTimeout());
    // One slot per destination: the address length, then its bytes.
    struct Slot {
      std::uint32_t length = 0;
      char bytes[gloo::transport::Address::kMaxByteSize] = {};
    };
    std::vector<Slot> mine(static_cast<std::size_t>(size));
    std::vector<Slot> theirs(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const std::vector<char> address = transport->createPair(peer)->address().bytes();
      if (address.size() > sizeof(Slot::bytes)) {
        throw std::runtime_error("--peer gloo: a pair address of " +
                                 std::to_string(address.size()) + " bytes");
      }
      Slot& slot = mine[static_cast<std::size_t>(peer)];
      slot.length = static_cast<std::uint32_t>(address.size());
      std::memcpy(slot.bytes, address.data(), address.size());
    }
    MPI_Alltoall(mine.data(), sizeof(Slot), MPI_BYTE, theirs.data(), sizeof(Slot), MPI_BYTE,
                 MPI_COMM_WORLD);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const Slot& slot = theirs[static_cast<std::size_t>(peer)];
      transport->getPair(peer)->connect(std::vector<char>(slot.bytes, slot.bytes + slot.length));
    }
    device_ = device;
    transportContext_ = std::move(transport);
  }
};

// out[i] = a[i] (op) b[i]: gloo's reduction callback, from ccoll's own combine (so every ccoll
// type and operation works, the 16-bit floats included).
template <class T, ccoll::ReduceOp Op>
void reduce_elements(void* out, const void* a, const void* b, std::size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = ccoll::combine<Op>(x[i], y[i]);
}

template <class T>
gloo::AllreduceOptions::Func reduce_function(ccoll::ReduceOp op) {
  switch (op) {
    case ccoll::ReduceOp::sum:
    case ccoll::ReduceOp::avg:  // summed, then divided by P locally (as the MPI peer)
      return &reduce_elements<T, ccoll::ReduceOp::sum>;
    case ccoll::ReduceOp::prod:
      return &reduce_elements<T, ccoll::ReduceOp::prod>;
    case ccoll::ReduceOp::min:
      return &reduce_elements<T, ccoll::ReduceOp::min>;
    case ccoll::ReduceOp::max:
      return &reduce_elements<T, ccoll::ReduceOp::max>;
  }
  return &reduce_elements<T, ccoll::ReduceOp::sum>;
}

// gloo::allreduce with the algorithm left unspecified, which this Gloo runs as its ring (a
// reduce-scatter and an allgather over the ring of TCP pairs, in segments of at most 1 MiB with
// two in flight). Input and output are separate buffers, as for the other implementations.
class GlooAllreduce final : public RankCollective {
 public:
  explicit GlooAllreduce(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}

  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    ccoll::dispatch_data_type(d, [&](auto t) {
      using T = decltype(t);
      gloo::AllreduceOptions opts(context_);
      // Gloo only reads its inputs; its API takes them as non-const.
      opts.setInput(const_cast<T*>(static_cast<const T*>(send)), count);
      opts.setOutput(static_cast<T*>(recv), count);
      opts.setReduceFunction(reduce_function<T>(op));
      gloo::allreduce(opts);
      if (op != ccoll::ReduceOp::avg) return;
      T* out = static_cast<T*>(recv);
      for (std::size_t i = 0; i < count; ++i)
        out[i] = ccoll::finalize<ccoll::ReduceOp::avg>(out[i], context_->size);
    });
  }

 private:
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace

std::unique_ptr<RankCollective> make_gloo_allreduce(
    const std::string& iface, std::optional<std::chrono::milliseconds> timeout) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gloo::transport::tcp::attr attr;
  attr.iface = iface;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw std::runtime_error("--peer gloo: no TCP device on interface '" + iface +
                             "' (--gloo_iface): " + e.what());
  }
  auto context = std::make_shared<MpiConnectedContext>(rank, size);
  if (timeout) context->setTimeout(*timeout);
  context->connect_full_mesh(device);
  return std::make_unique<GlooAllreduce>(std::move(context));
}

std::string gloo_description() {
  return std::string(CCOLL_GLOO_PACKAGE) + " (Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
         std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) +
         "): gloo::allreduce, algorithm unspecified = ring (reduce-scatter + allgather in <= 1 "
         "MiB segments), TCP pairs";
}

}  // namespace ccoll_perf

#endif
