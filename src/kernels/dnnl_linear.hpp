// A linear layer's three matrix products (y = x w^T + b forward; dx = dy w and dw = dy^T x
// backward), each on LibTorch's at::mm, oneDNN's sgemm or our own (kernels/sgemm.hpp), chosen per
// machine and per shape and product.
//
// Why: LibTorch 1.13's float32 CPU products go to the BLAS it links (OpenBLAS on Debian), whose
// kernels depend on how the machine is set up (OPENBLAS_CORETYPE pins them: these VMs pin an AVX2
// core on an AVX-512 CPU, half the rate); oneDNN's sgemm picks its own ISA at run time; ours is
// blocked for few-token products. Which is fastest differs by CPU, environment, shape and product
// (ours measured 10-20 % faster than OpenBLAS's on the weight gradient at 256 tokens on a Zen 3,
// and level on the other two), so `gemm_choice` measures each kernel on each of the three products
// once per shape in the process and keeps, per product, the fastest where it is at least 10 %
// faster than at::mm (docs/llm.md, "The matrix products' kernel").
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace scaffold::kernels {

class KernelUse;

enum class GemmKernel { LibTorch, OneDnn, Probe };

// The kernel of each of a linear layer's three products: the forward (y), the input gradient (dx)
// and the weight gradient (dw).
struct GemmChoice {
  enum Kernel : uint8_t { LibTorch = 0, OneDnn = 1, Native = 2 };
  Kernel y = LibTorch, dx = LibTorch, dw = LibTorch;

  static GemmChoice all(Kernel k) { return {k, k, k}; }
  bool all_libtorch() const { return y == LibTorch && dx == LibTorch && dw == LibTorch; }
  // A small integer for an autograd function's saved data, and back.
  int64_t code() const { return y | dx << 2 | dw << 4; }
  static GemmChoice from_code(int64_t code);
  // The probe's verdict: a kernel's name where all three products run it ("libtorch", "onednn",
  // "native"), else "y=<kernel> dx=<kernel> dw=<kernel>".
  std::string name() const;
  // name()'s inverse; anything else is a core::Error naming the text.
  static GemmChoice parse(const std::string& text);
};
// "libtorch", "onednn", "native".
const char* to_string(GemmChoice::Kernel kernel);
// "libtorch", "onednn", "probe": the config's and system.json's names.
const char* to_string(GemmKernel kernel);

// Whether this build has oneDNN's sgemm (libdnnl-dev at configure time).
bool dnnl_gemm_built();

// Whether dnnl_linear takes these: a CPU build with oneDNN, float32 CPU tensors, x (..., in) and w
// (out, in), not under CPU autocast (where at::linear runs the product in bf16).
bool dnnl_linear_supported(const at::Tensor& x, const at::Tensor& w);

// at::linear(x, w, b) (b may be undefined) with oneDNN's sgemm for the forward product and for
// both gradients; throws core::Error naming the arguments where !dnnl_linear_supported.
at::Tensor dnnl_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// at::linear(x, w, b) with each product on the kernel `choice` names (a float32 CPU x and w, not
// under autocast; oneDNN where this build has it, at::mm in its place otherwise). For the tests
// and the probe's users.
at::Tensor chosen_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                         GemmChoice choice);

// The products take the rows (tokens, pixels) in blocks of at most this many, each block a product
// of its own (the weight gradient's blocks added up): a kernel packs its operands into buffers of
// its own, and over the 100 352 pixels of a ResNet-50 1x1 layer at batch 32 (kernels/conv1x1.hpp)
// that packing held ~85 MiB more at the step's peak, measured on a Zen 5. The probe times one
// block.
inline constexpr int64_t kGemmRowsPerProduct = 16384;

// A kernel is kept for a product where its time is below this fraction of at::mm's (the probe's
// time ratio): above it the two are within the machine's noise and LibTorch, the reference, stays.
inline constexpr double kGemmMargin = 0.9;

// The probe: for an (m x k) input `x` and an (n x k) weight `w` (float32, contiguous), each
// product timed on each kernel this build has (best of 2 after a warm-up), once per shape in this
// process and remembered in probe_verdicts(), whose line reads "gemm 256x768 by 2304x768: y
// libtorch 2.10 ms, y onednn 2.31 ms, y native 2.05 ms, dx libtorch ... -> y=libtorch
// dx=libtorch dw=native". It times the call's own x (its first kGemmRowsPerProduct rows: the
// products' block) and w, so that it allocates only what the products write (an output-layer
// weight of a large model is hundreds of MB: a second one would raise the run's peak memory).
GemmChoice gemm_choice(const at::Tensor& x, const at::Tensor& w);

// Why linear_cross_entropy does not take these ("" when it does): x (N x k) and w (V x k) float32
// on the CPU, not under CPU autocast, or float32 or bf16 under CPU autocast to bf16 on a CPU with
// bf16 products (cpu_has_bf16_products); labels (N) int64 on the CPU.
std::string linear_cross_entropy_unsupported(const at::Tensor& x, const at::Tensor& w,
                                             const at::Tensor& labels);

// The per-token cross-entropy of the logits x w^T against `labels`, as at::cross_entropy of
// at::linear(x, w) without reduction (N float32 losses), in one autograd node: the forward's
// product (on the kernel `kernel` gives the shape's forward, as linear() would run it) writes the N
// x V logits, kernels::cross_entropy_rows turns them in place into the losses' gradient (softmax
// minus one-hot), and the backward is the two gradient products over that tensor, with x's rows
// (and the input gradient's) scaled by the incoming per-token gradient. So the logits are one
// tensor, kept, and read by the products only: LibTorch's operations keep a second one (the
// softmax) and make about ten passes over them (docs/llm.md, "The output layer's loss"). A
// core::Error names the arguments where linear_cross_entropy_unsupported, or a label outside [0,
// V). Under CPU autocast to bf16 (a CPU with bf16 products): x and w rounded to bf16, the products
// on oneDNN's matmul (kernels/bf16_gemm.hpp; LibTorch's at::mm for `kernel` LibTorch), the logits
// their float32 sums (autocast would round them to bf16 first), the gradient tensor kept in bf16
// for the two backward products, the input and weight gradients float32 sums returned in x's and
// w's dtypes.
at::Tensor linear_cross_entropy(const at::Tensor& x, const at::Tensor& w, const at::Tensor& labels,
                                GemmKernel kernel);

// Whether this CPU runs LibTorch's bf16 matrix products in hardware: AVX-512 with its BW, VL and DQ
// extensions, LibTorch's condition for handing them to oneDNN. Elsewhere (an AVX2 CPU) LibTorch
// 1.13 multiplies bf16 matrices in reference loops, ~35 times slower than float32 (docs/llm.md,
// "bf16 on a CPU without bf16 products"). force_bf16_products(0 or 1) makes tests take either
// answer on any CPU; -1 follows CPUID again.
bool cpu_has_bf16_products();
void force_bf16_products(int has);
// Whether bf16 products on the calling thread would be LibTorch's reference loops: CPU autocast to
// bf16 is on and the CPU has no bf16 products. Where it is, linear() and the ResNet's convolutions
// multiply the bf16 operands in float32 instead.
bool bf16_products_emulated();
// t's values rounded to bf16 (as autocast's cast rounds a bf16 product's operands), held in
// float32 for the float32 kernels that multiply them there; an undefined t stays undefined.
at::Tensor bf16_rounded(const at::Tensor& t);
// Whether a bf16 run's linear layers on `device` with `kernel` multiply in float32: a CPU without
// bf16 products and a kernel other than LibTorch's (linear() below). What an MFU's peak must be
// measured in.
bool bf16_linear_in_float32(const c10::Device& device, GemmKernel kernel);
// Whether a bf16 run's linear layers on `device` with `kernel` take oneDNN's bf16 matmul
// (kernels/bf16_gemm.hpp): a CPU with bf16 products where oneDNN has the kernels
// (bf16_gemm_available), a kernel other than LibTorch's. An MFU's peak must time that product too.
bool bf16_linear_on_onednn(const c10::Device& device, GemmKernel kernel);

// at::linear(x, w, b) as CPU autocast to bf16 computes it, without bf16 products: x, w and b
// rounded to bf16 (autocast's casts), their products taken in float32 (a product of two bf16
// values is exact in float32, and the sums are float32, as in oneDNN's bf16 products), the output
// rounded to bf16; backward, the gradients of x, w and b rounded to bf16 (as autocast's bf16
// gradients are) and returned in x's, w's and b's dtypes. The products run on the kernels `kernel`
// gives the shape (the probe's verdict for float32, or one kernel). x (..., k) and w (n x k) on
// the CPU, float32 or bf16; b (n) or undefined. Saves x and w in bf16 for the backward, as
// autocast's products do. A core::Error names the arguments otherwise.
at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                       GemmKernel kernel);

// at::linear by `kernel`: LibTorch; oneDNN where it takes the arguments; or, for float32 CPU
// arguments, each product on the kernel the probe chose for the shape. Under CPU autocast to bf16
// (kernel probe or onednn), one autograd node of bf16 products: on a CPU with bf16 products on
// oneDNN's matmul (kernels/bf16_gemm.hpp; at::mm where it is not available), the input and weight
// gradients their float32 sums, rounded only where the operand is bf16 (autocast rounds them to
// bf16 and widens them again: a pass over every weight gradient saved); on a CPU without,
// bf16_linear on the float32 kernels instead of LibTorch's bf16 reference loops. Each call is
// counted in `use` (op "gemm") when given, by the kernel of its forward product ("<kernel>_fp32"
// for bf16_linear, logged once with its reason), with the reason when OneDnn had to leave a call to
// LibTorch.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, GemmKernel kernel,
                  KernelUse* use = nullptr);

}  // namespace scaffold::kernels
