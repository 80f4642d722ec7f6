"""The ranker as Lightning pieces: module, data module, callbacks and the fused data-parallel strategy."""
