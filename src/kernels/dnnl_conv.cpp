// oneDNN convolution: a torch autograd Function over three cached oneDNN primitives (forward,
// backward data, backward weights) per shape and algorithm. User tensors are wrapped as oneDNN
// memory without a copy; where the primitive wants another layout (its blocked nCdhw16c and the
// like) the data is reordered in and the result reordered out, as LibTorch's own oneDNN path does.
#include "kernels/dnnl_conv.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.hpp"
#include "nn/memory_format.hpp"

#if SCAFFOLD_WITH_DNNL
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "kernels/dnnl_engine.hpp"
#endif

namespace scaffold::kernels {

bool dnnl_conv3d_built() {
  return SCAFFOLD_WITH_DNNL != 0;
}

namespace {

// x and w as oneDNN takes them: CPU, one float dtype (bf16 where this CPU's oneDNN has it), w (O,
// C, k...) over x (N, C, ...) of rank `dim`.
bool plain_arguments(const at::Tensor& x, const at::Tensor& w, int64_t dim) {
  if (!SCAFFOLD_WITH_DNNL) return false;
  if (!x.defined() || !w.defined() || !x.device().is_cpu() || !w.device().is_cpu()) return false;
  if (x.dim() != dim || w.dim() != dim || x.size(1) != w.size(1)) return false;
  if (x.scalar_type() != w.scalar_type()) return false;
  return x.scalar_type() == at::kFloat ||
         (x.scalar_type() == at::kBFloat16 && dnnl_bf16_conv_available());
}

// One value per spatial dimension from `v` (one value for all, or one each); empty when neither.
std::vector<int64_t> per_dim(at::IntArrayRef v, std::size_t spatial) {
  if (v.size() == 1) return std::vector<int64_t>(spatial, v[0]);
  if (v.size() == spatial) return v.vec();
  return {};
}

std::string describe(const at::Tensor& x, const at::Tensor& w) {
  return fmt::format("input {} {} on {}, weight {} {}", fmt::join(x.sizes(), "x"),
                     c10::toString(x.scalar_type()), x.device().str(), fmt::join(w.sizes(), "x"),
                     c10::toString(w.scalar_type()));
}

}  // namespace

bool dnnl_conv3d_supported(const at::Tensor& x, const at::Tensor& w) {
  if (!plain_arguments(x, w, 5)) return false;
  const int64_t k = w.size(2);
  return k % 2 == 1 && w.size(3) == k && w.size(4) == k;
}

#if SCAFFOLD_WITH_DNNL
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

memory::data_type dnnl_type(at::ScalarType t) {
  return t == at::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

dnnl::algorithm dnnl_algorithm(DnnlAlgorithm a) {
  return a == DnnlAlgorithm::Winograd ? dnnl::algorithm::convolution_winograd
                                      : dnnl::algorithm::convolution_direct;
}

// Whether x (4-D or 5-D) is laid out channels-last (and not also contiguous).
bool channels_last(const at::Tensor& x) {
  if (x.dim() == 5) return nn::is_channels_last_3d(x);
  return !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
}

at::MemoryFormat format_of(int64_t dim, bool cl) {
  if (!cl) return at::MemoryFormat::Contiguous;
  return dim == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

// A convolution's arguments besides the tensors.
struct Conv {
  std::vector<int64_t> stride, padding;  // one per spatial dimension
  DnnlAlgorithm algorithm = DnnlAlgorithm::Direct;
};

// One convolution shape and algorithm: its three primitives and the user (plain) layouts they
// exchange.
struct Primitives {
  memory::desc src_user, wei_user, dst_user, diff_wei_user;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
};

// (x sizes, w sizes, stride, padding, dtype, channels-last)
using ShapeKey = std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
                            std::vector<int64_t>, int, bool>;
using Key = std::tuple<ShapeKey, int>;  // and the algorithm

ShapeKey shape_key(const at::Tensor& x, const at::Tensor& w, const Conv& c) {
  return {x.sizes().vec(), w.sizes().vec(), c.stride, c.padding, static_cast<int>(x.scalar_type()),
          channels_last(x)};
}

// The shape's primitives for c.algorithm, built on first use; null when oneDNN has no
// implementation of that algorithm for it on this CPU. core::Error when no output is left.
std::shared_ptr<const Primitives> primitives_for(const at::Tensor& x, const at::Tensor& w,
                                                 const Conv& c) {
  const Key key{shape_key(x, w, c), static_cast<int>(c.algorithm)};
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Primitives>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  const int64_t dims = x.dim(), spatial = dims - 2;
  memory::dims src_dims = x.sizes().vec(), wei_dims = w.sizes().vec();
  memory::dims dst_dims{x.size(0), w.size(0)};
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t out = (x.size(2 + d) + 2 * c.padding[d] - w.size(2 + d)) / c.stride[d] + 1;
    if (out < 1 || x.size(2 + d) + 2 * c.padding[d] < w.size(2 + d))
      throw core::Error(fmt::format(
          "oneDNN convolution: kernel {} with padding {} leaves no output of a {} input",
          fmt::join(w.sizes().slice(2), "x"), fmt::join(c.padding, "x"),
          fmt::join(x.sizes().slice(2), "x")));
    dst_dims.push_back(out);
  }
  const memory::data_type dt = dnnl_type(x.scalar_type());
  const bool cl = channels_last(x);
  const Tag act = dims == 5 ? (cl ? Tag::ndhwc : Tag::ncdhw) : (cl ? Tag::nhwc : Tag::nchw);
  const Tag wei = dims == 5 ? Tag::oidhw : Tag::oihw;
  auto p = std::make_shared<Primitives>();
  p->src_user = memory::desc(src_dims, dt, act);
  p->dst_user = memory::desc(dst_dims, dt, act);
  p->wei_user = memory::desc(wei_dims, dt, wei);
  p->diff_wei_user = p->wei_user;
  // `any`: oneDNN chooses the layouts its fastest kernel for this shape and CPU wants.
  const memory::desc src_any(src_dims, dt, Tag::any), wei_any(wei_dims, dt, Tag::any),
      dst_any(dst_dims, dt, Tag::any);
  // bf16 weight gradients accumulate in float32, reordered (rounded) into the weight's dtype.
  const memory::desc diff_wei_any(wei_dims, memory::data_type::f32, Tag::any);
  dnnl::engine& engine = dnnl_cpu_engine();
  // The caller hands each primitive its scratchpad as an ATen tensor, freed after the call. In
  // oneDNN's own (library) mode it is a per-thread buffer kept for the process at the size of the
  // largest primitive run so far: ~50 MiB more resident memory in a bf16 step on AMX kernels.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::algorithm alg = dnnl_algorithm(c.algorithm);
  const memory::dims strides = c.stride, padding = c.padding;
  try {
    p->fwd_pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src_any, wei_any,
                                        dst_any, strides, padding, padding),
        attr, engine);
    p->bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(alg, src_any, wei_any, dst_any, strides, padding,
                                              padding),
        attr, engine, p->fwd_pd);
    p->bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(alg, src_any, diff_wei_any, dst_any, strides,
                                                 padding, padding),
        attr, engine, p->fwd_pd);
  } catch (const dnnl::error& e) {
    // The direct kernel takes every float32 shape; bf16 needs AVX-512 (dnnl_bf16_conv_available).
    if (c.algorithm == DnnlAlgorithm::Direct && x.scalar_type() == at::kFloat) throw;
    p = nullptr;  // no such kernel for this shape (or CPU): remembered as such
  }
  if (p) {
    p->fwd = dnnl::convolution_forward(p->fwd_pd);
    p->bwd_data = dnnl::convolution_backward_data(p->bwd_data_pd);
    p->bwd_weights = dnnl::convolution_backward_weights(p->bwd_weights_pd);
  }
  if (cache.size() >= 256) cache.clear();  // a bound for shape-changing callers
  cache.emplace(key, p);
  return p;
}

}  // namespace

bool dnnl_bf16_conv_available() {
  static const bool available = [] {
    const at::Tensor x = at::zeros({1, 16, 4, 4, 4}, at::kBFloat16);
    const at::Tensor w = at::zeros({16, 16, 3, 3, 3}, at::kBFloat16);
    return primitives_for(x, w, Conv{{1, 1, 1}, {1, 1, 1}, DnnlAlgorithm::Direct}) != nullptr;
  }();
  return available;
}

namespace {

// `user` in the layout `want`: itself when it already is, else a reordered copy.
memory in_layout(memory user, const memory::desc& want,
                 dnnl::stream& stream) {  // (memory is a handle)
  if (user.get_desc() == want) return user;
  memory m(want, dnnl_cpu_engine());
  dnnl::reorder(user, m).execute(stream, user, m);
  return m;
}

// Runs `prim` (made from `pd`) with `args` writing its output argument `out_arg` (layout
// `produced`) into `out`, with a scratchpad of its own for the call.
void run_into(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
              std::unordered_map<int, memory> args, int out_arg, const memory::desc& produced,
              memory out, dnnl::stream& stream) {
  const bool direct = produced == out.get_desc();
  memory result = direct ? out : memory(produced, dnnl_cpu_engine());
  args.emplace(out_arg, result);
  const memory::desc scratch_desc = pd.scratchpad_desc();
  const at::Tensor scratch =
      at::empty({static_cast<int64_t>(scratch_desc.get_size())}, at::TensorOptions(at::kByte));
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_desc, dnnl_cpu_engine(), scratch.data_ptr()));
  prim.execute(stream, args);
  if (!direct) dnnl::reorder(result, out).execute(stream, result, out);
  stream.wait();
}

std::shared_ptr<const Primitives> existing_primitives(const at::Tensor& x, const at::Tensor& w,
                                                      const Conv& c) {
  auto p = primitives_for(x, w, c);
  if (!p)
    throw core::Error(
        fmt::format("oneDNN has no Winograd convolution for {} on this CPU", describe(x, w)));
  return p;
}

at::Tensor forward_impl(const at::Tensor& x_in, const at::Tensor& w_in, const Conv& c) {
  const bool cl = channels_last(x_in);
  const at::Tensor x = x_in.contiguous(format_of(x_in.dim(), cl)), w = w_in.contiguous();
  const auto p = existing_primitives(x, w, c);
  const memory::dims dims = p->dst_user.dims();
  at::Tensor y = at::empty(dims, x.options().memory_format(format_of(x.dim(), cl)));
  dnnl::engine& engine = dnnl_cpu_engine();
  dnnl::stream stream(engine);
  const memory src_u(p->src_user, engine, x.data_ptr()), wei_u(p->wei_user, engine, w.data_ptr()),
      dst_u(p->dst_user, engine, y.data_ptr());
  run_into(p->fwd, p->fwd_pd,
           {{DNNL_ARG_SRC, in_layout(src_u, p->fwd_pd.src_desc(), stream)},
            {DNNL_ARG_WEIGHTS, in_layout(wei_u, p->fwd_pd.weights_desc(), stream)}},
           DNNL_ARG_DST, p->fwd_pd.dst_desc(), dst_u, stream);
  return y;
}

// The gradients of x and w (each only when asked; else undefined) from the output's, dy.
std::pair<at::Tensor, at::Tensor> backward_impl(const at::Tensor& x_in, const at::Tensor& w_in,
                                                const at::Tensor& dy_in, const Conv& c,
                                                bool want_dx, bool want_dw) {
  const bool cl = channels_last(x_in);
  const at::MemoryFormat format = format_of(x_in.dim(), cl);
  const at::Tensor x = x_in.contiguous(format), w = w_in.contiguous();
  const at::Tensor dy = dy_in.to(x.scalar_type()).contiguous(format);
  const auto p = existing_primitives(x, w, c);
  dnnl::engine& engine = dnnl_cpu_engine();
  dnnl::stream stream(engine);
  const memory dst_u(p->dst_user, engine, dy.data_ptr());
  at::Tensor dx, dw;
  if (want_dx) {
    dx = at::empty_like(x);
    const memory diff_src_u(p->src_user, engine, dx.data_ptr()),
        wei_u(p->wei_user, engine, w.data_ptr());
    run_into(p->bwd_data, p->bwd_data_pd,
             {{DNNL_ARG_DIFF_DST, in_layout(dst_u, p->bwd_data_pd.diff_dst_desc(), stream)},
              {DNNL_ARG_WEIGHTS, in_layout(wei_u, p->bwd_data_pd.weights_desc(), stream)}},
             DNNL_ARG_DIFF_SRC, p->bwd_data_pd.diff_src_desc(), diff_src_u, stream);
  }
  if (want_dw) {
    dw = at::empty_like(w);
    const memory src_u(p->src_user, engine, x.data_ptr()),
        diff_wei_u(p->diff_wei_user, engine, dw.data_ptr());
    run_into(p->bwd_weights, p->bwd_weights_pd,
             {{DNNL_ARG_SRC, in_layout(src_u, p->bwd_weights_pd.src_desc(), stream)},
              {DNNL_ARG_DIFF_DST, in_layout(dst_u, p->bwd_weights_pd.diff_dst_desc(), stream)}},
             DNNL_ARG_DIFF_WEIGHTS, p->bwd_weights_pd.diff_weights_desc(), diff_wei_u, stream);
  }
  return {dx, dw};
}

class DnnlConvFunction : public torch::autograd::Function<DnnlConvFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, std::vector<int64_t> stride,
                            std::vector<int64_t> padding, int64_t algorithm) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["algorithm"] = algorithm;
    return forward_impl(x, w, {stride, padding, static_cast<DnnlAlgorithm>(algorithm)});
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Conv c{ctx->saved_data["stride"].toIntVector(), ctx->saved_data["padding"].toIntVector(),
                 static_cast<DnnlAlgorithm>(ctx->saved_data["algorithm"].toInt())};
    auto [dx, dw] = backward_impl(saved[0], saved[1], grads.at(0), c, ctx->needs_input_grad(0),
                                  ctx->needs_input_grad(1));
    return {dx, dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor apply(const at::Tensor& x, const at::Tensor& w, const Conv& c) {
  return DnnlConvFunction::apply(x, w, c.stride, c.padding, static_cast<int64_t>(c.algorithm));
}

}  // namespace
#else
bool dnnl_bf16_conv_available() {
  return false;
}
#endif

namespace {

// The stride and padding of a 2-D convolution, checked.
#if SCAFFOLD_WITH_DNNL
std::optional<Conv> conv2d_arguments(const at::Tensor& x, const at::Tensor& w,
                                     at::IntArrayRef stride, at::IntArrayRef padding,
                                     DnnlAlgorithm algorithm) {
  if (!plain_arguments(x, w, 4)) return std::nullopt;
  Conv c{per_dim(stride, 2), per_dim(padding, 2), algorithm};
  if (c.stride.empty() || c.padding.empty()) return std::nullopt;
  for (int d = 0; d < 2; ++d)
    if (c.stride[d] < 1 || c.padding[d] < 0 || x.size(2 + d) + 2 * c.padding[d] < w.size(2 + d))
      return std::nullopt;
  return c;
}
#endif

}  // namespace

at::Tensor dnnl_conv3d(const at::Tensor& x, const at::Tensor& w, int64_t padding) {
  if (!dnnl_conv3d_supported(x, w))
    throw core::Error(fmt::format("oneDNN conv3d: unsupported arguments ({}){}", describe(x, w),
                                  dnnl_conv3d_built() ? "" : "; this build has no oneDNN"));
#if SCAFFOLD_WITH_DNNL
  return apply(x, w, {{1, 1, 1}, {padding, padding, padding}, DnnlAlgorithm::Direct});
#else
  (void)padding;
  return at::Tensor();
#endif
}

bool dnnl_conv2d_supported(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                           at::IntArrayRef padding, DnnlAlgorithm algorithm) {
#if SCAFFOLD_WITH_DNNL
  const auto c = conv2d_arguments(x, w, stride, padding, algorithm);
  if (!c) return false;
  if (algorithm == DnnlAlgorithm::Direct) return true;
  const at::Tensor xc = x.contiguous(format_of(4, channels_last(x)));
  return primitives_for(xc, w.contiguous(), *c) != nullptr;
#else
  (void)x, (void)w, (void)stride, (void)padding, (void)algorithm;
  return false;
#endif
}

at::Tensor dnnl_conv2d(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                       at::IntArrayRef padding, DnnlAlgorithm algorithm) {
  if (!dnnl_conv2d_supported(x, w, stride, padding, algorithm))
    throw core::Error(
        fmt::format("oneDNN conv2d ({}): unsupported arguments ({}, stride {}, padding {}){}",
                    algorithm == DnnlAlgorithm::Winograd ? "Winograd" : "direct", describe(x, w),
                    fmt::join(stride, "x"), fmt::join(padding, "x"),
                    dnnl_conv3d_built() ? "" : "; this build has no oneDNN"));
#if SCAFFOLD_WITH_DNNL
  return apply(x, w, *conv2d_arguments(x, w, stride, padding, algorithm));
#else
  return at::Tensor();
#endif
}

}  // namespace scaffold::kernels
