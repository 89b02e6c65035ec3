// PopcornBench shim: the Marlin tasks' torch shim (tr-marlin-gptq-w4a16-gemm/popcorn_marlin_torch.h).
#pragma once
#include "../../../tr-marlin-gptq-w4a16-gemm/popcorn_marlin_torch.h"
