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
//
// The moe workload (moe-tiny, moe-small) is this GPT with each block's MLP replaced by E expert
// MLPs behind a top-k router (MoeTransformer in gpt.cpp: router, capacity and dropping are
// defined there and in README.md). It shares the embedding, attention and head code; its
// blocks have no tensor-parallel split (tp is refused).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "workloads/workload.hpp"

namespace pts {

const WorkloadKind& gpt_kind();
const WorkloadKind& moe_kind();

// An expert's slots per sequence: ceil(capacity_factor * S * k / E).
int64_t moe_capacity(const WorkloadSpec& w);

// The routing of one microbatch of `rows` sequences of `seq` tokens (N = rows*seq), host data.
// Per token t and choice i < k: choice[t*k+i] the expert (the k largest logits, largest first,
// ties to the lower expert index), softmax[t*k+i] its gate (softmax over the k chosen logits),
// slot[t*k+i] its row in the expert's buffer or -1 when dropped. Per expert e and slot
// j < rows*capacity (sequence r's slots at r*capacity): token[e*rows*capacity+j] the token in it
// (-1: empty) and gate[...] its gate (0 when empty). A sequence's tokens take their experts' slots
// in token order; an assignment to a full expert is dropped.
struct MoeRouting {
  int64_t rows = 0, seq = 0, experts = 0, top_k = 0, capacity = 0;
  std::vector<double> logits;  // [N, E]
  std::vector<double> probs;   // [N, E]: softmax over all E logits (the auxiliary loss's P)
  std::vector<int64_t> choice, slot;
  std::vector<double> softmax;
  std::vector<int32_t> token;
  std::vector<double> gate;
  int64_t dropped() const;  // assignments dropped
};
MoeRouting moe_route(std::vector<double> logits, int64_t rows, int64_t seq, int64_t experts, int64_t top_k,
                     int64_t capacity);
// The load-balancing auxiliary loss (Switch Transformer's, per sequence, top-k): for sequence
// r, f[r,e] = (tokens of r that chose e among their k, dropped or not) / (S k) and
// P[r,e] = mean over r's tokens of probs[t,e]; aux_r = E sum_e f[r,e] P[r,e] (1 when routing is
// uniform). Returns coef * sum_r aux_r / norm (norm: the loss's, the global batch's sequences),
// and when dlogits [N,E] is given adds d(that)/d logits to it (f is a count: no gradient).
double moe_aux_loss(const MoeRouting& r, double coef, double norm, std::vector<double>* dlogits);
// The tests' view of the router: when set, every MoE block's forward hands it its routing.
// Process-wide and off by default, like set_forward_tap.
using MoeRoutingTap = std::function<void(const MoeRouting&)>;
void set_moe_routing_tap(MoeRoutingTap tap);

// RNG streams: tensor t of block b draws from kGptStream + 16 b + t.
inline constexpr uint64_t kGptStream = 2000;
// The moe router is tensor 8 of its block's GPT streams; expert e of block b draws fc from
// kMoeStream + 256 b + 2e and fc2 from the next stream.
inline constexpr uint64_t kMoeStream = 5000;

}  // namespace pts
