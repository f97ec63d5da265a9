"""The README's first Python program runs as written."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_the_readme_program(tmp_path, monkeypatch, capsys):
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("no Fashion-MNIST (apt-get install dataset-fashion-mnist)")
    with open(README) as f:
        text = f.read()
    program = re.search(r"<!-- python-first-program -->\n```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(program, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "'samples': 10000" in printed and "(4, 10)" in printed
    assert (tmp_path / "fashion.cnn").exists()
