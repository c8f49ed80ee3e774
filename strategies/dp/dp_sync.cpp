#include "strategies/dp/dp_sync.hpp"

#include <algorithm>

#include "strategies/dp/ddp.hpp"
#include "strategies/dp/fsdp.hpp"
#include "strategies/dp/zero.hpp"

namespace pts {

template <class T>
std::vector<double> DpSync<T>::local_params(Comm&) {
  return model().params_unpadded();
}

template class DpSync<float>;
template class DpSync<double>;

const DpAlgorithm& dp_algorithm_for_stage(int zero_stage) {
  static const std::vector<DpAlgorithm> stages = {dp_algorithm<Ddp>("ddp", 0), dp_algorithm<Zero>("zero1", 1, 1),
                                                  dp_algorithm<Zero>("zero2", 2, 2), dp_algorithm<Fsdp>("fsdp", 3)};
  return stages.at(static_cast<size_t>(zero_stage));
}

}  // namespace pts
