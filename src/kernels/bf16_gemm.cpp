#include "kernels/bf16_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>
#include <unordered_map>

#include "core/error.hpp"

#if SCAFFOLD_WITH_DNNL
#include "kernels/dnnl_engine.hpp"
#endif

namespace scaffold::kernels {

#if SCAFFOLD_WITH_DNNL
namespace bf16_matmul {

using dnnl::memory;
using Type = memory::data_type;

// (trans_a, trans_b, m, n, k, lda, ldb, ldc, bf16 out, accumulate, bias)
using Key =
    std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool>;

struct Primitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
};

std::string describe(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, bf16_out, accumulate, bias] = key;
  return fmt::format("bf16 product {}x{} by {}x{}{}{} (lda {}, ldb {}, ldc {}) into {}{}{}", m, k,
                     k, n, ta ? " (A transposed)" : "", tb ? " (B transposed)" : "", lda, ldb, ldc,
                     bf16_out ? "bf16" : "float32", accumulate ? ", accumulating" : "",
                     bias ? ", with a bias" : "");
}

std::shared_ptr<const Primitive> primitive_for(const Key& key) {
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Primitive>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const auto [ta, tb, m, n, k, lda, ldb, ldc, bf16_out, accumulate, bias] = key;
  const memory::desc a({m, k}, Type::bf16, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  const memory::desc b({k, n}, Type::bf16, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  const memory::desc c({m, n}, bf16_out ? Type::bf16 : Type::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  // The caller gives each call its scratchpad (freed after it), so that nothing stays allocated
  // at the size of the largest product run (oneDNN's library mode keeps one per thread).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  auto p = std::make_shared<Primitive>();
  try {
    const dnnl::matmul::desc desc =
        bias ? dnnl::matmul::desc(a, b, memory::desc({1, n}, Type::bf16, memory::dims{n, 1}), c)
             : dnnl::matmul::desc(a, b, c);
    p->pd = dnnl::matmul::primitive_desc(desc, attr, dnnl_cpu_engine());
    p->matmul = dnnl::matmul(p->pd);
  } catch (const dnnl::error& e) {
    throw core::Error(fmt::format("oneDNN has no {}: {}", describe(key), e.what()));
  }
  if (cache.size() >= 256) cache.clear();  // a bound for shape-changing callers
  cache.emplace(key, p);
  return p;
}

struct AlignedFree {
  void operator()(void* p) const { ::operator delete(p, std::align_val_t(64)); }
};

// The longest extent (rows, columns or reduction) of one primitive's product.
constexpr int64_t kMaxExtent = 16384;

// One product, `key` as bf16_gemm's arguments, on its primitive, with a scratchpad of its own.
void run_piece(const Key& key, const uint16_t* a, const uint16_t* b, void* c,
               const uint16_t* bias) {
  const auto p = primitive_for(key);
  const memory::desc scratch_desc = p->pd.scratchpad_desc();
  const std::size_t scratch_bytes = scratch_desc.get_size();
  std::unique_ptr<void, AlignedFree> scratch(
      scratch_bytes ? ::operator new(scratch_bytes, std::align_val_t(64)) : nullptr);
  dnnl::engine& cpu = dnnl_cpu_engine();
  dnnl::stream stream(cpu);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(p->pd.src_desc(), cpu, const_cast<uint16_t*>(a))},
      {DNNL_ARG_WEIGHTS, memory(p->pd.weights_desc(), cpu, const_cast<uint16_t*>(b))},
      {DNNL_ARG_DST, memory(p->pd.dst_desc(), cpu, c)},
      {DNNL_ARG_SCRATCHPAD, memory(scratch_desc, cpu, scratch.get())}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, memory(p->pd.bias_desc(), cpu, const_cast<uint16_t*>(bias)));
  p->matmul.execute(stream, args);
  stream.wait();
}

}  // namespace bf16_matmul
#endif

bool bf16_gemm_available() {
#if SCAFFOLD_WITH_DNNL
  static const bool available = [] {
    try {
      bf16_matmul::primitive_for({false, false, 2, 16, 16, 16, 16, 16, false, false, false});
      return true;
    } catch (const core::Error&) {
      return false;
    }
  }();
  return available;
#else
  return false;
#endif
}

void bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, void* c, int64_t ldc, Bf16GemmOut out,
               bool accumulate, const uint16_t* bias) {
  const bool bf16_out = out == Bf16GemmOut::BFloat16;
#if SCAFFOLD_WITH_DNNL
  using namespace bf16_matmul;
  const Key key{trans_a, trans_b, m, n, k, lda, ldb, ldc, bf16_out, accumulate, bias != nullptr};
  if (accumulate && bf16_out)
    throw core::Error(fmt::format("{}: accumulating needs a float32 output", describe(key)));
  if (m == 0 || n == 0) return;
  if (k < 1) throw core::Error(fmt::format("{}: an empty reduction", describe(key)));
  // Extents above kMaxExtent are split into equal pieces, each its own product (pieces of the
  // reduction add to C): oneDNN's kernel for one product over a whole vocabulary (50 304 rows,
  // columns or products) ran at 650-800 GFLOP/s, pieces of 2 000-16 000 at 810-850, on a Zen 5
  // (docs/llm.md, "bf16 products on oneDNN's matmul"). A bf16 C takes its reduction whole.
  const auto pieces = [](int64_t extent) { return (extent + kMaxExtent - 1) / kMaxExtent; };
  const int64_t m_step = (m + pieces(m) - 1) / pieces(m), n_step = (n + pieces(n) - 1) / pieces(n);
  const int64_t k_step = bf16_out ? k : (k + pieces(k) - 1) / pieces(k);
  const std::size_t c_size = bf16_out ? 2 : 4;
  for (int64_t i = 0; i < m; i += m_step)
    for (int64_t j = 0; j < n; j += n_step)
      for (int64_t p = 0; p < k; p += k_step) {
        const int64_t mi = std::min(m_step, m - i), nj = std::min(n_step, n - j),
                      kp = std::min(k_step, k - p);
        const uint16_t* a_piece = a + (trans_a ? p * lda + i : i * lda + p);
        const uint16_t* b_piece = b + (trans_b ? j * ldb + p : p * ldb + j);
        void* c_piece = static_cast<char*>(c) + (i * ldc + j) * c_size;
        run_piece({trans_a, trans_b, mi, nj, kp, lda, ldb, ldc, bf16_out, accumulate || p > 0,
                   bias != nullptr && p == 0},
                  a_piece, b_piece, c_piece, bias != nullptr && p == 0 ? bias + j : nullptr);
      }
#else
  (void)trans_a, (void)trans_b, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc,
      (void)accumulate, (void)bias, (void)bf16_out;
  throw core::Error(
      fmt::format("bf16 product {}x{} by {}x{}: this build has no oneDNN", m, k, k, n));
#endif
}

}  // namespace scaffold::kernels
