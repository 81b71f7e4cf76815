// ccoll/transport/session.hpp: session names, the key under which the ranks of one job meet on a
// host (the shared-memory segment and token of transport/shared_memory.hpp, the CUDA IPC socket).
//
// Two jobs that derive the same name meet, and one of them fails (a rank claimed twice, a barrier
// aborted), so a name must tell apart every pair of jobs that can run at once and share /dev/shm
// or the token directory:
//   - a launcher that forks its own ranks hands them new_session(): 128 random bits, unique
//     whatever the pids, which repeat across PID namespaces (each container's first process is
//     pid 1);
//   - ranks started with neither a session nor a launcher's job id fall back on parent_session():
//     the parent's pid and start time, which their launcher shares, qualified by the PID namespace
//     (containers started in the same clock tick have the same pid and start time) and the boot
//     id (hosts that share a token directory over a network file system).
#pragma once

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "ccoll/sync/backoff.hpp"

namespace ccoll::transport {

namespace detail {

// 128 random bits as 32 hex digits.
inline std::string random_token() {
  std::random_device rd;
  std::uint64_t a = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  std::uint64_t b = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  a ^= sync::now_ns();
  b ^= static_cast<std::uint64_t>(::getpid()) << 20;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

// The characters of `s` that may appear in a session name (letters, digits, '-'), at most `max`.
inline std::string name_chars(std::string_view s, std::size_t max) {
  std::string out;
  for (char ch : s) {
    if (out.size() == max) break;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) out += ch;
  }
  return out;
}

// This process's PID namespace: the inode of /proc/self/ns/pid, else (no /proc, or a kernel
// without namespaces) the host name, which containers usually set apart as well; "" if neither.
inline std::string pid_namespace_id() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) == 0) return "ns" + std::to_string(st.st_ino);
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0')
    return "h" + name_chars(host, 32);
  return "";
}

// This kernel's boot id (16 of its hex digits: enough to tell hosts apart), "" if unreadable.
inline std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string line;
  if (!std::getline(f, line)) return "";
  return name_chars(line, 16);
}

// The start time of process `pid` (clock ticks since boot, field 22 of /proc/<pid>/stat), "0" if
// unreadable.
inline std::string process_start_time(pid_t pid) {
  std::string start = "0";
  if (std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r")) {
    char buf[1024] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    // Fields after the command name's closing parenthesis start at field 3; starttime is 22.
    const std::string stat(buf, n);
    const auto close = stat.rfind(')');
    if (close != std::string::npos) {
      std::istringstream fields(stat.substr(close + 1));
      std::string field;
      for (int k = 3; k <= 22 && (fields >> field); ++k)
        if (k == 22) start = field;
    }
  }
  return start;
}

// The session of processes started without a launcher's job id: their parent process, so the
// ranks one script or program starts meet, and two such jobs with different parents never share a
// segment, in the same container or not:
// ccoll-parent-<pid>-<start time>-<PID namespace>-<boot id>.
inline std::string parent_session() {
  const pid_t parent = ::getppid();
  std::string s = "ccoll-parent-" + std::to_string(parent) + "-" + process_start_time(parent);
  if (const std::string ns = pid_namespace_id(); !ns.empty()) s += "-" + ns;
  if (const std::string boot = boot_id(); !boot.empty()) s += "-" + boot;
  return s;
}

}  // namespace detail

// A session name no other job uses, for a launcher that forks its ranks (or hands the name to
// processes it starts): "<prefix>.<128 random bits>". Draw it once, before fork(), and give every
// rank the same name (Config::session or CCOLL_SESSION).
inline std::string new_session(std::string_view prefix) {
  std::string s(prefix);
  if (!s.empty()) s += '.';
  return s + detail::random_token();
}

}  // namespace ccoll::transport
