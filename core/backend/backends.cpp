// The backend registry: name -> factories, "cpu" built in.
#include <vector>

#include "core/backend/backend.hpp"

namespace pts {
namespace {
std::vector<BackendInfo>& entries() {
  static std::vector<BackendInfo> all = {
      {"cpu", [] { return make_cpu_backend<float>(); }, [] { return make_cpu_backend<double>(); }}};
  return all;
}
}  // namespace

const BackendInfo* find_backend(const std::string& name) {
  for (const auto& b : entries())
    if (b.name == name) return &b;
  return nullptr;
}

std::string backend_names() {
  std::string s;
  for (const auto& b : entries()) s += (s.empty() ? "" : ", ") + b.name;
  return s;
}

void register_backend(const BackendInfo& info) {
  for (auto& b : entries())
    if (b.name == info.name) {
      b = info;
      return;
    }
  entries().push_back(info);
}

}  // namespace pts
