"""`python -m experiments.ablation`: head ablation of every shipped model on held-out text,
beside each head's slope -> assets/results/ablation.json (the measurement is
alibi_viz.models.head_ablation; what the results say, alibi_viz.results.ablation)."""

from __future__ import annotations

import time

import numpy as np
import torch

from alibi_viz import assets, data
from alibi_viz.assets import shipped_models, shipped_train_seq_len
from alibi_viz.models.attention import attention_maps_of_ids, head_statistics
from alibi_viz.models.head_ablation import head_ablation
from alibi_viz.models.loading import describe_model, load_eval_model
from experiments.program import parse, parser, write_results

ABLATION_WINDOWS = 32  # held-out windows of the training length each head is ablated on


def heldout_windows(windows: int = ABLATION_WINDOWS, seq_len: int = 128) -> np.ndarray:
    """(windows, seq_len + 1) consecutive windows of the shipped held-out text of the four
    kinds, interleaved in their training shares (`data.heldout_mixture_ids`)."""
    ids = data.heldout_mixture_ids(max_tokens=windows * seq_len + 1)
    return np.stack([ids[i * seq_len:(i + 1) * seq_len + 1] for i in range(windows)])


def measure_shipped(log=print) -> dict:
    """Head ablation of every shipped model on `heldout_windows()`, beside each head's slope:
    the ALiBi slope from the config (`ModelInfo.config_slopes`; slope_kind "applied"), or for
    the other models the decay fitted to its attention on the same text
    (`heads.head_statistics`; slope_kind "fitted"). What assets/results/ablation.json holds."""
    out = {"command": "python -m experiments.ablation", "torch": torch.__version__,
           "windows": ABLATION_WINDOWS, "models": {}}
    for name, folder in shipped_models().items():
        t0 = time.perf_counter()
        model = load_eval_model(folder, for_attentions=True)
        info = describe_model(model)
        windows = heldout_windows(seq_len=shipped_train_seq_len(folder))
        base, increase = head_ablation(model, windows, info.num_heads)
        if info.config_slopes is not None:
            slope = np.broadcast_to(np.asarray(info.config_slopes), increase.shape)
            slope_kind = "applied"
        else:
            maps = attention_maps_of_ids(model, windows[0, :-1])
            slope = head_statistics(maps).fitted_slope
            slope_kind = "fitted"
        out["models"][name] = {"loss": round(base, 5), "increase": np.round(increase, 5).tolist(),
                               "slope": np.round(slope, 6).tolist(), "slope_kind": slope_kind,
                               "seconds": round(time.perf_counter() - t0, 1)}
        log(f"{name}: loss {base:.4f}, largest increase {increase.max():.4f} "
            f"({time.perf_counter() - t0:.1f} s)")
    return out


def main(argv=None) -> None:
    parse(parser("python -m experiments.ablation",
                 "Head ablation of the shipped models -> assets/results/ablation.json."), argv)
    write_results(assets.ABLATION_PATH, measure_shipped())


if __name__ == "__main__":
    main()
