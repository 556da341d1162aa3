"""xsim as LASER defines it (Artetxe & Schwenk, 2019): hand-computed margins over the k nearest
neighbours, both directions, duplicates and the textual error, LASER's own procedure (faiss) giving
the same counts, faiss vs exact search, and the embedding-file checks of every tool that reads
embeddings."""
import json

import numpy as np
import pytest

from fairseq_ctx.cli import plot_embeddings
from fairseq_ctx.embedding import doc_classify
from fairseq_ctx.cli import xsim as xsim_cli
from fairseq_ctx.embedding.embedding_file import EmbeddingFileError, read_embeddings
from fairseq_ctx.embedding.xsim import (MARGINS, Neighbours, best_candidates, faiss_available,
                                        margin_scores, nearest_neighbours, normalise, xsim, xsim_files)


def embeddings_with_cosines(cosines) -> tuple:
    """Unit rows x_i, y_j with x_i · y_j = cosines[i][j]: x_i = e_i, y_j = column j plus the rest
    of its unit length on an extra axis of its own."""
    cosines = np.asarray(cosines, dtype=np.float64)
    n = len(cosines)
    x = np.eye(n, 2 * n)
    y = np.zeros((n, 2 * n))
    y[:, :n] = cosines.T
    y[np.arange(n), n + np.arange(n)] = np.sqrt(1 - (cosines ** 2).sum(axis=0))
    return x.astype(np.float32), y.astype(np.float32)


def retrievals(x: np.ndarray, y: np.ndarray, margin: str, k: int) -> list:
    forward = nearest_neighbours(normalise(x), normalise(y), k, "exact")
    backward = nearest_neighbours(normalise(y), normalise(x), k, "exact")
    return best_candidates(forward, backward, margin).tolist()


# cos(x_i, y_j); y0 is a hub, close to every source.
HUB = [[0.60, 0.30, 0.20, 0.10],
       [0.50, 0.45, 0.10, 0.00],
       [0.40, 0.20, 0.30, 0.10],
       [0.10, 0.00, 0.20, 0.50]]


def test_margins_by_hand_both_directions():
    """k = 2. Means of the 2 nearest: sources (rows) 0.45, 0.475, 0.35, 0.35; targets (columns)
    0.55, 0.375, 0.25, 0.30. Source 1: cosine prefers the hub y0 (0.50 > 0.45), but
    ratio: 0.50 / ((0.475 + 0.55) / 2) = 0.976 < 0.45 / ((0.475 + 0.375) / 2) = 1.059, and
    distance: 0.50 - 0.5125 = -0.0125 < 0.45 - 0.425 = 0.025, so both margins retrieve y1.
    Source 2: 0.40 / 0.45 = 0.889 < 0.30 / 0.30 = 1.0 and 0.40 - 0.45 < 0.30 - 0.30: y2."""
    x, y = embeddings_with_cosines(HUB)
    assert retrievals(x, y, "absolute", 2) == [0, 0, 0, 3]
    assert retrievals(x, y, "ratio", 2) == [0, 1, 2, 3]
    assert retrievals(x, y, "distance", 2) == [0, 1, 2, 3]
    # target side: y0 → x0 (0.6/0.5 = 1.2 against 0.5/0.5125), y1 → x1 (1.059 against 0.3/0.4125), ...
    for margin in MARGINS:
        assert retrievals(y, x, margin, 2) == [0, 1, 2, 3]
    result = xsim(x, y, k=2, search="exact")
    assert (result["absolute"]["src2tgt"].errors, result["absolute"]["src2tgt"].total) == (2, 4)
    assert result["absolute"]["src2tgt"].percent == 50.0
    assert all(result[m]["src2tgt"].errors == 0 for m in ("ratio", "distance"))
    assert all(result[m]["tgt2src"].errors == 0 for m in MARGINS)
    # the wrong retrievals themselves, (query row, retrieved row): x1 → y0 and x2 → y0
    assert result["absolute"]["src2tgt"].wrong == ((1, 0), (2, 0))
    assert result["ratio"]["src2tgt"].wrong == ()


def test_only_the_k_nearest_are_candidates():
    """Source 0's 2 nearest are y0 (0.30) and y1 (0.28), both near everything (target means
    0.375). The isolated y2 (mean 0.125) would score 0.25 / ((0.29 + 0.125) / 2) = 1.205 against
    y0's 0.30 / ((0.29 + 0.375) / 2) = 0.902, but it is not among source 0's 2 nearest: LASER
    retrieves y0 (a margin argmax over all rows would give y2)."""
    x, y = embeddings_with_cosines([[0.30, 0.28, 0.25, 0.00],
                                    [0.40, 0.35, 0.00, 0.05],
                                    [0.35, 0.40, 0.00, 0.05],
                                    [0.00, 0.05, 0.00, 0.20]])
    assert retrievals(x, y, "ratio", 2) == [0, 0, 1, 3]
    assert retrievals(x, y, "absolute", 2) == [0, 0, 1, 3]


def test_duplicates_textual_error_and_the_order_of_ties():
    """y1 = y2 (the same sentence twice). Cosine takes the lower row among equals (y1: faiss's
    single nearest neighbour); the margins list equal neighbours higher row first, as faiss does,
    and take the first best (y2), as LASER's argmax does. By index each is one error; by text
    ('b' = 'b') none."""
    x = np.eye(3, dtype=np.float32)
    y = np.array([[1, 0, 0], [0, 1, 1], [0, 1, 1]], dtype=np.float32)
    assert retrievals(x, y, "absolute", 1) == [0, 1, 1]
    assert retrievals(x, y, "ratio", 2) == [0, 2, 2]
    assert retrievals(x, y, "distance", 2) == [0, 2, 2]
    by_index = xsim(x, y, k=2, search="exact")
    by_text = xsim(x, y, k=2, tgt_texts=["a", "b", "b"], src_texts=["A", "B", "B"], search="exact")
    for margin in MARGINS:
        assert by_index[margin]["src2tgt"].errors == 1 and by_index[margin]["src2tgt"].error_type == "index"
        assert by_text[margin]["src2tgt"].errors == 0 and by_text[margin]["src2tgt"].error_type == "text"
        wrong = ((2, 1),) if margin == "absolute" else ((1, 2),)  # x2 → y1 by cosine; x1 → y2 by the margins
        assert by_index[margin]["src2tgt"].wrong == wrong and by_text[margin]["src2tgt"].wrong == ()
    # from the target side both duplicates retrieve x1 by cosine: y2 → x1 is wrong by index only
    assert by_index["absolute"]["tgt2src"].errors == 1 and by_text["absolute"]["tgt2src"].errors == 0
    assert by_text["ratio"]["tgt2src"].errors == by_index["ratio"]["tgt2src"].errors - 1 == 0


def reference_retrievals(x: np.ndarray, y: np.ndarray, margin: str, k: int) -> list:
    """The definition written out with plain loops (no ties in the data)."""
    x, y = normalise(x).astype(np.float64), normalise(y).astype(np.float64)
    cos = x @ y.T
    query_mean = [np.mean(sorted(row)[-k:]) for row in cos]
    key_mean = [np.mean(sorted(column)[-k:]) for column in cos.T]
    retrieved = []
    for i, row in enumerate(cos):
        candidates = sorted(range(len(row)), key=lambda j: -row[j])[:k]
        if margin == "absolute":
            retrieved.append(candidates[0])
            continue
        def score(j):
            denominator = (query_mean[i] + key_mean[j]) / 2
            return row[j] / denominator if margin == "ratio" else row[j] - denominator
        retrieved.append(max(candidates, key=score))
    return retrieved


@pytest.mark.parametrize("k", [1, 2, 4, 9])
def test_equals_the_definition_on_random_embeddings(k):
    rng = np.random.RandomState(k)
    base = rng.randn(60, 8)
    x = (base + 0.9 * rng.randn(60, 8)).astype(np.float32)
    y = (base + 0.9 * rng.randn(60, 8)).astype(np.float32)
    for margin in MARGINS:
        assert retrievals(x, y, margin, k) == reference_retrievals(x, y, margin, k)
        assert retrievals(y, x, margin, k) == reference_retrievals(y, x, margin, k)
    result = xsim(x, y, k=k, search="exact")
    expected = sum(r != i for i, r in enumerate(reference_retrievals(x, y, "ratio", k)))
    assert result["ratio"]["src2tgt"].errors == expected
    assert 0 < expected < 60


def test_exact_search_blocks_give_the_same_neighbours(monkeypatch):
    rng = np.random.RandomState(0)
    x, y = normalise(rng.randn(50, 6)), normalise(rng.randn(40, 6))
    whole = nearest_neighbours(x, y, 5, "exact")
    monkeypatch.setattr("fairseq_ctx.embedding.xsim.BLOCK_ELEMENTS", 7 * 40)
    blocked = nearest_neighbours(x, y, 5, "exact")
    np.testing.assert_array_equal(whole.indices, blocked.indices)
    # a block's matrix product may round in the last float32 bit differently from the whole one (BLAS
    # kernels depend on the block's shape and the CPU)
    np.testing.assert_allclose(whole.similarities, blocked.similarities, rtol=1e-6, atol=0)


def near_tied_queries(forward: Neighbours, backward: Neighbours, margin: str, tolerance: float) -> set:
    """The queries whose two best candidate scores are within ``tolerance``."""
    best_two = np.sort(margin_scores(forward, backward, margin).astype(np.float64), axis=1)[:, -2:]
    return set(np.flatnonzero(best_two[:, 1] - best_two[:, 0] <= tolerance).tolist())


@pytest.mark.skipif(not faiss_available(), reason="faiss is not installed (the 'faiss' extra)")
def test_faiss_and_exact_search_agree_with_duplicates():
    """Faiss and numpy's BLAS round float32 cosines differently (1e-6 apart, by CPU), so equal
    cosines may be listed in another order and a query whose two best scores are that close may
    retrieve either: here only x7 (whose best candidates are y7 and its copies) and y3 (x3 and its
    copies) are, and every other query is retrieved, or missed, alike by xsim with either search."""
    rng = np.random.RandomState(1)
    base = rng.randn(300, 16)
    x = (base + 0.8 * rng.randn(300, 16)).astype(np.float32)
    y = (base + 0.8 * rng.randn(300, 16)).astype(np.float32)
    y[[10, 50, 90]] = y[7]
    x[[20, 60]] = x[3]
    texts = [str(i % 250) for i in range(300)]
    searched = {search: {"x2y": nearest_neighbours(normalise(x, search), normalise(y, search), 4, search),
                         "y2x": nearest_neighbours(normalise(y, search), normalise(x, search), 4, search)}
                for search in ("exact", "faiss")}
    for side, queries, keys in (("x2y", x, y), ("y2x", y, x)):
        exact, faiss = searched["exact"][side], searched["faiss"][side]
        np.testing.assert_allclose(exact.similarities, faiss.similarities, atol=1e-5)
        # the lists differ only in the order of equal cosines (the duplicates)
        cosines = normalise(queries).astype(np.float64) @ normalise(keys).astype(np.float64).T
        listed_by_faiss = np.take_along_axis(cosines, faiss.indices, axis=1)
        np.testing.assert_allclose(listed_by_faiss, exact.similarities, atol=1e-5)
    for texts_given in (None, texts):
        exact = xsim(x, y, k=4, src_texts=texts_given, tgt_texts=texts_given, search="exact")
        with_faiss = xsim(x, y, k=4, src_texts=texts_given, tgt_texts=texts_given, search="faiss")
        for margin in MARGINS:
            for direction, forward, backward, duplicated in (("src2tgt", "x2y", "y2x", {7}),
                                                             ("tgt2src", "y2x", "x2y", {3})):
                tied = near_tied_queries(searched["exact"][forward], searched["exact"][backward], margin, 1e-5)
                assert tied == duplicated, (margin, direction, sorted(tied))
                differing = set(exact[margin][direction].wrong) ^ set(with_faiss[margin][direction].wrong)
                assert {query for query, _ in differing} <= tied, (margin, direction, sorted(differing))


@pytest.mark.parametrize("margin", MARGINS)
def test_the_first_best_in_the_listed_order_is_retrieved_as_by_laser(margin):
    """Two copies of one target row (rows 2 and 1, listed in that order, as faiss lists equal
    neighbours) whose cosines came out equal or one float32 ulp apart: the higher score wins
    however small the difference, and of equal scores the first listed (LASER: numpy's argmax
    over faiss's list; for absolute, faiss's single nearest neighbour)."""
    tie = np.float32(0.7)
    ulp = np.spacing(tie)
    backward = Neighbours(np.array([[0.7, 0.2], [0.7, 0.2], [0.7, 0.2]], dtype=np.float32),
                          np.array([[0, 1], [0, 1], [0, 1]]))
    picked = []
    for nudge in (ulp, 0, -ulp):
        cosines = np.array(sorted([tie + nudge, tie], reverse=True) + [0.1], dtype=np.float32)
        order = [2, 1, 0] if nudge >= 0 else [1, 2, 0]
        forward = Neighbours(cosines[None], np.array([order]))
        picked.append(int(best_candidates(forward, backward, margin)[0]))
    assert picked == [2, 2, 1]


def laser_errors(x: np.ndarray, y: np.ndarray, margin: str, k: int, texts=None) -> int:
    """LASER's xSIM(x, y) procedure (facebookresearch/LASER, source/xsim.py) written out on its
    own: faiss's normalize_L2 on float32 copies, one IndexFlatIP per side, for absolute the single
    nearest row, for a margin both k-searches, the float32 means, the score of each candidate in a
    scalar loop into a float64 array, numpy's argmax; then the index error, or with ``texts`` (the
    retrieved side's lines) the textual error."""
    import faiss

    x, y = np.array(x, dtype=np.float32), np.array(y, dtype=np.float32)
    faiss.normalize_L2(x)
    faiss.normalize_L2(y)
    index_x, index_y = faiss.IndexFlatIP(x.shape[1]), faiss.IndexFlatIP(y.shape[1])
    index_x.add(x)
    index_y.add(y)
    rows = len(x)
    if margin == "absolute":
        retrieved = index_y.search(x, 1)[1][:, 0]
    else:
        cos_xy, idx_xy = index_y.search(x, k)
        cos_yx, _ = index_x.search(y, k)
        mean_x, mean_y = cos_xy.mean(axis=1), cos_yx.mean(axis=1)
        scores = np.zeros((rows, k))
        for i in range(rows):
            for j in range(k):
                a, b = cos_xy[i, j], (mean_x[i] + mean_y[idx_xy[i, j]]) / 2
                scores[i, j] = a / b if margin == "ratio" else a - b
        retrieved = np.array([idx_xy[i, best] for i, best in enumerate(scores.argmax(axis=1))])
    if texts is None:
        return int((retrieved != np.arange(rows)).sum())
    return sum(texts[i] != texts[j] for i, j in enumerate(retrieved.tolist()))


def assert_laser_counts(x: np.ndarray, y: np.ndarray, k: int, texts=None) -> None:
    ours = xsim(x, y, k=k, src_texts=texts, tgt_texts=texts, search="faiss")
    for margin in MARGINS:
        assert ours[margin]["src2tgt"].errors == laser_errors(x, y, margin, k, texts), margin
        assert ours[margin]["tgt2src"].errors == laser_errors(y, x, margin, k, texts), margin


@pytest.mark.skipif(not faiss_available(), reason="faiss is not installed (the 'faiss' extra)")
@pytest.mark.parametrize("spread", [1e-2, 3e-3, 1e-3])
def test_counts_equal_lasers_on_distinct_sentences(spread):
    """300 distinct sentences in clusters of 5 close paraphrases: many margin scores differ by
    1e-6 to 1e-5 relative, real differences that decide LASER's retrieval."""
    rng = np.random.RandomState(0)
    base = np.repeat(rng.randn(60, 16), 5, axis=0) + spread * rng.randn(300, 16)
    x = (base + 0.8 * spread * rng.randn(300, 16)).astype(np.float32)
    y = (base + 0.8 * spread * rng.randn(300, 16)).astype(np.float32)
    assert_laser_counts(x, y, k=4)
    assert_laser_counts(x, y, k=4, texts=[f"sentence {i}" for i in range(300)])


@pytest.mark.skipif(not faiss_available(), reason="faiss is not installed (the 'faiss' extra)")
@pytest.mark.parametrize("noise", [0.0, 1e-7, 1e-6, 1e-5])
def test_counts_equal_lasers_when_many_sentences_map_to_one_vector(noise):
    """A collapsed model: 250 of 300 sentences embed to one vector (exactly, or within ``noise``),
    some sentences repeated (textual error)."""
    rng = np.random.RandomState(1)
    x = rng.randn(300, 16)
    y = x + 0.5 * rng.randn(300, 16)
    vector = rng.randn(16)
    x[:250] = vector + noise * rng.randn(250, 16)
    y[:250] = vector + noise * rng.randn(250, 16)
    x, y = x.astype(np.float32), y.astype(np.float32)
    assert_laser_counts(x, y, k=4)
    assert_laser_counts(x, y, k=4, texts=[f"sentence {i % 220}" for i in range(300)])


def save(path, array) -> str:
    np.save(path, np.asarray(array, dtype=np.float32))
    return str(path)


def test_cli_prints_and_writes_json_with_the_textual_error(tmp_path, capsys):
    x = np.eye(3, dtype=np.float32)
    y = np.array([[1, 0, 0], [0, 1, 1], [0, 1, 1]], dtype=np.float32)
    (tmp_path / "tgt.txt").write_text("a\nb\nb\n")
    out = tmp_path / "xsim.json"
    xsim_cli.main([save(tmp_path / "x.npy", x), save(tmp_path / "y.npy", y), "--k", "2", "--tgt-text",
                   str(tmp_path / "tgt.txt"), "--search", "exact", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "3 sentences, k=2, exact search" in printed
    assert "ratio     src2tgt      0.00        0  text" in printed
    assert "ratio     tgt2src     33.33        1  index" in printed
    report = json.loads(out.read_text())
    assert report["results"]["absolute"]["src2tgt"] == {"errors": 0, "total": 3, "error_percent": 0.0,
                                                        "error_type": "text"}
    assert report["results"]["distance"]["tgt2src"]["errors"] == 1 and report["k"] == 2


def test_laser_raw_binary_files_read_like_npy(tmp_path):
    rows = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    rows.tofile(tmp_path / "x.bin")
    rows.astype(np.float16).tofile(tmp_path / "x16.bin")
    np.testing.assert_array_equal(read_embeddings(str(tmp_path / "x.bin"), dim=3), rows)
    np.testing.assert_array_equal(read_embeddings(str(tmp_path / "x16.bin"), dim=3, fp16=True), rows)
    with pytest.raises(EmbeddingFileError, match=r"x\.bin has 48 bytes, not a whole number of rows of 5 float32"):
        read_embeddings(str(tmp_path / "x.bin"), dim=5)
    with pytest.raises(EmbeddingFileError, match=r"not a \.npy file; for LASER's raw binary embeddings give"):
        read_embeddings(str(tmp_path / "x.bin"))


def test_nan_inf_and_zero_rows_name_the_file_and_first_bad_row(tmp_path):
    rows = np.random.RandomState(0).randn(20, 4)
    nan_rows = rows.copy()
    nan_rows[[7, 12]] = np.nan
    inf_rows = rows.copy()
    inf_rows[3, 1] = np.inf
    zero_rows = rows.copy()
    zero_rows[15:] = 0
    with pytest.raises(EmbeddingFileError, match=r"nan\.npy has NaN/inf values; first bad row 7 \(line 8 of the "
                                                 r"embedded text\)"):
        read_embeddings(save(tmp_path / "nan.npy", nan_rows))
    with pytest.raises(EmbeddingFileError, match=r"inf\.npy has NaN/inf values; first bad row 3 "):
        read_embeddings(save(tmp_path / "inf.npy", inf_rows))
    with pytest.raises(EmbeddingFileError, match=r"zero\.npy has an all-zero row 15 \(line 16 .*interrupted "
                                                 r"fairseq-ctx-embed"):
        read_embeddings(save(tmp_path / "zero.npy", zero_rows))
    with pytest.raises(EmbeddingFileError, match=r"empty\.npy has 0 rows of dimension 4; it is empty"):
        read_embeddings(save(tmp_path / "empty.npy", np.zeros((0, 4))))
    with pytest.raises(EmbeddingFileError, match=r"flat\.npy has shape \(5,\); expected \(rows, dim\)"):
        read_embeddings(save(tmp_path / "flat.npy", np.ones(5)))
    with pytest.raises(EmbeddingFileError, match=r"missing\.npy does not exist"):
        read_embeddings(str(tmp_path / "missing.npy"))
    (tmp_path / "cut.npy").write_bytes(open(save(tmp_path / "whole.npy", rows), "rb").read()[:100])
    with pytest.raises(EmbeddingFileError, match=r"cut\.npy is not a readable \.npy file \(.*\); write it with"):
        read_embeddings(str(tmp_path / "cut.npy"))


def test_xsim_refuses_bad_files_k_and_misaligned_input(tmp_path, capsys):
    rng = np.random.RandomState(0)
    good = save(tmp_path / "good.npy", rng.randn(5, 4))
    other = save(tmp_path / "other.npy", rng.randn(5, 4))
    nan_rows = rng.randn(20, 4)
    nan_rows[9] = np.nan
    with pytest.raises(EmbeddingFileError, match=r"bad\.npy has NaN/inf values; first bad row 9"):
        xsim_files(save(tmp_path / "bad.npy", nan_rows), save(tmp_path / "ok.npy", rng.randn(20, 4)))
    with pytest.raises(EmbeddingFileError, match=r"--k 5 nearest neighbours needs 1 <= k < rows, but .*good\.npy "
                                                 r"and .*other\.npy have 5 rows"):
        xsim_files(good, other, k=5)
    assert xsim_files(good, other, margins=["absolute"], k=5)["absolute"]["src2tgt"].total == 5
    with pytest.raises(EmbeddingFileError, match=r"short\.npy has 4 rows of dimension 4; xsim needs aligned"):
        xsim_files(good, save(tmp_path / "short.npy", rng.randn(4, 4)))
    with pytest.raises(EmbeddingFileError, match=r"the target text has 2 lines but target has 5 rows"):
        xsim(read_embeddings(good), read_embeddings(other), tgt_texts=["a", "b"])
    (tmp_path / "text").write_text("a\nb\n")
    with pytest.raises(EmbeddingFileError, match=r"text file .*text has 2 lines but embedding file .*other\.npy "
                                                 r"has 5 rows"):
        xsim_files(good, other, tgt_text=str(tmp_path / "text"))
    with pytest.raises(SystemExit) as stop:
        xsim_cli.main([good, other, "--k", "7"])
    assert stop.value.code == 2 and "fairseq-ctx-xsim: error: --k 7 nearest neighbours" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        xsim_cli.main([good, other, "--json", good])
    assert stop.value.code == 2 and "is one of the inputs" in capsys.readouterr().err


def test_doc_classify_and_plot_embeddings_read_through_the_same_checks(tmp_path, capsys):
    rows = np.random.RandomState(0).randn(6, 4)
    rows[2] = np.nan
    save(tmp_path / "train.xa.npy", rows)
    (tmp_path / "train.labels").write_text("a\nb\na\nb\na\nb\n")
    with pytest.raises(EmbeddingFileError, match=r"train\.xa\.npy has NaN/inf values; first bad row 2"):
        doc_classify.load_split(str(tmp_path), "train", "xa")
    with pytest.raises(SystemExit) as stop:
        plot_embeddings.main(["--input", f"xa={tmp_path / 'train.xa.npy'}", "--output", str(tmp_path / "p.png")])
    assert stop.value.code == 2 and "train.xa.npy has NaN/inf values; first bad row 2" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()


def test_plot_embeddings_says_how_many_rows_it_leaves_out(tmp_path, capsys):
    """--max-points keeps t-SNE affordable; a file with more rows is plotted in part, and the tool
    says so (before, silently); 0 plots every row."""
    pytest.importorskip("matplotlib")
    np.save(tmp_path / "many.npy", np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32))
    plot_embeddings.main(["--input", f"xa={tmp_path / 'many.npy'}", "--output", str(tmp_path / "part.png"),
                          "--method", "pca", "--max-points", "25"])
    assert f"plotting the first 25 of the 40 rows of {tmp_path / 'many.npy'}" in capsys.readouterr().err
    plot_embeddings.main(["--input", f"xa={tmp_path / 'many.npy'}", "--output", str(tmp_path / "all.png"),
                          "--method", "pca", "--max-points", "0"])
    assert "plotting the first" not in capsys.readouterr().err and (tmp_path / "all.png").exists()
