#include "core/mesh.hpp"

#include "core/error.hpp"

namespace pts {

std::string Layout::axes_string() const {
  return "dp(" + std::to_string(dp) + ") * " + (ep > 1 ? "ep(" + std::to_string(ep) + ") * " : "") +
         (cp > 1 ? "cp(" + std::to_string(cp) + ") * " : "") + "tp(" + std::to_string(tp) + ") * pp(" +
         std::to_string(pp) + ")";
}

std::string Layout::product_string() const { return axes_string() + " = " + std::to_string(num_ranks()); }

int mesh_rank(const Layout& l, MeshCoord c) {
  return (((c.pp * l.dp + c.dp) * l.ep + c.ep) * l.cp + c.cp) * l.tp + c.tp;
}

MeshCoord mesh_coord(const Layout& l, int rank) {
  MeshCoord c;
  c.tp = rank % l.tp;
  c.cp = (rank / l.tp) % l.cp;
  c.ep = (rank / (l.tp * l.cp)) % l.ep;
  c.dp = (rank / (l.tp * l.cp * l.ep)) % l.dp;
  c.pp = rank / (l.tp * l.cp * l.ep * l.dp);
  return c;
}

Mesh::Mesh(Comm& world, const Layout& layout) : world_(world), layout_(layout) {
  if (layout.dp < 1 || layout.tp < 1 || layout.pp < 1 || layout.cp < 1 || layout.ep < 1)
    throw ConfigError("every mesh axis needs at least one rank, got " + layout.product_string());
  if (layout.num_ranks() != world.size())
    throw ConfigError(layout.product_string() + ", but " + std::to_string(world.size()) +
                      " ranks are running");
  coord_ = mesh_coord(layout, world.rank());
  // Each axis group: the ranks that agree on the other coordinates, ordered by this axis (the
  // dp group by dp then cp).
  const MeshCoord& c = coord_;
  const Layout& l = layout;
  // A group's colour: the rank with its own coordinate zeroed (unique per group).
  auto colour = [&](MeshCoord at) { return mesh_rank(l, at); };
  MeshCoord dp0 = c, tp0 = c, pp0 = c, cp0 = c, ep0 = c;
  dp0.dp = dp0.cp = 0, tp0.tp = 0, pp0.pp = 0, cp0.cp = 0, ep0.ep = 0;
  dp_ = world.split(colour(dp0), c.dp * l.cp + c.cp, "dp");
  tp_ = world.split(colour(tp0), c.tp, "tp");
  pp_ = world.split(colour(pp0), c.pp, "pp");
  cp_ = world.split(colour(cp0), c.cp, "cp");
  ep_ = world.split(colour(ep0), c.ep, "ep");
}

}  // namespace pts
