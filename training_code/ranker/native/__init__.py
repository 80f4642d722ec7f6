"""The native PyTorch loop's bookkeeping and progress reporting (the loop itself is train_ddp.py)."""
