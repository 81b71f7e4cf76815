// ccoll/transport/cuda/fd_passing.hpp: framed messages with file descriptors attached, over a
// Unix-domain stream socket (SCM_RIGHTS).
//
// Processes that share GPU memory through cuMem export it as a POSIX file descriptor
// (ipc_memory.cuh), and a descriptor means something only in the process that holds it: the
// kernel must copy it into the receiver, which only SCM_RIGHTS ancillary data over a Unix socket
// does. A frame is a fixed header (kind, an error code, the payload size and how many descriptors
// ride with it) followed by the payload; the descriptors travel with the header's bytes. Every
// read and write has a deadline (poll), so a peer that stops answering is an error, never a hang.
// Plain host C++: the fast suite tests it without a GPU.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>  // sync/backoff.hpp's deadline_after, in nvcc's device pass too
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/sync/backoff.hpp"

namespace ccoll::transport::cuda {

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The most descriptors one frame carries (Linux refuses more than 253 per message).
inline constexpr std::size_t kMaxFrameFds = 250;

enum class FrameKind : std::uint32_t { hello = 1, all = 2, error = 3 };

struct FrameHeader {
  std::uint32_t magic = 0x32703263;  // "c2p2"
  FrameKind kind = FrameKind::hello;
  std::uint32_t code = 0;  // FrameKind::error: a ccoll::ErrorCode
  std::uint32_t nfds = 0;
  std::uint64_t bytes = 0;
};

struct Frame {
  FrameHeader header;
  std::vector<std::byte> payload;
  std::vector<UniqueFd> fds;
};

namespace detail {

// Milliseconds left until `deadline_ns` (sync::now_ns clock), at least 0; -1: no deadline.
inline int poll_ms_left(std::uint64_t deadline_ns) {
  if (deadline_ns == 0) return -1;
  const std::uint64_t now = sync::now_ns();
  if (now >= deadline_ns) return 0;
  const std::uint64_t ms = (deadline_ns - now + 999'999) / 1'000'000;
  return ms > 1'000'000 ? 1'000'000 : static_cast<int>(ms);
}

// Waits until `fd` is ready for `events`; false at the deadline. A hang-up counts as ready: the
// read or write that follows reports it.
inline bool wait_ready(int fd, short events, std::uint64_t deadline_ns) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms_left(deadline_ns));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR)
      throw Error(ErrorCode::System, -1, std::string("poll: ") + std::strerror(errno));
  }
}

}  // namespace detail

// Sends one frame; `fds` ride with its header. `what` names the peer in errors.
inline void send_frame(int sock, FrameKind kind, std::uint32_t code,
                       std::span<const std::byte> payload, std::span<const int> fds,
                       std::uint64_t deadline_ns, const std::string& what) {
  if (fds.size() > kMaxFrameFds)
    throw Error(ErrorCode::Unsupported, -1,
                "a frame to " + what + " would carry " + std::to_string(fds.size()) +
                    " file descriptors; at most " + std::to_string(kMaxFrameFds));
  FrameHeader h;
  h.kind = kind;
  h.code = code;
  h.nfds = static_cast<std::uint32_t>(fds.size());
  h.bytes = payload.size();
  const auto* hp = reinterpret_cast<const std::byte*>(&h);
  std::vector<std::byte> bytes(hp, hp + sizeof h);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  std::vector<char> control(fds.empty() ? 0 : CMSG_SPACE(fds.size() * sizeof(int)));
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    if (!detail::wait_ready(sock, POLLOUT, deadline_ns))
      throw Error(ErrorCode::Timeout, -1, "sending to " + what + ": timed out");
    iovec iov{bytes.data() + sent, bytes.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {
      // The descriptors go with the first byte; the kernel installs copies in the receiver.
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    const ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error(ErrorCode::System, -1, "sending to " + what + ": " + std::strerror(errno));
    }
    sent += static_cast<std::size_t>(n);
  }
}

// Receives one frame (its descriptors are owned by the result). Throws at the deadline or when
// the peer closes the connection.
inline Frame recv_frame(int sock, std::uint64_t deadline_ns, const std::string& what,
                        std::uint64_t max_bytes = std::uint64_t{1} << 30) {
  Frame f;
  std::vector<std::byte> head(sizeof(FrameHeader));
  std::vector<char> control(CMSG_SPACE(kMaxFrameFds * sizeof(int)));
  auto read_into = [&](std::byte* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (!detail::wait_ready(sock, POLLIN, deadline_ns))
        throw Error(ErrorCode::Timeout, -1, "waiting for " + what + ": timed out");
      iovec iov{dst + got, n - got};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      const ssize_t k = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
      if (k < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw Error(ErrorCode::System, -1, "receiving from " + what + ": " + std::strerror(errno));
      }
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < nfd; ++i) {
          int fd = -1;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          f.fds.emplace_back(fd);
        }
      }
      if ((msg.msg_flags & MSG_CTRUNC) != 0)
        throw Error(ErrorCode::System, -1,
                    "receiving from " + what +
                        ": file descriptors were dropped (the process's descriptor limit?)");
      if (k == 0)
        throw Error(ErrorCode::System, -1,
                    what + " closed the connection in the middle of a frame");
      got += static_cast<std::size_t>(k);
    }
  };
  read_into(head.data(), head.size());
  std::memcpy(&f.header, head.data(), sizeof f.header);
  if (f.header.magic != FrameHeader{}.magic || f.header.bytes > max_bytes)
    throw Error(ErrorCode::System, -1, what + " sent something that is not a ccoll frame");
  f.payload.resize(f.header.bytes);
  read_into(f.payload.data(), f.payload.size());
  if (f.fds.size() != f.header.nfds)
    throw Error(ErrorCode::System, -1,
                what + " sent " + std::to_string(f.header.nfds) + " file descriptors; " +
                    std::to_string(f.fds.size()) + " arrived");
  return f;
}

}  // namespace ccoll::transport::cuda
