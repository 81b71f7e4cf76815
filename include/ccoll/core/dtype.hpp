// ccoll/core/dtype.hpp: the element types an allreduce can carry.
//
// f16 and bf16 are plain 16-bit storage types with host/device conversions, so that the same step
// interpreter runs on g++ without cuda_fp16.h; arithmetic on them goes through float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>

#include "ccoll/core/platform.hpp"

namespace ccoll {

enum class DataType : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
inline constexpr DataType kAllDataTypes[] = {DataType::f32,  DataType::f64, DataType::f16,
                                             DataType::bf16, DataType::i32, DataType::i64,
                                             DataType::u8};

CCOLL_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
CCOLL_HD inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// IEEE 754 binary16, round to nearest even.
struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  CCOLL_HD explicit Half(float f) : bits(from_float(f)) {}
  CCOLL_HD explicit operator float() const { return to_float(bits); }

  CCOLL_HD static std::uint16_t from_float(float f) {
    const std::uint32_t x = float_bits(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or nan
      return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow
    if (absx < 0x38800000u) {  // subnormal or zero in half
      if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);
      const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
      const int shift = 126 - static_cast<int>(absx >> 23);  // 14..24: half subnormal unit 2^-24
      const std::uint32_t rem = mant & ((1u << shift) - 1u);
      const std::uint32_t halfway = 1u << (shift - 1);
      std::uint32_t r = mant >> shift;
      if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
      return static_cast<std::uint16_t>(sign | r);
    }
    std::uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
    const std::uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  CCOLL_HD static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      if (mant == 0) return bits_float(sign);
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      return bits_float(sign | (static_cast<std::uint32_t>(112 - e) << 23) |
                        ((mant & 0x3ffu) << 13));
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

// bfloat16: the top half of a float, round to nearest even.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  CCOLL_HD explicit BFloat16(float f) : bits(from_float(f)) {}
  CCOLL_HD explicit operator float() const {
    return bits_float(static_cast<std::uint32_t>(bits) << 16);
  }

  CCOLL_HD static std::uint16_t from_float(float f) {
    const std::uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
    const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>((x + rounding) >> 16);
  }
};

template <DataType D>
struct DataTypeTraits;
template <>
struct DataTypeTraits<DataType::f32> {
  using type = float;
};
template <>
struct DataTypeTraits<DataType::f64> {
  using type = double;
};
template <>
struct DataTypeTraits<DataType::f16> {
  using type = Half;
};
template <>
struct DataTypeTraits<DataType::bf16> {
  using type = BFloat16;
};
template <>
struct DataTypeTraits<DataType::i32> {
  using type = std::int32_t;
};
template <>
struct DataTypeTraits<DataType::i64> {
  using type = std::int64_t;
};
template <>
struct DataTypeTraits<DataType::u8> {
  using type = std::uint8_t;
};
template <DataType D>
using element_t = typename DataTypeTraits<D>::type;

template <class T>
inline constexpr bool kIsFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

constexpr std::size_t size_of(DataType d) {
  switch (d) {
    case DataType::f32:
    case DataType::i32:
      return 4;
    case DataType::f64:
    case DataType::i64:
      return 8;
    case DataType::f16:
    case DataType::bf16:
      return 2;
    case DataType::u8:
      return 1;
  }
  return 0;
}

constexpr std::string_view to_string(DataType d) {
  switch (d) {
    case DataType::f32:
      return "float";
    case DataType::f64:
      return "double";
    case DataType::f16:
      return "half";
    case DataType::bf16:
      return "bfloat16";
    case DataType::i32:
      return "int32";
    case DataType::i64:
      return "int64";
    case DataType::u8:
      return "uint8";
  }
  return "?";
}

// Accepts our names and the short ones nccl-tests users type (f32, float, fp16, bf16, int ...).
inline std::optional<DataType> parse_data_type(std::string_view s) {
  struct Name {
    std::string_view name;
    DataType type;
  };
  static constexpr Name kNames[] = {
      {"f32", DataType::f32},     {"float", DataType::f32},  {"float32", DataType::f32},
      {"f64", DataType::f64},     {"double", DataType::f64}, {"float64", DataType::f64},
      {"f16", DataType::f16},     {"half", DataType::f16},   {"fp16", DataType::f16},
      {"float16", DataType::f16}, {"bf16", DataType::bf16},  {"bfloat16", DataType::bf16},
      {"i32", DataType::i32},     {"int32", DataType::i32},  {"int", DataType::i32},
      {"i64", DataType::i64},     {"int64", DataType::i64},  {"u8", DataType::u8},
      {"uint8", DataType::u8}};
  for (const auto& n : kNames)
    if (n.name == s) return n.type;
  return std::nullopt;
}

// The DataType of element type T (the inverse of dispatch_data_type).
template <class T>
constexpr DataType data_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return DataType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DataType::f64;
  else if constexpr (std::is_same_v<T, Half>)
    return DataType::f16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DataType::bf16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DataType::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DataType::i64;
  else {
    static_assert(std::is_same_v<T, std::uint8_t>, "not an element type of ccoll::DataType");
    return DataType::u8;
  }
}

// Calls f(T{}) with the element type of d; the one dtype switch of the library.
template <class F>
decltype(auto) dispatch_data_type(DataType d, F&& f) {
  switch (d) {
    case DataType::f32:
      return f(float{});
    case DataType::f64:
      return f(double{});
    case DataType::f16:
      return f(Half{});
    case DataType::bf16:
      return f(BFloat16{});
    case DataType::i32:
      return f(std::int32_t{});
    case DataType::i64:
      return f(std::int64_t{});
    case DataType::u8:
      return f(std::uint8_t{});
  }
  return f(float{});
}

}  // namespace ccoll
