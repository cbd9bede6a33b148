"""The lesson's glossary: the field's terms, each with one sentence, in the page's language.

The terms are the ones each language's catalog uses (alibi_viz/locale/<lang>/glossary.csv,
checked by tests/test_i18n.py), so the glossary a class reads names things as the pages do.
"""

from alibi_viz.i18n import N_, _

# (the English term, as glossary.csv names it; its msgid; one sentence), in teaching order.
TERMS = (
    ("attention", N_("attention"),
     N_("The weights one query gives the keys: a softmax of their scores, summing to 1.")),
    ("query", N_("query"),
     N_("The token whose attention is computed (row i of a map); the keys are the tokens it "
        "can attend to (columns j).")),
    ("head", N_("attention head"),
     N_("One of a layer's parallel attention maps; in ALiBi each head has its own slope.")),
    ("layer", N_("layer"),
     N_("One block of the transformer; ALiBi adds the same bias in every layer.")),
    ("bias", N_("bias"),
     N_("A number added to an attention score before the softmax; ALiBi's is −m·(i−j).")),
    ("slope", N_("slope"),
     N_("m, how much one head's bias falls per token of distance; in the paper's ALiBi set "
        "before training, not learned (a variant that learns them: Extrapolation lab, section "
        "6).")),
    ("half-life", N_("half-life"),
     N_("The distance at which a head's bias alone halves a key's weight: ln 2 / m tokens.")),
    ("causal", N_("causal"),
     N_("Each token sees only itself and the tokens before it, as in a language model.")),
    ("symmetric", N_("symmetric"),
     N_("Each token sees keys on both sides, with the bias −m·|i−j|, as in an encoder.")),
    ("token", N_("token"),
     N_("One unit of the text a model reads; for the shipped models, one byte.")),
    ("perplexity", N_("perplexity"),
     N_("e to the mean loss per token: how many choices the model is as unsure as.")),
    ("length extrapolation", N_("length extrapolation"),
     N_("Running a model on texts longer than any it was trained on.")),
)


def glossary_rows() -> list[dict]:
    """The glossary in the current language: one {"term", "meaning"} row per term."""
    return [{"term": _(term), "meaning": _(meaning)} for _english, term, meaning in TERMS]
