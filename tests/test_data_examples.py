"""The Model heads page's default text: a held-out sentence short enough in every language."""

from alibi_viz import assets, data


def test_sentence_example_fits_the_training_length_in_every_language():
    """The sentence is at most the training length in UTF-8 bytes (the shipped models' tokens)
    in English, Spanish and Russian, where the short paragraph is 620 bytes in Russian; it is a
    whole held-out sentence of the same page in all three (translations of one another)."""
    found = data.sentence_examples()
    assert set(found) == set(data.PROSE_LANGS)
    assert max(len(data.prose_example(lang).encode("utf-8")) for lang in data.PROSE_LANGS) > \
        assets.SHIPPED_TRAIN_SEQ_LEN  # the paragraph would not fit: the test can tell
    pages = set()
    for lang, text in found.items():
        assert data.SENTENCE_EXAMPLE_MIN_CHARS <= len(text)
        assert len(text.encode("utf-8")) <= assets.SHIPPED_TRAIN_SEQ_LEN
        assert text.endswith(".") and data.sentences(text) == [text]
        pages.add(next(i for i, d in enumerate(data.heldout_documents(lang)) if text in d.text))
    assert len(pages) == 1
    assert sum("\u0400" <= c <= "\u04ff" for c in found["ru"]) > len(found["ru"]) // 2


def test_sentences_cut_after_a_full_stop_and_a_space():
    assert data.sentences("One. Two! Three? 3.5 four.") == ["One.", "Two!", "Three?",
                                                             "3.5 four."]
