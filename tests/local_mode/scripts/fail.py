"""Fixture entry point: fails the way a broken training script does."""

print("loading data", flush=True)
raise ValueError("rank.train line 7: expected 'qid:<id>', got 'quid:3'")
