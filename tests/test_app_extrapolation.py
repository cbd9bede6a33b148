"""The Extrapolation lab under Streamlit's AppTest, against the shipped models and results."""

from apptest_utils import figure_keys, figure_titles, figures, run_app, warnings

from alibi_viz import assets
from alibi_viz.evaluate import evaluation_stream, load_eval_model, perplexity

SHIPPED = assets.shipped_models()


def attention_title(at) -> str:
    return next(t for t in figure_titles(at) if t.startswith("Layer"))


def test_page_shows_results_and_attention():
    """The page draws the shipped results chart and the two-length attention figure."""
    at = run_app("extrapolation")
    assert not at.exception and not at.error
    assert assets.load_extrapolation_results("en")["models"]  # results shipped
    assert any(t.startswith("Train short, test long") for t in figure_titles(at))
    assert "Layer 1, head 8" in attention_title(at)
    assert "128 and 1,024 tokens" in attention_title(at)


def test_layer_and_head_selection_change_the_maps():
    """Choosing layer 2, head 3 redraws the attention figure for that head and updates the URL."""
    at = run_app("extrapolation")
    at.selectbox(key="xl_layer").set_value(2)
    at.selectbox(key="xl_head").set_value(3).run()
    assert attention_title(at).startswith("Layer 2, head 3")
    assert at.query_params["layer"] == "2" and at.query_params["head"] == "3"


def test_url_restores_state():
    """?model=rope&length=512&layer=2&head=5 restores exactly those controls."""
    at = run_app("extrapolation", {"model": "rope", "length": "512", "layer": "2", "head": "5"})
    assert at.selectbox(key="xl_model").value == "rope"
    assert at.select_slider(key="xl_length").value == 512
    assert attention_title(at).startswith("Layer 2, head 5")
    assert not warnings(at)


def test_bad_url_values_warn_and_fall_back():
    """layer=99, head=-1, length=1000 and model=gpt5 each warn; the defaults are used."""
    at = run_app("extrapolation", {"layer": "99", "head": "-1", "length": "1000", "model": "gpt5"})
    assert not at.exception
    assert len([w for w in warnings(at) if w.startswith("URL parameter ignored")]) == 4
    assert at.selectbox(key="xl_layer").value == 1
    assert at.select_slider(key="xl_length").value == 1024


def test_live_run_reproduces_the_evaluator():
    """A live run at 128 tokens shows the perplexity evaluate.perplexity gives, and a star."""
    at = run_app("extrapolation", {"length": "128"})
    at.number_input(key="xl_tokens").set_value(128).run()
    at.button(key="xl_run").click().run()
    assert not at.exception and not at.error
    live = next(m for m in at.metric if m.label.startswith("Live"))
    expected = perplexity(load_eval_model(SHIPPED["alibi"]), evaluation_stream(128, "en"), 128,
                          max_tokens=128)["ppl"]
    assert live.value == f"{expected:.3f}"
    if assets.load_extrapolation_results("en"):
        stars = [t for fig in figures(at) for t in fig["data"]
                 if t.get("marker", {}).get("symbol") == "star"
                 and t.get("hovertemplate", "").startswith("live run")]
        assert len(stars) == 1 and stars[0]["x"] == [128]


def test_missing_assets_give_clear_messages(monkeypatch, tmp_path):
    """With no shipped models or results the page explains what to run, without an exception."""
    monkeypatch.setattr(assets, "MODELS_DIR", tmp_path / "models")
    monkeypatch.setattr(assets, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(assets, "RESCALE_PATH", tmp_path / "rescale.json")
    monkeypatch.setattr(assets, "ABLATION_PATH", tmp_path / "ablation.json")
    monkeypatch.setattr(assets, "LEARNABLE_SLOPES_PATH", tmp_path / "learnable-slopes.json")
    monkeypatch.setattr(assets, "REACH_PATH", tmp_path / "reach.json")
    at = run_app("extrapolation")
    assert not at.exception
    infos = " ".join(i.value for i in at.info)
    assert "python -m alibi_viz.evaluate" in infos and "python -m alibi_viz.reach" in infos
    assert "python -m alibi_viz.models.layer_slopes" in infos
    assert "python -m alibi_viz.train --arch alibi" in infos
    assert not figures(at)


def test_paper_numbers_sit_beside_ours_at_a_matching_factor():
    """The table beside the paper holds the paper's Table 2 values (alibi_viz.paper: 512 and
    3,512 words, 6.9x) and this project's perplexities at the training length and at the
    evaluated length nearest that factor (1,024 bytes: 8x, not the longest, 32x), each number
    written as the page writes numbers."""
    from alibi_viz import paper
    from alibi_viz.i18n import significant

    at = run_app("extrapolation")
    table = next(t.value for t in at.table if "method" in t.value.columns)
    alibi = table[table["method"] == "ALiBi"].iloc[0]
    results = assets.load_extrapolation_results("en")
    ours = results["models"]["alibi"]["perplexity"]["nonoverlapping"]
    assert alibi["paper: 3,512 (6.9x)"] == significant(paper.TABLE2["ALiBi"][1], 4)
    assert alibi["ours: 128"] == significant(ours["128"], 4)
    assert alibi["ours: 1,024 (8x)"] == significant(ours["1024"], 4)
    assert alibi["ours: ratio"] == significant(ours["1024"] / ours["128"], 4)


def test_key_result_states_the_measured_sliding_ratios():
    """The key-result sentence quotes ALiBi's sliding-window gains computed from the chunks:
    up to the length it uses, and from there to 4,096."""
    from alibi_viz.evaluate import describe_ratio, useful_context

    results = assets.load_extrapolation_results("en")
    n, gain, rest = useful_context(results, "alibi")
    at = run_app("extrapolation")
    text = next(m.value for m in at.markdown if m.value.startswith("**The key result.**"))
    assert describe_ratio(gain) in text and describe_ratio(rest) in text and f"{n:,}" in text



def test_where_no_longer_context_helps_the_key_result_says_so():
    """On Python, ALiBi's sliding-window perplexity is significantly lower at no length past
    its training length: the key result says that, with the change from 128 to 4,096, and
    does not report a gain "from 128 to 128 tokens"."""
    from alibi_viz.evaluate import describe_ratio, useful_context

    results = assets.load_extrapolation_results("python")
    n, _gain, rest = useful_context(results, "alibi")
    assert n == 128
    at = run_app("extrapolation", {"kind": "python"})
    text = next(m.value for m in at.markdown if m.value.startswith("**The key result.**"))
    assert "no length past its training length" in text and describe_ratio(rest) in text
    assert "from 128 to 128" not in text


def test_held_out_text_follows_the_page_language_and_the_url():
    """The lab reads the held-out text of the page's language first (Russian prose for
    ?lang=ru), and ?kind=python switches the results to code."""
    at = run_app("extrapolation", {"lang": "ru"})
    assert not at.exception
    assert at.selectbox(key="xl_kind").value == "ru"
    at = run_app("extrapolation", {"kind": "python"})
    assert at.selectbox(key="xl_kind").value == "python"
    results = assets.load_extrapolation_results("python")
    table = next(t.value for t in at.table if "method" in t.value.columns)
    alibi = table[table["method"] == "ALiBi"].iloc[0]
    from alibi_viz.i18n import significant
    assert alibi["ours: 128"] == significant(
        results["models"]["alibi"]["perplexity"]["nonoverlapping"]["128"], 4)


def test_key_result_says_what_a_sliding_token_sees_and_where_to_go_further():
    """The key result says a sliding token sees L − 63 to L tokens (stride 64), not "a full
    window", and names position interpolation (the official repository's pointer)."""
    from alibi_viz import paper

    at = run_app("extrapolation")
    text = next(m.value for m in at.markdown if m.value.startswith("**The key result.**"))
    assert "between L − 63 and L tokens" in text and "a full window" not in text
    assert paper.ALIBI_INTERPOLATION in text
    assert "best near twice the training length" not in text


def test_reading_notes_say_the_protocols_score_different_text():
    """The two protocols' absolute values are not comparable: the page says which tokens each
    scores, from the results file."""
    results = assets.load_extrapolation_results("en")
    at = run_app("extrapolation")
    text = next(m.value for m in at.markdown if m.value.startswith("**How to read it.**"))
    a, b = results["protocols"]["sliding"]["targets"]
    assert f"sliding tokens {a:,} to {b:,}" in text


def answers(at) -> str:
    return " ".join(m.value for e in at.expander if e.label == "Answer" for m in e.markdown)


def test_learnable_slopes_answer_states_the_shipped_ratios():
    """Section 6's answer quotes learnable / fixed at 8x and 32x, with the interval and the
    verdict the interval gives, and the largest drift, from learnable-slopes.json."""
    import pytest

    from alibi_viz.i18n import number
    from alibi_viz.models import layer_slopes

    results = assets.load_learnable_slopes_results()
    if not results:
        pytest.skip("no shipped learnable-slope results")
    at = run_app("extrapolation", {"kind": "en"})
    assert not at.exception
    summary = layer_slopes.summary(results, "en")
    text = answers(at)
    for factor in (8, 32):
        ratio, low, high = summary["ratios"][factor]
        assert f"perplexity {number(ratio, 3)} (95% interval {number(low, 3)} to " \
               f"{number(high, 3)})" in text
    largest = summary["largest"]
    assert f"layer {largest['layer'] + 1}, head {largest['head'] + 1}, from " in text
    assert f"{summary['steeper']} of the {summary['slopes']} slopes ended steeper" in text
    titles = figure_titles(at)
    assert any(t.startswith("Learned slopes during training") for t in titles)
    assert any(t.startswith("Learnable against fixed slopes: english prose") for t in titles)


def test_learned_slopes_figure_draws_every_logged_step():
    import pytest

    results = assets.load_learnable_slopes_results()
    if not results:
        pytest.skip("no shipped learnable-slope results")
    at = run_app("extrapolation")
    fig = next(f for f in figures(at)
               if f["layout"]["title"]["text"].startswith("Learned slopes during training"))
    learned = [t for t in fig["data"] if t.get("hoverinfo") != "skip"]  # the rest: initial m
    layers, heads = len(results["slopes"][0]), len(results["slopes"][0][0])
    assert len(learned) == layers * heads
    assert all(len(t["x"]) == len(results["steps"]) for t in learned)


def test_lab_asks_which_heads_matter_in_russian():
    """Section 7: the head-ablation question, in Russian, the answer folded away."""
    at = run_app("extrapolation", {"lang": "ru"})
    assert not at.exception
    assert any(m.value.startswith("**Вопрос.** Один источник") for m in at.markdown)
    assert "xl_fig_ablation" in figure_keys(at)
