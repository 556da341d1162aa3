"""Text is read as text, once, in one place (``core.text_input``): a byte-order mark changes no
result, ``\\r\\n`` is a line end, a lone ``\\r`` or a NUL is refused naming the file and line. Every
output appears whole or not at all (``core.atomic_output``): a failure while writing leaves the
file that was there, a second writer does not silently replace the first one's output, a full
disk is named."""
import errno
import io
import json
import os
import stat

import numpy as np
import pytest

from devtools.in_process_tools import call_tool
from fairseq_ctx.cli import embed
from fairseq_ctx.context.data.docids import read_docids
from fairseq_ctx.core import atomic_output
from fairseq_ctx.core.atomic_output import OutputConflictError, atomic_path, reserve_space, write_json
from fairseq_ctx.core.text_input import TextEncodingError, read_utf8_lines, utf8_lines

BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_is_dropped_and_crlf_is_a_line_end():
    assert list(utf8_lines(io.BytesIO(BOM + b"doc1\r\ndoc1\ndoc2\n"), "ids")) == ["doc1\n", "doc1\n", "doc2\n"]
    assert list(utf8_lines(io.BytesIO(b"a\n" + BOM + b"b\n"), "x")) == ["a\n", "\ufeffb\n"]  # only at the start


@pytest.mark.parametrize("content, what", [(b"one\ntwo\rthree\n", "a carriage return (\\r) inside the line"),
                                           (b"one\nt\x00wo\n", "a NUL byte (\\0) in the line")])
def test_a_lone_carriage_return_or_a_nul_is_refused_naming_file_and_line(tmp_path, content, what):
    path = tmp_path / "text.en"
    path.write_bytes(content)
    with pytest.raises(TextEncodingError, match=f"^{path}:2: " + what.replace("\\", "\\\\").replace("(", r"\(")
                       .replace(")", r"\)")):
        read_utf8_lines(str(path))


def test_document_ids_and_scores_are_the_same_with_a_byte_order_mark(tmp_path):
    plain, marked = tmp_path / "plain.docids", tmp_path / "marked.docids"
    plain.write_bytes(b"d1\nd1\nd2\n")
    marked.write_bytes(BOM + b"d1\nd1\nd2\n")
    assert read_docids(str(marked), "test", 3).tolist() == read_docids(str(plain), "test", 3).tolist() == [0, 0, 1]
    reference, hypotheses = tmp_path / "ref.de", tmp_path / "hyp.de"
    reference.write_text("ein mann läuft .\neine frau sitzt .\n", encoding="utf-8")
    hypotheses.write_bytes(b"ein mann l\xc3\xa4uft .\neine frau steht .\n")
    marked_hypotheses = tmp_path / "hyp.bom.de"
    marked_hypotheses.write_bytes(BOM + hypotheses.read_bytes())
    scores = []
    for hyp in (hypotheses, marked_hypotheses):
        out = tmp_path / f"{hyp.name}.json"
        call_tool("fairseq-ctx-score", ["--hyp", str(hyp), "--ref", str(reference), "--no-comet", "--json", str(out)])
        scores.append(json.loads(out.read_text(encoding="utf-8")))
    assert scores[0] == scores[1] and scores[0]["bleu"] > 0


def test_embed_refuses_a_lone_carriage_return_before_loading_a_model(tmp_path, capsys):
    text = tmp_path / "input.de"
    text.write_bytes(b"ein satz\nzwei\rteile\ndrei\n")
    with pytest.raises(SystemExit):
        embed.main([str(tmp_path / "no-checkpoint"), "--lang", "de", "--input", str(text),
                    "--output", str(tmp_path / "out.npy")])
    assert f"{text}:2: a carriage return (\\r) inside the line" in capsys.readouterr().err
    assert not (tmp_path / "out.npy").exists()


def test_a_failed_write_leaves_the_file_that_was_there_and_no_partial_file(tmp_path):
    path = tmp_path / "scores.json"
    write_json(str(path), {"bleu": 1.0})
    with pytest.raises(RuntimeError):
        with atomic_output.atomic_output(str(path)) as handle:
            handle.write('{"bleu": ')
            raise RuntimeError("killed while writing")
    assert json.loads(path.read_text()) == {"bleu": 1.0} and os.listdir(tmp_path) == ["scores.json"]


def test_a_second_writer_of_the_same_output_keeps_its_output_beside_it_and_says_so(tmp_path):
    path = tmp_path / "rows.npy"
    with pytest.raises(OutputConflictError, match=f"{path} was written by another run while this one wrote it; "
                                                  f"this run's output is kept as {path}.{os.getpid()}"):
        with atomic_path(str(path)) as second:
            np.save(open(second, "wb"), np.zeros(3))
            write_json(str(path), {"first": "run"})  # the other run finishes first
    assert json.loads(path.read_text()) == {"first": "run"}
    assert np.load(f"{path}.{os.getpid()}").tolist() == [0.0, 0.0, 0.0]


def test_a_full_disk_is_named_with_the_file_before_any_row_is_written(tmp_path, monkeypatch):
    def full(descriptor, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    output = tmp_path / "embeddings.npy"
    with pytest.raises(OSError, match=f"no space left on the device for {output} \\(4000128 bytes\\): nothing was "
                                      f"written there"):
        with atomic_path(str(output)) as temporary:
            np.lib.format.open_memmap(temporary, mode="w+", dtype=np.float32, shape=(1000, 1000))
            reserve_space(temporary, str(output))
    assert os.listdir(tmp_path) == []


def test_an_atomic_output_has_the_permissions_of_a_plain_write(tmp_path):
    """A new output gets 0o666 less the umask (it was always 0o600, mkstemp's mode); a replaced
    output keeps its own permissions."""
    previous = os.umask(0o022)
    try:
        new = tmp_path / "new.json"
        write_json(str(new), {"a": 1})
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        shared = tmp_path / "shared.json"
        shared.write_text("{}")
        shared.chmod(0o664)
        write_json(str(shared), {"b": 2})
        assert stat.S_IMODE(shared.stat().st_mode) == 0o664 and json.loads(shared.read_text()) == {"b": 2}
    finally:
        os.umask(previous)


def test_an_output_that_is_a_symbolic_link_is_written_through_to_its_target(tmp_path):
    """The link stays a link and its target gets the output (it was replaced by a regular file,
    the target keeping its old content)."""
    target, link = tmp_path / "elsewhere" / "result.json", tmp_path / "result.json"
    target.parent.mkdir()
    target.write_text('{"old": true}\n')
    link.symlink_to(target)
    write_json(str(link), {"new": True})
    assert link.is_symlink() and json.loads(target.read_text()) == {"new": True}
    assert sorted(p.name for p in target.parent.iterdir()) == ["result.json"]
