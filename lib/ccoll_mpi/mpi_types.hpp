// ccoll_mpi/mpi_types.hpp: MPI's predefined datatypes and ops as ccoll's DataType and ReduceOp.
//
// Only the handles named here are served; every derived datatype and user op goes to MPI. A C
// type maps by its size on this platform (MPI_LONG is i64 on LP64, i32 on LLP64), and the mapping
// is kept only where MPI agrees on the size (PMPI_Type_size). MPI_BYTE and MPI_CHAR
// are not numeric types (MPI standard Sec. 6.9.2 allows no arithmetic op on them), and ccoll has no
// 8-bit signed, 16-bit integer or unsigned 32/64-bit type, so those go to MPI too.
#pragma once

#include <mpi.h>

#include <climits>
#include <optional>

#include <ccoll/core/dtype.hpp>
#include <ccoll/core/op.hpp>

namespace ccoll_mpi {

template <class C>
constexpr std::optional<ccoll::DataType> integer_type() {
  if constexpr (CHAR_BIT == 8 && sizeof(C) == 4) {
    return ccoll::DataType::i32;
  } else if constexpr (CHAR_BIT == 8 && sizeof(C) == 8) {
    return ccoll::DataType::i64;
  } else {
    return std::nullopt;
  }
}

// The ccoll type of a predefined MPI datatype handle, without asking MPI.
inline std::optional<ccoll::DataType> lookup_datatype(MPI_Datatype t) {
  if (t == MPI_FLOAT)
    return sizeof(float) == 4 ? std::optional(ccoll::DataType::f32) : std::nullopt;
  if (t == MPI_DOUBLE) {
    return sizeof(double) == 8 ? std::optional(ccoll::DataType::f64) : std::nullopt;
  }
  if (t == MPI_INT) return integer_type<int>();
  if (t == MPI_LONG) return integer_type<long>();
  if (t == MPI_LONG_LONG_INT || t == MPI_LONG_LONG) return integer_type<long long>();
  if (t == MPI_INT32_T) return ccoll::DataType::i32;
  if (t == MPI_INT64_T) return ccoll::DataType::i64;
  if (t == MPI_UINT8_T || t == MPI_UNSIGNED_CHAR) {
    return CHAR_BIT == 8 ? std::optional(ccoll::DataType::u8) : std::nullopt;
  }
  return std::nullopt;
}

// lookup_datatype, kept only where MPI's size of the type agrees with ccoll's.
inline std::optional<ccoll::DataType> to_ccoll(MPI_Datatype t) {
  const auto d = lookup_datatype(t);
  if (!d) return std::nullopt;
  int size = 0;
  if (PMPI_Type_size(t, &size) != MPI_SUCCESS || static_cast<std::size_t>(size) != size_of(*d))
    return std::nullopt;
  return d;
}

enum class OpKind : std::uint8_t { served, predefined, user };

struct OpMapping {
  OpKind kind = OpKind::user;
  ccoll::ReduceOp op = ccoll::ReduceOp::sum;
};

inline OpMapping to_ccoll(MPI_Op o) {
  if (o == MPI_SUM) return {OpKind::served, ccoll::ReduceOp::sum};
  if (o == MPI_PROD) return {OpKind::served, ccoll::ReduceOp::prod};
  if (o == MPI_MIN) return {OpKind::served, ccoll::ReduceOp::min};
  if (o == MPI_MAX) return {OpKind::served, ccoll::ReduceOp::max};
  for (MPI_Op p : {MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC,
                   MPI_REPLACE, MPI_NO_OP})
    if (o == p) return {OpKind::predefined, ccoll::ReduceOp::sum};
  return {OpKind::user, ccoll::ReduceOp::sum};
}

}  // namespace ccoll_mpi
