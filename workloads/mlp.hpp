// The MLP workload: L hidden layers of width W with GELU, then a C-class softmax head.
// Parameters in canonical order W0 b0 W1 b1 ... WL bL (W row-major [in, out]); each layer
// is one block (unit). Dimension legend: R = rows, I = inputs, O = outputs of a layer.
//
// Under tensor parallelism hidden layers pair up as column-parallel (even l, when a partner
// follows) then row-parallel (odd l), so each pair costs one all-reduce forward (g, of
// [R, O]) and, unless the pair starts the model, one backward (f, of [R, I]). Unpaired
// layers and the head are replicated: their inputs are identical on every tp rank, so are
// their gradients.
#pragma once
#include <memory>
#include <vector>

#include "workloads/workload.hpp"

namespace pts {

const WorkloadKind& mlp_kind();

// RNG streams of the parameter tensors: weight of layer l is stream kParamStream + 2l.
inline constexpr uint64_t kParamStream = 1000;

// The blocks of the full MLP, each the `shard` part of its layer.
}  // namespace pts
