from collections.abc import Sequence

def run_stage(
    ready_s: Sequence[float],
    bits: Sequence[float],
    klass: Sequence[int],
    rates_bps: Sequence[float],
    cap_bps: float,
    /,
) -> tuple[list[float], list[tuple[float, float]]]: ...
