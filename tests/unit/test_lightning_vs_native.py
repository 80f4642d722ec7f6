"""The Lightning-versus-native benchmark's arithmetic: time per step, and the split of Lightning's extra time."""

from __future__ import annotations

import pytest

from benchmarks.gpu.lightning_vs_native import LIGHTNING, NATIVE, NATIVE_EAGER, NATIVE_EAGER_DDP, analyse


def _result(variant: str, samples_per_second: float) -> dict:
    return {"variant": variant, "width": 1024, "world_size": 2, "batch_per_rank": 8192,
            "samples_per_second": samples_per_second}


def test_the_gap_per_step_splits_into_the_native_steps_savings_and_lightnings_loop():
    # Given 2 GPUs x 8192 samples a step: native at 16.384M samples/s (1 ms a step), its eager step at 8.192M (2 ms),
    # eager DDP at 4.096M (4 ms, not part of the split) and Lightning at 6.5536M (2.5 ms)
    results = [_result(NATIVE.label, 16_384_000), _result(NATIVE_EAGER.label, 8_192_000),
               _result(NATIVE_EAGER_DDP.label, 4_096_000), _result(LIGHTNING.label, 6_553_600)]
    # When the results are analysed
    headers, rows, [finding] = analyse(results)
    by_trainer = {row[headers.index("trainer")]: row for row in rows}
    # Then each row has its time per step and its difference from native, in % and in ms
    assert float(by_trainer["lightning"][headers.index("ms/step")]) == pytest.approx(2.5)
    assert by_trainer["lightning"][headers.index("vs native")] == "-60.0%"
    assert float(by_trainer["lightning"][headers.index("ms/step vs native")]) == pytest.approx(1.5)
    # And the 1.5 ms are 1 ms of eager step against the captured one plus 0.5 ms of Lightning's loop
    assert "+1.500 ms per step" in finding and "+1.000 ms of it is the native step run eagerly" in finding
    assert "+0.500 ms is Lightning's loop" in finding
