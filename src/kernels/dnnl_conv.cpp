// oneDNN convolution: a torch autograd Function over three cached oneDNN primitives (forward,
// backward data, backward weights). User tensors are wrapped as oneDNN memory without a copy;
// where the primitive wants another layout (its blocked nCdhw16c and the like) the data is
// reordered in and the result reordered out, as LibTorch's own oneDNN path does.
#include "kernels/dnnl_conv.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.hpp"
#include "nn/memory_format.hpp"

#if SCAFFOLD_WITH_DNNL
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#endif

namespace scaffold::model {

bool dnnl_conv3d_built() {
  return SCAFFOLD_WITH_DNNL != 0;
}

bool dnnl_conv3d_supported(const at::Tensor& x, const at::Tensor& w) {
  if (!SCAFFOLD_WITH_DNNL) return false;
  if (!x.defined() || !w.defined() || !x.device().is_cpu() || !w.device().is_cpu()) return false;
  if (x.dim() != 5 || w.dim() != 5 || x.size(1) != w.size(1)) return false;
  if (x.scalar_type() != w.scalar_type()) return false;
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16) return false;
  const int64_t k = w.size(2);
  return k % 2 == 1 && w.size(3) == k && w.size(4) == k;
}

#if SCAFFOLD_WITH_DNNL
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::data_type dnnl_type(at::ScalarType t) {
  return t == at::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// One convolution shape: its three primitives and the user (plain) layouts they exchange.
struct Primitives {
  memory::desc src_user, wei_user, dst_user, diff_wei_user;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
};

// (N, C, O, D, H, W, k, padding, dtype, channels-last)
using Key =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool>;

std::shared_ptr<const Primitives> primitives_for(const at::Tensor& x, const at::Tensor& w,
                                                 int64_t pad) {
  const bool cl = is_channels_last_3d(x);
  const Key key{x.size(0), x.size(1), w.size(0),
                x.size(2), x.size(3), x.size(4),
                w.size(2), pad,       static_cast<int>(x.scalar_type()),
                cl};
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Primitives>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  const int64_t k = w.size(2), out_d = x.size(2) + 2 * pad - k + 1,
                out_h = x.size(3) + 2 * pad - k + 1, out_w = x.size(4) + 2 * pad - k + 1;
  if (out_d < 1 || out_h < 1 || out_w < 1)
    throw core::Error(
        fmt::format("oneDNN conv3d: kernel {} with padding {} leaves no output of a {}x{}x{} input",
                    k, pad, x.size(2), x.size(3), x.size(4)));
  const memory::data_type dt = dnnl_type(x.scalar_type());
  const memory::dims src_dims{x.size(0), x.size(1), x.size(2), x.size(3), x.size(4)};
  const memory::dims wei_dims{w.size(0), w.size(1), k, k, k};
  const memory::dims dst_dims{x.size(0), w.size(0), out_d, out_h, out_w};
  const memory::dims strides{1, 1, 1}, padding{pad, pad, pad};
  const Tag act = cl ? Tag::ndhwc : Tag::ncdhw;
  auto p = std::make_shared<Primitives>();
  p->src_user = memory::desc(src_dims, dt, act);
  p->dst_user = memory::desc(dst_dims, dt, act);
  p->wei_user = memory::desc(wei_dims, dt, Tag::oidhw);
  p->diff_wei_user = p->wei_user;
  // `any`: oneDNN chooses the layouts its fastest kernel for this shape and CPU wants.
  const memory::desc src_any(src_dims, dt, Tag::any), wei_any(wei_dims, dt, Tag::any),
      dst_any(dst_dims, dt, Tag::any);
  // bf16 weight gradients accumulate in float32, reordered (rounded) into the weight's dtype.
  const memory::desc diff_wei_any(wei_dims, memory::data_type::f32, Tag::any);
  dnnl::engine& engine = cpu_engine();
  // The caller hands each primitive its scratchpad as an ATen tensor, freed after the call. In
  // oneDNN's own (library) mode it is a per-thread buffer kept for the process at the size of the
  // largest primitive run so far: ~50 MiB more resident memory in a bf16 step on AMX kernels.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  p->fwd_pd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src_any, wei_any,
                                      dst_any, strides, padding, padding),
      attr, engine);
  p->fwd = dnnl::convolution_forward(p->fwd_pd);
  p->bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_any, wei_any,
                                            dst_any, strides, padding, padding),
      attr, engine, p->fwd_pd);
  p->bwd_data = dnnl::convolution_backward_data(p->bwd_data_pd);
  p->bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any,
                                               diff_wei_any, dst_any, strides, padding, padding),
      attr, engine, p->fwd_pd);
  p->bwd_weights = dnnl::convolution_backward_weights(p->bwd_weights_pd);
  if (cache.size() >= 256) cache.clear();  // a bound for shape-changing callers
  cache.emplace(key, p);
  return p;
}

// `user` in the layout `want`: itself when it already is, else a reordered copy.
memory in_layout(memory user, const memory::desc& want,
                 dnnl::stream& stream) {  // (memory is a handle)
  if (user.get_desc() == want) return user;
  memory m(want, cpu_engine());
  dnnl::reorder(user, m).execute(stream, user, m);
  return m;
}

// Runs `prim` (made from `pd`) with `args` writing its output argument `out_arg` (layout
// `produced`) into `out`, with a scratchpad of its own for the call.
void run_into(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
              std::unordered_map<int, memory> args, int out_arg, const memory::desc& produced,
              memory out, dnnl::stream& stream) {
  const bool direct = produced == out.get_desc();
  memory result = direct ? out : memory(produced, cpu_engine());
  args.emplace(out_arg, result);
  const memory::desc scratch_desc = pd.scratchpad_desc();
  const at::Tensor scratch =
      at::empty({static_cast<int64_t>(scratch_desc.get_size())}, at::TensorOptions(at::kByte));
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_desc, cpu_engine(), scratch.data_ptr()));
  prim.execute(stream, args);
  if (!direct) dnnl::reorder(result, out).execute(stream, result, out);
  stream.wait();
}

at::Tensor forward_impl(const at::Tensor& x_in, const at::Tensor& w_in, int64_t pad) {
  const bool cl = is_channels_last_3d(x_in);
  const at::Tensor x = x_in.contiguous(volume_format(cl)), w = w_in.contiguous();
  const auto p = primitives_for(x, w, pad);
  const auto& dims = p->dst_user.dims();
  at::Tensor y = at::empty({dims[0], dims[1], dims[2], dims[3], dims[4]},
                           x.options().memory_format(volume_format(cl)));
  dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  const memory src_u(p->src_user, engine, x.data_ptr()), wei_u(p->wei_user, engine, w.data_ptr()),
      dst_u(p->dst_user, engine, y.data_ptr());
  run_into(p->fwd, p->fwd_pd,
           {{DNNL_ARG_SRC, in_layout(src_u, p->fwd_pd.src_desc(), stream)},
            {DNNL_ARG_WEIGHTS, in_layout(wei_u, p->fwd_pd.weights_desc(), stream)}},
           DNNL_ARG_DST, p->fwd_pd.dst_desc(), dst_u, stream);
  return y;
}

class DnnlConv3dFunction : public torch::autograd::Function<DnnlConv3dFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, int64_t padding) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["padding"] = padding;
    return forward_impl(x, w, padding);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t pad = ctx->saved_data["padding"].toInt();
    const bool cl = is_channels_last_3d(saved[0]);
    const at::Tensor x = saved[0].contiguous(volume_format(cl)), w = saved[1].contiguous();
    const at::Tensor dy = grads.at(0).to(x.scalar_type()).contiguous(volume_format(cl));
    const auto p = primitives_for(x, w, pad);
    dnnl::engine& engine = cpu_engine();
    dnnl::stream stream(engine);
    const memory dst_u(p->dst_user, engine, dy.data_ptr());
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty_like(x);
      const memory diff_src_u(p->src_user, engine, dx.data_ptr()),
          wei_u(p->wei_user, engine, w.data_ptr());
      run_into(p->bwd_data, p->bwd_data_pd,
               {{DNNL_ARG_DIFF_DST, in_layout(dst_u, p->bwd_data_pd.diff_dst_desc(), stream)},
                {DNNL_ARG_WEIGHTS, in_layout(wei_u, p->bwd_data_pd.weights_desc(), stream)}},
               DNNL_ARG_DIFF_SRC, p->bwd_data_pd.diff_src_desc(), diff_src_u, stream);
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty_like(w);
      const memory src_u(p->src_user, engine, x.data_ptr()),
          diff_wei_u(p->diff_wei_user, engine, dw.data_ptr());
      run_into(p->bwd_weights, p->bwd_weights_pd,
               {{DNNL_ARG_SRC, in_layout(src_u, p->bwd_weights_pd.src_desc(), stream)},
                {DNNL_ARG_DIFF_DST, in_layout(dst_u, p->bwd_weights_pd.diff_dst_desc(), stream)}},
               DNNL_ARG_DIFF_WEIGHTS, p->bwd_weights_pd.diff_weights_desc(), diff_wei_u, stream);
    }
    return {dx, dw, at::Tensor()};
  }
};

}  // namespace
#endif

at::Tensor dnnl_conv3d(const at::Tensor& x, const at::Tensor& w, int64_t padding) {
  if (!dnnl_conv3d_supported(x, w))
    throw core::Error(
        fmt::format("oneDNN conv3d: unsupported arguments (input {} {} on {}, weight {} {}){}",
                    fmt::join(x.sizes(), "x"), c10::toString(x.scalar_type()), x.device().str(),
                    fmt::join(w.sizes(), "x"), c10::toString(w.scalar_type()),
                    dnnl_conv3d_built() ? "" : "; this build has no oneDNN (libdnnl-dev)"));
#if SCAFFOLD_WITH_DNNL
  return DnnlConv3dFunction::apply(x, w, padding);
#else
  (void)padding;
  return at::Tensor();
#endif
}

}  // namespace scaffold::model
