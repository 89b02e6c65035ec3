// PopcornBench shim (see popcorn_torch.h): no libtorch is linked.
#pragma once
#include "popcorn_torch.h"
