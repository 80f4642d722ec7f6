"""The training step on GPUs, for a GPU machine (their CPU runs are smoke runs): throughput and scaling of the project's
trainers against the naive peers (`gpu_scaling`), what each optimisation of the native step is worth (`gpu_ablation`),
where a step's GPU time goes (`gpu_profile`), that the GPU-only paths train correctly (`gpu_checks`), the path a torch
2.2 container takes (`gpu_portable_path`), PyTorch's own data parallelism against the hand-written one
(`data_parallel_library`), Lightning's step beside the native one (`lightning_vs_native`) and the per-feature
embedding's cost each way it runs (`per_feature_embedding`). `native_harness`, `project_trainers`,
`lightning_trainer` and `project_variants` are the project's trainers as these benchmarks drive them.

May import: `benchmarks.harness`, `benchmarks.baselines`.
"""
