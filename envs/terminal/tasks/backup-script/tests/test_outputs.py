import os
import subprocess
import tarfile
import tempfile


def tree(files):
    root = os.path.join(tempfile.mkdtemp(), "site")
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    return root


def backup(*args):
    return subprocess.run(["/app/backup.sh", *args], capture_output=True, text=True, timeout=30)


def test_archive_holds_the_tree_without_tmp_files():
    src = tree({"index.html": "<h1>", "css/site.css": "body{}", "draft.tmp": "x", "img/a/b.tmp": "y", "img/a/c.png": "z"})
    dest = os.path.join(tempfile.mkdtemp(), "out", "nested")
    result = backup(src, dest)
    assert result.returncode == 0, result.stderr
    archive = os.path.join(dest, "backup-site.tar.gz")
    assert result.stdout.strip() == archive
    with tarfile.open(archive, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}
    assert members == {"index.html": "<h1>", "css/site.css": "body{}", "img/a/c.png": "z"}


def test_missing_source_is_an_error_that_creates_nothing():
    dest = os.path.join(tempfile.mkdtemp(), "never")
    result = backup("/nonexistent/dir", dest)
    assert result.returncode == 2
    assert result.stderr.strip()
    assert not os.path.exists(dest)
