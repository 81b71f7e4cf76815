// ccoll_perf/gloo_peer.cpp: --peer gloo (gloo_peer.hpp).
#include "gloo_peer.hpp"

#if CCOLL_HAVE_GLOO

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
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

// The average: summed, then divided by P here (as the MPI peer).
template <class T>
void finalize_average(T* out, std::size_t n, int nranks) {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = ccoll::finalize<ccoll::ReduceOp::avg>(out[i], nranks);
}

// x[i] = x[i] (op) y[i], for the reduce-scatter of gloo's algorithm API.
template <class T, ccoll::ReduceOp Op>
void combine_into(T* x, const T* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = ccoll::combine<Op>(x[i], y[i]);
}

template <class T>
typename gloo::ReductionFunction<T>::Function* combine_function(ccoll::ReduceOp op) {
  switch (op) {
    case ccoll::ReduceOp::prod:
      return &combine_into<T, ccoll::ReduceOp::prod>;
    case ccoll::ReduceOp::min:
      return &combine_into<T, ccoll::ReduceOp::min>;
    case ccoll::ReduceOp::max:
      return &combine_into<T, ccoll::ReduceOp::max>;
    case ccoll::ReduceOp::sum:
    case ccoll::ReduceOp::avg:
      break;
  }
  return &combine_into<T, ccoll::ReduceOp::sum>;
}

// Gloo's other collectives: gloo::allgather, gloo::broadcast and gloo::reduce (its options API),
// and the reduce-scatter Gloo has, gloo::ReduceScatterHalvingDoubling (its algorithm API: in
// place on one buffer whose pairs it registers when made, so one object per element count, type
// and op, kept; each call copies the input into that buffer and the rank's block, which Gloo
// leaves at the buffer's start, out of it).
class GlooCollective final : public RankCollective {
 public:
  GlooCollective(std::shared_ptr<gloo::Context> context, const CollectiveCall& call)
      : context_(std::move(context)), call_(call) {}

  void run(const void* send, void* recv, std::size_t count, ccoll::DataType d,
           ccoll::ReduceOp op) override {
    using C = ccoll::plan::Collective;
    const int nranks = context_->size;
    const std::size_t block = count / static_cast<std::size_t>(nranks);
    ccoll::dispatch_data_type(d, [&](auto t) {
      using T = decltype(t);
      // Gloo only reads its inputs; its API takes them as non-const.
      T* in = const_cast<T*>(static_cast<const T*>(send));
      T* out = static_cast<T*>(recv);
      switch (call_.collective) {
        case C::all_gather: {
          gloo::AllgatherOptions opts(context_);
          opts.setInput(in, block);
          opts.setOutput(out, count);
          gloo::allgather(opts);
          return;
        }
        case C::broadcast: {
          gloo::BroadcastOptions opts(context_);
          if (context_->rank == call_.root) opts.setInput(in, count);
          opts.setOutput(out, count);
          opts.setRoot(call_.root);
          gloo::broadcast(opts);
          return;
        }
        case C::reduce: {
          gloo::ReduceOptions opts(context_);
          opts.setInput(in, count);
          opts.setOutput(out, count);
          opts.setRoot(call_.root);
          opts.setReduceFunction(reduce_function<T>(op));
          gloo::reduce(opts);
          if (op == ccoll::ReduceOp::avg && context_->rank == call_.root)
            finalize_average(out, count, nranks);
          return;
        }
        case C::reduce_scatter: {
          // Gloo's halving-doubling reduce-scatter counts in int.
          if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
            throw std::invalid_argument("--peer gloo: " + std::to_string(count) +
                                        " elements exceed Gloo's int count in reduce-scatter");
          auto& slot = reduce_scatters_[{count, static_cast<int>(d), static_cast<int>(op)}];
          if (!slot.algorithm) {
            slot.buffer.resize(count * sizeof(T));
            slot.function =
                std::make_shared<gloo::ReductionFunction<T>>(gloo::SUM, combine_function<T>(op));
            slot.algorithm = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
                context_, std::vector<T*>{reinterpret_cast<T*>(slot.buffer.data())},
                static_cast<int>(count), std::vector<int>(nranks, static_cast<int>(block)),
                static_cast<const gloo::ReductionFunction<T>*>(slot.function.get()));
          }
          std::memcpy(slot.buffer.data(), send, count * sizeof(T));
          slot.algorithm->run();
          // Gloo leaves the rank's block at the start of the buffer.
          std::memcpy(recv, slot.buffer.data(), block * sizeof(T));
          if (op == ccoll::ReduceOp::avg) finalize_average(out, block, nranks);
          return;
        }
        case C::allreduce:
          break;
      }
      throw std::invalid_argument("--peer gloo: allreduce goes through GlooAllreduce");
    });
  }

 private:
  struct ReduceScatter {
    std::vector<std::byte> buffer;
    std::shared_ptr<void> function;  // the gloo::ReductionFunction<T> the algorithm calls
    std::shared_ptr<gloo::Algorithm> algorithm;
  };
  std::shared_ptr<gloo::Context> context_;
  CollectiveCall call_;
  std::map<std::tuple<std::size_t, int, int>, ReduceScatter> reduce_scatters_;
};

// Connects this MPI process to every other one over `iface`.
std::shared_ptr<gloo::Context> connect_gloo(const std::string& iface,
                                            std::optional<std::chrono::milliseconds> timeout) {
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
  return context;
}

}  // namespace

std::unique_ptr<RankCollective> make_gloo_peer(const std::string& iface,
                                               std::optional<std::chrono::milliseconds> timeout,
                                               const CollectiveCall& call) {
  auto context = connect_gloo(iface, timeout);
  if (call.collective == ccoll::plan::Collective::allreduce)
    return std::make_unique<GlooAllreduce>(std::move(context));
  return std::make_unique<GlooCollective>(std::move(context), call);
}

std::string gloo_function_name(ccoll::plan::Collective c) {
  switch (c) {
    case ccoll::plan::Collective::reduce_scatter:
      return "gloo::ReduceScatterHalvingDoubling";
    case ccoll::plan::Collective::all_gather:
      return "gloo::allgather";
    case ccoll::plan::Collective::broadcast:
      return "gloo::broadcast";
    case ccoll::plan::Collective::reduce:
      return "gloo::reduce";
    case ccoll::plan::Collective::allreduce:
      break;
  }
  return "gloo::allreduce";
}

std::string gloo_description(ccoll::plan::Collective c) {
  const std::string package =
      std::string(CCOLL_GLOO_PACKAGE) + " (Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
      std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) + "): ";
  if (c != ccoll::plan::Collective::allreduce)
    return package + gloo_function_name(c) + ", TCP pairs";
  return package +
         "gloo::allreduce, algorithm unspecified = ring (reduce-scatter + allgather in <= 1 MiB "
         "segments), TCP pairs";
}

}  // namespace ccoll_perf

#endif
