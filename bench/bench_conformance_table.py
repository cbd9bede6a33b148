"""Benchmark: the conformance check, one row per bug class and per correct model shape, before and after.

    .venv/bin/python bench/bench_conformance_table.py                 # every row, both trees
    .venv/bin/python bench/bench_conformance_table.py --only shards   # rows whose name has it
    .venv/bin/python bench/bench_conformance_table.py --no-before     # this tree only
    .venv/bin/python bench/bench_conformance_table.py --repeats 1     # quicker correct rows
    .venv/bin/python bench/bench_conformance_table.py --group kernels --baseline db87066
                                    # kernels, biases, x-transformers, attn-gym (issue 58)

For every row it runs `alibi_viz.models.conformance.check_alibi(model, tokenizer, ...)` on a
tiny random model built from a transformers config (no download) and reports the check's
verdict, its findings (the first two sentences of `problems()`, 160 characters each) and its
time (time.perf_counter around check_alibi only), in two trees side by side: BEFORE, commit
90a9b48 (`--baseline`), checked out into a git worktree at /tmp/before_tree (created if missing,
removed afterwards if this script created it) and imported from there (its PYTHONPATH;
each child prints the alibi_viz it imported), and AFTER, this working tree.

Rows (the injections are copied from tests/test_conformance_builders.py,
tests/test_conformance_ports.py and alibi_viz/models/zoo.py, so both trees get the very same
model and bug; none of them edits the check):

* bugs inside transformers' own slope builders (monkeypatched, as a vendored or patched
  transformers would have them): BLOOM's _get_alibi_slopes x2, truncated 16 -> 12, sign flip,
  /4, reversed; Falcon's and MPT's builders x2; BLOOM's build_alibi_tensor x2 (masked path);
* port bugs on the bias on its way into the attention (forward pre-hooks): tensor-parallel
  shards each building their own schedule, the last shard adding no bias (bfloat16 32 heads
  / 4 shards and 64 / 8, float32 32 / 4), one head at 3.4x in bfloat16, a sign flip in
  reverse head order, MPT's alibi_bias_max 16 (transformers applies 8; and a port honouring
  16, which conforms), the decode step's bias row (zero at the new key, +m at the new key,
  2x in decode only), a left-padded batch decode whose new token counts the pads (HF #26380,
  float32 and bfloat16);
* the zoo's bugs (alibi_viz/models/zoo.py, BLOOM, 12 heads, 2 layers);
* kernels, biases and third-party libraries (`kernel_rows`, `--group kernels`: x-transformers
  2.31.10 and attn-gym 0.0.17 from PyPI, built as tests/test_conformance_thirdparty.py builds
  them): correct forms prefill and decode; no causal mask; ALiBi on some heads; max_bias 4;
  the geometric formula; m(j - L + 1) over a static cache of 1,024 slots in bfloat16 (bias and
  decode kernel), and its last 2 rows at 4,096 slots; slopes below resolution on q = 0; the (1, H, 1, K) row form; a kernel's own
  errors; a wrapper model; transformers' BLOOM in bfloat16 at a 1,024-token probe;
* correct models: BLOOM 12/16/32/40 heads, MPT 32/48/64, Falcon-RW 32 (sdpa, and eager, where
  transformers adds the bias twice and the expected verdict is "scaled"), each in float32,
  bfloat16 and float16, 2 layers, head_dim 8, with the decode and padding checks; and BLOOM
  32 heads in bfloat16 initialised at 1 and 2 (seeds 0, 1), whose content swamps the probe
  (expected "conforms" or "inconclusive", never a bug).

"expected" says what the current tests require; a verdict is marked ✓ when it is one of the
expected ones and every phrase the tests look for is in the findings (and, for the one steep
head, the probe flags that head alone), ~ when the verdict is right but the bug is not named
so, ✗ when the verdict is wrong. Times are
the median of --repeats runs (correct rows, default 3) or --bug-repeats runs (bug rows, default
1), each after one warm-up check of the same model, one torch thread (--threads). Rows run in
child processes, --chunk rows per child, each chunk BEFORE then AFTER, so the two versions
never share a process and load drifts hit both; each child warms up on a throwaway model
first. Results also go to bench/out/conformance_table.json. About 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "90a9b4881e96a5bb2b6e4d7df28b68069d4ca618"
BEFORE_TREE = Path("/tmp/before_tree")
VOCAB = 259  # the byte tokenizer of the shipped models (ByT5Tokenizer(extra_ids=0))
DTYPES = ("float32", "bfloat16", "float16")


# ----------------------------------------------------------------------------- the rows

def _row(name, kind="bloom", heads=12, *, dtype="float32", attn="eager", layers=1, decode=False,
         inject=None, want=None, phrases=(), expected="", correct=False, init=None, seed=0,
         flagged=None, probe_length=128):
    """One row. want: the verdicts the tests accept (None: anything but "conforms"; "error":
    a raised error, its phrases in its message); phrases: parts the findings (or notes) must
    contain; flagged: the heads the probe must mark other than "conforms" (["L1H21"]);
    expected: what the table says. kind "kernel" or "bias": check_kernel or check_bias on the
    callable or tensor `kernel_case(inject)` builds (the model column says which)."""
    return dict(name=name, kind=kind, heads=heads, dtype=dtype, attn=attn, layers=layers,
                decode=decode, inject=inject, want=want, phrases=list(phrases), flagged=flagged,
                expected=expected or (" or ".join(want) if want else "not conforms"),
                correct=correct, init=init, seed=seed, probe_length=probe_length)


def kernel_rows() -> list[dict]:
    """Issue 58's classes: kernels and libraries nobody here wrote (x-transformers 2.31.10,
    attn-gym 0.0.17, as tests/test_conformance_thirdparty.py builds them), the check's row
    measures, its decode form, its error messages."""
    rows = []
    for heads, dtype, decode in ((12, "float32", False), (12, "float32", True),
                                 (40, "bfloat16", False), (40, "bfloat16", True)):
        rows.append(_row(f"x-transformers ALiBi, {'decode' if decode else 'prefill'} (correct)",
                         "kernel", heads, dtype=dtype, decode=decode, inject="xt",
                         want=("conforms",), correct=True))
    for decode in (False, True):
        rows.append(_row(f"attn-gym ALiBi, expected geometric, {'decode' if decode else 'prefill'}"
                         " (correct)", "kernel", 8, decode=decode, inject="gym:geometric",
                         want=("conforms",), correct=True))
    rows += [
        _row("kernel without causal mask (sdpa, -m|i-j|)", "kernel", 8, inject="unmasked",
             want=("unmasked",), phrases=("causal mask is missing",)),
        _row("kernel without causal mask (sdpa, -m|i-j|)", "kernel", 12, inject="unmasked",
             want=("unmasked",), phrases=("causal mask is missing",)),
        _row("x-transformers Attend(causal=False)", "kernel", 8, inject="xt:nocausal",
             want=("unmasked",), phrases=("causal mask is missing",)),
        _row("attn-gym score_mod without block_mask", "kernel", 8, inject="gym:nomask",
             want=("unmasked",), phrases=("causal mask is missing",)),
        _row("symmetric kernel, mode='symmetric' (correct)", "kernel", 8,
             inject="xt:nocausal:symmetric", want=("conforms",), correct=True),
        _row("bias m(j-L+1), static cache L=1,024, bf16", "bias", 8, dtype="bfloat16",
             inject="static", want=("precision",),
             phrases=("bfloat16 rounding of a bias far from zero", "use the textbook form")),
        _row("last 2 rows of m(j-L+1), L=4,096, bf16", "bias", 12, dtype="bfloat16",
             inject="static2", want=("precision",),
             phrases=("bfloat16 rounding of a bias far from zero",)),
        _row("decode m(j-L+1), static cache L=1,024, bf16", "kernel", 8, dtype="bfloat16",
             decode=True, inject="static", want=("precision",),
             phrases=("bfloat16 rounding of a bias far from zero",)),
        _row("x-transformers alibi_num_heads=4 of 8", "kernel", 8, inject="xt:partial4",
             want=("missing",), phrases=("Heads 1-4 apply the 4-head schedule",)),
        _row("x-transformers alibi_num_heads=4, expected as applied (correct)", "kernel", 8,
             inject="xt:partial4:expected", want=("conforms",), correct=True),
        _row("x-transformers slopes= max_bias 4", "kernel", 8, inject="xt:maxbias4",
             want=("schedule",), phrases=("max_bias 4 instead of 8",)),
        _row("attn-gym at 12 heads (geometric)", "kernel", 12, inject="gym",
             want=("schedule",), phrases=("geometric formula",)),
        _row("slopes 1e-4 in bf16 (inconclusive on q = 0)", "bias", 8, dtype="bfloat16",
             inject="tiny", want=("inconclusive",), phrases=("the scores are the bias alone",)),
        _row("check_bias row form (1, H, 1, K) +m j (correct)", "bias", 8, inject="row",
             want=("conforms",), correct=True),
        _row("kernel error: 8-head kernel given 12 heads", "kernel", 12, inject="error:heads",
             want=("error",), phrases=("AlibiVizError", "num_heads")),
        _row("kernel error: float32 bias, bf16 inputs (baddbmm)", "kernel", 8,
             dtype="bfloat16", inject="error:dtype", want=("error",),
             phrases=("AlibiVizError", "dtype")),
        _row("wrapper whose forward takes `input`", "bloom", 8, inject="wrapper",
             want=("error",), phrases=("AlibiVizError", "check_alibi(wrapper.model")),
        _row("BLOOM bf16 at a 1,024-token probe (correct, rounding noted)", "bloom", 8,
             dtype="bfloat16", probe_length=1024, want=("conforms",), phrases=("Precision",),
             correct=True),
    ]
    return rows


BUILDER = "Your transformers' BLOOM builder"
ZOO = {  # zoo bug -> the verdict the tests require (BLOOM, 12 heads)
    "sign_flip": "sign_flipped", "twice": "scaled", "sqrt_d": "scaled", "truncated": "schedule",
    "geometric": "schedule", "reversed": "permuted", "permuted": "permuted",
    "off_by_one": "offset", "clip64": "clipped", "row_shift": "conforms",
    "shift_all": "conforms", "decode_zero": "decode", "left_padding": "padding",
}


def all_rows() -> list[dict]:
    rows = [
        _row("builder x2 (BLOOM _get_alibi_slopes)", inject="builder:twice", want=("scaled",),
             phrases=(BUILDER, "gives 2x the official slopes")),
        _row("builder truncated 16->12", inject="builder:truncated", want=("schedule",),
             phrases=(BUILDER, "gives the first 12 slopes of the 16-head schedule")),
        _row("builder sign flip", inject="builder:sign", want=("sign_flipped",),
             phrases=(BUILDER, "gives the official slopes with the wrong sign")),
        _row("builder /4", inject="builder:quarter", want=("scaled",),
             phrases=(BUILDER, "gives 0.25x the official slopes")),
        _row("builder reversed order", inject="builder:reversed", want=("permuted",),
             phrases=(BUILDER, "the slopes are in reverse head order")),
        _row("builder x2 (Falcon build_alibi_tensor)", "falcon", 32, attn="sdpa",
             inject="builder:falcon_twice", want=("scaled",),
             phrases=("Your transformers' Falcon builder", "gives 2x the official slopes")),
        _row("builder x2 (MPT build_mpt_alibi_tensor)", "mpt", 12, inject="builder:mpt_twice",
             want=("scaled",), phrases=("Your transformers' MPT builder",
                                        "gives 2x the official slopes")),
        _row("builder x2 (BLOOM build_alibi_tensor, masked path)", heads=8, decode=True,
             inject="builder:bloom_tensor_twice", phrases=("gives 2x the official slopes",)),
    ]
    for heads, shards in ((32, 2), (32, 4), (48, 2)):
        rows.append(_row(f"tensor parallel: {shards} shards, own schedule each", heads=heads,
                         inject=f"shards:{shards}", want=("schedule",),
                         phrases=(f"the schedule for {heads // shards} heads, repeated "
                                  f"{shards} times",)))
    for heads, shards, dtype in ((32, 4, "bfloat16"), (64, 8, "bfloat16"), (32, 4, "float32")):
        size = heads // shards
        rows.append(_row(f"last shard without bias ({heads} heads / {shards} shards)",
                         heads=heads, dtype=dtype, inject=f"last_shard:{shards}",
                         want=("missing",),
                         phrases=(f"Heads {heads - size + 1}-{heads} apply no positional "
                                  "bias",)))
    rows += [
        _row("one head at 3.4x its slope (head 21 of 32)", heads=32, dtype="bfloat16",
             inject="steep_head21", flagged=["L1H21"], expected="not conforms, head 21 alone"),
        _row("sign flip + reversed order", heads=12, inject="sign_reversed",
             want=("sign_flipped",), phrases=("wrong sign", "reverse head order")),
        _row("sign flip + reversed order", heads=40, inject="sign_reversed",
             want=("sign_flipped",), phrases=("wrong sign", "reverse head order")),
        _row("MPT alibi_bias_max 16 in config (transformers applies 8)", "mpt", 8,
             inject="mpt_bias_max16", want=("schedule",),
             phrases=("max_bias 8 instead of 16",)),
        _row("MPT port honouring alibi_bias_max 16 (correct)", "mpt", 8,
             inject="mpt_bias_max16_port", want=("conforms",)),
    ]
    for dtype in ("float32", "bfloat16"):
        rows.append(_row("padded batch decode counting pads (HF #26380)", heads=8, dtype=dtype,
                         decode=True, inject="new_key:pads_counted", want=("padding",),
                         phrases=("#26380",)))
    for bug, phrase in (("zero_new_key", "The new token's own key gets no bias"),
                        ("plus_m_new_key", "The distance is off by 1 token for every key but "
                                           "the query's own"),
                        ("decode_twice", "Every head applies 2x its slope")):
        rows.append(_row(f"decode only: {bug.replace('_', ' ')}", heads=8, decode=True,
                         inject=f"new_key:{bug}", want=("decode",),
                         phrases=("The decode step's bias row, probed as the prefill's",
                                  phrase)))
    for bug, verdict in ZOO.items():
        rows.append(_row(f"zoo: {bug}", heads=12, layers=2, inject=f"zoo:{bug}",
                         decode=bug in ("decode_zero", "left_padding"), want=(verdict,)))
    for kind, heads_list, attn in (("bloom", (12, 16, 32, 40), "eager"),
                                   ("mpt", (32, 48, 64), "eager"),
                                   ("falcon", (32,), "sdpa"), ("falcon", (32,), "eager")):
        for heads in heads_list:
            for dtype in DTYPES:
                eager_falcon = kind == "falcon" and attn == "eager"
                rows.append(_row(
                    "correct" + (" (eager Falcon adds the bias twice)" if eager_falcon else ""),
                    kind, heads, dtype=dtype, attn=attn, layers=2, decode=True, correct=True,
                    want=("scaled",) if eager_falcon else ("conforms",),
                    phrases=("the bias is added twice",) if eager_falcon else ()))
    for init in (1.0, 2.0):
        for seed in (0, 1):
            rows.append(_row(f"correct, content-dominated (init {init:g}, seed {seed})",
                             heads=32, dtype="bfloat16", layers=2, init=init, seed=seed,
                             correct=True, want=("conforms", "inconclusive")))
    rows += [dict(r, group="kernels") for r in kernel_rows()]
    for row in rows:
        if row["kind"] in ("kernel", "bias"):
            row["model"] = (f"check_{row['kind']} {row['heads']}h {row['dtype']}"
                            + (" decode" if row["decode"] else ""))
        else:
            row["model"] = (f"{row['kind']} {row['heads']}h {row['layers']}L {row['dtype']} "
                            f"{row['attn']}" + ("" if row["decode"] else " decode=False")
                            + (f" probe {row['probe_length']}" if row["probe_length"] != 128
                               else ""))
        row["id"] = f"{row['name']} | {row['model']}" + (
            f" seed {row['seed']}" if row["seed"] else "")
    return rows


# ----------------------------------------------------------------------------- the child

def tiny_model(kind, heads, seed=0, layers=2, head_dim=8, dtype=None, attn="eager", init=None):
    """alibi_viz.models.zoo.tiny_model, copied: the same model in both trees."""
    import torch
    from transformers import AutoModelForCausalLM, BloomConfig, FalconConfig, MptConfig

    torch.manual_seed(seed)
    hidden = head_dim * heads
    init = 0.3 * min(1.0, math.sqrt(128 / hidden)) if init is None else init
    common = dict(vocab_size=VOCAB, initializer_range=init, pad_token_id=0, bos_token_id=1,
                  eos_token_id=1)
    if kind == "bloom":
        config = BloomConfig(hidden_size=hidden, n_head=heads, n_layer=layers, **common)
    elif kind == "mpt":
        config = MptConfig(d_model=hidden, n_heads=heads, n_layers=layers, max_seq_len=512,
                           **common)
    else:
        config = FalconConfig(hidden_size=hidden, num_attention_heads=heads,
                              num_hidden_layers=layers, alibi=True, bias=True, multi_query=False,
                              new_decoder_architecture=False, parallel_attn=False, **common)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()
    return model.to(dtype) if dtype is not None else model


def official_slopes(n: int) -> list[float]:
    """fairseq's get_slopes (the official ALiBi rule), as tests/test_conformance_builders.py
    writes it out."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + official_slopes(2 * closest)[0::2][: n - closest]


def mpt_slopes(n: int, max_bias: float) -> list[float]:
    """MPT's builder's slopes: 2^(-max_bias k / n') for the next power of two n', interleaved
    as build_mpt_alibi_tensor does."""
    n2 = 2 ** math.ceil(math.log2(n))
    base = [2 ** (-max_bias * k / n2) for k in range(1, n2 + 1)]
    return base if n2 == n else (base[1::2] + base[0::2])[:n]


def hook(model, edit):
    """tests/test_conformance_ports.py's hook: edit(per_head, queries) rewrites the bias every
    attention block receives (per_head: (batch, heads, 1, keys); queries: this forward's
    rows, 1 when decoding)."""
    kind = model.config.model_type
    heads = model.config.n_head if kind == "bloom" else model.config.n_heads
    blocks = ([b.self_attention for b in model.transformer.h] if kind == "bloom" else
              [b.attn for b in model.transformer.blocks])
    name = "alibi" if kind == "bloom" else "position_bias"

    def pre(_module, args, kwargs):
        bias = kwargs[name]
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        per = bias.reshape(-1, heads, *bias.shape[1:]) if kind == "bloom" else bias[None]
        per = edit(per.clone(), hidden.shape[1])
        kwargs[name] = per.reshape(bias.shape) if kind == "bloom" else per[0]
        return args, kwargs

    for block in blocks:
        block.register_forward_pre_hook(pre, with_kwargs=True)
    return model


def ratio(slopes, heads):
    import torch

    return torch.tensor([s / o for s, o in zip(slopes, official_slopes(heads), strict=True)],
                        dtype=torch.float32)[None, :, None, None]


def new_key(bug):
    """tests/test_conformance_ports.py's decode-step bugs (queries == 1 only)."""
    import torch

    def edit(per, queries):
        if queries != 1:
            return per
        slopes = torch.tensor(official_slopes(per.shape[1]), dtype=per.dtype)
        if bug == "zero_new_key":
            per[..., -1] = 0
        elif bug == "plus_m_new_key":
            per[..., -1] += slopes[None, :, None]
        elif bug == "decode_twice":
            per = per * 2
        elif bug == "pads_counted":  # HF #26380: the new token's position counts the pads
            per[..., -1] = slopes[None, :, None] * (per.shape[-1] - 1)
        return per
    return edit


def break_model(model, bug: str):
    """alibi_viz/models/zoo.py's break_model, copied (BLOOM and MPT)."""
    import torch

    kind = model.config.model_type
    heads = model.config.n_head if kind == "bloom" else model.config.n_heads
    modules = ([b.self_attention for b in model.transformer.h] if kind == "bloom" else
               [b.attn for b in model.transformer.blocks])
    name = "alibi" if kind == "bloom" else "position_bias"
    head_dim = (model.config.hidden_size if kind == "bloom" else model.config.d_model) // heads
    slopes = torch.tensor(official_slopes(heads), dtype=torch.float32)

    def schedule(values, dtype):
        return (torch.tensor(values, dtype=dtype) / slopes.to(dtype))[None, :, None, None]

    def distance(mask):
        queries, keys = mask.shape[-2:]
        return torch.arange(queries)[:, None] + keys - queries - torch.arange(keys)[None, :]

    def edit(module, args, kwargs):
        bias, mask = kwargs.get(name), kwargs.get("attention_mask")
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        if bias is None:
            return None
        per = bias.reshape(-1, heads, *bias.shape[1:]) if kind == "bloom" else bias[None]
        float_mask = mask is not None and mask.dim() == 4 and mask.is_floating_point()
        if bug == "sign_flip":
            per = -per
        elif bug == "twice":
            per = per * 2
        elif bug == "truncated":
            count = 2 ** math.ceil(math.log2(heads))
            count = count if count != heads else 2 * heads
            per = per * schedule(official_slopes(count)[:heads], per.dtype)
        elif bug == "permuted":
            order = torch.arange(heads)
            pairs = heads - heads % 2
            order[:pairs] = order[:pairs].reshape(-1, 2).flip(1).reshape(-1)
            per = per[:, order]
        elif bug == "shift_all":
            per = per + slopes.to(per.dtype)[None, :, None, None]
        elif bug == "off_by_one" and float_mask:
            extra = slopes[:, None, None] * (distance(mask) >= 1).to(slopes.dtype)
            kwargs["attention_mask"] = mask + extra[None].to(mask.dtype)
        elif bug == "sqrt_d":
            per = per / math.sqrt(head_dim)
        elif bug == "reversed":
            per = per.flip(1)
        elif bug == "geometric":
            per = per * schedule([2 ** (-8 * (h + 1) / heads) for h in range(heads)], per.dtype)
        elif bug == "row_shift":
            per = per + 3.0
        elif bug == "decode_zero" and hidden is not None and hidden.shape[1] == 1:
            per = torch.zeros_like(per)
        elif bug == "clip64" and float_mask:
            extra = slopes[:, None, None] * (distance(mask) - 64).clamp_min(0).to(slopes.dtype)
            kwargs["attention_mask"] = mask + extra[None].to(mask.dtype)
        elif bug == "left_padding" and mask is not None and mask.dim() == 4:
            queries, keys = mask.shape[-2:]
            future = torch.ones(queries, keys, dtype=torch.bool).triu(keys - queries + 1)
            kwargs["attention_mask"] = torch.zeros_like(mask).masked_fill(
                future, torch.finfo(mask.dtype).min)
        kwargs[name] = per.reshape(bias.shape) if kind == "bloom" else per[0]
        return args, kwargs

    for module in modules:
        module.register_forward_pre_hook(edit, with_kwargs=True)
    return model


def inject(model, spec: str | None, stack: ExitStack):
    """The row's bug in `model` (hooks) or in transformers (patches, undone by `stack`)."""
    import torch
    import transformers.models.bloom.modeling_bloom as bloom_module
    import transformers.models.falcon.modeling_falcon as falcon_module
    import transformers.models.mpt.modeling_mpt as mpt_module

    if spec is None:
        return model
    what, _, arg = spec.partition(":")
    heads = model.config.n_head if model.config.model_type == "bloom" else getattr(
        model.config, "n_heads", getattr(model.config, "num_attention_heads", None))
    if what == "builder":  # tests/test_conformance_builders.py
        if arg == "falcon_twice":
            original = falcon_module.build_alibi_tensor
            stack.enter_context(mock.patch.object(
                falcon_module, "build_alibi_tensor",
                lambda mask, n, dtype: 2 * original(mask, n, dtype)))
        elif arg == "mpt_twice":
            original = mpt_module.build_mpt_alibi_tensor
            stack.enter_context(mock.patch.object(
                mpt_module, "build_mpt_alibi_tensor", lambda *a, **k: 2 * original(*a, **k)))
        elif arg == "bloom_tensor_twice":
            original = bloom_module.build_alibi_tensor
            stack.enter_context(mock.patch.object(
                bloom_module, "build_alibi_tensor",
                lambda mask, n, dtype: 2 * original(mask, n, dtype)))
        else:
            original = bloom_module._get_alibi_slopes

            def slopes(num_heads, device):
                if arg == "twice":
                    return 2 * original(num_heads, device)
                if arg == "truncated":
                    return original(2 ** math.ceil(math.log2(num_heads)), device)[:num_heads]
                if arg == "sign":
                    return -original(num_heads, device)
                if arg == "quarter":
                    return original(num_heads, device) / 4
                if arg == "reversed":
                    return original(num_heads, device).flip(0)
                raise AssertionError(arg)
            stack.enter_context(mock.patch.object(bloom_module, "_get_alibi_slopes", slopes))
        return model
    if what == "shards":  # each of k shards builds the schedule of n/k heads
        k = int(arg)
        tiled = official_slopes(heads // k) * k
        return hook(model, lambda per, q: per * ratio(tiled, heads).to(per.dtype))
    if what == "last_shard":
        size = heads // int(arg)

        def drop_last_shard(per, q):
            per[:, -size:] = 0
            return per
        return hook(model, drop_last_shard)
    if what == "steep_head21":
        def steep(per, q):
            per[:, 20] *= 3.4
            return per
        return hook(model, steep)
    if what == "sign_reversed":
        return hook(model, lambda per, q: -per.flip(1))
    if what in ("mpt_bias_max16", "mpt_bias_max16_port"):
        model.config.attn_config.alibi_bias_max = 16
        if what == "mpt_bias_max16_port":
            honour = torch.tensor([a / b for a, b in zip(mpt_slopes(heads, 16),
                                                         mpt_slopes(heads, 8), strict=True)],
                                  dtype=torch.float32)[None, :, None, None]
            hook(model, lambda per, q: per * honour.to(per.dtype))
        return model
    if what == "new_key":
        return hook(model, new_key(arg))
    if what == "zoo":
        return break_model(model, arg)
    if what == "wrapper":
        return Bridge(model)
    raise AssertionError(spec)


def kernel_case(spec: str, heads: int, dtype):
    """(fn or bias, check keyword arguments) of a kernel or bias row (`kernel_rows`)."""
    import torch

    what, _, arg = spec.partition(":")
    m = torch.tensor(official_slopes(heads))
    if what == "xt":
        from x_transformers.attend import Attend
        from x_transformers.x_transformers import AlibiPositionalBias

        alibi_heads = 4 if arg.startswith("partial4") else heads
        slopes = official_slopes(16)[:8] if arg == "maxbias4" else None  # = max_bias 4
        rel = AlibiPositionalBias(alibi_heads, total_heads=heads, slopes=slopes).to(dtype)
        attend = Attend(causal=not arg.startswith("nocausal"))
        kwargs = {"mode": "symmetric"} if arg.endswith("symmetric") else {}
        if arg == "partial4:expected":
            kwargs["expected"] = official_slopes(4) + [0.0] * (heads - 4)
        return (lambda q, k, v: attend(q, k, v, attn_bias=rel(q.shape[-2], k.shape[-2]))[0],
                kwargs)
    if what == "gym":
        from attn_gym.mods.alibi import generate_alibi_bias
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        score_mod = generate_alibi_bias(heads)

        def gym(q, k, v):
            Q, K = q.shape[-2], k.shape[-2]
            block = (create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, Q, K,
                                       device=q.device) if arg != "nomask" and Q > 1 else None)
            return flex_attention(q, k, v, score_mod=score_mod, block_mask=block)
        return gym, ({"expected": "geometric"} if arg in ("geometric", "nomask") else {})
    if what == "unmasked":
        def unmasked(q, k, v):
            i = torch.arange(q.shape[-2])
            bias = -m[:, None, None] * (i[:, None] - i[None, :]).abs()
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=bias.to(q.dtype))
        return unmasked, {}
    if what == "static":  # m (j - L + 1) over a static cache of L = 1,024 slots
        slots = 1024
        j = torch.arange(slots, dtype=torch.float64)

        def static(q, k, v):
            t = k.shape[-2] - 1
            bias = (m[:, None, None] * (j - slots + 1)).to(q.dtype).masked_fill(j > t, -math.inf)
            pad = slots - (t + 1)
            k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (k, v))
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return static, {}
    if what == "error":  # a kernel built for 8 heads with a float32 bias
        m8 = torch.tensor(official_slopes(8))

        def eight_heads(q, k, v):
            i = torch.arange(q.shape[-2]).double()
            bias = (-m8[:, None, None] * (i[:, None] - i[None, :])).masked_fill(
                i[:, None] < i[None, :], -math.inf).float()
            if arg == "dtype":  # baddbmm, as BLOOM's attention adds its bias
                scores = torch.baddbmm(bias, q[0], k[0].transpose(1, 2))
                return (torch.softmax(scores, dim=-1) @ v[0])[None]
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return eight_heads, {}
    raise AssertionError(spec)


def bias_case(spec: str, heads: int, dtype):
    """The bias tensor of a check_bias row."""
    import torch

    m = torch.tensor(official_slopes(heads) if spec != "tiny" else [1e-4] * heads,
                     dtype=torch.float64)[:, None, None]
    j = torch.arange(64, dtype=torch.float64)
    if spec == "static":  # m (j - L + 1), L = 1,024, for 64 queries
        return (m * (j - 1024 + 1)).expand(-1, 64, -1).to(dtype), {}
    if spec == "static2":  # the last 2 rows of m (j - L + 1), L = 4,096, over 128 keys
        return (m * (torch.arange(128.0, dtype=torch.float64) - 4096 + 1)).expand(
            -1, 2, -1).to(dtype), {}
    if spec == "row":  # BLOOM's +m j, one row for every query, with a batch of 1
        return (m * j)[None].to(dtype), {}
    if spec == "tiny":  # -m (i - j) with slopes of 1e-4
        return (-m * (j[:, None] - j[None, :])).to(dtype), {"expected": [1e-4] * heads}
    raise AssertionError(spec)


class Bridge:
    """A wrapper whose forward takes `input` (an interpretability library's bridge)."""

    def __new__(cls, model):
        import torch

        class _Bridge(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.model, self.config = inner, inner.config

            def get_input_embeddings(self):
                return self.model.get_input_embeddings()

            def forward(self, input, return_type="logits"):  # noqa: A002 - the wrapped API's name
                return self.model(input_ids=input).logits
        return _Bridge(model)


def _summary(check) -> dict:
    """Whatever the check returned, read the same way in both trees."""
    problems = [str(p) for p in (check.problems() if hasattr(check, "problems") else [])]
    diagnosis = getattr(check, "diagnosis", None) or []
    try:  # the heads the probe marks other than "conforms", as L<layer>H<head> (1-based)
        flagged = [f"L{layer + 1}H{head + 1}" for layer, head in
                   zip(*(check.verdicts() != "conforms").nonzero(), strict=True)]
    except Exception:  # noqa: BLE001 - a check without per-head verdicts
        flagged = None
    return {"verdict": str(getattr(check, "verdict", "?")), "ok": bool(getattr(check, "ok", False)),
            "findings": [str(getattr(f, "verdict", "?")) for f in diagnosis], "flagged": flagged,
            "problems": [p[:400] for p in problems],
            "notes": [str(n)[:400] for n in (getattr(check, "notes", None) or [])]}


def run_cell(row: dict, tokenizer, repeats: int) -> dict:
    import torch

    from alibi_viz.models.conformance import check_alibi

    out = {"id": row["id"]}
    try:
        with ExitStack() as stack:
            dtype = getattr(torch, row["dtype"])
            if row["kind"] in ("kernel", "bias"):
                import alibi_viz

                if row["kind"] == "bias":
                    bias, kwargs = bias_case(row["inject"], row["heads"], dtype)

                    def check():
                        return alibi_viz.check_bias(bias, **kwargs)
                else:
                    fn, kwargs = kernel_case(row["inject"], row["heads"], dtype)
                    if row["decode"]:
                        kwargs["decode"] = True

                    def check():
                        return alibi_viz.check_kernel(fn, row["heads"], 16, dtype=dtype,
                                                      **kwargs)
            else:
                model = tiny_model(row["kind"], row["heads"], seed=row["seed"],
                                   layers=row["layers"], dtype=dtype, attn=row["attn"],
                                   init=row["init"])
                model = inject(model, row["inject"], stack)

                def check():
                    if row["decode"]:
                        return check_alibi(model, tokenizer, probe_length=row["probe_length"])
                    return check_alibi(model, decode=False, probe_length=row["probe_length"])
            check()  # warm-up
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                result = check()
                times.append(time.perf_counter() - start)
        out.update(_summary(result), seconds=statistics.median(times), times=times)
    except Exception as error:  # noqa: BLE001 - the old tree may not know a model or a bug
        out.update(verdict="error", ok=False, findings=[], notes=[], seconds=None, times=[],
                   problems=[f"{type(error).__name__}: {error}"[:400]])
    return out


def child(tree: str, ids: list[str], repeats: int, bug_repeats: int, threads: int) -> None:
    import torch
    from transformers import ByT5Tokenizer

    import alibi_viz
    from alibi_viz.models.conformance import check_alibi

    torch.set_num_threads(threads)
    where = str(Path(alibi_viz.__file__).resolve())
    if not where.startswith(str(Path(tree).resolve()) + os.sep):
        raise SystemExit(f"alibi_viz came from {where}, not from {tree}")
    print("TREE " + json.dumps(where), flush=True)
    tokenizer = ByT5Tokenizer(extra_ids=0)
    check_alibi(tiny_model("bloom", 4), tokenizer)  # the process's first check: lazy imports
    rows = {row["id"]: row for row in all_rows()}
    for cell in ids:
        row = rows[cell]
        print("CELL " + json.dumps(run_cell(row, tokenizer,
                                            repeats if row["correct"] else bug_repeats)),
              flush=True)


# ----------------------------------------------------------------------------- the parent

def judge(row: dict, result: dict) -> str:
    """"yes" when the check said what the current tests require; "verdict" when its verdict
    is one the tests accept but a phrase they look for (or the heads it must flag) is not
    there: caught, not named; "no" otherwise."""
    verdict = result["verdict"]
    good = verdict != "conforms" and verdict != "error" if row["want"] is None \
        else verdict in row["want"]
    if not good:
        return "no"
    text = " ".join(result["problems"] + result.get("notes", []))
    named = all(p in text for p in row["phrases"]) and (
        row["flagged"] is None or result.get("flagged") == row["flagged"])
    return "yes" if named else "verdict"


def run_chunk(tree: Path, rows: list[dict], args) -> tuple[str, list[dict]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(args.threads)}
    proc = subprocess.run([sys.executable, __file__, "--child", str(tree), "--repeats",
                           str(args.repeats), "--bug-repeats", str(args.bug_repeats),
                           "--threads", str(args.threads), "--cells",
                           json.dumps([r["id"] for r in rows])],
                          capture_output=True, text=True, env=env, cwd="/tmp")
    where, results = "?", {}
    for line in proc.stdout.splitlines():
        if line.startswith("TREE "):
            where = json.loads(line[5:])
        elif line.startswith("CELL "):
            cell = json.loads(line[5:])
            results[cell["id"]] = cell
    crash = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    out = [results.get(r["id"]) or {
        "id": r["id"], "verdict": "error", "ok": False, "findings": [], "notes": [],
        "seconds": None, "times": [], "problems": [f"child failed: {crash[0][:300]}"]}
        for r in rows]
    return where, out


def cell_text(row: dict, result: dict | None) -> tuple[str, str, str]:
    if result is None:
        return "", "", ""
    mark = {"yes": "✓", "verdict": "~", "no": "✗"}[judge(row, result)]
    findings = " + ".join(result["findings"]) if len(result["findings"]) > 1 else ""
    verdict = f"{mark} {result['verdict']}" + (f" ({findings})" if findings else "")
    said = result["problems"][:2] or [f"note: {n}" for n in result["notes"][:1]]
    text = " / ".join(p[:160] + ("…" if len(p) > 160 else "") for p in said) or "—"
    seconds = "" if result["seconds"] is None else f"{result['seconds']:.2f}"
    return verdict, text.replace("|", "\\|").replace("\n", " "), seconds


def ensure_tree(commit: str) -> bool:
    """The BEFORE worktree at BEFORE_TREE, at `commit`; True when this call created it."""
    if not BEFORE_TREE.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q",
                        str(BEFORE_TREE), commit], check=True)
        created = True
    else:
        created = False
    head = subprocess.run(["git", "-C", str(BEFORE_TREE), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    wanted = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit],
                            capture_output=True, text=True, check=True).stdout.strip()
    if head != wanted:
        raise SystemExit(f"{BEFORE_TREE} is at {head}, not {wanted}: remove it or pass "
                         "another --baseline")
    return created


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=None, help="rows whose name or model contains this")
    p.add_argument("--group", default=None, choices=("kernels",),
                   help="kernels: the rows of kernels, biases and libraries (kernel_rows)")
    p.add_argument("--no-before", action="store_true", help="this tree only")
    p.add_argument("--baseline", default=BASELINE)
    p.add_argument("--before-tree", default=None, type=Path,
                   help="a folder already holding the BEFORE tree's files (`git archive "
                        "COMMIT | tar -x -C DIR`), used instead of a worktree of --baseline")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of a correct-model row")
    p.add_argument("--bug-repeats", type=int, default=1, help="timed runs of a bug row")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--chunk", type=int, default=12, help="rows per child process")
    p.add_argument("--child", default=None)
    p.add_argument("--cells", default="[]")
    args = p.parse_args()
    if args.child:
        child(args.child, json.loads(args.cells), args.repeats, args.bug_repeats, args.threads)
        return
    rows = [r for r in all_rows() if (args.only is None or args.only.lower() in r["id"].lower())
            and (args.group is None or r.get("group") == args.group)]
    if not rows:
        raise SystemExit(f"No row matches {args.only!r}.")
    started = time.perf_counter()
    before_tree = args.before_tree or BEFORE_TREE
    created = False if args.no_before or args.before_tree else ensure_tree(args.baseline)
    trees = ([("before", before_tree)] if not args.no_before else []) + [("after", ROOT)]
    print(f"{len(rows)} rows; load average before: {os.getloadavg()[0]:.2f}; {args.threads} "
          f"torch thread(s); correct rows: median of {args.repeats}, bug rows: "
          f"{args.bug_repeats}, after one warm-up", flush=True)
    results: dict[str, dict[str, dict]] = {side: {} for side, _ in trees}
    imported = {}
    try:
        for start in range(0, len(rows), args.chunk):
            chunk = rows[start:start + args.chunk]
            for side, tree in trees:
                imported[side], out = run_chunk(tree, chunk, args)
                results[side].update({r["id"]: r for r in out})
            print(f"  {start + len(chunk)}/{len(rows)} rows, "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    finally:
        if created:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(BEFORE_TREE)])
    for side, where in imported.items():
        print(f"{side}: alibi_viz from {where}")
    before = "before" in results
    head = "| # | row | model | expected |"
    rule = "|---|---|---|---|"
    for side in ("before", "after") if before else ("after",):
        head += f" {side}: verdict | {side}: findings | {side} s |"
        rule += "---|---|---:|"
    if before:
        head += " after/before |"
        rule += "---:|"
    lines = [head, rule]
    table = []
    for k, row in enumerate(rows, 1):
        line = f"| {k} | {row['name']} | {row['model']} | {row['expected']} |"
        entry = {"row": row}
        for side in ("before", "after") if before else ("after",):
            result = results[side][row["id"]]
            entry[side] = dict(result, as_expected=judge(row, result))
            line += " {} | {} | {} |".format(*cell_text(row, result))
        if before:
            b, a = results["before"][row["id"]]["seconds"], results["after"][row["id"]]["seconds"]
            line += f" {a / b:.2f} |" if a and b else " |"
        lines.append(line)
        table.append(entry)
    total = time.perf_counter() - started
    print("\n".join(lines))
    for side in ("before", "after") if before else ("after",):
        marks = [judge(row, results[side][row["id"]]) for row in rows]
        print(f"{side}: {marks.count('yes')}/{len(rows)} rows as the current tests expect (✓), "
              f"{marks.count('verdict')} with the right verdict but not named (~), "
              f"{marks.count('no')} wrong (✗)")
    print(f"load average after: {os.getloadavg()[0]:.2f}; total {total:.0f} s")
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "conformance_table.json").write_text(json.dumps(
        {"baseline": args.baseline if before else None, "imported": imported,
         "threads": args.threads, "repeats": args.repeats, "bug_repeats": args.bug_repeats,
         "total_seconds": total, "markdown": "\n".join(lines), "rows": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
