// Tests of the host side of transport::CudaP2P's process mode, no GPU needed: file descriptors
// passed over a Unix socket (SCM_RIGHTS) between fork()ed processes, and the rendezvous that
// all-gathers every rank's record and descriptors through rank 0, with its refusals (a rank that
// never joins, a rank 0 that never opens, a joiner built differently).
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/transport/cuda/fd_passing.hpp"
#include "ccoll/transport/cuda/rendezvous.hpp"
#include "process_ranks.hpp"

namespace p2p_rendezvous_shm_test {
using namespace ccoll;
using namespace ccoll::transport::cuda;
using namespace std::chrono_literals;

namespace {

// A memfd of one page holding `text`.
UniqueFd memfd_with(const std::string& text) {
  UniqueFd fd(::memfd_create("ccoll-test", MFD_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::ftruncate(fd.get(), 4096) == 0);
  REQUIRE(::pwrite(fd.get(), text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()));
  return fd;
}

// What a received memfd holds, read through a shared mapping: the page itself, not a copy.
std::string mapped_text(int fd, std::size_t n) {
  void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return "<mmap failed>";
  std::string s(static_cast<const char*>(p), n);
  ::munmap(p, 4096);
  return s;
}

std::string socket_path(const char* name) {
  return "/tmp/ccoll-test-" + std::to_string(::getpid()) + "-" + name + ".sock";
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("a memfd passed over a socketpair maps the same page in the receiving process") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  UniqueFd parent_end(sv[0]), child_end(sv[1]);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    parent_end.reset();
    int code = 0;
    try {
      UniqueFd a = memfd_with("first page");
      UniqueFd b = memfd_with("second page");
      const int fds[] = {a.get(), b.get()};
      send_frame(child_end.get(), FrameKind::hello, 7, bytes_of("payload"), fds,
                 sync::deadline_after(5000ms), "the parent");
      // The parent writes into the first page through its own descriptor; wait for its word.
      Frame ack = recv_frame(child_end.get(), sync::deadline_after(5000ms), "the parent");
      code = mapped_text(a.get(), 7) == "changed" && ack.payload.size() == 2 ? 0 : 3;
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  child_end.reset();
  Frame f = recv_frame(parent_end.get(), sync::deadline_after(5000ms), "the child");
  CHECK(f.header.kind == FrameKind::hello);
  CHECK(f.header.code == 7);
  CHECK(std::string(reinterpret_cast<const char*>(f.payload.data()), f.payload.size()) ==
        "payload");
  REQUIRE(f.fds.size() == 2);
  CHECK(mapped_text(f.fds[0].get(), 10) == "first page");
  CHECK(mapped_text(f.fds[1].get(), 11) == "second page");
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f.fds[0].get(), 0);
  REQUIRE(p != MAP_FAILED);
  std::memcpy(p, "changed", 7);
  ::munmap(p, 4096);
  send_frame(parent_end.get(), FrameKind::all, 0, bytes_of("ok"), {}, sync::deadline_after(5000ms),
             "the child");
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a frame that does not arrive times out instead of hanging") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  UniqueFd a(sv[0]), b(sv[1]);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)recv_frame(a.get(), sync::deadline_after(50ms), "a silent peer");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(std::string(e.what()).find("a silent peer") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("the rendezvous all-gathers records and descriptors among 3 processes") {
  const std::string path = socket_path("gather");
  const auto out = process_ranks::on_processes(
      3,
      [&](int rank) -> std::string {
        UniqueFd page = memfd_with("page of rank " + std::to_string(rank));
        const int fds[] = {page.get()};
        const std::string mine = "record " + std::to_string(rank);
        auto all = rendezvous_all_gather(path, rank, 3, 0xfeed, bytes_of(mine), fds, 5000ms);
        for (int q = 0; q < 3; ++q) {
          const auto& r = all[static_cast<std::size_t>(q)];
          const std::string text(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
          if (text != "record " + std::to_string(q)) return "record of rank " + std::to_string(q);
          if (q == rank) {
            if (!r.fds.empty()) return "own descriptors came back";
            continue;
          }
          if (r.fds.size() != 1) return "descriptors of rank " + std::to_string(q);
          if (mapped_text(r.fds[0].get(), 14) != "page of rank " + std::to_string(q))
            return "page of rank " + std::to_string(q);
        }
        return "";
      },
      10000ms);
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    CAPTURE(out[static_cast<std::size_t>(r)].message);
    CHECK(out[static_cast<std::size_t>(r)].exit_code == 0);
  }
  CHECK(::access(path.c_str(), F_OK) != 0);  // rank 0 removed the socket
}

TEST_CASE("a rank that never joins: every rank that came reports it by number, at the timeout") {
  const std::string path = socket_path("missing");
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = process_ranks::on_processes(
      2,  // ranks 0 and 1 of a job of 3: rank 2 never comes
      [&](int rank) -> std::string {
        (void)rendezvous_all_gather(path, rank, 3, 1, bytes_of("x"), {}, 300ms);
        return "the rendezvous completed without rank 2";
      },
      10000ms);
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    const auto& o = out[static_cast<std::size_t>(r)];
    CAPTURE(o.message);
    CHECK(o.exit_code == 1);
    CHECK(o.message.rfind("ERR " + std::to_string(static_cast<int>(ErrorCode::Timeout)), 0) == 0);
    CHECK(o.message.find("rank 2 did not join the rendezvous") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("a rank 0 that never opens the rendezvous is reported at the timeout") {
  const std::string path = socket_path("no-root");
  try {
    (void)rendezvous_all_gather(path, 1, 2, 1, bytes_of("x"), {}, 100ms);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(std::string(e.what()).find("rank 0 did not open the rendezvous") != std::string::npos);
  }
}

TEST_CASE("a joiner with another fingerprint is refused on both sides") {
  const std::string path = socket_path("mismatch");
  const auto out = process_ranks::on_processes(
      2,
      [&](int rank) -> std::string {
        (void)rendezvous_all_gather(path, rank, 2, rank == 0 ? 1 : 2, bytes_of("x"), {}, 2000ms);
        return "a mismatched joiner was accepted";
      },
      10000ms);
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    const auto& o = out[static_cast<std::size_t>(r)];
    CAPTURE(o.message);
    CHECK(o.message.rfind("ERR " + std::to_string(static_cast<int>(ErrorCode::Mismatch)), 0) == 0);
    CHECK(o.message.find("rank 1 was built with a different configuration") != std::string::npos);
  }
}
}  // namespace p2p_rendezvous_shm_test
