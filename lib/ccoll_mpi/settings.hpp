// ccoll_mpi/settings.hpp: the environment variables of libccoll_mpi.so, read once per process.
//
//   CCOLL_MPI_ALGO            auto (default), or any registry name: ring, dbtree, tree,
//                             tree-overlap, direct, ps, ... (algo/registry.hpp)
//   CCOLL_MPI_TRANSPORT       mpi-hybrid (default: shared memory between the ranks of a host, MPI
//                             messages between hosts) or mpi (MPI messages only)
//   CCOLL_MPI_AUTO_MIN_BYTES  auto: calls below this many bytes go to MPI (default in
//                             algorithm_choice.hpp; K, M, G suffixes are powers of 1024)
//   CCOLL_MPI_TUNING          auto: a tuning table (the JSON `ccoll_perf --tune` writes,
//                             docs/protocols.md) whose rules choose the algorithm and protocol of
//                             the calls auto serves, per collective, communicator size and bytes;
//                             a call no rule matches goes to MPI
//   CCOLL_MPI_DISABLE         1: every call goes to MPI
//   CCOLL_MPI_REPORT          1: world rank 0 prints its counts at MPI_Finalize; all: every rank
//   CCOLL_MPI_TIMEOUT_S       deadline of one call's waits in seconds (default 0: none, as MPI)
//   CCOLL_MPI_SLOT_BYTES      Config::slot_bytes, the largest message (a multiple of 16; K, M, G)
//   CCOLL_MPI_NSLOTS          Config::nslots, messages in flight per connection (>= 2)
//
// A bad value never stops the program: it is named on stderr and every call goes to MPI. The
// variables must be the same on every rank (Open MPI: mpirun -x), as the serve-or-pass decision of
// a collective call has to be: MPI_Init compares them (and the tuning table's text) across the
// ranks, and if one rank's value is bad or differs, every call goes to MPI on every rank.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <ccoll/algo/by_size.hpp>
#include <ccoll/algo/registry.hpp>
#include <ccoll/core/error.hpp>
#if __has_include(<nlohmann/json.hpp>)
#include <ccoll/algo/tuning_table_json.hpp>
#define CCOLL_MPI_HAS_TUNING_JSON 1
#endif

#include "algorithm_choice.hpp"

namespace ccoll_mpi {

enum class Report : std::uint8_t { none, rank0, all };
enum class Transport : std::uint8_t { hybrid, messages };

inline const char* to_string(Transport t) {
  return t == Transport::hybrid ? "mpi-hybrid" : "mpi";
}

struct Settings {
  bool disabled = false;
  std::string error;  // the first bad value; non-empty: every call goes to MPI
  std::optional<ccoll::algo::AlgorithmSpec> algorithm;  // empty: auto
  Transport transport = Transport::hybrid;
  std::uint64_t auto_min_bytes = kDefaultAutoMinBytes;
  // CCOLL_MPI_TUNING's table (null: auto's own choice, algorithm_choice.hpp).
  std::shared_ptr<const ccoll::algo::TuningTable> tuning;
  Report report = Report::none;
  std::chrono::milliseconds timeout{0};  // 0: no deadline
  std::uint64_t slot_bytes = 0;          // 0: Config's default
  std::uint32_t nslots = 0;              // 0: Config's default
  // What the serve-or-pass decision and the transports' shapes depend on, as parsed (the tuning
  // table's text, not its path): the ranks compare it at MPI_Init (interpose.cpp).
  std::string fingerprint;
};

namespace detail {

inline std::optional<std::string_view> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string_view(v);
}

// A non-negative integer with an optional K, M or G suffix (powers of 1024).
inline std::optional<std::uint64_t> parse_size(std::string_view s) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  std::string_view rest(end, static_cast<std::size_t>(s.data() + s.size() - end));
  int shift = 0;
  if (rest == "K" || rest == "k") {
    shift = 10;
  } else if (rest == "M" || rest == "m") {
    shift = 20;
  } else if (rest == "G" || rest == "g") {
    shift = 30;
  } else if (!rest.empty()) {
    return std::nullopt;
  }
  if (shift != 0 && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

inline void fail(Settings& s, const std::string& message) {
  if (s.error.empty()) s.error = message;
}

}  // namespace detail

inline Settings read_settings() {
  Settings s;
  if (auto v = detail::env("CCOLL_MPI_DISABLE")) {
    if (*v == "1") {
      s.disabled = true;
    } else if (*v != "0") {
      detail::fail(s, "CCOLL_MPI_DISABLE=" + std::string(*v) + ": expected 0 or 1");
    }
  }
  if (auto v = detail::env("CCOLL_MPI_REPORT")) {
    if (*v == "1") {
      s.report = Report::rank0;
    } else if (*v == "all") {
      s.report = Report::all;
    } else if (*v != "0") {
      detail::fail(s, "CCOLL_MPI_REPORT=" + std::string(*v) + ": expected 0, 1 or all");
    }
  }
  if (auto v = detail::env("CCOLL_MPI_ALGO"); v && *v != "auto") {
    try {
      auto spec = ccoll::algo::find_algorithm(*v);
      if (spec.algorithm.needs_topology) {
        detail::fail(s, "CCOLL_MPI_ALGO=" + std::string(*v) +
                            ": the algorithm is planned on a physical topology, which an MPI "
                            "communicator does not give; use auto or one of " +
                            abstract_algorithm_names());
      } else {
        s.algorithm = std::move(spec);
      }
    } catch (const ccoll::Error&) {
      detail::fail(s, "CCOLL_MPI_ALGO=" + std::string(*v) + ": expected auto or one of " +
                          abstract_algorithm_names() + " (optionally -overlap or -phased)");
    }
  }
  if (auto v = detail::env("CCOLL_MPI_TRANSPORT")) {
    if (*v == "mpi-hybrid") {
      s.transport = Transport::hybrid;
    } else if (*v == "mpi") {
      s.transport = Transport::messages;
    } else {
      detail::fail(s, "CCOLL_MPI_TRANSPORT=" + std::string(*v) + ": expected mpi-hybrid or mpi");
    }
  }
  if (auto v = detail::env("CCOLL_MPI_AUTO_MIN_BYTES")) {
    if (auto n = detail::parse_size(*v)) {
      s.auto_min_bytes = *n;
    } else {
      detail::fail(s, "CCOLL_MPI_AUTO_MIN_BYTES=" + std::string(*v) +
                          ": expected a byte count such as 65536 or 64K");
    }
  }
  if (auto v = detail::env("CCOLL_MPI_TUNING")) {
    const std::string what = "CCOLL_MPI_TUNING=" + std::string(*v);
    if (s.algorithm) {
      detail::fail(s, what + ": a tuning table chooses for CCOLL_MPI_ALGO=auto only");
    } else {
#ifdef CCOLL_MPI_HAS_TUNING_JSON
      std::ifstream in{std::string(*v)};
      std::stringstream text;
      text << in.rdbuf();
      if (!in) {
        detail::fail(s, what + ": cannot read the file");
      } else {
        s.fingerprint += "tuning:\n" + text.str();
        try {
          auto table = ccoll::algo::tuning_table_from_json(text.str());
          (void)ccoll::algo::BySize(
              table);  // every rule names an algorithm that plans its collective
          s.tuning = std::make_shared<const ccoll::algo::TuningTable>(std::move(table));
        } catch (const std::exception& e) {
          detail::fail(s, what + ": " + e.what());
        }
      }
#else
      detail::fail(s, what + ": this build has no JSON reader (nlohmann-json)");
#endif
    }
  }
  if (auto v = detail::env("CCOLL_MPI_TIMEOUT_S")) {
    std::uint32_t seconds = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), seconds);
    if (ec != std::errc() || end != v->data() + v->size()) {
      detail::fail(s, "CCOLL_MPI_TIMEOUT_S=" + std::string(*v) +
                          ": expected whole seconds (0: no deadline)");
    } else {
      s.timeout = std::chrono::seconds(seconds);
    }
  }
  if (auto v = detail::env("CCOLL_MPI_SLOT_BYTES")) {
    const auto n = detail::parse_size(*v);
    if (n && *n >= 16 && *n % 16 == 0 && *n <= (1ull << 30)) {
      s.slot_bytes = *n;
    } else {
      detail::fail(s, "CCOLL_MPI_SLOT_BYTES=" + std::string(*v) +
                          ": expected a multiple of 16 bytes up to 1G, such as 4M");
    }
  }
  if (auto v = detail::env("CCOLL_MPI_NSLOTS")) {
    std::uint32_t n = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec == std::errc() && end == v->data() + v->size() && n >= 2 && n <= 64) {
      s.nslots = n;
    } else {
      detail::fail(s, "CCOLL_MPI_NSLOTS=" + std::string(*v) + ": expected 2 to 64");
    }
  }
  // The values as parsed, so that equal meanings compare equal (64K and 65536, auto and unset).
  s.fingerprint = "disabled=" + std::to_string(s.disabled ? 1 : 0) +
                  "\nalgorithm=" + (s.algorithm ? s.algorithm->name() : std::string("auto")) +
                  "\ntransport=" + to_string(s.transport) +
                  "\nauto_min_bytes=" + std::to_string(s.auto_min_bytes) +
                  "\nslot_bytes=" + std::to_string(s.slot_bytes) +
                  "\nnslots=" + std::to_string(s.nslots) + "\n" + s.fingerprint;
  return s;
}

}  // namespace ccoll_mpi
