// bf16 where oneDNN has no bf16 kernel. oneDNN 2.6 builds bf16 matmul,
// convolution, normalization, pooling and eltwise primitives only on cores
// with AVX-512 (avx512_core); on an AVX2-only CPU it refuses them. There a
// bf16 op keeps its bf16 storage and runs the f32 kernel: its primitives are
// built on kernel_md() (the bf16 descriptors turned f32), and run() converts
// each bf16 operand into an f32 scratch before the primitive and the outputs
// back after it (round to nearest even, as the native kernels store). The
// math matches the native kernels' (bf16 inputs, f32 accumulation); the
// conversions cost a pass over each operand.
#include <atomic>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/bf16_kernels.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/typed.h"

namespace cohort::ops::cpu {
namespace {

std::atomic<bool> g_forced{false};
std::atomic<bool> g_fallback_built{false};  // some primitive was built on f32 for bf16

// Whether oneDNN builds a bf16 matmul here (the probe is the real question:
// the ISA it needs differs between oneDNN versions).
bool probe_native() {
  try {
    memory::desc a({2, 2}, memory::data_type::bf16, Tag::ab);
    memory::desc c({2, 2}, memory::data_type::f32, Tag::ab);
    dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, a, c), engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// md at another element type, its layout kept.
memory::desc with_type(const memory::desc& md, memory::data_type t) {
  dnnl_memory_desc_t d = md.data;
  d.data_type = static_cast<dnnl_data_type_t>(t);
  return memory::desc(d);
}

bool is_output(int arg) {
  return arg == DNNL_ARG_DST || arg == DNNL_ARG_DIFF_SRC || arg == DNNL_ARG_DIFF_WEIGHTS ||
         arg == DNNL_ARG_DIFF_BIAS;
}

// A reorder between two descriptors, built once per thread and pair.
dnnl::reorder& converter(const memory::desc& from, const memory::desc& to) {
  thread_local std::unordered_map<std::string, dnnl::reorder> cache;
  std::string key(reinterpret_cast<const char*>(&from.data), sizeof(from.data));
  key.append(reinterpret_cast<const char*>(&to.data), sizeof(to.data));
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from, engine(), to)))
             .first;
  return it->second;
}

// Whether md's elements fill its extent (dense, permuted, or blocked with
// padding: no gaps), so that converting the whole extent touches only them.
bool gapless(const memory::desc& md) {
  int64_t n = 1;
  for (int i = 0; i < md.data.ndims; ++i) n *= md.data.padded_dims[i];
  return md.data.offset0 == 0 &&
         int64_t(md.get_size()) == n * int64_t(memory::data_type_size(md.data_type()));
}

// A plain strided layout (no inner blocks, no offset): walkable element by element.
bool plain(const memory::desc& md) {
  return md.data.format_kind == dnnl_blocked && md.data.format_desc.blocking.inner_nblks == 0 &&
         md.data.offset0 == 0 && md.data.ndims > 0;
}

// Each element of a plain layout `d` (strides in elements) from f into t.
template <class F, class T>
void convert_strided(const F* f, T* t, const dnnl_memory_desc_t& d) {
  const int nd = d.ndims;
  const dnnl_dims_t& st = d.format_desc.blocking.strides;
  const int64_t inner = d.dims[nd - 1], s_in = st[nd - 1];
  int64_t outer = 1;
  for (int i = 0; i < nd - 1; ++i) outer *= d.dims[i];
#pragma omp parallel for if (outer * inner > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off = 0, r = o;
    for (int i = nd - 2; i >= 0; --i) {
      off += (r % d.dims[i]) * st[i];
      r /= d.dims[i];
    }
    for (int64_t j = 0; j < inner; ++j) store(t, off + j * s_in, load(f, off + j * s_in));
  }
}

// from into to, one of them bf16 and the other f32, in the same layout
// (converted flat where it has no gaps, else element by element where it is
// plain: attention's head views into qkv), else by a oneDNN reorder. oneDNN's
// reorder between bf16 and f32 is its reference one on AVX2 (cifar-resnet50
// at batch 2: 31 s of a 32 s step; gpt2-tiny: 1.5 ms a head view, measured).
void convert(const memory& from, const memory& to) {
  const memory::desc f = from.get_desc(), t = to.get_desc();
  const bool same = with_type(f, t.data_type()) == t;
  const bool widen = f.data_type() == memory::data_type::bf16;
  const void* src = from.get_data_handle();
  void* dst = to.get_data_handle();
  if (same && gapless(f)) {
    if (widen)
      bf16_to_f32(static_cast<const BF16*>(src), static_cast<float*>(dst), f.get_size() / 2);
    else
      f32_to_bf16(static_cast<const float*>(src), static_cast<BF16*>(dst), f.get_size() / 4);
  } else if (same && plain(f)) {
    if (widen)
      convert_strided(static_cast<const BF16*>(src), static_cast<float*>(dst), f.data);
    else
      convert_strided(static_cast<const float*>(src), static_cast<BF16*>(dst), f.data);
  } else {
    converter(f, t).execute(stream(), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }
}

// The descriptor primitive `p` wants for argument `arg`, or a zero one.
memory::desc wanted(const dnnl::primitive& p, int arg) {
  const dnnl_memory_desc_t* md =
      dnnl_primitive_desc_query_md(p.get_primitive_desc(), dnnl_query_exec_arg_md, arg);
  return md ? memory::desc(*md) : memory::desc();
}

}  // namespace

bool native_bf16() {
  if (g_forced) return false;
  static const bool native = probe_native();
  return native;
}

void force_bf16_fallback(bool on) { g_forced = on; }

void round_to_bf16_values(float* x, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) x[i] = rounded<BF16>(x[i]);
}

memory::desc kernel_md(const memory::desc& md) {
  if (md.data_type() != memory::data_type::bf16 || native_bf16()) return md;
  g_fallback_built = true;
  return with_type(md, memory::data_type::f32);
}

void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
  if (!g_fallback_built) {
    COHORT_DNNL(p.execute(stream(), args); stream().wait());
    return;
  }
  thread_local std::vector<std::vector<char>> scratch;
  std::unordered_map<int, memory> exec = args;
  std::vector<std::pair<memory, memory>> outputs;  // {f32 scratch, the caller's bf16}
  size_t used = 0;
  COHORT_DNNL({
    for (const auto& [arg, m] : args) {
      const memory::desc have = m.get_desc();
      if (have.data_type() != memory::data_type::bf16 || !m.get_data_handle()) continue;
      const memory::desc want = wanted(p, arg);
      if (want.data_type() != memory::data_type::f32) continue;
      if (scratch.size() <= used) scratch.emplace_back();
      std::vector<char>& buf = scratch[used++];
      if (buf.size() < want.get_size()) buf.resize(want.get_size());
      memory k(want, engine(), buf.data());
      convert(m, k);
      exec[arg] = k;
      if (is_output(arg)) outputs.emplace_back(k, m);
    }
    stream().wait();
    p.execute(stream(), exec);
    stream().wait();
    for (const auto& [k, m] : outputs) convert(k, m);
    stream().wait();
  });
}

}  // namespace cohort::ops::cpu

namespace cohort::ops {

bool bf16_kernels_native() { return cpu::native_bf16(); }

}  // namespace cohort::ops
