"""Ranking data: LETOR text and binary shards read into whole queries, batched for the device or streamed."""
