// PopcornBench shim (see popcorn_torch_lite.h at the root of this shim): no libtorch is linked.
#pragma once
#include <popcorn_torch_lite.h>
