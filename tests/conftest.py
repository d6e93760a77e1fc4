import os

import torch

from common import ROOT  # noqa: F401  (the tests import it from here; tools/ is on pytest's pythonpath)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # reference models are built from configs: never download

# Tiny tensors run fastest on one intra-op thread; with two on a busy 2-core machine every op waits
# for the other thread (measured: hundreds of times slower). Notebook kernels get OMP_NUM_THREADS=1
# from the Makefile.
torch.set_num_threads(1)

from kernel_runner import CellError, run_all_repeatedly  # noqa: E402,F401  (the tests import them from here)
from kernel_runner import execute_cell as _execute  # noqa: E402,F401
