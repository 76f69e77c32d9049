import os

import pytest

EXPECTED = {
    "pdf/report.pdf",
    "txt/notes.txt",
    "jpg/photo.JPG",
    "csv/data.csv",
    "gz/backup.tar.gz",
    "none/README",
    "txt/todo.txt",
    "png/image.png",
    "none/Makefile",
    "sh/run.SH",
}


def sorted_files():
    found = set()
    for top, _, names in os.walk("/app/sorted"):
        for name in names:
            found.add(os.path.relpath(os.path.join(top, name), "/app/sorted"))
    return found


def test_every_file_is_where_it_belongs():
    assert sorted_files() == EXPECTED


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_contents_are_unchanged(path):
    with open(os.path.join("/app/sorted", path)) as f:
        assert f.read() == "contents of %s\n" % os.path.basename(path)


def test_inbox_is_empty_but_present():
    assert os.path.isdir("/app/inbox")
    assert os.listdir("/app/inbox") == []
