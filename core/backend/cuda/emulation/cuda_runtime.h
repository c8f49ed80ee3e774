// See cuda_runtime_api.h: the emulation is one header.
#pragma once
#include "cuda_runtime_api.h"
