// ccoll/transport/shared_window.hpp: a registered window of the shared-memory transport: one
// segment per rank, mapped by every rank, from which the ranks allocate the buffers they pass to
// the allreduce (as MPI_Win_allocate_shared and NCCL's registered buffers do). When every rank's
// input and output lie at the same offsets of one window, a call reads its peers' buffers directly
// (runtime/symmetric_allreduce.hpp) instead of staging each message through a slot.
//
// Allocation is collective. Rank r creates its segment, named after the transport's private
// segment name (which embeds 128 random bits; transport/shared_memory.hpp) with ".w<id>.<r>",
// O_EXCL and mode 0600, sizes it and marks it ready; it then opens every peer's segment (refusing
// one that is not this user's with mode 0600, or of another size than its header says), and counts
// itself in the peer's `attached` word. Once all P - 1 peers are attached, r unlinks its own name
// (the mappings stay), so no window outlives the job in /dev/shm. Each segment starts with a page
// of header (its barrier word on a line of its own); the user's bytes start at the second page.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "ccoll/core/error.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/sync/counter.hpp"

namespace ccoll::transport {

inline constexpr std::uint64_t kWindowMagic = 0x63636f6c6c77696eull;  // "ccollwin"

struct WindowHeader {
  std::uint64_t magic = 0;
  std::uint64_t bytes = 0;                  // the user's bytes
  std::uint32_t ready = 0;                  // 1 once magic and bytes are written (release)
  alignas(128) std::uint64_t attached = 0;  // peers that have mapped this segment
  alignas(128) std::uint64_t arrived = 0;   // this rank's barrier count (symmetric calls)
};

inline constexpr std::size_t kWindowDataOffset = 4096;
// The most bytes a window holds: its mapping (header page and whole pages) must fit in an off_t,
// the type ftruncate and posix_fallocate take, without the rounding up wrapping around.
inline constexpr std::size_t kMaxWindowBytes =
    static_cast<std::size_t>(std::numeric_limits<off_t>::max()) / 2;
static_assert(sizeof(WindowHeader) <= kWindowDataOffset);

class SharedWindow {
 public:
  // Collective: every rank calls it with the same id. `check_peers(q)` is called now and then
  // while waiting for rank q (-1: for every peer to map this rank's segment): it throws once a
  // peer's process is gone, once q has left (destroyed its communicator), or once the communicator
  // is aborted. A rank that left never creates the segment waited for: it would have had to wait
  // for this rank to map it.
  SharedWindow(const std::string& segment_prefix, std::uint32_t id, int rank, int nranks,
               std::size_t bytes, std::uint64_t deadline_ns,
               const std::function<void(int)>& check_peers)
      : id_(id),
        rank_(rank),
        nranks_(nranks),
        bases_(static_cast<std::size_t>(nranks), nullptr),
        sizes_(static_cast<std::size_t>(nranks), 0),
        data_(static_cast<std::size_t>(nranks), nullptr) {
    const auto name_of = [&](int q) {
      return segment_prefix + ".w" + std::to_string(id) + "." + std::to_string(q);
    };
    own_name_ = name_of(rank);
    try {
      create(bytes);
      for (int k = 1; k < nranks; ++k)
        open_peer((rank + k) % nranks, name_of((rank + k) % nranks), deadline_ns, check_peers);
      wait_attached(deadline_ns, check_peers);
    } catch (...) {
      release();
      throw;
    }
    ::shm_unlink(own_name_.c_str());
    own_name_.clear();
  }
  ~SharedWindow() { release(); }
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  std::uint32_t id() const { return id_; }
  // Rank q's user bytes, mapped in this process.
  std::byte* data(int q) const { return data_[static_cast<std::size_t>(q)]; }
  // Every rank's, indexed by rank.
  std::byte* const* data() const { return data_.data(); }
  std::size_t bytes(int q) const { return sizes_[static_cast<std::size_t>(q)]; }
  // Where [p, p + n) lies in this rank's bytes; -1 if not inside them.
  std::int64_t offset_of(const void* p, std::size_t n) const {
    const auto* b = static_cast<const std::byte*>(p);
    const std::byte* d = data(rank_);
    if (b < d || n > bytes(rank_) || static_cast<std::size_t>(b - d) > bytes(rank_) - n) return -1;
    return static_cast<std::int64_t>(b - d);
  }
  // Rank q's barrier word.
  std::uint64_t* arrival_word(int q) const {
    return &reinterpret_cast<WindowHeader*>(bases_[static_cast<std::size_t>(q)])->arrived;
  }

 private:
  static std::size_t mapped_size(std::size_t bytes) {
    return kWindowDataOffset + (bytes + 4095) / 4096 * 4096;
  }
  [[noreturn]] void fail(const std::string& what, const std::string& name) const {
    throw Error(
        ErrorCode::System, rank_,
        "window " + std::to_string(id_) + ": " + what + " '" + name + "': " + std::strerror(errno));
  }

  void create(std::size_t bytes) {
    const int fd = ::shm_open(own_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) fail("shm_open(O_CREAT|O_EXCL)", own_name_);
    const std::size_t size = mapped_size(bytes);
    void* p = MAP_FAILED;
    // Every page at once (posix_fallocate): tmpfs commits pages at their first touch, and a full
    // /dev/shm would otherwise kill the process with SIGBUS inside the user's own stores.
    int allocated = -1;
    if (::fchmod(fd, 0600) == 0 && ::ftruncate(fd, static_cast<off_t>(size)) == 0)
      allocated = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
    if (allocated > 0) errno = allocated;
    if (allocated == 0) p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int saved = errno;
    ::close(fd);
    errno = saved;
    if (p == MAP_FAILED) {
      ::shm_unlink(own_name_.c_str());
      fail("sizing (" + std::to_string(size) + " bytes of /dev/shm) and mapping", own_name_);
    }
    auto* h = new (p) WindowHeader{};
    h->magic = kWindowMagic;
    h->bytes = bytes;
    bases_[static_cast<std::size_t>(rank_)] = static_cast<std::byte*>(p);
    data_[static_cast<std::size_t>(rank_)] = static_cast<std::byte*>(p) + kWindowDataOffset;
    sizes_[static_cast<std::size_t>(rank_)] = bytes;
    sync::AtomicWord<std::uint32_t>(&h->ready).store_release(1);
  }

  // Maps rank q's segment once it exists and is ready.
  void open_peer(int q, const std::string& name, std::uint64_t deadline_ns,
                 const std::function<void(int)>& check_peers) {
    sync::Backoff backoff;
    for (std::uint32_t polls = 0;; ++polls) {
      if (try_open(q, name)) return;
      if ((polls & 63u) == 63u) check_peers(q);
      if (sync::now_ns() >= deadline_ns)
        throw Error(ErrorCode::Timeout, rank_,
                    "window " + std::to_string(id_) + ": rank " + std::to_string(q) +
                        " did not create its segment '" + name +
                        "' in time (every rank must "
                        "allocate the same windows in the same order)");
      backoff.pause();
    }
  }

  bool try_open(int q, const std::string& name) {
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
      ::close(fd);
      errno = EPERM;
      fail("refusing a segment that is not this user's with mode 0600", name);
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size < kWindowDataOffset) {  // created, not yet sized
      ::close(fd);
      return false;
    }
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) fail("mmap", name);
    auto* h = static_cast<WindowHeader*>(p);
    if (sync::AtomicWord<std::uint32_t>(&h->ready).load_acquire() != 1) {
      ::munmap(p, size);
      return false;
    }
    if (h->magic != kWindowMagic || mapped_size(h->bytes) != size) {
      ::munmap(p, size);
      errno = EINVAL;
      fail("not a window segment of the expected size", name);
    }
    bases_[static_cast<std::size_t>(q)] = static_cast<std::byte*>(p);
    data_[static_cast<std::size_t>(q)] = static_cast<std::byte*>(p) + kWindowDataOffset;
    sizes_[static_cast<std::size_t>(q)] = h->bytes;
    sync::AtomicWord<std::uint64_t>(&h->attached).fetch_add_acq_rel(1);
    return true;
  }

  void wait_attached(std::uint64_t deadline_ns, const std::function<void(int)>& check_peers) {
    auto* h = reinterpret_cast<WindowHeader*>(bases_[static_cast<std::size_t>(rank_)]);
    const auto peers = static_cast<std::uint64_t>(nranks_ - 1);
    sync::Backoff backoff;
    for (std::uint32_t polls = 0;
         sync::AtomicWord<std::uint64_t>(&h->attached).load_acquire() < peers; ++polls) {
      if ((polls & 63u) == 63u) check_peers(-1);
      if (sync::now_ns() >= deadline_ns)
        throw Error(ErrorCode::Timeout, rank_,
                    "window " + std::to_string(id_) +
                        ": not every rank mapped this rank's "
                        "segment in time");
      backoff.pause();
    }
  }

  void release() {
    if (!own_name_.empty()) ::shm_unlink(own_name_.c_str());
    own_name_.clear();
    for (std::size_t q = 0; q < bases_.size(); ++q)
      if (bases_[q] != nullptr) ::munmap(bases_[q], mapped_size(sizes_[q]));
    bases_.assign(bases_.size(), nullptr);
  }

  std::uint32_t id_;
  int rank_;
  int nranks_;
  std::string own_name_;  // until every peer has mapped it
  std::vector<std::byte*> bases_;
  std::vector<std::size_t> sizes_;
  std::vector<std::byte*> data_;
};

}  // namespace ccoll::transport
