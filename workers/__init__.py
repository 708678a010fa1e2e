"""Trial side: build a reconfigured transformer, train it, measure it. Never imports ``sweep``."""

import os

# torch.profiler (used by the CPU peak-memory probe) otherwise logs a GPU-count error on CPU machines.
os.environ.setdefault("KINETO_LOG_LEVEL", "5")
