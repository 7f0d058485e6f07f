#include "ops/cpu/dnnl_util.h"

namespace cohort::ops::cpu {

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::kF32: return memory::data_type::f32;
    case DType::kBF16: return memory::data_type::bf16;
    case DType::kF16: return memory::data_type::f16;
    case DType::kI32: return memory::data_type::s32;
    case DType::kI64: break;  // no oneDNN type; no op takes it
  }
  return memory::data_type::undef;
}

void require_compute_dtype(const char* op, DType t) {
  if (t != DType::kF32 && t != DType::kBF16)
    throw Error(detail::concat(op, ": dtype ", dtype_name(t),
                               " is not supported by the CPU ops (f32 and bf16 only)"));
}

void check_operands(const char* op, DType want, std::initializer_list<Operand> operands) {
  for (const auto& [name, v] : operands) {
    if (!v) continue;
    if (v.device != Device::kCpu)
      throw Error(detail::concat(op, ": ", name, " is on ", device_name(v.device),
                                 ", the op runs on cpu"));
    check_dtype(op, name, v.dtype, want);
  }
}

Reorder::Reorder(const memory::desc& src, const memory::desc& dst, bool accumulate)
    : src_md_(src), dst_md_(dst) {
  identity_ = (src == dst) && !accumulate;
  if (identity_) return;
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  COHORT_DNNL(prim_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src, engine(), dst, attr)));
}

void Reorder::operator()(void* src, void* dst) {
  if (identity_) {
    if (src != dst) std::memcpy(dst, src, src_md_.get_size());
    return;
  }
  memory s(src_md_, engine(), src), d(dst_md_, engine(), dst);
  run(prim_, {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, d}});
}

NormalizationBackward::NormalizationBackward(dnnl::primitive prim, const memory::desc& data,
                                             const memory::desc& stat, int64_t c)
    : prim_(std::move(prim)),
      data_md_(data),
      stat_md_(stat),
      vec_md_({c}, memory::data_type::f32, Tag::a),
      dscale_(size_t(c)),
      dshift_(size_t(c)),
      zero_(size_t(c), 0.0f) {}

void NormalizationBackward::operator()(ConstView src, ConstView ddst, ConstView scale,
                                       const float* mean, const float* var, View dsrc,
                                       View dscale_v, View dshift_v, bool accumulate,
                                       std::unordered_map<int, memory> extra) {
  float* dscale = dscale_v.as<float>();
  float* dshift = dshift_v.as<float>();
  extra.insert({{DNNL_ARG_SRC, mem(data_md_, src.data)},
                {DNNL_ARG_DIFF_DST, mem(data_md_, ddst.data)},
                {DNNL_ARG_SCALE, mem(vec_md_, scale.data)},
                // oneDNN 2.6 wants the shift at backward although the math does not use it.
                {DNNL_ARG_SHIFT, mem(vec_md_, zero_.data())},
                {DNNL_ARG_MEAN, mem(stat_md_, mean)},
                {DNNL_ARG_VARIANCE, mem(stat_md_, var)},
                {DNNL_ARG_DIFF_SRC, mem(data_md_, dsrc.data)},
                {DNNL_ARG_DIFF_SCALE, mem(vec_md_, accumulate ? dscale_.data() : dscale)},
                {DNNL_ARG_DIFF_SHIFT, mem(vec_md_, accumulate ? dshift_.data() : dshift)}});
  run(prim_, extra);
  if (!accumulate) return;
  for (size_t k = 0; k < dscale_.size(); ++k) {
    dscale[k] += dscale_[k];
    dshift[k] += dshift_[k];
  }
}

}  // namespace cohort::ops::cpu
