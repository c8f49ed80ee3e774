// The process mesh dp x ep x cp x tp x pp and its axis groups. Axis order, fastest first: tp,
// cp, ep, dp, pp
//   rank = (((pp_index * dp + dp_index) * ep + ep_index) * cp + cp_index) * tp + tp_index
// so tensor-parallel peers are neighbours (same node on a cluster), context- and
// expert-parallel peers next, and pipeline stages are furthest apart. Worked example, dp = tp = pp = 2 on 8 ranks:
//   tp groups {0,1} {2,3} {4,5} {6,7}
//   dp groups {0,2} {1,3} {4,6} {5,7}
//   pp groups {0,4} {1,5} {2,6} {3,7}   (stage 0 = ranks 0-3, stage 1 = ranks 4-7)
// Context parallelism splits each sequence over cp ranks that hold the same parameters, so
// for gradients and ZeRO shards they are data-parallel peers: the dp group (the one gradient
// sync and sharding run over) holds every rank of the same tp and pp index, dp * cp of them,
// ordered by (dp, cp); cp = 1 makes it the plain dp group. With dp = cp = 2, tp = pp = 1:
//   cp groups {0,1} {2,3};  dp group {0,1,2,3} (group rank = dp_index * cp + cp_index).
// Expert parallelism splits a mixture-of-experts model's experts over ep ranks that take
// different samples: they hold the same dense (non-expert) parameters but different experts,
// so they are not gradient peers of the dp algorithm. The dp group holds one ep index; the
// trainer sums the dense gradients over the ep group itself (strategies/trainer.cpp). With
// dp = ep = 2: ep groups {0,1} {2,3}; dp groups {0,2} {1,3}.
#pragma once
#include <memory>
#include <string>

#include "core/comm/comm.hpp"

namespace pts {

struct Layout {
  int dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  int num_ranks() const { return dp * tp * pp * cp * ep; }
  // "dp(2) * tp(2) * pp(2)"; "dp(2) * ep(2) * cp(2) * tp(1) * pp(1)" with the axes above 1
  std::string axes_string() const;
  // "dp(2) * tp(2) * pp(2) = 8"
  std::string product_string() const;
};

struct MeshCoord {
  int dp = 0, tp = 0, pp = 0, cp = 0, ep = 0;
};

int mesh_rank(const Layout& l, MeshCoord c);
MeshCoord mesh_coord(const Layout& l, int rank);

class Mesh {
 public:
  // Collective over `world`; throws ConfigError unless layout.num_ranks() == world.size().
  Mesh(Comm& world, const Layout& layout);
  const Layout& layout() const { return layout_; }
  const MeshCoord& coord() const { return coord_; }
  Comm& world() { return world_; }
  Comm& dp() { return *dp_; }  // dp * cp ranks of one ep index (see above)
  Comm& tp() { return *tp_; }
  Comm& pp() { return *pp_; }
  Comm& cp() { return *cp_; }
  Comm& ep() { return *ep_; }

 private:
  Comm& world_;
  Layout layout_;
  MeshCoord coord_;
  std::unique_ptr<Comm> dp_, tp_, pp_, cp_, ep_;
};

}  // namespace pts
