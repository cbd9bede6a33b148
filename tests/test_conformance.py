"""The ALiBi conformance check: the probe's premise, correct models passing in every dtype, path
and size (against transformers' own BLOOM, MPT and Falcon code), every bug of the zoo named by
the explanation that fits all heads, and the check's typed errors."""

import itertools
import json
import math

import numpy as np
import pytest
import torch

from alibi_viz.alibi import alibi_slopes
from alibi_viz.assets import shipped_models
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.conformance import check_alibi, probe_bias, thresholds
from alibi_viz.models.loading import load_model
from alibi_viz.models.zoo import BUGS, broken_model, is_harmless, tiny_model
from alibi_viz.tiny_models import byte_tokenizer, save_tiny_model
from alibi_viz.tiny_models import tiny_model as factory_model

HEAD_COUNTS = (8, 12, 16, 32, 64)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
PATHS = (("bloom", "eager"), ("mpt", "eager"), ("falcon", "eager"), ("falcon", "sdpa"))


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


def assert_correct(check, kind: str, attn: str, inconclusive: bool = False) -> None:
    """A correct model's result: conforms, except transformers' eager Falcon, which adds its
    bias twice and must be diagnosed as exactly that; decoding and padding agree.
    inconclusive: a verdict of "inconclusive" is accepted too (deep random 16-bit models, whose
    shallowest slopes the probe's tokens read 50% apart), never a wrong diagnosis."""
    if inconclusive and check.verdict == "inconclusive":
        assert [f.verdict for f in check.diagnosis] == ["inconclusive"], check.problems()
        assert set(check.verdicts().ravel()) <= {"conforms", "inconclusive"}
        return
    if (kind, attn) == ("falcon", "eager"):
        assert [f.verdict for f in check.diagnosis] == ["scaled"], check.problems()
        assert check.diagnosis[0].evidence["factor_name"] == "twice"
        assert "Falcon eager path" in check.diagnosis[0].summary
    else:
        assert check.ok, check.problems()
        assert set(check.verdicts().ravel()) == {"conforms"}
    if check.decode is not None:
        assert check.decode.ok and check.decode.padding_ok


# ----------------------------------------------------------------------------- the probe

def test_repeated_token_keeps_every_position_identical():
    """The probe's premise, checked: with one token repeated and no position embeddings,
    every position's hidden state is the same in every layer of a BLOOM model."""
    model = factory_model("bloom")
    with torch.inference_mode():
        out = model(input_ids=torch.full((1, 40), 70), output_hidden_states=True)
    for hidden in out.hidden_states:
        torch.testing.assert_close(hidden[0], hidden[0, :1].expand_as(hidden[0]),
                                   rtol=1e-5, atol=1e-5)


def test_probe_reads_minus_m_d_from_a_bloom_model():
    """The probe's curve of head h is -m_h d (transformers' BLOOM slopes), to 1e-5."""
    model = factory_model("bloom")
    curves = probe_bias(model, 64, tokenizer=byte_tokenizer())
    d = np.arange(64)
    for h, m in enumerate(alibi_slopes(model.config.n_head)):
        np.testing.assert_allclose(curves[0, h], -m * d, atol=1e-5)


def test_probe_skips_probabilities_that_underflow_float16(tokenizer):
    """In float16 the steep heads' far keys underflow: the probe stops reading them (their
    reach is short) instead of calling the flat floor a clip, and the model conforms."""
    check = check_alibi(tiny_model("bloom", 8, dtype=torch.float16), tokenizer, decode=False)
    assert check.ok, check.problems()
    assert check.heads[0][0].reach < 40 < check.heads[0][-1].reach


def test_thresholds_follow_the_dtype_and_the_schedule_rounding():
    """The tolerances are derived from the dtype's eps (probabilities read in the model's
    dtype on eager, float64 on sdpa) and from Falcon's bfloat16 slopes."""
    fp32 = thresholds(torch.float32, "eager")
    bf16 = thresholds(torch.bfloat16, "eager")
    assert fp32.slope_rtol == pytest.approx(2.0**-10) and bf16.slope_rtol == pytest.approx(2**-6)
    assert bf16.slope_atol == pytest.approx(1e-6 + 2.0**-7 / 64)  # the floor of each head's
    assert thresholds(torch.bfloat16, "sdpa").read_dtype == "float64"
    assert thresholds(torch.float16, "eager").min_log_prob == pytest.approx(math.log(2.0**-14))
    assert thresholds(torch.float32, "eager", 2.0**-8).slope_rtol == pytest.approx(2.0**-7)
    assert bf16.decode_rtol == pytest.approx(4 * 2.0**-7) and bf16.attention_tol == 2 * bf16.decode_rtol


# ----------------------------------------------------------------------------- correct models

@pytest.mark.parametrize("kind", ["bloom", "mpt"])
def test_correct_models_pass(kind, tokenizer):
    """Tiny random BLOOM and MPT conform in every head, in decoding and with left padding."""
    check = check_alibi(factory_model(kind), tokenizer)
    assert_correct(check, kind, "eager")
    assert check.verdict == "conforms" and check.diagnosis == []


# Every dtype of every path once in the quick run, head counts and depths taking turns.
QUICK = [(kind, attn, dtype, HEAD_COUNTS[i % 5], 2 + 2 * (i % 2))
         for i, ((kind, attn), dtype) in enumerate(itertools.product(PATHS, DTYPES))]


@pytest.mark.parametrize("kind,attn,dtype,heads,layers", QUICK)
def test_correct_models_conform_in_every_dtype_and_path(kind, attn, dtype, heads, layers,
                                                        tokenizer):
    """Correct BLOOM, MPT and Falcon models (transformers' own code) pass in float32,
    bfloat16 and float16, eager and sdpa: no false alarm from the dtype's rounding."""
    model = tiny_model(kind, heads, layers=layers, dtype=dtype, attn=attn)
    assert_correct(check_alibi(model, tokenizer), kind, attn)


@pytest.mark.slow
@pytest.mark.parametrize("kind,attn", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_correct_models_conform_at_every_size(kind, attn, dtype, tokenizer):
    """The full matrix: 8, 12, 16, 32 and 64 heads, 2 and 4 layers, each dtype and path. The
    size that QUICK gives this dtype and path is checked there, with the stricter assertion
    (no verdict "inconclusive" accepted), so it is not checked twice."""
    for heads, layers in itertools.product(HEAD_COUNTS, (2, 4)):
        if (kind, attn, dtype, heads, layers) in QUICK:
            continue
        model = tiny_model(kind, heads, layers=layers, dtype=dtype, attn=attn)
        assert_correct(check_alibi(model, tokenizer), kind, attn,
                       inconclusive=dtype != torch.float32 and layers == 4)


@pytest.mark.parametrize("heads", [32, 64])
def test_falcon_rw_head_counts_conform_on_sdpa(heads, tokenizer):
    """Falcon-RW-1B (32 heads) and -7B (64 heads) shapes on sdpa: their slopes are rounded to
    bfloat16 by Falcon's builder, which the expected slopes follow, so no head is `scaled` or
    `offset`."""
    check = check_alibi(tiny_model("falcon", heads, attn="sdpa"), tokenizer)
    assert check.ok, check.problems()
    assert check.attn == "sdpa"


@pytest.mark.parametrize("kind", ["bloom", "mpt"])
def test_decode_tolerance_scales_with_depth_and_logits(kind, tokenizer):
    """4 layers of hidden 256 with large weights (logits of about 20), where rounding alone
    makes cached decoding differ from the full forward by 2e-4 to 4e-4 (over the old absolute
    1e-4): within the tolerance relative to the logits' scale and the depth."""
    model = tiny_model(kind, 8, layers=4, head_dim=32, init=0.3)
    check = check_alibi(model, tokenizer)
    d = check.decode
    assert d.ok and d.padding_ok
    with torch.inference_mode():
        ids = torch.tensor([tokenizer("def add(a, b):\n    return a + b\n")["input_ids"]])
        scale = float(model(input_ids=ids).logits.abs().max())
    assert scale > 10 and d.logits_tolerance == pytest.approx(
        check.thresholds.decode_rtol * 4 * scale)


@pytest.mark.parametrize("kind", ["falcon", "falcon_mq", "falcon_new"])
def test_falcon_sdpa_passes_and_eager_is_diagnosed_as_added_twice(kind, tokenizer):
    """Falcon with alibi=True on sdpa applies m/sqrt(d) (its documented form) and passes; the
    eager path applies 2 m/sqrt(d): every head `scaled` by 2, "the bias is added twice"."""
    sdpa = check_alibi(factory_model(kind), tokenizer, decode=False, attn="sdpa")
    assert sdpa.ok and sdpa.attn == "sdpa"
    eager = check_alibi(factory_model(kind), tokenizer, decode=False)
    assert set(eager.verdicts().ravel()) == {"scaled"} and eager.attn == "eager"
    np.testing.assert_allclose([h.ratio for row in eager.heads for h in row], 2.0, rtol=1e-3)
    assert eager.problems() == ["Every head applies 2x its slope: the bias is added twice "
                                "(transformers' Falcon eager path does this)."]


# ----------------------------------------------------------------------------- the zoo

# bug -> (the model's verdict, evidence that must be in the finding)
EXPLANATIONS = {
    "sign_flip": ("sign_flipped", {}),
    "twice": ("scaled", {"factor_name": "twice"}),
    "sqrt_d": ("scaled", {"factor_name": "inv_sqrt_d"}),
    "truncated": ("schedule", {"schedule": "official"}),
    "geometric": ("schedule", {"schedule": "geometric"}),
    "reversed": ("permuted", {"order": "reversed"}),
    "permuted": ("permuted", {"order": "permutation"}),
    "off_by_one": ("offset", {"distance_off_by": 1}),
    "clip64": ("clipped", {"clip_at": 64}),
    "row_shift": ("conforms", None),
    "shift_all": ("conforms", None),
}


def assert_explained(check, bug: str, heads: int) -> None:
    verdict, evidence = EXPLANATIONS[bug]
    if is_harmless(bug, heads):
        assert check.ok, check.problems()
        return
    assert len(check.diagnosis) == 1, check.problems()
    finding = check.diagnosis[0]
    assert finding.verdict == verdict and finding.layers == [0, 1]
    assert evidence.items() <= finding.evidence.items(), finding.evidence
    assert set(check.verdicts().ravel()) <= {verdict, "conforms"}


@pytest.mark.parametrize("heads", HEAD_COUNTS)
@pytest.mark.parametrize("bug", list(EXPLANATIONS))
def test_every_explanation_is_named_at_every_head_count(bug, heads, tokenizer):
    """Each injected bug is diagnosed as the one explanation that fits every head, at 8, 12,
    16, 32 and 64 heads (BLOOM, float32); the harmless ones, and the geometric formula where
    it equals the official rule, conform."""
    check = check_alibi(broken_model(bug, heads=heads), tokenizer, decode=False)
    assert_explained(check, bug, heads)


def test_named_details_of_the_zoo(tokenizer):
    """The evidence says what happened: the 16-head schedule for 12 heads is "truncated from
    the next power of two"; sqrt_d's ratio is 1/sqrt(8); the permutation lists which head's
    slope each head applies."""
    truncated = check_alibi(broken_model("truncated", heads=12), tokenizer, decode=False)
    assert truncated.diagnosis[0].evidence == {"schedule": "official", "num_heads": 16,
                                               "next_power_of_two": True}
    assert "truncated from the next power of two" in truncated.problems()[0]
    sqrt_d = check_alibi(broken_model("sqrt_d", heads=8), tokenizer, decode=False)
    assert sqrt_d.heads[0][0].ratio == pytest.approx(1 / np.sqrt(8), rel=1e-3)
    assert sqrt_d.problems() == ["Every head applies 0.3536x its slope: the bias is divided by "
                                 "sqrt(head_dim) = 2.828."]
    permuted = check_alibi(broken_model("permuted", heads=8), tokenizer, decode=False)
    assert permuted.diagnosis[0].evidence["sources"] == [1, 0, 3, 2, 5, 4, 7, 6]


@pytest.mark.parametrize("bug,heads", [("decode_zero", 8), ("decode_zero", 64),
                                       ("left_padding", 12), ("left_padding", 32)])
def test_decode_and_padding_bugs_are_named(bug, heads, tokenizer):
    """The bias dropped in decoding, and padding ignored, leave every head conforming in the
    probe and fail exactly the check they break, with one sentence each."""
    check = check_alibi(broken_model(bug, heads=heads), tokenizer)
    assert set(check.verdicts().ravel()) == {"conforms"}
    assert check.decode.ok == (bug != "decode_zero")
    assert not check.decode.padding_ok  # a padded batch decoded through the cache fails too
    assert check.verdict == ("decode" if bug == "decode_zero" else "padding")
    if bug == "decode_zero":  # the decode step's bias row is probed and named
        assert check.problems()[0].endswith("prefill's: Layer 1: No head applies a positional bias.")
        assert "#26380" in check.problems()[1]
    else:
        assert len(check.problems()) == 1 and check.problems()[0].endswith(").")


@pytest.mark.parametrize("bug,heads", [("sign_flip", 12), ("twice", 16), ("sqrt_d", 32),
                                       ("truncated", 64), ("reversed", 8)])
def test_mpt_zoo(bug, heads, tokenizer):
    """The same bugs in MPT's position_bias are named too."""
    check = check_alibi(broken_model(bug, "mpt", heads=heads), tokenizer, decode=False)
    assert_explained(check, bug, heads)


@pytest.mark.parametrize("dtype,bug,heads", [(torch.bfloat16, "twice", 64),
                                             (torch.bfloat16, "reversed", 12),
                                             (torch.float16, "truncated", 16),
                                             (torch.float16, "sign_flip", 32)])
def test_16_bit_zoo(dtype, bug, heads, tokenizer):
    """In 16 bits the probe reads less (slopes below its resolution fit any explanation), and
    the diagnosis still names the bug."""
    check = check_alibi(broken_model(bug, heads=heads, dtype=dtype), tokenizer, decode=False)
    assert_explained(check, bug, heads)


# ----------------------------------------------------------------------------- any port, path

def test_expected_slopes_can_be_given(tokenizer):
    """expected= overrides the config: the model's own slopes conform, twice them make the
    model apply half ("the bias is halved"), and a schedule name works too."""
    model = factory_model("bloom")
    slopes = alibi_slopes(4)
    assert check_alibi(model, decode=False, expected=slopes).ok
    halved = check_alibi(model, decode=False, expected=2 * slopes)
    assert halved.diagnosis[0].evidence["factor_name"] == "half"
    assert check_alibi(model, decode=False, expected="official").expected_form.startswith(
        "the official schedule")


def test_expected_of_the_wrong_length_is_a_typed_error():
    """Slopes for another head count than the attention's: AlibiVizError saying both."""
    with pytest.raises(AlibiVizError, match="3 finite slopes.*4 heads"):
        check_alibi(factory_model("bloom"), decode=False, expected=[0.5, 0.25, 0.125])


def test_position_encoded_another_way_is_a_typed_error():
    """GPT-2 with expected slopes: its learned positions break the probe's premise, which the
    check says instead of reading nonsense."""
    with pytest.raises(AlibiVizError, match="encodes position some other way"):
        check_alibi(factory_model("gpt2"), decode=False, expected="official")


def test_attention_path_is_chosen_and_restored(tokenizer):
    """attn="sdpa" checks a Falcon's sdpa path and leaves its config as it was; BLOOM has no
    sdpa path: a typed error."""
    model = factory_model("falcon")
    assert check_alibi(model, decode=False, attn="sdpa").attn == "sdpa"
    assert model.config._attn_implementation == "eager"
    with pytest.raises(AlibiVizError, match="no sdpa attention"):
        check_alibi(factory_model("bloom"), decode=False, attn="sdpa")


def test_model_offloaded_wholly_to_disk_is_a_typed_error(tmp_path):
    """device_map={"": "disk"} leaves every weight on the meta device: AlibiVizError saying
    so, not torch's "Cannot copy out of meta tensor"."""
    pytest.importorskip("accelerate")
    folder = save_tiny_model(tmp_path / "bloom", "bloom")
    model, tokenizer, _ = load_model(folder, device_map={"": "disk"},
                                     offload_folder=tmp_path / "offload")
    with pytest.raises(AlibiVizError, match="offloaded to disk"):
        check_alibi(model, tokenizer)


def test_decode_false_needs_no_tokenizer():
    """decode=False: no tokenizer needed, no decode result, the verdict from the probe."""
    check = check_alibi(factory_model("mpt"), None, decode=False)
    assert check.decode is None and check.ok


def test_report_is_plain_json(tokenizer):
    """to_dict() is JSON (no NaN), with the thresholds and one entry per head."""
    data = check_alibi(broken_model("twice", heads=8), tokenizer).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["verdict"] == "scaled" and len(data["heads"]) == 16
    assert data["thresholds"]["dtype"] == "float32" and data["attn"] == "eager"


def test_shipped_model_slopes_read_back_exactly():
    """The measured slopes of the shipped ALiBi model equal alibi_slopes(8) to 1e-5 (fp32)."""
    model, tokenizer, _ = load_model(shipped_models()["alibi"])
    check = check_alibi(model, tokenizer)
    np.testing.assert_allclose(check.measured(), np.broadcast_to(alibi_slopes(8), (4, 8)),
                               atol=1e-5)
    assert check.ok


def test_non_alibi_model_is_a_typed_error(tokenizer):
    """A GPT-2 model has no ALiBi to check: AlibiVizError, not a crash."""
    with pytest.raises(AlibiVizError, match="ALiBi"):
        check_alibi(factory_model("gpt2"), tokenizer)


def test_every_bug_has_a_test():
    """Every bug of the zoo is covered by the explanation tests or the decode/padding ones."""
    assert set(BUGS) == set(EXPLANATIONS) | {"decode_zero", "left_padding"}


# ----------------------------------------------------------------------------- the app's banner

@pytest.mark.parametrize("bug,banner", [
    ("decode_zero", "**Does not conform.** Cached decoding differs from the full forward (logits "
                    "by "),
    ("sqrt_d", "**Does not conform.** Every head applies 0.3536x its slope: the bias is divided "
               "by sqrt(head_dim) = 2.828."),
])
def test_app_banner_reads_as_the_diagnosis(bug, banner):
    """The zoo demo on Inspect a model: the error banner is the diagnosis, one sentence per
    finding, with no stray punctuation (no "Does not conform: ; ..."), and the decode table
    judges the logits and the first layer only."""
    from alibi_viz_app.testing import run_app

    at = run_app("inspect_model")
    at.selectbox(key="im_zoo_bug").set_value(bug).run()
    at.button(key="im_zoo_check_run").click().run()
    assert not at.exception
    assert at.error[0].value.startswith(banner) and ": ;" not in at.error[0].value
    table = at.dataframe[0].value
    assert list(table["pass"] == "shown, not judged") == [False, False, True, False, False, True]
    assert "None" not in table.astype(str).to_numpy().ravel().tolist()


def test_decode_rows_judge_the_logits_and_the_first_layer_only():
    """The decode table: logits and every layer for both checks; deeper layers carry no
    tolerance (shown, not judged)."""
    from alibi_viz.models.conformance import DecodeCheck

    d = DecodeCheck(logits=1e-5, layers=[1e-6, 2e-3], padding_logits=2e-5,
                    padding_layers=[3e-6, 4e-3], logits_tolerance=1e-3,
                    attention_tolerance=1e-4, ok=True, padding_ok=True)
    assert d.rows() == [("decode", None, 1e-5, 1e-3), ("decode", 0, 1e-6, 1e-4),
                        ("decode", 1, 2e-3, None), ("padding", None, 2e-5, 1e-3),
                        ("padding", 0, 3e-6, 1e-4), ("padding", 1, 4e-3, None)]
