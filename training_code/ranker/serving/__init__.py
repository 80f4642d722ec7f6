"""Scoring with a finished job's artifact: the scoring command (`python -m ranker.predict`), the SageMaker inference
handler the artifact carries, and what both share."""
