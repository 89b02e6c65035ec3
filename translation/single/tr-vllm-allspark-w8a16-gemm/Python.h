// PopcornBench shim (see popcorn_allspark_torch.h next to the task's entry.h): no libtorch, no Python.
#pragma once
#include "popcorn_allspark_torch.h"
