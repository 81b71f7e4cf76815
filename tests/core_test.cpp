#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "ccoll/core/dtype.hpp"
#include "ccoll/core/error.hpp"
#include "ccoll/core/op.hpp"

namespace core_test {
using namespace ccoll;

TEST_CASE("half round-trips every finite half value") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0) continue;  // nan payloads
    const float f = Half::to_float(bits);
    CHECK(Half::from_float(f) == bits);
  }
}

TEST_CASE("half rounds to nearest even and saturates to infinity") {
  CHECK(static_cast<float>(Half(1.0f)) == 1.0f);
  CHECK(static_cast<float>(Half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(static_cast<float>(Half(70000.0f))));
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even -> 1.
  CHECK(static_cast<float>(Half(1.0f + std::ldexp(1.0f, -11))) == 1.0f);
  CHECK(static_cast<float>(Half(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));
  CHECK(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("bfloat16 keeps the top half of a float, rounding to nearest even") {
  CHECK(static_cast<float>(BFloat16(1.0f)) == 1.0f);
  CHECK(static_cast<float>(BFloat16(3.0f)) == 3.0f);
  CHECK(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits == BFloat16(1.0f).bits);
  CHECK(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("ops combine and finalize") {
  CHECK(combine<ReduceOp::sum>(2, 3) == 5);
  CHECK(combine<ReduceOp::prod>(2, 3) == 6);
  CHECK(combine<ReduceOp::min>(2, 3) == 2);
  CHECK(combine<ReduceOp::max>(2.0, 3.0) == 3.0);
  CHECK(finalize<ReduceOp::avg>(9.0f, 3) == 3.0f);
  CHECK(finalize<ReduceOp::sum>(9.0f, 3) == 9.0f);
  CHECK(static_cast<float>(combine<ReduceOp::max>(Half(1.0f), Half(-2.0f))) == 1.0f);
  // Integers wrap (no signed-overflow UB) and avg divides by rank counts beyond the type's range.
  CHECK(combine<ReduceOp::sum>(std::int32_t{2147483647}, std::int32_t{1}) == -2147483647 - 1);
  CHECK(combine<ReduceOp::avg>(std::int64_t{INT64_MAX}, std::int64_t{1}) == INT64_MIN);
  CHECK(combine<ReduceOp::prod>(std::int32_t{65536}, std::int32_t{65536}) == 0);
  CHECK(combine<ReduceOp::prod>(std::uint8_t{16}, std::uint8_t{17}) == 16);
  CHECK(combine<ReduceOp::sum>(std::uint8_t{255}, std::uint8_t{2}) == 1);
  CHECK(finalize<ReduceOp::avg>(std::uint8_t{200}, 256) == 0);
  CHECK(finalize<ReduceOp::avg>(std::uint8_t{200}, 100) == 2);
  CHECK(finalize<ReduceOp::avg>(std::int32_t{-9}, 2) == -4);
  CHECK(finalize<ReduceOp::avg>(std::int64_t{-9}, 300) == 0);
}

TEST_CASE("names parse back") {
  for (DataType d : kAllDataTypes) CHECK(parse_data_type(to_string(d)) == d);
  for (ReduceOp op : kAllReduceOps) CHECK(parse_reduce_op(to_string(op)) == op);
  CHECK_FALSE(parse_data_type("complex").has_value());
}

TEST_CASE("errors name the argument and the rank") {
  try {
    throw_invalid_argument(3, "count", "> 0", "0");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(e.rank() == 3);
    CHECK(std::strstr(e.what(), "rank 3") != nullptr);
    CHECK(std::strstr(e.what(), "'count'") != nullptr);
  }
}
}  // namespace core_test
