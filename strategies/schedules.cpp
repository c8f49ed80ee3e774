#include "strategies/schedules.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace pts {

int64_t activation_peak(const ScheduleTable& t, int rank, const std::vector<ChunkBytes>& chunk) {
  PTS_REQUIRE(static_cast<int>(chunk.size()) == t.v, "one ChunkBytes per chunk");
  int64_t now = 0, peak = 0;
  for (const PipeAction& a : t.ranks.at(rank)) {
    const ChunkBytes& c = chunk[a.chunk];
    switch (a.kind) {
      case PipeKind::F: now += c.activation; break;
      case PipeKind::B: now += t.split_w ? c.deferred : -c.activation; break;
      case PipeKind::W: now -= c.activation + c.deferred; break;
    }
    peak = std::max(peak, now);
  }
  return peak;
}

int64_t PipeSchedule::stated_activation(const ScheduleTable& t, int rank, const std::vector<ChunkBytes>& chunk) const {
  return activation_peak(t, rank, chunk);
}

double PipeSchedule::stated_bubble(const ScheduleTable& t, int rank, const PipeCosts& costs) const {
  const ScheduleSim sim = simulate(t, costs, false);
  return sim.makespan > 0 ? sim.bubble[rank] / sim.makespan : 0.0;
}

namespace {
const std::vector<std::shared_ptr<const PipeSchedule>>& shipped() {
  static const std::vector<std::shared_ptr<const PipeSchedule>> all = {
      std::make_shared<NamedSchedule>("1f1b"), std::make_shared<NamedSchedule>("gpipe"),
      std::make_shared<NamedSchedule>("interleaved-1f1b", 2), std::make_shared<NamedSchedule>("zb-h1"),
      std::make_shared<NamedSchedule>("zbv", 2)};
  return all;
}
}  // namespace

std::shared_ptr<const PipeSchedule> find_schedule(const std::string& name) {
  for (const auto& s : shipped())
    if (s->name() == name) return s;
  return nullptr;
}

std::string schedule_names() {
  std::string out;
  for (const auto& s : shipped()) out += (out.empty() ? "" : ", ") + s->name();
  return out;
}

}  // namespace pts
