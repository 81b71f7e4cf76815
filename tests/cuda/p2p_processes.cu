// gpu_p2p_processes: transport::CudaP2P with its ranks as processes, one per GPU, their FIFO
// memory shared through CUDA IPC (label gpu; exit 77, "skipped", without a CUDA device).
//
// The test forks its ranks before anything in this process touches CUDA (a CUDA context does not
// survive fork), so even the device probe runs in a child. Rank r uses device r % (devices); with
// one GPU the processes share it and the driver time-slices them (correctness only). Each rank
// compares its result bit for bit with host threads running the same plan, computed by the parent
// before the fork. Then the failure paths: a rank that never starts (the rendezvous names it at
// Config::timeout) and a rank that joins but never calls (the kernels' timeout names it). Then the
// agreement of the ranks' calls (a count that differs fails every process with Mismatch), a peer
// whose process exits mid-job (named as exited, not a bare timeout), and the leave barrier (a rank
// that is done first does not free its memory before its peer has left).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../process_ranks.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/transport/cuda/p2p.cuh"
#include "gpu_main.hpp"
#include "host_side.hpp"
#include "p2p_common.hpp"

using namespace ccoll;
using namespace std::chrono_literals;
using transport::CudaP2P;
using transport::cuda::P2POptions;

namespace {

// A session name of its own per executor of this test run.
std::string session(const char* name) {
  return "gpu-p2p-test-" + std::to_string(::getpid()) + "-" + name;
}

P2POptions on_my_device(int rank) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) n = 1;
  P2POptions o;
  o.mode = P2POptions::Mode::processes;
  o.device = rank % n;
  return o;
}

Config process_config(int p, int rank, std::uint32_t nchannels, const std::string& name) {
  Config c = p2p_test::make_config(p, nchannels);
  c.rank = rank;
  c.session = name;
  c.timeout = 60000ms;  // one GPU: every wait may take a time slice of another process
  return c;
}

// Rank `rank`'s part of a case: runs it in place or not; "" or what was wrong.
template <class T, ReduceOp Op>
std::string run_rank(CudaP2P::Executor& ex, int rank, const p2p_test::Case<T>& k, bool in_place,
                     std::size_t offset) {
  const auto i = static_cast<std::size_t>(rank);
  p2p_test::RankBuffers<T> b;
  if (b.init(k.in[i], in_place, offset) != cudaSuccess) return "buffers";
  if (cudaDeviceSynchronize() != cudaSuccess) return "cudaDeviceSynchronize";
  ex.run<T, Op>(rank, b.send, b.recv, k.in[i].size(), ex.stream(rank));
  ex.synchronize(rank, ex.stream(rank));
  if (!p2p_test::same_bits(b.result(), k.expected[i]))
    return std::string(to_string(data_type_of<T>())) + " count " + std::to_string(k.in[i].size()) +
           (in_place ? " in place" : " out of place") + ": differs from host threads";
  return "";
}

void check_all_ok(const std::vector<process_ranks::Outcome>& out) {
  for (std::size_t r = 0; r < out.size(); ++r) {
    CAPTURE(r);
    CAPTURE(out[r].message);
    CHECK(out[r].exit_code == 0);
  }
}

}  // namespace

TEST_CASE("cuda-p2p processes: results equal host threads bit for bit") {
  for (int p : {2, 3})
    for (const char* algorithm : {"ring", "dbtree"}) {
      CAPTURE(p);
      CAPTURE(algorithm);
      const auto source = gpu_test::registered(algorithm, p);
      const Config c = p2p_test::make_config(p, 2);
      // Computed here, before the fork, on host threads.
      const auto f32 = p2p_test::make_case<float>(source, c, 65537, ReduceOp::sum, 1);
      const auto bf16 = p2p_test::make_case<BFloat16>(source, c, 33, ReduceOp::avg, 2);
      const auto i32 = p2p_test::make_case<std::int32_t>(source, c, 1, ReduceOp::max, 3);
      const auto big = p2p_test::make_case<float>(source, c, (1 << 20) + 3, ReduceOp::sum, 4);
      const std::string name = session((std::string(algorithm) + std::to_string(p)).c_str());
      const auto out = process_ranks::on_processes(
          p,
          [&](int rank) -> std::string {
            CudaP2P::Executor ex(process_config(p, rank, 2, name), source, "gpu-test",
                                 on_my_device(rank));
            std::fprintf(stderr, "rank %d: device %d, %s\n", rank, ex.device(rank),
                         ex.ipc_kind() == transport::cuda::IpcKind::cumem_fd ? "cuMem POSIX fd"
                                                                             : "legacy CUDA IPC");
            for (const std::string& wrong :
                 {run_rank<float, ReduceOp::sum>(ex, rank, f32, false, 0),
                  run_rank<float, ReduceOp::sum>(ex, rank, f32, true, 1),
                  run_rank<BFloat16, ReduceOp::avg>(ex, rank, bf16, false, 1),
                  run_rank<std::int32_t, ReduceOp::max>(ex, rank, i32, true, 0),
                  run_rank<float, ReduceOp::sum>(ex, rank, big, false, 0)})
              if (!wrong.empty()) return wrong;
            return "";
          },
          300000ms);
      check_all_ok(out);
    }
}

TEST_CASE("cuda-p2p processes: LowLatency and Simple calls, every rank choosing the same") {
  // LowLatency plans below 10000 elements. In a tree or double binary tree no process maps every
  // connection of the plan, yet every rank must run each call in the same protocol.
  for (const std::pair<const char*, int>& plan : {std::pair{"tree", 3}, std::pair{"dbtree", 4}}) {
    const char* const algorithm = plan.first;
    const int p = plan.second;
    CAPTURE(algorithm);
    CAPTURE(p);
    const auto source = gpu_test::low_latency_below(gpu_test::registered(algorithm, p), 10000);
    const Config c = p2p_test::make_config(p, 2);
    const auto small = p2p_test::make_case<float>(source, c, 33, ReduceOp::sum, 5);
    const auto mid = p2p_test::make_case<BFloat16>(source, c, 4099, ReduceOp::avg, 6);
    const auto large = p2p_test::make_case<float>(source, c, 65537, ReduceOp::sum, 7);
    const std::string name = session((std::string(algorithm) + "-ll" + std::to_string(p)).c_str());
    const auto out = process_ranks::on_processes(
        p,
        [&](int rank) -> std::string {
          CudaP2P::Executor ex(process_config(p, rank, 2, name), source, "gpu-test-ll",
                               on_my_device(rank));
          for (const std::string& wrong :
               {run_rank<float, ReduceOp::sum>(ex, rank, small, false, 0),
                run_rank<float, ReduceOp::sum>(ex, rank, large, true, 0),
                run_rank<BFloat16, ReduceOp::avg>(ex, rank, mid, false, 1),
                run_rank<float, ReduceOp::sum>(ex, rank, small, true, 1)})
            if (!wrong.empty()) return wrong;
          return "";
        },
        300000ms);
    check_all_ok(out);
  }
}

TEST_CASE("cuda-p2p processes: a rank that never starts is named by the rendezvous") {
  const int p = 3;
  const auto source = gpu_test::registered("ring", p);
  const std::string name = session("missing");
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = process_ranks::on_processes(
      2,  // ranks 0 and 1; rank 2 never starts
      [&](int rank) -> std::string {
        Config c = process_config(p, rank, 1, name);
        c.timeout = 500ms;
        CudaP2P::Executor ex(c, source, "gpu-test", on_my_device(rank));
        return "the executor was built without rank 2";
      },
      60000ms);
  for (std::size_t r = 0; r < out.size(); ++r) {
    CAPTURE(r);
    CAPTURE(out[r].message);
    CHECK(out[r].exit_code == 1);
    CHECK(out[r].message.find("rank 2 did not join the rendezvous") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 30s);
}

TEST_CASE("cuda-p2p processes: a rank that joins but never calls is named at the timeout") {
  const int p = 2;
  const auto source = gpu_test::registered("ring", p);
  const std::string name = session("silent");
  const auto out = process_ranks::on_processes(
      p,
      [&](int rank) -> std::string {
        Config c = process_config(p, rank, 1, name);
        c.timeout = 1000ms;
        CudaP2P::Executor ex(c, source, "gpu-test", on_my_device(rank));
        if (rank == 1) {
          // Keeps its memory mapped while rank 0 waits for it in vain.
          std::this_thread::sleep_for(5s);
          return "";
        }
        p2p_test::RankBuffers<float> b;
        if (b.init(std::vector<float>(65536, 1.0f), false, 0) != cudaSuccess) return "buffers";
        cudaDeviceSynchronize();
        try {
          ex.run<float, ReduceOp::sum>(0, b.send, b.recv, 65536, ex.stream(0));
          ex.synchronize(0, ex.stream(0));
        } catch (const Error& e) {
          if (e.code() == ErrorCode::Timeout &&
              std::string(e.what()).find("rank 1 did not call") != std::string::npos)
            return "";
          throw;
        }
        return "the call completed without rank 1";
      },
      60000ms);
  check_all_ok(out);
}

TEST_CASE("cuda-p2p processes: ranks whose calls differ all fail with Mismatch") {
  const int p = 2;
  const auto source = gpu_test::registered("ring", p);
  const std::string name = session("mismatch");
  const auto out = process_ranks::on_processes(
      p,
      [&](int rank) -> std::string {
        CudaP2P::Executor ex(process_config(p, rank, 1, name), source, "gpu-test",
                             on_my_device(rank));
        p2p_test::RankBuffers<float> b;
        if (b.init(std::vector<float>(8192, 1.0f), false, 0) != cudaSuccess) return "buffers";
        cudaDeviceSynchronize();
        try {
          ex.run<float, ReduceOp::sum>(rank, b.send, b.recv, rank == 0 ? 8192 : 8000,
                                       ex.stream(rank));
          ex.synchronize(rank, ex.stream(rank));
        } catch (const Error& e) {
          if (e.code() == ErrorCode::Mismatch &&
              std::string(e.what()).find("call 0 of rank 0 has count 8192") != std::string::npos)
            return "";
          throw;
        }
        return "calls of different counts completed";
      },
      120000ms);
  check_all_ok(out);
}

TEST_CASE("cuda-p2p processes: a peer whose process exits is named as such") {
  const int p = 2;
  const auto source = gpu_test::registered("ring", p);
  const std::string name = session("exits");
  const auto out = process_ranks::on_processes(
      p,
      [&](int rank) -> std::string {
        Config c = process_config(p, rank, 1, name);
        CudaP2P::Executor ex(c, source, "gpu-test", on_my_device(rank));
        if (rank == 1) {
          std::this_thread::sleep_for(500ms);
          std::fflush(nullptr);
          ::_exit(0);  // gone without a word, its executor never destroyed
        }
        p2p_test::RankBuffers<float> b;
        if (b.init(std::vector<float>(65536, 1.0f), false, 0) != cudaSuccess) return "buffers";
        cudaDeviceSynchronize();
        try {
          ex.run<float, ReduceOp::sum>(0, b.send, b.recv, 65536, ex.stream(0));
          ex.synchronize(0, ex.stream(0));
        } catch (const Error& e) {
          // Aborted by the liveness check (a timeout would say Timeout, 60 s later).
          if (e.code() == ErrorCode::Aborted &&
              std::string(e.what()).find("rank 1 (pid") != std::string::npos &&
              std::string(e.what()).find("has exited") != std::string::npos)
            return "";
          throw;
        }
        return "the call completed without rank 1";
      },
      120000ms);
  CAPTURE(out[0].message);
  CHECK(out[0].exit_code == 0);
}

TEST_CASE("cuda-p2p processes: a rank done first leaves only after its peer has left") {
  const int p = 2;
  const auto source = gpu_test::registered("ring", p);
  const std::string name = session("leave");
  const std::string marker =
      (std::filesystem::temp_directory_path() / (name + ".rank0-leaving")).string();
  std::filesystem::remove(marker);
  const auto out = process_ranks::on_processes(
      p,
      [&](int rank) -> std::string {
        {
          CudaP2P::Executor ex(process_config(p, rank, 2, name), source, "gpu-test",
                               on_my_device(rank));
          p2p_test::RankBuffers<float> b;
          if (b.init(std::vector<float>(1 << 20, 1.0f), false, 0) != cudaSuccess) return "buffers";
          cudaDeviceSynchronize();
          ex.run<float, ReduceOp::sum>(rank, b.send, b.recv, 1 << 20, ex.stream(rank));
          ex.synchronize(rank, ex.stream(rank));
          if (rank == 0) {
            // Rank 1 is done and destroying its executor by now; rank 0 lingers, then leaves.
            std::this_thread::sleep_for(1s);
            std::ofstream(marker) << "leaving";
          }
        }
        // Rank 1's executor is gone only once rank 0 has started leaving.
        if (rank == 1 && !std::filesystem::exists(marker))
          return "rank 1 freed its memory before rank 0 left";
        return "";
      },
      120000ms);
  check_all_ok(out);
  std::filesystem::remove(marker);
}

int main(int argc, char** argv) {
  return gpu_test::run_tests(argc, argv, [] {
    // The probe runs in a child: CUDA initialised here would be unusable in the forked ranks.
    const pid_t pid = ::fork();
    if (pid == 0) {
      int devices = 0;
      ::_exit(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 ? 0 : 77);
    }
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
  });
}
