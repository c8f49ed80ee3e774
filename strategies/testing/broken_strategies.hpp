// Test-only strategies with planted bugs: the conformance checks must fail each of them.
// They are never in the shipped registry; tests add them with add_broken_strategies().
#pragma once
#include "strategies/registry.hpp"

namespace pts {

// ddp-sum           sums gradients instead of averaging (a missing 1/dp)  -> exact, precision
// ddp-skip-bucket   never all-reduces the first bucket                    -> exact, precision, comm
// ddp-leak          keeps an extra full-size gradient copy                -> memory
// zero1-shard-shift / zero2-shard-shift
//                   updates its reduce-scattered shard one element off    -> exact, precision
// fsdp-no-free      never frees a gathered unit                           -> memory (comm bound)
// fsdp-double-gather gathers every unit twice before backward             -> comm
// ps-drop, ps-double-apply, ps-ignore-staleness (broken_param_server.cpp)   -> trace
void add_broken_strategies(StrategyRegistry& r);
void add_broken_param_servers(StrategyRegistry& r);
// ddp-slow (slow_strategies.cpp): ddp plus a 10 % sleep each step  -> compare's timing gate
void add_slow_strategies(StrategyRegistry& r);
// fsdp-throw-rank1, fsdp-crash-rank1, fsdp-block-rank1 (faulty_strategies.cpp): not wrong
// numbers but a failing rank, for the watchdog, crash and --resume tests.
void add_faulty_strategies(StrategyRegistry& r);

}  // namespace pts
