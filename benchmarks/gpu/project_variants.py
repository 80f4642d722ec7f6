"""The project trainers the benchmarks can run, by name, and what each ablation of the gradient reduction changes in
TrainConfig. Plain data, so that the launcher (benchmarks.gpu.gpu_scaling) knows them without importing the trainers."""

# The ablations of the gradient reduction: bf16 compression (DDP's hook), DDP in place of FusedDataParallel,
# and FusedDataParallel all-reducing for a whole AdamW update on every rank instead of sharding it. Each is measured on
# several GPUs only, against native's 1 GPU.
REDUCTION_ABLATIONS = {"native-bf16-allreduce": {"allreduce_dtype": "bf16"}, "native-ddp": {"data_parallel": "ddp"},
                       "native-replicated-update": {"shard_optimizer": False}}
PROJECT_TRAINERS = ("native", *REDUCTION_ABLATIONS, "lightning")
