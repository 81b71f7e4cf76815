// ccoll/transport/shared_memory.hpp: the shared-memory executor: the ranks are processes on one
// host.
//
// The shared area (runtime/shared_area.hpp, followed by the connections' LL slots of
// runtime/low_latency_area.hpp) is a POSIX shared-memory segment of this user, mode
// 0600, named /ccoll.<session>.<token>: the token is 128 random bits that rank 0 draws and leaves
// in a private per-user directory (token_dir()), so no other user can predict, squat or open the
// segment; the session tells concurrent jobs apart (transport/session.hpp). Rendezvous, robust
// against slow starters and crashed earlier runs:
//   - rank 0 unlinks the segment a crashed run's token names (if it is ours), creates a fresh one
//     (O_EXCL, 0600), sizes it, writes the header with a new generation nonce and its pid, sets
//     `ready` last, and then publishes the token (a private file, renamed into place);
//   - every other rank reads the token and opens the segment until the deadline, skipping token
//     files and segments that are not this user's with mode 0600 (reported at the deadline), and
//     segments that are too small, not ready, or whose creator process is gone (a stale segment);
//     it checks that the creator's fingerprint equals its own (Mismatch otherwise);
//   - every rank then claims its descriptor with its pid (a second live claimant is refused),
//     registers the generation and waits for all ranks, checking that those already there are
//     alive. While waiting, a non-zero rank checks that the name still refers to the segment it
//     mapped: if rank 0 of this run replaced a stale segment in the meantime, the rank starts over
//     on the new one, so a stale segment can delay but never capture a new run;
//   - once all ranks are registered rank 0 unlinks the name and removes the token (the mappings
//     stay valid), so a crash after setup leaves nothing behind in /dev/shm; the last rank to leave
//     also unlinks it if a failed setup left it there.
// Registered windows (allocate_window(), transport/shared_window.hpp): buffers the ranks allocate
// in segments every rank maps; a call whose buffers lie at the same offsets of one window on every
// rank reads its peers' buffers directly (runtime/symmetric_allreduce.hpp; reduce-scatter and
// all-gather: runtime/symmetric_shards.hpp; broadcast and reduce: runtime/symmetric_rooted.hpp).
// Rank and size come from Config or the environment (CCOLL_RANK/CCOLL_SIZE,
// OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE), so the executor runs under
// mpirun without using MPI.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "ccoll/core/config.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/runtime/area_communicator.hpp"
#include "ccoll/runtime/low_latency_area.hpp"
#include "ccoll/runtime/symmetric_allreduce.hpp"
#include "ccoll/runtime/symmetric_rooted.hpp"
#include "ccoll/runtime/symmetric_shards.hpp"
#include "ccoll/sync/atomic.hpp"
#include "ccoll/sync/backoff.hpp"
#include "ccoll/transport/concept.hpp"
#include "ccoll/transport/job.hpp"
#include "ccoll/transport/session.hpp"
#include "ccoll/transport/shared_window.hpp"

namespace ccoll::transport {

namespace detail {

// POSIX shm names: one leading slash, no other slash, portable characters only.
inline std::string shm_name(const std::string& session) {
  std::string n = "/ccoll.";
  for (char ch : session.substr(0, 200)) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    n += ok ? ch : '_';
  }
  return n;
}

inline std::string token_path(const std::string& session, int rank) {
  std::string file;
  for (char ch : session.substr(0, 200)) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    file += ok ? ch : '_';
  }
  return token_dir(rank) + "/" + file + ".token";
}

}  // namespace detail

struct SharedMemory {
  static constexpr std::string_view name = "shm";
  using connection_type = sync::ConnectionRef;
  static Config resolve(const Config& c) { return detail::resolve_job_config(c); }

  class Executor {
   public:
    Executor(const Config& config, runtime::PlanSource source, std::string_view policy_id)
        : config_(detail::resolve_job_config(config)),
          comm_(config_, config_.nranks, std::move(source), policy_id),
          local_{config_.rank},
          base_name_(detail::shm_name(config_.session)),
          name_(base_name_),
          token_path_(detail::token_path(config_.session, config_.rank)) {
      comm_.init_rank_state(state_);
      const std::uint64_t deadline = sync::deadline_after(config_.timeout);
      try {
        rendezvous(deadline);
      } catch (...) {
        // A failed run must not leave its segment behind: rank 0 unlinks it, and so does any rank
        // that saw rank 0 die before it could.
        if (config_.rank == 0 ||
            (header_ != nullptr && header_->creator_pid > 0 &&
             runtime::process_gone(static_cast<pid_t>(header_->creator_pid)))) {
          unlink_if_ours();
          remove_token_if_ours();
        }
        unmap();
        throw;
      }
    }
    ~Executor() {
      if (header_ != nullptr) {
        // Left, not dead (AreaControlPlane::check_peers): a peer may still be finishing calls
        // this rank returned from early (eager broadcasts and reduces) after this process exits.
        auto* d = reinterpret_cast<runtime::RankDescriptor*>(
            area_ + runtime::area_layout(comm_).descriptors);
        std::int64_t self = ::getpid();
        sync::AtomicWord<std::int64_t>(&d[config_.rank].pid).compare_exchange(self, -self);
        const std::uint32_t left =
            sync::AtomicWord<std::uint32_t>(&header_->left).fetch_add_acq_rel(1) + 1;
        if (left == static_cast<std::uint32_t>(config_.nranks)) unlink_if_ours();
      }
      unmap();
    }
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    // `shape`: the collective and root of a call of a communicator built for another
    // collective than allreduce (ccoll/collective.hpp). Calls with buffers in a window go direct
    // as allreduce's do.
    void run(int rank, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
             runtime::CallShape shape = {}) {
      if (rank != config_.rank)
        throw_invalid_argument(config_.rank, "rank",
                               "this process's rank " + std::to_string(config_.rank),
                               std::to_string(rank));
      // The bytes each buffer spans: reduce-scatter reads P blocks, all-gather writes P.
      const std::size_t block = count * size_of(dtype);
      const auto p = static_cast<std::size_t>(config_.nranks);
      std::size_t send_bytes = block;
      std::size_t recv_bytes = block;
      if (shape.collective == plan::Collective::reduce_scatter) send_bytes = p * block;
      if (shape.collective == plan::Collective::all_gather) recv_bytes = p * block;
      if (windows_.empty()) {
        comm_.run(state_, config_.rank, send, recv, count, dtype, op, shape);
        return;
      }
      // A buffer the call does not use on this rank (a broadcast's input off the root, a
      // reduce's output) may be null: it is placed where the other one is, as in place.
      const bool off_root = shape.root != config_.rank;
      const void* placed_send = send;
      const void* placed_recv = recv;
      if (off_root && shape.collective == plan::Collective::broadcast && send == nullptr)
        placed_send = recv;
      if (off_root && shape.collective == plan::Collective::reduce && recv == nullptr)
        placed_recv = send;
      runtime::WindowPlacement at = placement(placed_send, send_bytes, placed_recv, recv_bytes);
      // NCCL's in-place forms: block r of the larger buffer is the smaller one.
      const std::byte* s = static_cast<const std::byte*>(send);
      const auto* r = static_cast<const std::byte*>(recv);
      const std::size_t shift = static_cast<std::size_t>(config_.rank) * block;
      if (at.window != 0 && block != 0) {
        if (shape.collective == plan::Collective::all_gather && s == r + shift) {
          at.in_place = true;
          at.send_offset = 0;
        } else if (shape.collective == plan::Collective::reduce_scatter && r == s + shift) {
          at.in_place = true;
          at.recv_offset = 0;
        }
      }
      comm_.run(
          state_, config_.rank, send, recv, count, dtype, op, at,
          [&](const runtime::StepOptions& o) {
            run_symmetric(*windows_[at.window - 1], at, count, dtype, op, shape, o);
            ++direct_calls_;
          },
          shape);
    }

    // Collective (every rank, in the same order): a window of `bytes` in shared memory that every
    // rank maps, for the buffers of later calls. Calls whose input and output lie at the same
    // offsets of one window on every rank read the peers' buffers directly, without staging (a
    // call whose buffers are anywhere else runs as before). Page-aligned; valid while the
    // executor lives.
    std::span<std::byte> allocate_window(std::size_t bytes) {
      if (bytes == 0 || bytes > kMaxWindowBytes)
        throw_invalid_argument(config_.rank, "bytes", "1.." + std::to_string(kMaxWindowBytes),
                               std::to_string(bytes));
      const auto id = static_cast<std::uint32_t>(windows_.size());
      auto& plane = comm_.control_plane();
      const int rank = config_.rank;
      auto check_peers = [&plane, rank, id](int waited_for) {
        plane.check_peers();  // raises the abort record for a peer whose process is gone
        if (!plane.aborted() && waited_for >= 0 && plane.left(waited_for)) plane.check_peers();
        if (!plane.aborted() && waited_for >= 0 && plane.left(waited_for))
          plane.raise(ErrorCode::Aborted,
                      runtime::FailurePoint{waited_for, -1, -1, waited_for,
                                            runtime::FailurePoint::Waiting::left});
        if (!plane.aborted()) return;
        // A window is not the call a peer refused: its code (InvalidArgument) is not this one's.
        const Error e = runtime::later_stop(plane.stopped_error(
            runtime::FailurePoint{rank, -1, -1, -1, runtime::FailurePoint::Waiting::arrival}, 0));
        const std::string what = e.what();
        const auto because = what.find("because ");
        throw Error(e.code(), rank,
                    "allocating window " + std::to_string(id) + " stopped " +
                        (because == std::string::npos ? what : what.substr(because)));
      };
      windows_.push_back(
          std::make_unique<SharedWindow>(name_, id, config_.rank, config_.nranks, bytes,
                                         sync::deadline_after(config_.timeout), check_peers));
      return {windows_.back()->data(config_.rank), bytes};
    }
    int rank() const { return config_.rank; }
    // The calls of this rank that read their peers' windows directly (the others staged).
    std::uint64_t direct_calls() const { return direct_calls_; }
    std::span<const int> local_ranks() const { return local_; }
    plan::Plan plan(std::size_t count, std::size_t elem_size) {
      return comm_.prepared_plan(count, elem_size)->plan;
    }
    int nranks() const { return config_.nranks; }
    const Config& config() const { return config_; }
    const std::string& segment_name() const { return name_; }
    runtime::AreaCommunicator& communicator() { return comm_; }

   private:
    // Where send and recv lie: both in one window, or window 0.
    runtime::WindowPlacement placement(const void* send, std::size_t send_bytes, const void* recv,
                                       std::size_t recv_bytes) const {
      if (config_.nranks > runtime::kMaxSymmetricRanks) return {};
      for (const auto& w : windows_) {
        const std::int64_t s = w->offset_of(send, send_bytes);
        const std::int64_t r = s < 0 ? -1 : w->offset_of(recv, recv_bytes);
        if (r >= 0)
          return {.window = w->id() + 1,
                  .send_offset = static_cast<std::uint64_t>(s),
                  .recv_offset = static_cast<std::uint64_t>(r)};
      }
      return {};
    }

    void run_symmetric(const SharedWindow& w, const runtime::WindowPlacement& at, std::size_t count,
                       DataType dtype, ReduceOp op, runtime::CallShape shape,
                       const runtime::StepOptions& o) {
      const int p = config_.nranks;
      const int rank = config_.rank;
      auto& plane = comm_.control_plane();
      // Barriers (allreduce: two per call, the other collectives: one); every rank's word counts
      // the same calls of this window.
      auto barrier = [&] {
        std::uint64_t* mine = w.arrival_word(rank);
        const std::uint64_t target = sync::AtomicWord<std::uint64_t>(mine).load_relaxed() + 1;
        sync::AtomicWord<std::uint64_t>(mine).store_release(target);
        for (int k = 1; k < p; ++k) {
          const int q = (rank + k) % p;
          plane.wait_peer_word(w.arrival_word(q), target, rank, q, o.deadline_ns, o.seq);
        }
      };
      dispatch_data_type(dtype, [&](auto t) {
        using T = decltype(t);
        dispatch_reduce_op(op, [&](auto tag) {
          runtime::SymmetricCall<T> c;
          c.windows = w.data();
          c.send_offset = at.send_offset;
          c.recv_offset = at.recv_offset;
          c.rank = rank;
          c.nranks = p;
          c.count = count;
          c.in_place = at.in_place;
          c.root = shape.root;
          c.stream_share = o.stream_slots;
          c.stream = o.stream_output;
          switch (shape.collective) {
            case plan::Collective::reduce_scatter:
              runtime::symmetric_reduce_scatter<T, decltype(tag)::value>(c, barrier);
              break;
            case plan::Collective::all_gather:
              runtime::symmetric_all_gather<T>(c, barrier);
              break;
            case plan::Collective::broadcast:
              runtime::symmetric_broadcast<T>(c, barrier);
              break;
            case plan::Collective::reduce:
              runtime::symmetric_reduce<T, decltype(tag)::value>(c, barrier);
              break;
            case plan::Collective::allreduce:
              runtime::symmetric_allreduce<T, decltype(tag)::value>(c, barrier);
              break;
          }
        });
      });
    }

    [[noreturn]] void fail_system(const std::string& what) const {
      throw Error(ErrorCode::System, config_.rank,
                  what + " '" + name_ + "': " + std::strerror(errno));
    }

    void unmap() {
      if (area_ != nullptr) ::munmap(area_, bytes_);
      if (fd_ >= 0) ::close(fd_);
      area_ = nullptr;
      header_ = nullptr;
      fd_ = -1;
    }

    // Unlinks the name only if it still refers to the segment we mapped (never a newer run's).
    void unlink_if_ours() const {
      if (fd_ < 0) return;
      const int fd = ::shm_open(name_.c_str(), O_RDONLY, 0);
      if (fd < 0) return;
      struct stat a {
      }, b{};
      const bool same = ::fstat(fd, &a) == 0 && ::fstat(fd_, &b) == 0 && a.st_ino == b.st_ino &&
                        a.st_dev == b.st_dev;
      ::close(fd);
      if (same) ::shm_unlink(name_.c_str());
    }

    // Does the name refer to the segment we mapped? (false: gone or replaced)
    bool name_is_ours() const {
      const int fd = ::shm_open(name_.c_str(), O_RDONLY, 0);
      if (fd < 0) return false;
      struct stat a {
      }, b{};
      const bool same = ::fstat(fd, &a) == 0 && ::fstat(fd_, &b) == 0 && a.st_ino == b.st_ino &&
                        a.st_dev == b.st_dev;
      ::close(fd);
      return same;
    }

    // The token in the token file, if the file is this user's, private and well formed.
    std::optional<std::string> read_token() {
      const int fd = ::open(token_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return std::nullopt;
      struct stat st {};
      char buf[64] = {};
      const bool private_file = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && owned_privately(st);
      const ssize_t n = private_file ? ::read(fd, buf, sizeof buf - 1) : -1;
      ::close(fd);
      if (!private_file) {
        foreign_token_ = true;
        return std::nullopt;
      }
      if (n != 32) return std::nullopt;
      for (int i = 0; i < 32; ++i)
        if (!((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f')))
          return std::nullopt;
      return std::string(buf, 32);
    }

    // Publishes the token atomically (write a private temporary file, then rename it).
    void write_token() {
      const std::string tmp = token_path_ + ".tmp." + std::to_string(::getpid());
      ::unlink(tmp.c_str());
      const int fd =
          ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0)
        throw Error(ErrorCode::System, config_.rank,
                    "creating '" + tmp + "': " + std::string(std::strerror(errno)));
      const bool written =
          ::write(fd, token_.data(), token_.size()) == static_cast<ssize_t>(token_.size());
      ::close(fd);
      if (!written || ::rename(tmp.c_str(), token_path_.c_str()) != 0) {
        ::unlink(tmp.c_str());
        throw Error(ErrorCode::System, config_.rank,
                    "publishing the session token '" + token_path_ + "': " + std::strerror(errno));
      }
    }

    // Removes the token file if it still names the segment this rank created or mapped (never a
    // newer run's).
    void remove_token_if_ours() {
      const auto t = read_token();
      if (t && name_ == base_name_ + "." + *t) ::unlink(token_path_.c_str());
    }

    // Only segments of this user that no other user can open take part in a job.
    static bool owned_privately(const struct stat& st) {
      return st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
    }

    [[noreturn]] void fail_foreign() const {
      throw Error(ErrorCode::System, config_.rank,
                  "segment '" + name_ + "' belongs to uid " + std::to_string(foreign_uid_) +
                      " with mode " + octal(foreign_mode_) + ", not to this user (uid " +
                      std::to_string(::geteuid()) +
                      ") with mode 0600: refusing to share data through it; another process "
                      "holds this session name (set CCOLL_SESSION to a name of your own)");
    }
    static std::string octal(unsigned mode) {
      std::string s;
      for (int shift = 9; shift >= 0; shift -= 3)
        s += static_cast<char>('0' + ((mode >> shift) & 7u));
      return s;
    }

    void create() {
      // A crashed run's segment, named by the token it left, if it is ours to remove. One whose
      // creator (another process) is alive belongs to a job that is meeting now under the same
      // session name: removing it would send that job's late ranks to this one's segment.
      if (const auto old = read_token()) {
        const std::string stale = base_name_ + "." + *old;
        const int fd = ::shm_open(stale.c_str(), O_RDONLY, 0);
        struct stat st {};
        if (fd >= 0 && ::fstat(fd, &st) == 0 && owned_privately(st)) {
          pid_t creator = 0;
          if (static_cast<std::size_t>(st.st_size) >= sizeof(runtime::AreaHeader)) {
            void* p = ::mmap(nullptr, sizeof(runtime::AreaHeader), PROT_READ, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) {
              const auto* h = static_cast<const runtime::AreaHeader*>(p);
              if (h->magic == runtime::kAreaMagic) creator = static_cast<pid_t>(h->creator_pid);
              ::munmap(p, sizeof(runtime::AreaHeader));
            }
          }
          if (creator > 0 && creator != ::getpid() && !runtime::process_gone(creator)) {
            ::close(fd);
            throw Error(ErrorCode::Mismatch, config_.rank,
                        "session '" + config_.session + "' is in use: its rank 0 (process " +
                            std::to_string(creator) +
                            ") is still meeting its ranks; two jobs derived the same session "
                            "name (set CCOLL_SESSION per job)");
          }
          ::shm_unlink(stale.c_str());
        }
        if (fd >= 0) ::close(fd);
      }
      token_ = detail::random_token();
      name_ = base_name_ + "." + token_;
      fd_ = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd_ < 0 && errno == EEXIST) {  // not ours to unlink: someone else's
        const int other = ::shm_open(name_.c_str(), O_RDONLY, 0);
        struct stat st {};
        if (other >= 0 && ::fstat(other, &st) == 0) {
          foreign_uid_ = static_cast<long>(st.st_uid);
          foreign_mode_ = static_cast<unsigned>(st.st_mode & 0777);
        }
        if (other >= 0) ::close(other);
        fail_foreign();
      }
      if (fd_ < 0) fail_system("shm_open(O_CREAT|O_EXCL)");
      if (::fchmod(fd_, 0600) != 0) fail_system("fchmod");
      bytes_ = runtime::low_latency_area_layout(comm_).total;
      if (::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) fail_system("ftruncate");
      // Every page now: tmpfs commits a page at its first touch, and a full /dev/shm (a
      // container's 64 MiB) would otherwise kill the rank that touches it with SIGBUS mid-call.
      if (const int e = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes_)); e != 0) {
        ::shm_unlink(name_.c_str());  // nobody knows its name yet
        errno = e;
        fail_system("posix_fallocate of " + std::to_string(bytes_) +
                    " bytes (/dev/shm too small? the area holds 2 x nslots x slot_bytes per "
                    "connection: enlarge /dev/shm, as docker's --shm-size does, or lower "
                    "Config::slot_bytes or nslots) for");
      }
      void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      if (p == MAP_FAILED) fail_system("mmap");
      area_ = static_cast<std::byte*>(p);
      generation_ = (sync::now_ns() ^ (static_cast<std::uint64_t>(::getpid()) << 40)) | 1u;
      runtime::init_area(area_, runtime::area_layout(comm_), config_.nranks, comm_.fingerprint(),
                         generation_, static_cast<std::int64_t>(::getpid()));
      header_ = reinterpret_cast<runtime::AreaHeader*>(area_);
      write_token();  // only now can the others find the segment
    }

    // Tries once to map a ready, live, compatible segment; true on success.
    bool try_open() {
      const auto token = read_token();
      if (!token) return false;
      name_ = base_name_ + "." + *token;
      fd_ = ::shm_open(name_.c_str(), O_RDWR, 0);
      if (fd_ < 0) return false;
      struct stat st {};
      bytes_ = runtime::low_latency_area_layout(comm_).total;
      if (::fstat(fd_, &st) != 0 ||
          static_cast<std::size_t>(st.st_size) < sizeof(runtime::AreaHeader)) {
        unmap();
        return false;
      }
      if (!owned_privately(st)) {
        foreign_uid_ = static_cast<long>(st.st_uid);
        foreign_mode_ = static_cast<unsigned>(st.st_mode & 0777);
        unmap();
        return false;
      }
      const auto size = static_cast<std::size_t>(st.st_size);
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      if (p == MAP_FAILED) {
        unmap();
        return false;
      }
      area_ = static_cast<std::byte*>(p);
      bytes_ = size;
      auto* h = reinterpret_cast<runtime::AreaHeader*>(area_);
      const bool ready = sync::AtomicWord<std::uint32_t>(&h->ready).load_acquire() == 1;
      if (!ready || h->magic != runtime::kAreaMagic) {
        unmap();
        return false;
      }
      const auto pid = static_cast<pid_t>(h->creator_pid);
      // A creator that exited and was reaped: stale. One that is a zombie is attached to and then
      // reported dead by the rendezvous, which names it at once.
      if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) {
        unmap();
        return false;
      }
      if (h->config_hash != comm_.fingerprint() || h->nranks != config_.nranks ||
          size != runtime::low_latency_area_layout(comm_).total) {
        mismatch_seen_ = true;
        unmap();
        return false;
      }
      header_ = h;
      generation_ = h->generation;
      return true;
    }

    void rendezvous(std::uint64_t deadline) {
      const bool creator = config_.rank == 0;
      for (;;) {
        if (creator) {
          create();
        } else {
          sync::Backoff backoff;
          while (!try_open()) {
            if (sync::now_ns() >= deadline) {
              if (foreign_uid_ >= 0) fail_foreign();
              if (foreign_token_)
                throw Error(ErrorCode::System, config_.rank,
                            "the session token file '" + token_path_ +
                                "' is not a private file of this user: refusing it");
              if (mismatch_seen_)
                throw Error(
                    ErrorCode::Mismatch, config_.rank,
                    "segment '" + name_ +
                        "' was created by rank 0 with a different configuration "
                        "(nranks, slot_bytes, nslots, nchannels, nchunks, policies or their plans "
                        "differ)");
              throw Error(ErrorCode::Timeout, config_.rank,
                          "rank 0 did not create segment '" + name_ + "' within " +
                              std::to_string(config_.timeout.count()) + " ms");
            }
            backoff.pause();
          }
        }
        runtime::attach_area_with_low_latency(comm_, area_);
        // Register for this generation.
        auto* d = reinterpret_cast<runtime::RankDescriptor*>(
            area_ + runtime::area_layout(comm_).descriptors);
        const auto gen32 = static_cast<std::uint32_t>(generation_ | 1u);
        // Claim the rank: a second process claiming it means two jobs share the session.
        std::int64_t expected = 0;
        const auto self = static_cast<std::int64_t>(::getpid());
        if (!sync::AtomicWord<std::int64_t>(&d[config_.rank].pid)
                 .compare_exchange(expected, self) &&
            expected != self) {
          // A negative pid: a process that held the rank and left (~Executor). It may take the
          // rank again; another process may only if the holder has exited.
          const auto holder = static_cast<pid_t>(expected < 0 ? -expected : expected);
          if (holder != ::getpid() && !runtime::process_gone(holder)) {
            // Two jobs met in this segment, and which is which cannot be told: stop every rank
            // that attached, so that none computes with a stranger.
            header_->abort.raise(static_cast<std::uint32_t>(ErrorCode::Mismatch), config_.rank, -1,
                                 -1, static_cast<std::int32_t>(holder), 0);
            throw Error(ErrorCode::Mismatch, config_.rank,
                        "rank " + std::to_string(config_.rank) + " of segment '" + name_ +
                            "' is already held by process " + std::to_string(holder) +
                            ": two jobs use the same session (set CCOLL_SESSION per job)");
          }
          // From the value judged: a second claimant racing for the same slot fails here.
          if (!sync::AtomicWord<std::int64_t>(&d[config_.rank].pid)
                   .compare_exchange(expected, self)) {
            header_->abort.raise(static_cast<std::uint32_t>(ErrorCode::Mismatch), config_.rank, -1,
                                 -1, static_cast<std::int32_t>(expected), 0);
            throw Error(ErrorCode::Mismatch, config_.rank,
                        "rank " + std::to_string(config_.rank) + " of segment '" + name_ +
                            "' was claimed by process " + std::to_string(expected) +
                            " at the same time: two jobs use the same session (set "
                            "CCOLL_SESSION per job)");
          }
        }
        sync::AtomicWord<std::uint32_t>(&d[config_.rank].attached_generation).store_release(gen32);
        sync::AtomicWord<std::uint32_t>(&header_->attached).fetch_add_acq_rel(1);
        sync::Backoff backoff;
        bool stale = false;
        auto everyone_attached = [&] {
          for (int q = 0; q < config_.nranks; ++q)
            if (sync::AtomicWord<std::uint32_t>(&d[q].attached_generation).load_acquire() != gen32)
              return false;
          return true;
        };
        for (std::uint32_t polls = 0;; ++polls) {
          if (everyone_attached()) break;
          // Rank 0 unlinks the name only after everyone attached, so a vanished or replaced name
          // means a stale segment unless everyone has attached in the meantime.
          if (!creator && (polls & 63u) == 63u && !name_is_ours() && !everyone_attached()) {
            stale = true;
            break;
          }
          // A rank that attached and then died will never complete the rendezvous.
          if ((polls & 63u) == 32u) {
            // Judged again after the process was found gone: a rank that completed the
            // rendezvous, ran its calls and exited in the meantime did not die in it.
            const auto creator_pid = static_cast<pid_t>(header_->creator_pid);
            if (!creator && creator_pid > 0 && runtime::process_gone(creator_pid)) {
              if (everyone_attached()) break;
              throw Error(ErrorCode::Aborted, config_.rank,
                          "rank 0 (pid " + std::to_string(creator_pid) +
                              ") died during the rendezvous on segment '" + name_ + "'");
            }
            for (int q = 0; q < config_.nranks; ++q) {
              const auto pid =
                  static_cast<pid_t>(sync::AtomicWord<std::int64_t>(&d[q].pid).load_acquire());
              if (q != config_.rank && pid > 0 && runtime::process_gone(pid)) {
                if (everyone_attached()) break;  // and the loop above ends at its next check
                throw Error(ErrorCode::Aborted, config_.rank,
                            "rank " + std::to_string(q) + " (pid " + std::to_string(pid) +
                                ") died during the rendezvous on segment '" + name_ + "'");
              }
            }
          }
          if (sync::now_ns() >= deadline) {
            std::string missing;
            for (int q = 0; q < config_.nranks; ++q)
              if (sync::AtomicWord<std::uint32_t>(&d[q].attached_generation).load_acquire() !=
                  gen32)
                missing += (missing.empty() ? "" : ", ") + std::to_string(q);
            if (missing.empty()) break;  // complete at the deadline: not a timeout
            // Withdraw, so that the others do not count this rank as attached when the missing
            // ones arrive: rank 0 would then unlink the name, and this process's retry (or a
            // launcher's) could no longer find the segment. The claim stays: its own process
            // may take the rank again. (A peer that judged the rendezvous complete in the
            // instant before this store runs without this rank and reports it at its first call.)
            sync::AtomicWord<std::uint32_t>(&d[config_.rank].attached_generation).store_release(0);
            throw Error(ErrorCode::Timeout, config_.rank,
                        "ranks " + missing + " did not attach to segment '" + name_ + "' within " +
                            std::to_string(config_.timeout.count()) + " ms");
          }
          backoff.pause();
        }
        if (stale) {
          unmap();
          continue;
        }
        break;
      }
      // Everyone has the segment mapped: the name and the token are no longer needed.
      if (creator) {
        unlink_if_ours();
        remove_token_if_ours();
      }
    }

    Config config_;
    runtime::AreaCommunicator comm_;
    std::vector<int> local_;
    std::string base_name_;   // /ccoll.<session>; the segment is /ccoll.<session>.<token>
    std::string name_;        // the segment this rank created or is trying
    std::string token_path_;  // where rank 0 leaves the token for the others
    std::string token_;       // rank 0: the token of the segment it created
    runtime::AreaCommunicator::rank_state state_;
    int fd_ = -1;
    std::byte* area_ = nullptr;
    runtime::AreaHeader* header_ = nullptr;
    std::size_t bytes_ = 0;
    std::uint64_t generation_ = 0;
    bool mismatch_seen_ = false;
    bool foreign_token_ = false;  // a token file that was not private was refused
    long foreign_uid_ = -1;       // the owner of a segment of our name that we refused
    unsigned foreign_mode_ = 0;
    std::vector<std::unique_ptr<SharedWindow>> windows_;
    std::uint64_t direct_calls_ = 0;
  };
};

static_assert(Transport<SharedMemory>);

}  // namespace ccoll::transport
