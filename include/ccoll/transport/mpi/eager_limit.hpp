// ccoll/transport/mpi/eager_limit.hpp: Open MPI's TCP eager limit, read through the MPI tool
// interface, so that a program can tell its user that messages of a slot between hosts would go
// by rendezvous.
//
// Open MPI's TCP transport (btl tcp) sends a message above btl_tcp_eager_limit by rendezvous: the
// receiver's answer travels behind the data queued in the other direction, so a link loaded both
// ways alternates directions (docs/mpi.md, "Over TCP"). ccoll's messages between hosts are up to
// Config::slot_bytes. Nothing here changes how ccoll runs; it only reads the setting.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace ccoll::transport::mpi {

namespace detail {

// The value of a string control variable of the MPI tool interface ("" when absent or unreadable).
inline std::string cvar_string(const char* name) {
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return {};
  MPI_T_cvar_handle handle = nullptr;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return {};
  std::string value;
  if (count > 0) {
    std::string buffer(static_cast<std::size_t>(count) + 1, '\0');
    if (MPI_T_cvar_read(handle, buffer.data()) == MPI_SUCCESS)
      value = buffer.substr(0, buffer.find('\0'));  // the text ends at its terminator
  }
  MPI_T_cvar_handle_free(&handle);
  return value;
}

// An unsigned integer control variable, whatever its integer type; nullopt when absent.
inline std::optional<std::uint64_t> cvar_unsigned(const char* name) {
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return std::nullopt;
  char cvar_name[256] = {}, description[1024] = {};
  int name_len = sizeof cvar_name, description_len = sizeof description;
  int verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = nullptr;
  if (MPI_T_cvar_get_info(index, cvar_name, &name_len, &verbosity, &type, &enumtype, description,
                          &description_len, &bind, &scope) != MPI_SUCCESS)
    return std::nullopt;
  MPI_T_cvar_handle handle = nullptr;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return std::nullopt;
  std::optional<std::uint64_t> out;
  if (count == 1) {
    if (type == MPI_UNSIGNED_LONG) {
      unsigned long v = 0;
      if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) out = v;
    } else if (type == MPI_UNSIGNED_LONG_LONG) {
      unsigned long long v = 0;
      if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) out = v;
    } else if (type == MPI_UNSIGNED) {
      unsigned v = 0;
      if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) out = v;
    } else if (type == MPI_INT) {
      int v = 0;
      if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS && v >= 0) out = static_cast<unsigned>(v);
    }
  }
  MPI_T_cvar_handle_free(&handle);
  return out;
}

// Whether an Open MPI component selection ("a,b", "^a,b" to exclude, "" for every component)
// admits the component `name`.
inline bool selects(const std::string& list, const std::string& name) {
  if (list.empty()) return true;
  const bool exclude = list[0] == '^';
  bool listed = false;
  std::size_t begin = exclude ? 1 : 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    if (list.compare(begin, end - begin, name) == 0 && end - begin == name.size()) listed = true;
    begin = end + 1;
  }
  return exclude ? !listed : listed;
}

}  // namespace detail

// Open MPI's btl_tcp_eager_limit in bytes, or nullopt with another MPI library or when the job's
// component selection leaves the TCP transport out (a pml list without ob1, or a btl list
// without tcp). A message is sent eagerly only if it fits with Open MPI's header (tens of bytes)
// in this limit. Callable between MPI_Init and MPI_Finalize.
inline std::optional<std::uint64_t> tcp_eager_limit() {
#ifndef OPEN_MPI
  // Other libraries have no such variable, and some (MPICH 4.3) free state that later calls use
  // when the tool interface is finalised before MPI is.
  return std::nullopt;
#else
  // Open MPI records the level asked for here as the process's thread level: ask for the one MPI
  // was initialised with, so that a program running MPI_THREAD_MULTIPLE keeps it.
  int level = MPI_THREAD_SINGLE;
  if (MPI_Query_thread(&level) != MPI_SUCCESS) return std::nullopt;
  int provided = 0;
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return std::nullopt;
  std::optional<std::uint64_t> limit = detail::cvar_unsigned("btl_tcp_eager_limit");
  if (limit) {
    if (!detail::selects(detail::cvar_string("pml"), "ob1") ||
        !detail::selects(detail::cvar_string("btl"), "tcp"))
      limit.reset();
  }
  MPI_T_finalize();
  return limit;
#endif
}

}  // namespace ccoll::transport::mpi
