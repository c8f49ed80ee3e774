#include "core/mesh.hpp"

#include "core/error.hpp"

namespace pts {

std::string Layout::axes_string() const {
  return "dp(" + std::to_string(dp) + ") * " + (cp > 1 ? "cp(" + std::to_string(cp) + ") * " : "") + "tp(" +
         std::to_string(tp) + ") * pp(" + std::to_string(pp) + ")";
}

std::string Layout::product_string() const { return axes_string() + " = " + std::to_string(num_ranks()); }

int mesh_rank(const Layout& l, MeshCoord c) { return ((c.pp * l.dp + c.dp) * l.cp + c.cp) * l.tp + c.tp; }

MeshCoord mesh_coord(const Layout& l, int rank) {
  MeshCoord c;
  c.tp = rank % l.tp;
  c.cp = (rank / l.tp) % l.cp;
  c.dp = (rank / (l.tp * l.cp)) % l.dp;
  c.pp = rank / (l.tp * l.cp * l.dp);
  return c;
}

Mesh::Mesh(Comm& world, const Layout& layout) : world_(world), layout_(layout) {
  if (layout.dp < 1 || layout.tp < 1 || layout.pp < 1 || layout.cp < 1)
    throw ConfigError("every mesh axis needs at least one rank, got " + layout.product_string());
  if (layout.num_ranks() != world.size())
    throw ConfigError(layout.product_string() + ", but " + std::to_string(world.size()) +
                      " ranks are running");
  coord_ = mesh_coord(layout, world.rank());
  // Each axis group: the ranks that agree on the other coordinates, ordered by this axis (the
  // dp group by dp then cp).
  const MeshCoord& c = coord_;
  const Layout& l = layout;
  dp_ = world.split(c.pp * l.tp + c.tp, c.dp * l.cp + c.cp, "dp");
  tp_ = world.split((c.pp * l.dp + c.dp) * l.cp + c.cp, c.tp, "tp");
  pp_ = world.split((c.dp * l.cp + c.cp) * l.tp + c.tp, c.pp, "pp");
  cp_ = world.split((c.pp * l.dp + c.dp) * l.tp + c.tp, c.cp, "cp");
}

}  // namespace pts
