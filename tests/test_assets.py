"""Where the shipped models' facts come from: one helper for the training length."""

import json

from alibi_viz import assets


def test_training_length_comes_from_the_folders_training_json(tmp_path):
    """A folder whose training.json says 64 was trained at 64, whatever the results say."""
    (tmp_path / "training.json").write_text(json.dumps({"train_seq_len": 64}))
    results = {"models": {"alibi": {"train_seq_len": 256}}}
    assert assets.shipped_train_seq_len(tmp_path, results) == 64


def test_training_length_falls_back_to_the_results_then_the_shipped_length(tmp_path):
    """Without training.json the results decide; without either, SHIPPED_TRAIN_SEQ_LEN."""
    assert assets.shipped_train_seq_len(tmp_path, {"models": {"a": {"train_seq_len": 256}}}) == 256
    assert assets.shipped_train_seq_len(tmp_path, {}) == assets.SHIPPED_TRAIN_SEQ_LEN


def test_the_shipped_length_is_what_every_shipped_model_trained_at():
    """SHIPPED_TRAIN_SEQ_LEN agrees with each shipped model's training.json."""
    lengths = {name: assets.training_info(path)["train_seq_len"]
               for name, path in assets.shipped_models().items()}
    assert set(lengths.values()) == {assets.SHIPPED_TRAIN_SEQ_LEN}, lengths
