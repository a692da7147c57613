"""Capacity planner, quantization numerics, eval-job payload and cluster executors.

Pure Python with no Django import anywhere: the same package runs inside the web service
and on a GPU node (Python 3.12 + CUDA torch) where Django is not installed.
"""

__version__ = "0.1.0"
