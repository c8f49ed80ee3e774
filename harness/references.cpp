// The reference cache: each distinct reference configuration trained once, on MPI_COMM_SELF.
#include "harness/references.hpp"

#include <memory>

#include "core/comm/case_comm.hpp"
#include "core/comm/counting_comm.hpp"
#include "harness/train.hpp"
#include "strategies/single.hpp"

namespace pts {

template <class T>
const Reference& ReferenceCache::get(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w) {
  CaseConfig rc = reference_config(info, c);
  rc.dtype = std::is_same_v<T, float> ? "float32" : "float64";
  // The error-ratio rule compares like with like: on a backend whose float32 gemms round
  // (cuda-tf32, cuda-bf16) the float32 reference is the single-device run there too; the
  // float64 oracle stays on the CPU.
  if (std::is_same_v<T, float> && find_backend(c.backend)->reduced_precision) rc.backend = c.backend;
  const std::string key = config_key(rc);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  static const StrategyInfo oracle = strategy_entry<Single>("single", "", validate_single);
  const ReferenceSpec& spec = reference_of(info, c);
  const StrategyInfo* ri = spec.runner ? spec.runner.get() : rc.strategy == "single" ? &oracle : registry_.find(rc.strategy);
  if (!ri) return cache_[key] = Reference{{}, {}, "reference strategy '" + rc.strategy + "' is not registered"};
  MpiComm self(MPI_COMM_SELF, "self", false);
  auto stats = std::make_shared<CommStats>();
  CountingComm counted(make_case_comm(MPI_COMM_SELF, "world", *find_backend(rc.backend), ri->tagged_p2p).comm,
                       stats);
  TrainResult r = train<T>(rc, Layout{}, w, *ri, counted, self, *stats, {});
  return cache_[key] = Reference{r.losses, r.params, r.error};
}

template <class T>
Reference replay_reference(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w,
                           const std::vector<ServedPull>& served, const std::vector<AppliedUpdate>& applied) {
  const ReplayFn& replay = std::is_same_v<T, float> ? info.reference.replay_f32 : info.reference.replay_f64;
  if (!replay) return {{}, {}, "strategy '" + info.name + "' names a replay reference but has no replay"};
  CaseConfig rc = c;
  rc.dtype = std::is_same_v<T, float> ? "float32" : "float64";
  try {
    ReplayResult r = replay(rc, w, served, applied);
    return {r.losses, r.params, ""};
  } catch (const std::exception& e) {
    return {{}, {}, e.what()};
  }
}

template Reference replay_reference<float>(const CaseConfig&, const StrategyInfo&, const WorkloadSpec&,
                                           const std::vector<ServedPull>&, const std::vector<AppliedUpdate>&);
template Reference replay_reference<double>(const CaseConfig&, const StrategyInfo&, const WorkloadSpec&,
                                            const std::vector<ServedPull>&, const std::vector<AppliedUpdate>&);
template const Reference& ReferenceCache::get<float>(const CaseConfig&, const StrategyInfo&, const WorkloadSpec&);
template const Reference& ReferenceCache::get<double>(const CaseConfig&, const StrategyInfo&, const WorkloadSpec&);

}  // namespace pts
