"""《Transformer 架构原理：可执行课程》的共享实现。Import as ``import transformer_course as tc``."""
from __future__ import annotations

from . import exercises, viz
from .attention import causal_mask, padding_mask, scaled_dot_product_attention
from .utils import count_params, get_device, set_seed, time_call

__version__ = "0.1.0"

__all__ = [
    "causal_mask",
    "count_params",
    "exercises",
    "get_device",
    "padding_mask",
    "scaled_dot_product_attention",
    "set_seed",
    "time_call",
    "viz",
]
