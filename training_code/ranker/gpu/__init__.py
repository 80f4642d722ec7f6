"""The GPU fast path: which speed-ups a run takes, fused bf16 layers, fused data parallelism, the sharded update and
the captured step."""
