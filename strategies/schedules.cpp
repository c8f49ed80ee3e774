#include "strategies/schedules.hpp"

#include <algorithm>

namespace pts {

double PipeSchedule::bubble(int stages, int micro) const { return double(stages - 1) / double(micro + stages - 1); }

std::vector<PipeStep> GPipe::steps(int, int, int micro) const {
  std::vector<PipeStep> out;
  for (int k = 0; k < micro; ++k) out.push_back({true, k});
  for (int k = 0; k < micro; ++k) out.push_back({false, k});
  return out;
}

std::vector<PipeStep> OneFOneB::steps(int stage, int stages, int micro) const {
  std::vector<PipeStep> out;
  const int warmup = std::min(stages - stage - 1, micro);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back({true, f});
  while (f < micro) {
    out.push_back({true, f++});
    out.push_back({false, b++});
  }
  while (b < micro) out.push_back({false, b++});
  return out;
}

int OneFOneB::in_flight(int stage, int stages, int micro) const { return std::min(stages - stage, micro); }

namespace {
const std::vector<std::shared_ptr<const PipeSchedule>>& shipped() {
  static const std::vector<std::shared_ptr<const PipeSchedule>> all = {std::make_shared<OneFOneB>(),
                                                                       std::make_shared<GPipe>()};
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
