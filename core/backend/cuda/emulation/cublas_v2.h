// Host emulation of the cuBLAS calls the CUDA backend makes (cuda_runtime_api.h says why):
// column-major gemm, naive loops accumulating in T, cuBLAS's argument checks (a leading
// dimension too small is CUBLAS_STATUS_INVALID_VALUE), TF32 as inputs rounded to 10 mantissa bits,
// bfloat16 operands (cublasGemmStridedBatchedEx with CUDA_R_16BF inputs) widened to float.
// Every operand must be device memory (cuda_runtime_api.h: emu::device).
#pragma once
#include "cuda_runtime_api.h"
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N, CUBLAS_OP_T };
enum cublasMath_t { CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH, CUBLAS_PEDANTIC_MATH };
struct cublasContext { cublasMath_t mode = CUBLAS_DEFAULT_MATH; };
typedef cublasContext* cublasHandle_t;
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_16BF = 75 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
inline const char* cublasGetStatusString(cublasStatus_t) { return "emulated cublas error"; }
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = new cublasContext; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) { h->mode = m; return CUBLAS_STATUS_SUCCESS; }
namespace emu {
inline float keep_bits(float x, int bits) {  // round to `bits` mantissa bits, nearest even
  const int drop = 23 - bits;
  uint32_t u = std::bit_cast<uint32_t>(x);
  u += ((1u << (drop - 1)) - 1u) + ((u >> drop) & 1u);
  return std::bit_cast<float>(u & ~((1u << drop) - 1u));
}
inline float tf32(float x) { return keep_bits(x, 10); }
template <class I> inline I value(I x) { return x; }
inline float value(uint16_t bf16) { return std::bit_cast<float>(uint32_t{bf16} << 16); }
// T: the output and accumulation type; I: the operands' (T, or uint16_t for bfloat16).
template <class T, class I>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                    const I* A, int lda, long long sa, const I* B, int ldb, long long sb, const T* beta, T* C, int ldc,
                    long long sc, int count) {
  const int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m > 0 && n > 0 && count > 0 && (!device(C) || (k > 0 && (!device(A) || !device(B))))) {
    std::fprintf(stderr, "emulated cuBLAS: a gemm operand is not device memory\n");
    std::abort();
  }
  // Inputs rounded by the math mode (TF32: 10 mantissa bits).
  const int bits = h->mode == CUBLAS_TF32_TENSOR_OP_MATH && sizeof(T) == 4 && sizeof(I) == 4 ? 10 : 0;
  const bool round = bits > 0;
  for (int b = 0; b < count; ++b) {
    const I* a = A + b * sa; const I* bb = B + b * sb; T* c = C + b * sc;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T s = 0;
        for (int p = 0; p < k; ++p) {
          T x = value(ta == CUBLAS_OP_N ? a[i + p * (long long)lda] : a[p + i * (long long)lda]);
          T y = value(tb == CUBLAS_OP_N ? bb[p + j * (long long)ldb] : bb[j + p * (long long)ldb]);
          if (round) { x = (T)keep_bits((float)x, bits); y = (T)keep_bits((float)y, bits); }
          s += x * y;
        }
        T& cij = c[i + j * (long long)ldc];
        cij = *beta == T(0) ? *alpha * s : *alpha * s + *beta * cij;
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace emu
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* al, const float* A, int lda, const float* B, int ldb, const float* be, float* C, int ldc) { return emu::gemm(h, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, C, ldc, 0, 1); }
inline cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double* al, const double* A, int lda, const double* B, int ldb, const double* be, double* C, int ldc) { return emu::gemm(h, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, C, ldc, 0, 1); }
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* al, const float* A, int lda, long long sa, const float* B, int ldb, long long sb, const float* be, float* C, int ldc, long long sc, int cnt) { return emu::gemm(h, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, cnt); }
inline cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double* al, const double* A, int lda, long long sa, const double* B, int ldb, long long sb, const double* be, double* C, int ldc, long long sc, int cnt) { return emu::gemm(h, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, cnt); }
// Float output and compute; operands float32 or both bfloat16.
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* al, const void* A, cudaDataType at, int lda, long long sa, const void* B, cudaDataType bt, int ldb, long long sb, const void* be, void* C, cudaDataType ct, int ldc, long long sc, int cnt, cublasComputeType_t, cublasGemmAlgo_t) {
  if (at != bt || ct != CUDA_R_32F) return CUBLAS_STATUS_INVALID_VALUE;
  const float* alpha = static_cast<const float*>(al); const float* beta = static_cast<const float*>(be);
  if (at == CUDA_R_16BF)
    return emu::gemm(h, ta, tb, m, n, k, alpha, static_cast<const uint16_t*>(A), lda, sa, static_cast<const uint16_t*>(B), ldb, sb, beta, static_cast<float*>(C), ldc, sc, cnt);
  return emu::gemm(h, ta, tb, m, n, k, alpha, static_cast<const float*>(A), lda, sa, static_cast<const float*>(B), ldb, sb, beta, static_cast<float*>(C), ldc, sc, cnt);
}
