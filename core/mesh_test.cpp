// Tests for the dp x ep x cp x tp x pp mesh on 8 ranks: the worked 2x2x2 example of mesh.hpp, rank <->
// coordinate round trips for every factorisation used, group membership gathered from the
// groups themselves, and the layout error message.
#include "core/mesh.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm/mpi/mpi_comm.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

// The world ranks making up `group`, in group-rank order, gathered over the group itself.
std::vector<int32_t> members(Comm& group, int world_rank) {
  int32_t me = world_rank;
  std::vector<int32_t> all(group.size(), -1);
  group.all_gather(&me, all.data(), 1, DType::i32);
  return all;
}

TEST(Mesh, WorkedExample2x2x2) {
  auto world = MpiComm::duplicate(MPI_COMM_WORLD, "world");
  ASSERT_EQ(world->size(), 8) << "this test is declared with RANKS 8";
  const int r = world->rank();
  Mesh mesh(*world, {2, 2, 2});

  // rank = (pp * dp + dp_index) * tp + tp_index, written out per rank: (dp, tp, pp).
  const MeshCoord coords[8] = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0},
                               {0, 0, 1}, {0, 1, 1}, {1, 0, 1}, {1, 1, 1}};
  EXPECT_EQ(mesh.coord().dp, coords[r].dp);
  EXPECT_EQ(mesh.coord().tp, coords[r].tp);
  EXPECT_EQ(mesh.coord().pp, coords[r].pp);

  // The groups listed in mesh.hpp's comment, indexed by world rank.
  const std::vector<int32_t> tp[8] = {{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4, 5}, {4, 5}, {6, 7}, {6, 7}};
  const std::vector<int32_t> dp[8] = {{0, 2}, {1, 3}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {4, 6}, {5, 7}};
  const std::vector<int32_t> pp[8] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(members(mesh.tp(), r), tp[r]);
  EXPECT_EQ(members(mesh.dp(), r), dp[r]);
  EXPECT_EQ(members(mesh.pp(), r), pp[r]);
  EXPECT_EQ(mesh.tp().axis(), "tp");
  EXPECT_EQ(mesh.dp().axis(), "dp");
  EXPECT_EQ(mesh.pp().axis(), "pp");
  // Each group's rank is this rank's coordinate on that axis.
  EXPECT_EQ(mesh.tp().rank(), coords[r].tp);
  EXPECT_EQ(mesh.dp().rank(), coords[r].dp);
  EXPECT_EQ(mesh.pp().rank(), coords[r].pp);
  EXPECT_EQ(&mesh.world(), world.get());
}

const Layout kLayouts[] = {{8, 1, 1},    {1, 8, 1},    {1, 1, 8},    {2, 4, 1},    {4, 1, 2},
                           {2, 2, 2},    {1, 1, 1, 8}, {2, 1, 1, 4}, {1, 2, 2, 2}, {2, 2, 1, 2},
                           {1, 1, 1, 1, 8}, {2, 1, 1, 1, 4}, {2, 2, 1, 1, 2}, {1, 1, 2, 2, 2}, {2, 1, 1, 2, 2}};

std::string name(const Layout& l) { return l.product_string(); }

TEST(Mesh, RankAndCoordRoundTrip) {
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(name(l));
    ASSERT_EQ(l.num_ranks(), 8);
    std::set<std::tuple<int, int, int, int, int>> seen;
    for (int rank = 0; rank < 8; ++rank) {
      MeshCoord c = mesh_coord(l, rank);
      EXPECT_GE(c.dp, 0);
      EXPECT_LT(c.dp, l.dp);
      EXPECT_GE(c.tp, 0);
      EXPECT_LT(c.tp, l.tp);
      EXPECT_GE(c.pp, 0);
      EXPECT_LT(c.pp, l.pp);
      EXPECT_GE(c.cp, 0);
      EXPECT_LT(c.cp, l.cp);
      EXPECT_GE(c.ep, 0);
      EXPECT_LT(c.ep, l.ep);
      EXPECT_EQ(mesh_rank(l, c), rank) << "rank " << rank;
      EXPECT_EQ(rank, (((c.pp * l.dp + c.dp) * l.ep + c.ep) * l.cp + c.cp) * l.tp + c.tp)
          << "rank " << rank;  // the documented order
      seen.insert({c.dp, c.tp, c.pp, c.cp, c.ep});
    }
    EXPECT_EQ(seen.size(), 8u) << "coordinates are not a bijection";
    for (int pp = 0; pp < l.pp; ++pp)
      for (int dp = 0; dp < l.dp; ++dp)
        for (int ep = 0; ep < l.ep; ++ep)
          for (int cp = 0; cp < l.cp; ++cp)
            for (int tp = 0; tp < l.tp; ++tp) {
              MeshCoord c = mesh_coord(l, mesh_rank(l, {dp, tp, pp, cp, ep}));
              EXPECT_EQ(c.dp, dp);
              EXPECT_EQ(c.tp, tp);
              EXPECT_EQ(c.pp, pp);
              EXPECT_EQ(c.cp, cp);
              EXPECT_EQ(c.ep, ep);
            }
  }
}

// For every layout: each axis group holds exactly the ranks that agree with this one on the
// other coordinates, ordered along the axis; the dp group spans dp and cp, ordered by (dp, cp),
// within one ep index.
TEST(Mesh, AxisGroupsForEveryLayout) {
  auto world = MpiComm::duplicate(MPI_COMM_WORLD, "world");
  ASSERT_EQ(world->size(), 8);
  const int r = world->rank();
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(name(l));
    Mesh mesh(*world, l);
    const MeshCoord c = mesh.coord();
    std::vector<int32_t> dp, tp, pp, cp, ep;
    for (int i = 0; i < l.dp; ++i)
      for (int j = 0; j < l.cp; ++j) dp.push_back(mesh_rank(l, {i, c.tp, c.pp, j, c.ep}));
    for (int i = 0; i < l.tp; ++i) tp.push_back(mesh_rank(l, {c.dp, i, c.pp, c.cp, c.ep}));
    for (int i = 0; i < l.pp; ++i) pp.push_back(mesh_rank(l, {c.dp, c.tp, i, c.cp, c.ep}));
    for (int i = 0; i < l.cp; ++i) cp.push_back(mesh_rank(l, {c.dp, c.tp, c.pp, i, c.ep}));
    for (int i = 0; i < l.ep; ++i) ep.push_back(mesh_rank(l, {c.dp, c.tp, c.pp, c.cp, i}));
    EXPECT_EQ(members(mesh.dp(), r), dp);
    EXPECT_EQ(members(mesh.tp(), r), tp);
    EXPECT_EQ(members(mesh.pp(), r), pp);
    EXPECT_EQ(members(mesh.cp(), r), cp);
    EXPECT_EQ(members(mesh.ep(), r), ep);
    EXPECT_EQ(mesh.dp().rank(), c.dp * l.cp + c.cp);
    EXPECT_EQ(mesh.cp().rank(), c.cp);
    EXPECT_EQ(mesh.ep().rank(), c.ep);
  }
}

TEST(Mesh, LayoutNotMatchingWorldThrowsConfigErrorWithTheProduct) {
  auto world = MpiComm::duplicate(MPI_COMM_WORLD, "world");
  ASSERT_EQ(world->size(), 8);
  try {
    Mesh mesh(*world, {2, 2, 1});
    FAIL() << "no exception for a 4-rank layout on 8 ranks";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "dp(2) * tp(2) * pp(1) = 4, but 8 ranks are running");
  }
  EXPECT_THROW((Mesh(*world, Layout{0, 8, 1})), ConfigError);  // an empty axis
  try {
    Mesh mesh(*world, {2, 1, 1, 2});
    FAIL() << "no exception for a 4-rank layout on 8 ranks";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "dp(2) * cp(2) * tp(1) * pp(1) = 4, but 8 ranks are running");
  }
  try {
    Mesh mesh(*world, {1, 1, 1, 2, 2});
    FAIL() << "no exception for a 4-rank layout on 8 ranks";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "dp(1) * ep(2) * cp(2) * tp(1) * pp(1) = 4, but 8 ranks are running");
  }
}

}  // namespace
}  // namespace pts
