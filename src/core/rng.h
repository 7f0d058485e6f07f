// Deterministic, platform-independent RNG (xoshiro256** seeded by splitmix64),
// so a seed gives the same weights, shuffles and dropout masks everywhere.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cohort {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next();
  float uniform();                  // [0, 1)
  float uniform(float lo, float hi);
  float normal();                   // mean 0, std 1
  uint64_t below(uint64_t n);       // [0, n)
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  uint64_t s_[4];
};

}  // namespace cohort
