"""Ranking quality and time to model: the shipped entry points launched as a job launches them, on LETOR text, beside
the tools a ranking engineer would use instead (LightGBM, a plain PyTorch script). Launch to model at MSLR-WEB30K's
shape (`time_to_model`), quality against LightGBM on data that favours trees (`ranking_quality`), how the shipped
recipe was chosen (`ranking_recipes`); `ranking_gpu.sh` runs the GPU tables, and
`requirements-ranking-quality.txt` pins the LightGBM peer.

May import: `benchmarks.harness`, `benchmarks.baselines`.
"""
