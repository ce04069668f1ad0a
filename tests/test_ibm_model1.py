"""IBM Model 1 (utils.ibm_model1): EM by hand, a toy corpus, alignment matrices, the course data."""

import math
import random
import time

import pytest
import torch

from utils.ibm_model1 import NULL, train_model1

TOY = [("the house", "la maison"), ("the book", "le livre"), ("a book", "un livre"),
       ("a house", "une maison"), ("the small house", "la petite maison"),
       ("a small book", "un petit livre")]


def split_pairs(pairs):
    return [(english.split(), french.split()) for english, french in pairs]


@pytest.fixture(scope="module")
def toy_model():
    return train_model1(split_pairs(TOY), iterations=15)


def synthetic_pairs(n=300, seed=0):
    """Word-for-word 'translations' with a shuffled order and a French article with no English
    counterpart: a corpus with a known answer and some ambiguity."""
    lexicon = {"cat": "chat", "dog": "chien", "sees": "voit", "eats": "mange", "red": "rouge",
               "big": "grand", "fish": "poisson", "bird": "oiseau"}
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        english = rng.sample(sorted(lexicon), rng.randint(1, 4))
        french = [lexicon[word] for word in english]
        rng.shuffle(french)
        pairs.append((english, ["le"] + french))
    return pairs


def test_first_iteration_by_hand():
    # Uniform start t = 1/2. Pair 1 ("a b" | "x y", with NULL: 3 positions): each French word
    # gives 1/3 to a, b, NULL. Pair 2 ("a" | "x", 2 positions): x gives 1/2 to a and NULL.
    # Counts: a: x 5/6, y 1/3 -> t(x|a) = 5/7; b: 1/3, 1/3 -> 1/2; NULL: like a.
    model = train_model1([(["a", "b"], ["x", "y"]), (["a"], ["x"])], iterations=1)
    assert model.translation_probability("x", "a") == pytest.approx(5 / 7)
    assert model.translation_probability("y", "a") == pytest.approx(2 / 7)
    assert model.translation_probability("x", "b") == pytest.approx(1 / 2)
    assert model.translation_probability("x", NULL) == pytest.approx(5 / 7)
    expected = (math.log((5 / 7 + 1 / 2 + 5 / 7) / 3) + math.log((2 / 7 + 1 / 2 + 2 / 7) / 3)
                + math.log((5 / 7 + 5 / 7) / 2)) / 3
    assert model.log_likelihoods == [pytest.approx(expected)]
    assert model.iterations == 1


def test_toy_corpus_alignment(toy_model):
    assert toy_model.translation_probability("maison", "house") > 0.5
    assert toy_model.translation_probability("livre", "book") > 0.5
    links = toy_model.align("the house".split(), "la maison".split())
    assert (1, 1) in links and (0, 1) not in links
    links = toy_model.align("a small book".split(), "un petit livre".split())
    assert (2, 2) in links and (1, 1) in links
    table = toy_model.table
    assert table.shape == (len(toy_model.english_words), len(toy_model.french_words))
    assert toy_model.english_words[-1] == NULL
    assert torch.allclose(table.sum(dim=1), torch.ones(table.shape[0]), atol=1e-5)


@pytest.mark.parametrize("pairs", [split_pairs(TOY), synthetic_pairs()])
def test_log_likelihood_never_decreases(pairs):
    model = train_model1(pairs, iterations=20)
    lls = model.log_likelihoods
    assert len(lls) == 20
    assert all(later >= earlier - 1e-12 for earlier, later in zip(lls, lls[1:]))
    assert lls[-1] > lls[0]


def test_synthetic_corpus_recovers_lexicon():
    model = train_model1(synthetic_pairs(), iterations=20)
    for english, french in [("cat", "chat"), ("fish", "poisson"), ("red", "rouge")]:
        row = model.table[model.english_index[english]]
        assert model.french_words[int(row.argmax())] == french
    # The article has no English counterpart: NULL should explain it, so it gets no link.
    links = model.align(["cat", "sees", "bird"], ["le", "oiseau", "voit", "chat"])
    assert links == {(2, 1), (1, 2), (0, 3)}


def test_alignment_matrix_shapes_rows_and_null_column(toy_model):
    english, french = "the small house".split(), "la petite maison".split()
    plain = toy_model.alignment_matrix(english, french)
    with_null = toy_model.alignment_matrix(english, french, null=True)
    assert plain.shape == (3, 3) and with_null.shape == (3, 4)
    assert torch.allclose(plain.sum(dim=1), torch.ones(3), atol=1e-6)
    assert torch.allclose(with_null.sum(dim=1), torch.ones(3), atol=1e-6)
    for i, f in enumerate(french):
        t = [toy_model.translation_probability(f, e) for e in english + [NULL]]
        assert with_null[i].tolist() == pytest.approx([v / sum(t) for v in t], abs=1e-6)
        assert plain[i].tolist() == pytest.approx([v / sum(t[:-1]) for v in t[:-1]], abs=1e-6)


def test_unknown_words(toy_model):
    matrix = toy_model.alignment_matrix(["the", "house"], ["la", "zzz"])
    assert matrix.shape == (2, 2)
    assert matrix[1].tolist() == pytest.approx([0.5, 0.5])
    assert all(f != 1 for _, f in toy_model.align(["the", "house"], ["la", "zzz"]))
    matrix = toy_model.alignment_matrix(["the", "zzz"], ["maison"])
    assert float(matrix.sum()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown French word 'zzz'"):
        toy_model.translation_probability("zzz", "house")
    with pytest.raises(ValueError, match="unknown English word 'zzz'"):
        toy_model.table_heatmap_data(["zzz"], ["maison"])


def test_table_heatmap_data(toy_model):
    english, french = ["house", "book", NULL], ["maison", "livre"]
    data = toy_model.table_heatmap_data(english, french)
    assert data.shape == (2, 3)
    for i, f in enumerate(french):
        for j, e in enumerate(english):
            assert float(data[i, j]) == toy_model.translation_probability(f, e)


def test_order_of_pairs_does_not_matter():
    pairs = synthetic_pairs() + split_pairs(TOY)
    shuffled = list(pairs)
    random.Random(1).shuffle(shuffled)
    a, b = train_model1(pairs, iterations=10), train_model1(shuffled, iterations=10)
    assert a.english_words == b.english_words and a.french_words == b.french_words
    assert torch.allclose(a.table, b.table, rtol=0, atol=1e-6)
    assert a.log_likelihoods == pytest.approx(b.log_likelihoods, abs=1e-9)


def test_bad_input():
    with pytest.raises(ValueError, match="pairs is empty"):
        train_model1([])
    with pytest.raises(ValueError, match="French sentence of pair 1 is empty"):
        train_model1([(["a"], ["x"]), (["b"], [])])
    with pytest.raises(ValueError, match="English sentence of pair 0 is empty"):
        train_model1([([], ["x"])])
    with pytest.raises(ValueError, match="is a str"):
        train_model1([("a b", "x y")])
    for iterations in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="iterations must be an int >= 1"):
            train_model1([(["a"], ["x"])], iterations=iterations)
    for call in (lambda: train_model1([]), lambda: train_model1([([], ["x"])]),
                 lambda: train_model1([(["a"], ["x"])], iterations=0)):
        with pytest.raises(ValueError) as caught:
            call()
        assert "\n" not in str(caught.value)


def test_course_data():
    from utils.data import tokenize
    from utils.seq2seq import LESSON_BAHDANAU
    from utils.training import training_pairs

    pairs = [(tokenize(e), tokenize(f)) for e, f in training_pairs(LESSON_BAHDANAU)]
    assert len(pairs) > 10_000
    start = time.perf_counter()
    model = train_model1(pairs, iterations=10)
    print(f"\nIBM Model 1, 10 iterations on {len(pairs)} pairs: "
          f"{time.perf_counter() - start:.2f} s")
    lls = model.log_likelihoods
    assert all(later >= earlier - 1e-12 for earlier, later in zip(lls, lls[1:]))
    for english, french in [("cat", "chat"), ("dog", "chien"), ("house", "maison"),
                            ("book", "livre"), ("car", "voiture"), ("bag", "sac")]:
        row = model.table[model.english_index[english]]
        assert model.french_words[int(row.argmax())] == french, english
    links = model.align("i lost my bag .".split(), "j'ai perdu mon sac .".split())
    assert {(1, 1), (2, 2), (3, 3)} <= links
