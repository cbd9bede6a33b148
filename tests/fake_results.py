"""Results shaped like `python -m experiments.evaluate` writes them, for tests that read them."""

LENGTHS = [128, 256, 512]


def fake_results(ppl: dict, lengths=LENGTHS) -> dict:
    """Results shaped like evaluate's: ppl = {model: {protocol: [one value per length]}}."""
    return {
        "lengths": lengths, "stride": 64,
        "models": {name: {"train_seq_len": 128, "perplexity": {
            protocol: {str(n): v for n, v in zip(lengths, values, strict=True)}
            for protocol, values in per_protocol.items()}}
            for name, per_protocol in ppl.items()},
    }


RESULTS = fake_results({
    "alibi": {"nonoverlapping": [3.2, 3.1, 3.05], "sliding": [3.0, 3.0, 3.01]},
    "learned": {"nonoverlapping": [3.3, 9.0, 40.0], "sliding": [3.2, 20.0, 60.0]},
    "rope": {"nonoverlapping": [3.1, 3.6, 6.0], "sliding": [2.9, 4.0, 8.0]},
})
