// tools/support/cli_args.hpp: the command-line pieces that ccoll_perf and the `ccoll` tool share:
// the usage error (exit status 2), sizes with binary suffixes (8K, 16M, 1G) and algorithm names
// looked up in the library's registry (ccoll/algo/registry.hpp).
//
// Each tool keeps its own flags and its own wording: ccoll_perf follows nccl-tests (exact sizes,
// "-b 64M"), `ccoll plan` takes sizes as numbers too ("--bytes 1.33e9"); what they share is the
// grammar of the suffixes and the registry lookup, so the two cannot drift apart.
#pragma once

#include <cmath>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ccoll/algo/registry.hpp"
#include "ccoll/core/error.hpp"

namespace ccoll::cli {

// A bad command line: exit status 2. Anything else that fails is exit status 1.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The binary multiple of a size suffix: K, M, G (either case) are 2^10, 2^20, 2^30; any other
// character is no suffix (0).
constexpr std::uint64_t binary_multiple(char c) {
  switch (c) {
    case 'k':
    case 'K':
      return 1ull << 10;
    case 'm':
    case 'M':
      return 1ull << 20;
    case 'g':
    case 'G':
      return 1ull << 30;
    default:
      return 0;
  }
}

// An exact size in bytes, as nccl-tests spells them: "64", "8K", "16M", "1G", "2KB", "4MiB",
// "64B". Nothing when `s` is not one or does not fit in 64 bits.
inline std::optional<std::uint64_t> parse_size(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(s[i] - '0');
    if (value > (~0ull - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string_view suffix = s.substr(i);
  std::uint64_t multiple = 1;
  if (!suffix.empty()) {
    if (const std::uint64_t m = binary_multiple(suffix[0]); m != 0) {
      multiple = m;
      suffix.remove_prefix(1);
      if (suffix == "iB" || suffix == "ib") suffix = "";
    } else if (suffix[0] != 'b' && suffix[0] != 'B') {
      return std::nullopt;
    }
    if (suffix == "B" || suffix == "b") suffix = "";
    if (!suffix.empty()) return std::nullopt;
  }
  if (value > (~0ull) / multiple) return std::nullopt;
  return value * multiple;
}

// A size as a number: "1048576", "1.33e9", or a finite number with a K, M or G suffix ("16K",
// "1.5M"). Nothing when `s` is not one (the caller checks the range and names its flag).
inline std::optional<double> parse_scaled_size(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::string num = s;
  double multiple = 1;
  if (const std::uint64_t m = binary_multiple(s.back()); m != 0) {
    multiple = static_cast<double>(m);
    num.pop_back();
  }
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(num, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != num.size() || !std::isfinite(v)) return std::nullopt;
  return v * multiple;
}

// The registry's entry for an algorithm name, optionally with -overlap or -phased. When there is
// none, throws the UsageError that `unknown(names)` words from the registered names (each tool
// names its own flag).
template <class Message>
algo::AlgorithmSpec find_algorithm(std::string_view name, Message&& unknown) {
  try {
    return algo::find_algorithm(name);
  } catch (const Error&) {
    throw UsageError(unknown(algo::algorithm_names()));
  }
}

}  // namespace ccoll::cli
