"""A shell's ``-c`` script (``bash -lc '…'``, ``sh -ec '…'``) and the simple commands in it.

Enough of the shell's grammar to find the command a unit's script starts: words as ``shlex`` splits them,
commands separated at ``;`` ``&&`` ``||`` ``|`` ``&`` and newlines, comments and redirections dropped.
Nothing is expanded: a ``$VAR`` stays as written (``variables`` names them).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
"""Programs read as a shell when they run a ``-c`` script."""
_SHELL_VAR = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


def shell_script(argv: list[str]) -> str | None:
    """The script of ``bash [-l] -c 'script'`` / ``sh -ec '…'``, or None when there is no ``-c``."""
    has_c = False
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if tok.startswith("--"):
            i += 1
            continue
        if tok.startswith(("-", "+")) and len(tok) > 1:
            has_c = has_c or (tok[0] == "-" and "c" in tok[1:])
            i += 1
            continue
        return tok if has_c else None
    return None


def simple_commands(script: str) -> list[list[str]]:
    """Split a shell script into simple commands (at ``;`` ``&&`` ``||`` ``|`` ``&`` newlines)."""
    script = script.replace("\\\n", " ")
    # fd redirections like 2>&1 would leave a stray "2" argument behind; drop the fd number first.
    script = re.sub(r"(?<=\s)\d+(?=[<>])", "", script)
    lex = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:
        tokens = script.split()
    commands: list[list[str]] = [[]]
    skip_next = False
    for tok in tokens:
        if skip_next:
            skip_next = False
            continue
        if tok and all(c in "<>&" for c in tok) and any(c in "<>" for c in tok):
            skip_next = True  # redirection target
            continue
        if tok and all(c in ";&|()\n" for c in tok):
            commands.append([])
            continue
        commands[-1].append(tok)
    return [c for c in commands if c]


def variables(words: Iterable[str]) -> list[str]:
    """The shell variables (``$X``, ``${X}``) written in ``words``, sorted, each once."""
    return sorted({m for word in words for m in _SHELL_VAR.findall(word)})
