#pragma once

// Defaults that several layers write into their own settings structs (the
// strategies, the memory estimate, `cohort simulate`'s plan): one place, so
// they cannot drift apart.

namespace cohort {

constexpr double kDefaultBucketMb = 25;   // --bucket-mb: gradient buckets (dp, zero)
constexpr double kDefaultPrefetchMb = 4;  // --prefetch-mb: ZeRO-3's parameters gathered ahead

}  // namespace cohort
