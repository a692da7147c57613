"""Calibration: measure one node's GPUs (GEMMs at a model's shapes, memory bandwidth, launch latency,
NCCL collectives) into a profile JSON the planner reads instead of its fixed efficiency factors.

`python -m planner.calibrate run --spec spec.json --out DIR` runs on the GPU node (torch, triton);
`planner.calibrate.profile` loads and interpolates a profile in pure Python.
"""
