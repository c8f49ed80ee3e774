#include "core/mesh.hpp"

#include "core/error.hpp"

namespace pts {

std::string Layout::product_string() const {
  return "dp(" + std::to_string(dp) + ") * tp(" + std::to_string(tp) + ") * pp(" +
         std::to_string(pp) + ") = " + std::to_string(num_ranks());
}

int mesh_rank(const Layout& l, MeshCoord c) { return (c.pp * l.dp + c.dp) * l.tp + c.tp; }

MeshCoord mesh_coord(const Layout& l, int rank) {
  return {(rank / l.tp) % l.dp, rank % l.tp, rank / (l.tp * l.dp)};
}

Mesh::Mesh(Comm& world, const Layout& layout) : world_(world), layout_(layout) {
  if (layout.dp < 1 || layout.tp < 1 || layout.pp < 1)
    throw ConfigError("every mesh axis needs at least one rank, got " + layout.product_string());
  if (layout.num_ranks() != world.size())
    throw ConfigError(layout.product_string() + ", but " + std::to_string(world.size()) +
                      " ranks are running");
  coord_ = mesh_coord(layout, world.rank());
  // Each axis group: the ranks that agree on the other two coordinates, ordered by this axis.
  const MeshCoord& c = coord_;
  dp_ = world.split(c.pp * layout.tp + c.tp, c.dp, "dp");
  tp_ = world.split(c.pp * layout.dp + c.dp, c.tp, "tp");
  pp_ = world.split(c.dp * layout.tp + c.tp, c.pp, "pp");
}

}  // namespace pts
