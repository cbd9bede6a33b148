"""Per-layer ALiBi slopes in a BLOOM model: the learnable-slope variant.

    slopes = attach(model, trainable=True)       # m[layer, head], initialised to the official schedule
    ... train: slopes.log_slopes is one more parameter ...
    save(model, slopes, folder)                  # config.json gains "alibi_viz_slopes"
    model, tokenizer, info = alibi_viz.load_model(folder)   # attaches them again

transformers' BLOOM builds one bias tensor from the head count alone (`_get_alibi_slopes`, the
official schedule) and hands the same tensor to every block. This module leaves that code as it
is and rescales the tensor on its way into each block, with a forward pre-hook:

    alibi_l = alibi * m[l] / m_official          (per head; alibi holds m_official * j)

so layer l's head h adds m[l, h] * j: the same row-constant form (softmax is unchanged by a
constant per row), the same masking, padding and KV cache as BLOOM's own path. Nothing of
transformers is patched and no remote code runs: the slopes are a plain list in config.json
(`CONFIG_KEY`, layers x heads), which `alibi_viz.models.loading.load_model` reads. Loaded by
plain transformers instead, the model silently uses the official slopes in every layer: only
alibi-viz's loader runs it as trained (its model card says so).

While training, the slopes are parameterised by their logarithms (`log_slopes`), so that they
stay positive and Adam moves every head by the same relative step whatever its size (from 1/2
to 1/256, a factor 128). They are kept off the model's own parameters (`model.parameters()`
and its state dict do not hold them), so `save_pretrained` writes a plain BLOOM checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from alibi_viz.alibi import alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _

CONFIG_KEY = "alibi_viz_slopes"  # config.json: per-layer slopes, [[m_h for each head] for each layer]
_ATTR = "_alibi_viz_layer_slopes"  # the attached LayerSlopes, on the model object


class LayerSlopes(nn.Module):
    """m[layer, head] = exp(log_slopes), and the hooks that apply them."""

    def __init__(self, slopes: np.ndarray, trainable: bool):
        super().__init__()
        official = alibi_slopes(slopes.shape[1])  # (heads,) what BLOOM's builder puts in alibi
        self.register_buffer("official", torch.tensor(official, dtype=torch.float32))
        self.log_slopes = nn.Parameter(torch.tensor(np.log(slopes), dtype=torch.float32),
                                       requires_grad=trainable)  # (layers, heads)
        self.handles = []

    def slopes(self) -> np.ndarray:
        """(layers, heads) float64: the slopes the model applies now."""
        return self.log_slopes.detach().double().exp().numpy()

    def hook(self, layer: int):
        def rescale(_module, args, kwargs):
            alibi = kwargs["alibi"]  # (batch * heads, 1, keys): m_official * j
            heads = self.official.numel()
            ratio = (self.log_slopes[layer].exp() / self.official).to(alibi.dtype)  # (heads,)
            scaled = alibi.view(-1, heads, *alibi.shape[1:]) * ratio[None, :, None, None]
            kwargs["alibi"] = scaled.view_as(alibi)
            return args, kwargs
        return rescale


def _blocks(model):
    if getattr(model.config, "model_type", None) != "bloom":
        raise AlibiVizError(_("Per-layer slopes work only in BLOOM models."))
    return model.transformer.h


def attach(model, slopes=None, trainable: bool = False) -> LayerSlopes:
    """Give every layer of `model` (a BLOOM model) its own slopes: `slopes` (layers, heads), or
    the official schedule in every layer. Returns the LayerSlopes (its log_slopes is the
    parameter to train when trainable). Attaching again replaces the earlier slopes."""
    blocks = _blocks(model)
    heads = int(model.config.n_head)
    if slopes is None:
        slopes = np.tile(alibi_slopes(heads), (len(blocks), 1))
    slopes = np.asarray(slopes, dtype=np.float64)
    if slopes.shape != (len(blocks), heads) or not (np.isfinite(slopes).all() and (slopes > 0).all()):
        raise AlibiVizError(_("Per-layer slopes must be {layers} x {heads} positive numbers, got "
                              "shape {shape}.").format(layers=len(blocks), heads=heads,
                                                       shape=tuple(slopes.shape)))
    detach(model)
    module = LayerSlopes(slopes, trainable).to(next(model.parameters()).device)
    module.handles = [block.register_forward_pre_hook(module.hook(i), with_kwargs=True)
                      for i, block in enumerate(blocks)]
    object.__setattr__(model, _ATTR, module)  # not a submodule: kept out of the state dict
    return module


def detach(model) -> None:
    """Remove attached per-layer slopes (the model then applies BLOOM's official schedule)."""
    module = getattr(model, _ATTR, None)
    if module is not None:
        for handle in module.handles:
            handle.remove()
        object.__delattr__(model, _ATTR)


def attached(model) -> np.ndarray | None:
    """(layers, heads) slopes attached to `model`, or None when it has none."""
    module = getattr(model, _ATTR, None)
    return None if module is None else module.slopes()


def from_config(config) -> np.ndarray | None:
    """(layers, heads) slopes a config.json declares (CONFIG_KEY), or None."""
    value = getattr(config, CONFIG_KEY, None)
    if value is None:
        return None
    try:
        return np.asarray(value, dtype=np.float64).reshape(len(value), -1)
    except (TypeError, ValueError):
        raise AlibiVizError(_("config.json's {key} must be a list of per-layer slope lists.")
                            .format(key=CONFIG_KEY)) from None


def attach_from_config(model) -> np.ndarray | None:
    """Attach the slopes the model's config declares, if it declares any; returns them."""
    slopes = from_config(model.config)
    if slopes is not None:
        attach(model, slopes)
    return slopes


def store(model, module: LayerSlopes) -> None:
    """Write the current slopes into the model's config (saved with `save_pretrained`)."""
    setattr(model.config, CONFIG_KEY, module.slopes().tolist())


def logged(slopes) -> list:
    """(layers, heads) slopes as nested lists to 5 significant digits, as training.json logs
    them and the shipped results keep them."""
    return [[float(f"{m:.5g}") for m in row] for row in np.asarray(slopes)]


def read(folder) -> np.ndarray | None:
    """(layers, heads) slopes of a saved model folder's config.json, or None."""
    value = json.loads((Path(folder) / "config.json").read_text()).get(CONFIG_KEY)
    return None if value is None else np.asarray(value, dtype=np.float64)
