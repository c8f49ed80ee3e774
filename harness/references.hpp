// A case's reference (the oracle or the strategy's twin, as its registry entry names it)
// runs on rank 0 alone, cached by the reference's whole configuration (config_key), so two
// cases share a reference exactly when the reference would train identically.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "strategies/registry.hpp"

namespace pts {

struct Reference {
  std::vector<double> losses, params;
  std::string error;  // the reference threw (or is not registered); losses and params are partial
};

// A replay reference (ReferenceSpec kind replay) of case c in precision T: the strategy's
// replay of the run's whole trace on this rank alone. Never cached; a replay that throws
// comes back with `error` set.
template <class T>
Reference replay_reference(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w,
                           const std::vector<ServedPull>& served, const std::vector<AppliedUpdate>& applied);

class ReferenceCache {
 public:
  explicit ReferenceCache(const StrategyRegistry& registry) : registry_(registry) {}
  // The reference of case c in precision T (float or double; instantiated in references.cpp),
  // trained on MPI_COMM_SELF with a one-rank mesh the first time its configuration is asked for.
  template <class T>
  const Reference& get(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w);
  size_t size() const { return cache_.size(); }

 private:
  const StrategyRegistry& registry_;
  std::map<std::string, Reference> cache_;
};

}  // namespace pts
