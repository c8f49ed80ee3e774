// The GPT workload (Radford et al., GPT-2): token and learned position embedding, L
// pre-LayerNorm blocks
//   x1 = x + proj(attn(ln1(x)))          causal multi-head self-attention, H heads
//   y  = x1 + fc2(gelu(fc(ln2(x1))))     MLP of width 4C
// then a final LayerNorm and an untied LM head, loss = mean token cross-entropy.
// Dimension legend: R = sequences, S = sequence length, N = R*S tokens, C = width,
// H = heads, D = C/H head dim, F = 4C, V = vocabulary.
//
// Blocks (units): embedding (wte [V,C], wpe [S,C]); L transformer blocks (ln1 g,b; qkv W
// [C,3C], b; proj W [C,C], b; ln2 g,b; fc W [C,F], b; fc2 W [F,C], b); head (lnf g,b;
// W [V,C]). Canonical order is exactly this list.
//
// Tensor parallelism over tp ranks (Megatron): qkv and fc column-parallel (heads split:
// H/tp per rank), proj and fc2 row-parallel; embedding and head vocabulary-parallel
// (TensorParallel::vocab); LayerNorms and row-parallel biases replicated. Per microbatch of N
// tokens, with s = sizeof(T), every collective over tp:
//   embedding   forward  all_reduce N*C                     (partial rows summed)
//   each block  forward  2 all_reduce N*C (g after proj, fc2); backward 2 all_reduce N*C (f)
//   head        forward  all_gather of N row maxima (payload tp*N), all_reduce 2N (sum of
//                        exp and target logit); backward all_reduce N*C (f)
// No rank ever holds the full logits [N, V]: only its [N, V/tp] columns.
#pragma once
#include <memory>
#include <vector>

#include "workloads/workload.hpp"

namespace pts {

const WorkloadKind& gpt_kind();

// RNG streams: tensor t of block b draws from kGptStream + 16 b + t.
inline constexpr uint64_t kGptStream = 2000;

}  // namespace pts
