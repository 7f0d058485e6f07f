#pragma once
#include <algorithm>
#include <cstdint>

// Defaults that several layers write into their own settings structs (the
// strategies, the memory estimate, `cohort simulate`'s plan): one place, so
// they cannot drift apart.

namespace cohort {

constexpr double kDefaultBucketMb = 25;   // --bucket-mb: gradient buckets (dp, zero)
constexpr double kDefaultPrefetchMb = 4;  // --prefetch-mb: ZeRO-3's parameters gathered ahead

// f32 elements in `mb` MiB, at least one: how a gradient bucket and ZeRO-3's
// prefetch budget are counted (the arenas are f32, whatever goes on the wire).
inline int64_t f32_elements_in_mib(double mb) {
  return std::max<int64_t>(1, int64_t(mb * (1 << 20) / 4));
}

}  // namespace cohort
