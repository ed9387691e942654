"""Print the uv options that give ``uv pip install`` the package sources pip is configured with.

uv reads no ``pip.conf`` and no ``PIP_*`` variable: on a machine whose pip is pointed at a local
wheel mirror, extra indexes or a constraints file, uv alone would download what pip takes from
disk, and could resolve other versions. ``make`` asks pip (``pip config list``: its files and
its environment, later ones winning, as pip applies them) and hands uv the same sources:

    .venv/bin/uv pip install --python .venv/bin/python $(.venv/bin/python scripts/uv_args.py) -e .

With extra indexes or find-links, uv picks the best version over all of them, as pip does
(``--index-strategy unsafe-best-match``; uv's default takes a package from the first index that
has it). Prints nothing where pip has no such settings.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
"""pip setting -> the uv option taking the same value (each of a space-separated list)."""


def parse(listing: str) -> dict[str, list[str]]:
    """pip setting -> its values, from the lines of ``pip config list`` (``scope.key='value'``):
    a ``PIP_*`` variable (scope ``:env:``) wins over the files, as in pip; among the files a
    later line wins (pip lists them in the order it applies them; versions differ on where the
    environment's lines come).

    >>> parse(":env:.find-links='/w'\\nglobal.find-links='/opt/wheels'\\n"
    ...       "global.extra-index-url='file:///a/simple file:///b/simple'\\n"
    ...       "global.timeout='60'\\n")
    {'find-links': ['/w'], 'extra-index-url': ['file:///a/simple', 'file:///b/simple']}
    """
    found: dict[str, list[str]] = {}
    from_env: set[str] = set()
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        key = name.rsplit(".", 1)[-1].strip()
        env = name.startswith(":env:")
        if not sep or key not in OPTIONS or (key in from_env and not env):
            continue
        found[key] = shlex.split(value)[0].split() if value.strip() else []
        if env:
            from_env.add(key)
    return found


def uv_args(settings: dict[str, list[str]]) -> list[str]:
    """The uv options for ``settings`` (see :func:`parse`).

    >>> uv_args({"find-links": ["/w"], "constraint": ["/etc/c.txt"]})
    ['--find-links', '/w', '--constraint', '/etc/c.txt', '--index-strategy', 'unsafe-best-match']
    >>> uv_args({})
    []
    """
    args = [a for key, values in settings.items() for v in values for a in (OPTIONS[key], v)]
    if settings.get("extra-index-url") or settings.get("find-links"):
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def main() -> int:
    r = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                       text=True, check=False)
    print(shlex.join(uv_args(parse(r.stdout))) if r.returncode == 0 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
