// PopcornBench shim (see popcorn_marlin_torch.h next to the task's entry.h): no libtorch, no Python.
#pragma once
#include "../../popcorn_marlin_torch.h"
