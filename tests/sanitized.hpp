// Test helper: whether this build runs under ASan or TSan, for the bounds that only hold without
// them (resident memory, which their quarantine keeps) or that they stretch (time limits).
#pragma once

namespace ccoll::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace ccoll::testing
