"""The README's Python example runs as it is shown."""

import os
import re

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "README.md")


def test_the_readme_example_runs(cli, capsys):
    text = open(README, encoding="utf-8").read()
    section = text[text.index("## In-process: Python"):]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "tollgate.call(" in example
    cli("limits", "set", "anthropic", "--requests", "10", "--window", "60")
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() == str(1187 + 412)
