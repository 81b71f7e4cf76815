// ccoll/transport/cuda/rendezvous.hpp: an all-gather of small records and file descriptors among
// the processes of one job, through rank 0 over a path-named Unix-domain socket.
//
// GPU ranks that are processes must learn, before their first kernel, where every peer's FIFO
// memory is: a cuMem export (a file descriptor) or a legacy cudaIpcMemHandle_t (bytes), plus the
// host page that holds the job's abort word (a memfd). Rank 0 listens on the path; every other
// rank connects (retrying until the path exists), sends a hello frame with its record and
// descriptors (fd_passing.hpp); once all have joined, rank 0 sends each of them everything, then
// removes the path. Nothing else is needed: no launcher, no MPI, no shared file system.
//
// Failure is an error, never a hang. At Config::timeout rank 0 gives up on the ranks that did not
// join, tells those that did (an error frame naming the missing ranks), and throws the same
// ccoll::Error(Timeout); a rank whose rank 0 never appears throws once its own deadline passes.
// Ranks waiting for rank 0's answer allow it twice the timeout, so that rank 0's verdict, which
// names the root cause, arrives before their own deadline. A joiner whose rank count or
// fingerprint (runtime::PlanCache: everything that shapes the plans) differs from rank 0's is
// refused with Mismatch, and so is a rank number claimed twice.
#pragma once

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/cuda/fd_passing.hpp"

namespace ccoll::transport::cuda {

// One rank's contribution: a record and the descriptors that go with it.
struct RendezvousRecord {
  std::vector<std::byte> bytes;
  std::vector<UniqueFd> fds;  // received copies (empty in the caller's own entry)
};

namespace detail {

struct Hello {
  std::uint32_t rank = 0;
  std::uint32_t nranks = 0;
  std::uint64_t fingerprint = 0;
};

inline sockaddr_un socket_address(const std::string& path, int rank) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() + 1 > sizeof a.sun_path)
    throw_invalid_argument(rank, "rendezvous socket path",
                           "at most " + std::to_string(sizeof a.sun_path - 1) + " characters",
                           path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

inline UniqueFd unix_socket(int rank) {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s)
    throw Error(ErrorCode::System, rank, std::string("socket(AF_UNIX): ") + std::strerror(errno));
  return s;
}

template <class T>
void append(std::vector<std::byte>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
template <class T>
T take(std::span<const std::byte>& in, const std::string& what) {
  T v{};
  if (in.size() < sizeof v) throw Error(ErrorCode::System, -1, what + ": a short record");
  std::memcpy(&v, in.data(), sizeof v);
  in = in.subspan(sizeof v);
  return v;
}

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return s;
}

}  // namespace detail

// All-gathers every rank's (bytes, fds) through rank 0 listening at `path` (a socket path in a
// private directory). Returns nranks records; the caller's own record holds its bytes and no
// descriptors. Collective: every rank of the job calls it once with the same path.
inline std::vector<RendezvousRecord> rendezvous_all_gather(const std::string& path, int rank,
                                                           int nranks, std::uint64_t fingerprint,
                                                           std::span<const std::byte> mine,
                                                           std::span<const int> my_fds,
                                                           std::chrono::milliseconds timeout) {
  using detail::append;
  std::vector<RendezvousRecord> all(static_cast<std::size_t>(nranks));
  all[static_cast<std::size_t>(rank)].bytes.assign(mine.begin(), mine.end());
  if (nranks == 1) return all;
  const sockaddr_un addr = detail::socket_address(path, rank);
  const std::uint64_t deadline = sync::deadline_after(timeout);
  const std::string timeout_text = "Config::timeout (" + std::to_string(timeout.count()) + " ms)";

  if (rank != 0) {
    // Connect, retrying while rank 0 has not bound the path yet.
    UniqueFd s;
    for (;;) {
      s = detail::unix_socket(rank);
      if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) break;
      if (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN && errno != EINTR)
        throw Error(ErrorCode::System, rank,
                    "connecting to the rendezvous at '" + path + "': " + std::strerror(errno));
      if (sync::now_ns() >= deadline)
        throw Error(ErrorCode::Timeout, rank,
                    std::string("cuda-p2p: rank 0 did not open the rendezvous at '")
                        .append(path)
                        .append("' within ")
                        .append(timeout_text)
                        .append("; rank ")
                        .append(std::to_string(rank))
                        .append(" waited for it"));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::vector<std::byte> hello;
    append(hello, detail::Hello{static_cast<std::uint32_t>(rank),
                                static_cast<std::uint32_t>(nranks), fingerprint});
    hello.insert(hello.end(), mine.begin(), mine.end());
    const std::string peer = "rank 0 (the rendezvous at '" + path + "')";
    try {
      send_frame(s.get(), FrameKind::hello, 0, hello, my_fds, deadline, peer);
      // Rank 0 waits up to its own timeout for the others: allow it that, and then some.
      const std::uint64_t answer_deadline = sync::deadline_after(2 * timeout);
      Frame f = recv_frame(s.get(), answer_deadline, peer);
      if (f.header.kind == FrameKind::error)
        throw Error(static_cast<ErrorCode>(f.header.code), rank,
                    std::string(reinterpret_cast<const char*>(f.payload.data()), f.payload.size()));
      if (f.header.kind != FrameKind::all)
        throw Error(ErrorCode::System, rank, peer + " answered with an unexpected frame");
      std::span<const std::byte> in(f.payload);
      std::size_t next_fd = 0;
      for (int q = 0; q < nranks; ++q) {
        const auto n = detail::take<std::uint64_t>(in, peer);
        const auto nfd = detail::take<std::uint32_t>(in, peer);
        if (in.size() < n || next_fd + nfd > f.fds.size())
          throw Error(ErrorCode::System, rank, peer + ": a short answer");
        auto& r = all[static_cast<std::size_t>(q)];
        if (q != rank) r.bytes.assign(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
        for (std::uint32_t k = 0; k < nfd; ++k) r.fds.push_back(std::move(f.fds[next_fd++]));
        in = in.subspan(n);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout ||
          std::string_view(e.what()).find("cuda-p2p") != std::string_view::npos)
        throw;
      throw Error(ErrorCode::Timeout, rank,
                  "cuda-p2p: rank 0 (the rendezvous at '" + path + "') did not answer rank " +
                      std::to_string(rank) + " within twice " + timeout_text);
    }
    return all;
  }

  // Rank 0: a stale socket of a crashed run of the same session would make bind fail.
  ::unlink(path.c_str());
  UniqueFd listener = detail::unix_socket(rank);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    throw Error(ErrorCode::System, rank,
                "binding the rendezvous socket '" + path + "': " + std::strerror(errno));
  struct Unlink {
    const std::string& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink_at_exit{path};
  ::chmod(path.c_str(), 0600);
  if (::listen(listener.get(), nranks) != 0)
    throw Error(ErrorCode::System, rank, std::string("listen: ") + std::strerror(errno));
  std::vector<UniqueFd> conns(static_cast<std::size_t>(nranks));
  int joined = 1;
  auto fail_all = [&](ErrorCode code, const std::string& text) {
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    for (int q = 0; q < nranks; ++q)
      if (conns[static_cast<std::size_t>(q)]) {
        try {
          send_frame(conns[static_cast<std::size_t>(q)].get(), FrameKind::error,
                     static_cast<std::uint32_t>(code), std::span(p, text.size()), {},
                     sync::deadline_after(std::chrono::milliseconds(100)),
                     "rank " + std::to_string(q));
        } catch (const Error&) {
          // That rank is gone too; the others still hear the verdict.
        }
      }
    throw Error(code, rank, text);
  };
  while (joined < nranks) {
    if (!detail::wait_ready(listener.get(), POLLIN, deadline)) {
      std::vector<int> missing;
      for (int q = 1; q < nranks; ++q)
        if (!conns[static_cast<std::size_t>(q)]) missing.push_back(q);
      fail_all(ErrorCode::Timeout, std::string("cuda-p2p: rank")
                                       .append(missing.size() > 1 ? "s " : " ")
                                       .append(detail::rank_list(missing))
                                       .append(" did not join the rendezvous at '")
                                       .append(path)
                                       .append("' within ")
                                       .append(timeout_text));
    }
    UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) continue;
    Frame f;
    try {
      f = recv_frame(c.get(), deadline, "a joining rank");
    } catch (const Error&) {
      continue;  // it died or stalled while joining: it counts as missing
    }
    std::span<const std::byte> in(f.payload);
    if (f.header.kind != FrameKind::hello || in.size() < sizeof(detail::Hello)) continue;
    const auto h = detail::take<detail::Hello>(in, "a joining rank");
    const int q = static_cast<int>(h.rank);
    if (static_cast<int>(h.nranks) != nranks || h.fingerprint != fingerprint || q <= 0 ||
        q >= nranks || conns[static_cast<std::size_t>(q)]) {
      const std::string text =
          static_cast<int>(h.nranks) != nranks
              ? "cuda-p2p: rank " + std::to_string(q) + " joined with " + std::to_string(h.nranks) +
                    " ranks; rank 0 has " + std::to_string(nranks)
          : h.fingerprint != fingerprint
              ? "cuda-p2p: rank " + std::to_string(q) +
                    " was built with a different configuration or plan than rank 0 (its slot "
                    "geometry, channels, chunks or algorithm differ)"
              : "cuda-p2p: rank " + std::to_string(q) +
                    " joined twice, or is out of range (two jobs share a session?)";
      conns[0] = std::move(c);  // slot 0 is free on rank 0: the offender hears the verdict too
      fail_all(ErrorCode::Mismatch, text);
    } else {
      all[static_cast<std::size_t>(q)].bytes.assign(in.begin(), in.end());
      all[static_cast<std::size_t>(q)].fds = std::move(f.fds);
      conns[static_cast<std::size_t>(q)] = std::move(c);
      ++joined;
    }
  }
  // Everyone is here: each joiner gets every record and every other rank's descriptors.
  for (int to = 1; to < nranks; ++to) {
    std::vector<std::byte> payload;
    std::vector<int> fds;
    for (int q = 0; q < nranks; ++q) {
      const auto& r = all[static_cast<std::size_t>(q)];
      std::vector<int> these;
      if (q == 0)
        these.assign(my_fds.begin(), my_fds.end());
      else if (q != to)
        for (const auto& fd : r.fds) these.push_back(fd.get());
      append(payload, static_cast<std::uint64_t>(r.bytes.size()));
      append(payload, static_cast<std::uint32_t>(these.size()));
      payload.insert(payload.end(), r.bytes.begin(), r.bytes.end());
      fds.insert(fds.end(), these.begin(), these.end());
    }
    send_frame(conns[static_cast<std::size_t>(to)].get(), FrameKind::all, 0, payload, fds,
               sync::deadline_after(timeout), "rank " + std::to_string(to));
  }
  return all;
}

}  // namespace ccoll::transport::cuda
