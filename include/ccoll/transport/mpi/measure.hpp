// ccoll/transport/mpi/measure.hpp: the physical topology of an MPI job, measured at setup.
//
// measure_host_links() times a ping-pong between the first ranks of every pair of hosts
// (transport/mpi/hosts.hpp), one pair at a time so that pairs do not share links while measured:
// latency from 8-byte round trips, bandwidth from round trips of `bytes`-byte messages (best of
// `reps`). measured_topology() turns the result into a physical::PhysicalTopology the planners use
// (algo::PackedForest plans trees on it):
//
//   rank nodes r0..r(P-1) (kind gpu, in rank order, so rank r is the r-th active node)
//     -- host node h<i> (kind cpu; only for hosts with several ranks; memory, `host_GBps`)
//     -- switch "net", over one link per host whose bandwidth is the host's best measured pair
//        bandwidth and whose latency is half its best pair latency.
//
// The star is a model, stated here because it decides the plans: a host's link to the network is
// taken to be as fast as the fastest transfer it took part in (its bottleneck in every pair was
// either its own link or the other host's, so the best pair is bounded by its own link), and the
// network core is taken to be non-blocking. A fabric whose core is the bottleneck (two racks
// joined by a thin uplink) is not seen by pairwise tests of the hosts' own links being shared:
// give such a fabric as a topology file (docs/topology.md) instead.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ccoll/physical/graph.hpp"
#include "ccoll/transport/mpi/check.hpp"
#include "ccoll/transport/mpi/hosts.hpp"

namespace ccoll::transport::mpi {

struct MeasureOptions {
  std::size_t bytes = std::size_t{1} << 20;  // bandwidth message size
  int reps = 3;                              // bandwidth round trips per pair (best is kept)
  int latency_reps = 20;                     // 8-byte round trips per pair (best is kept)
};

struct HostLinks {
  std::vector<int> host_of;  // per rank: its host's index (0 .. nhosts-1)
  int nhosts = 0;
  std::vector<double> bandwidth_GBps;  // nhosts x nhosts, one direction, 0 on the diagonal
  std::vector<double> latency_us;      // nhosts x nhosts, one way
  double at(const std::vector<double>& m, int a, int b) const {
    return m[static_cast<std::size_t>(a) * static_cast<std::size_t>(nhosts) +
             static_cast<std::size_t>(b)];
  }
};

// Collective over `parent`; every rank gets the same result. The round trips run on a private
// communicator of the parent's ranks (errors returned), so that no receive the application has
// posted on the parent (MPI_ANY_SOURCE, MPI_ANY_TAG) can take one of their messages.
inline HostLinks measure_host_links(MPI_Comm parent, const MeasureOptions& options = {}) {
  int self = 0;
  check(MPI_Comm_rank(parent, &self), "MPI_Comm_rank", -1);
  const OwnedComm own(parent, self);
  const MPI_Comm comm = own.get();
  const Hosts hosts = find_hosts(comm, self);
  HostLinks out;
  // Hosts numbered in the order of their first ranks.
  std::vector<int> leaders = hosts.host_of;
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  out.nhosts = static_cast<int>(leaders.size());
  for (int leader : hosts.host_of)
    out.host_of.push_back(static_cast<int>(
        std::lower_bound(leaders.begin(), leaders.end(), leader) - leaders.begin()));
  const auto h = static_cast<std::size_t>(out.nhosts);
  out.bandwidth_GBps.assign(h * h, 0.0);
  out.latency_us.assign(h * h, 0.0);

  std::vector<char> buffer(std::max<std::size_t>(options.bytes, 8));
  const int tag = 7;
  const auto round_trip = [&](int peer, bool first, std::size_t bytes, int reps) {
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < reps; ++k) {
      const double t0 = MPI_Wtime();
      if (first) {
        check(MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm),
              "MPI_Send (measure)", self);
        check(MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm,
                       MPI_STATUS_IGNORE),
              "MPI_Recv (measure)", self);
      } else {
        check(MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm,
                       MPI_STATUS_IGNORE),
              "MPI_Recv (measure)", self);
        check(MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm),
              "MPI_Send (measure)", self);
      }
      best = std::min(best, MPI_Wtime() - t0);
    }
    return best;
  };
  for (int a = 0; a < out.nhosts; ++a)
    for (int b = a + 1; b < out.nhosts; ++b) {
      const int ra = leaders[static_cast<std::size_t>(a)];
      const int rb = leaders[static_cast<std::size_t>(b)];
      if (self == ra || self == rb) {
        const bool first = self == ra;
        const int peer = first ? rb : ra;
        const double lat = round_trip(peer, first, 8, options.latency_reps) / 2;
        const double bw = round_trip(peer, first, options.bytes, options.reps) / 2;
        if (first) {
          const std::size_t ab = static_cast<std::size_t>(a) * h + static_cast<std::size_t>(b);
          const std::size_t ba = static_cast<std::size_t>(b) * h + static_cast<std::size_t>(a);
          out.latency_us[ab] = out.latency_us[ba] = lat * 1e6;
          out.bandwidth_GBps[ab] = out.bandwidth_GBps[ba] =
              static_cast<double>(options.bytes) / std::max(bw - lat, 1e-9) / 1e9;
        }
      }
      check(MPI_Barrier(comm), "MPI_Barrier (measure)", self);  // one pair at a time
    }
  // Each entry was measured by one rank; the maximum over ranks collects them all.
  check(MPI_Reduce(self == 0 ? MPI_IN_PLACE : out.bandwidth_GBps.data(), out.bandwidth_GBps.data(),
                   static_cast<int>(h * h), MPI_DOUBLE, MPI_MAX, 0, comm),
        "MPI_Reduce (measure)", self);
  check(MPI_Reduce(self == 0 ? MPI_IN_PLACE : out.latency_us.data(), out.latency_us.data(),
                   static_cast<int>(h * h), MPI_DOUBLE, MPI_MAX, 0, comm),
        "MPI_Reduce (measure)", self);
  check(MPI_Bcast(out.bandwidth_GBps.data(), static_cast<int>(h * h), MPI_DOUBLE, 0, comm),
        "MPI_Bcast (measure)", self);
  check(MPI_Bcast(out.latency_us.data(), static_cast<int>(h * h), MPI_DOUBLE, 0, comm),
        "MPI_Bcast (measure)", self);
  return out;
}

// The star model of the header comment. `host_GBps`: the bandwidth between the ranks of one host.
// "<prefix><n>", built without operator+ on a literal (which GCC 12 misreads under -Wrestrict).
inline std::string numbered(const char* prefix, int n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

inline physical::PhysicalTopology measured_topology(const HostLinks& m, double host_GBps = 10.0,
                                                    std::string name = "measured") {
  physical::PhysicalTopology t;
  t.name = std::move(name);
  const int p = static_cast<int>(m.host_of.size());
  std::vector<int> ranks_on(static_cast<std::size_t>(m.nhosts), 0);
  for (int r = 0; r < p; ++r) {
    const int host = m.host_of[static_cast<std::size_t>(r)];
    ++ranks_on[static_cast<std::size_t>(host)];
    t.add_node(numbered("r", r), physical::NodeKind::gpu, numbered("h", host));
  }
  const int net = m.nhosts > 1 ? t.add_node("net", physical::NodeKind::switch_) : -1;
  std::vector<int> attach(static_cast<std::size_t>(m.nhosts), -1);  // what joins host i to net
  for (int i = 0; i < m.nhosts; ++i)
    if (ranks_on[static_cast<std::size_t>(i)] > 1)
      attach[static_cast<std::size_t>(i)] =
          t.add_node(numbered("h", i), physical::NodeKind::cpu, numbered("h", i));
  for (int r = 0; r < p; ++r) {
    const int host = m.host_of[static_cast<std::size_t>(r)];
    if (attach[static_cast<std::size_t>(host)] >= 0)
      t.add_link(r, attach[static_cast<std::size_t>(host)], host_GBps, 1, 0.5, "memory");
    else
      attach[static_cast<std::size_t>(host)] = r;
  }
  for (int i = 0; i < m.nhosts && net >= 0; ++i) {
    double bw = 0;
    double lat = std::numeric_limits<double>::infinity();
    for (int j = 0; j < m.nhosts; ++j) {
      if (j == i) continue;
      bw = std::max(bw, m.at(m.bandwidth_GBps, i, j));
      lat = std::min(lat, m.at(m.latency_us, i, j));
    }
    t.add_link(attach[static_cast<std::size_t>(i)], net, std::max(bw, 1e-6), 1, lat / 2, "net");
  }
  std::vector<int> active(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) active[static_cast<std::size_t>(r)] = r;
  t.set_active(active);
  return t;
}

}  // namespace ccoll::transport::mpi
