// oneDNN plumbing for the CPU ops: one engine and stream per process, a check
// macro that turns dnnl::error into cohort::Error with file:line, and a
// helper to run a reorder (layout change, optionally accumulating).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <cstring>
#include <unordered_map>

#include "core/error.h"

namespace cohort::ops::cpu {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;
constexpr auto kF32 = dnnl::memory::data_type::f32;

dnnl::engine& engine();
dnnl::stream& stream();

// A oneDNN memory over a buffer cohort owns (no copy).
inline memory mem(const memory::desc& md, const void* p) {
  return memory(md, engine(), const_cast<void*>(p));
}

// Runs a primitive with its arguments on the process stream.
void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args);

// A reorder from one layout to another, built once; `accumulate` adds into dst.
class Reorder {
 public:
  Reorder() = default;
  Reorder(const memory::desc& src, const memory::desc& dst, bool accumulate = false);
  void operator()(void* src, void* dst);
  bool identity() const { return identity_; }

 private:
  memory::desc src_md_, dst_md_;
  dnnl::reorder prim_;
  bool identity_ = true;
};

}  // namespace cohort::ops::cpu

#define COHORT_DNNL(expr)                                                                    \
  do {                                                                                       \
    try {                                                                                    \
      expr;                                                                                  \
    } catch (const dnnl::error& e) {                                                         \
      throw ::cohort::Error(::cohort::detail::concat(__FILE__, ":", __LINE__, ": oneDNN: ", \
                                                     e.what()));                             \
    }                                                                                        \
  } while (0)
