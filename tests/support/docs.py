"""The commands and snippets of README.md and docs/*.md, with what the docs test does with each.

Collected: fenced ``bash`` / ``sh`` / ``console`` / unlabelled blocks whose
first command starts with a program name of :data:`PROGRAMS` (one command per
line, ``\\`` continues a line, ``# ...`` comments dropped), and ``python``
blocks (one snippet each). Other blocks (output, trees, YAML, JSON) are text,
unless an annotation writes them to a file.

An annotation is an HTML comment on the lines right before a block (blank
lines and other annotations may sit between), so readers never see it::

    <!-- test: VERB ARGS -->        every command of the next block
    <!-- test 2: VERB ARGS -->      its 2nd command (1-based); ``2-4`` is a range

The verbs (:data:`VERBS`; docs/development.md#tested-docs):

- ``run``: run as written;
- ``reduce ARGS``: run with ARGS appended (Hydra overrides for ``rlperf``: the
  last value of a key wins, so ``model=tiny`` replaces a swept list); ``@name``
  stands for a named set of overrides (``REDUCTIONS`` in tests/project/test_docs.py);
- ``check REASON``: not run; every cell passes the pre-flight a run would do
  (composition, validation and, for a single training run, the CPU and GPU
  check against this machine);
- ``compose REASON``: not run; every cell composes and validates (for commands
  that need hardware this machine lacks: feasibility would refuse them);
- ``skip REASON``: neither (installs, synopses, clusters, benchmarks);
- ``file PATH``: the block's text is written to PATH in the test's folder
  before the page's commands run (a config file the page's commands use).

Python blocks run unless annotated ``skip REASON``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

#: Words a collected command starts with (a leading ``VAR=value`` is skipped over).
PROGRAMS = (
    "rlperf",
    "rlperf-report",
    "python",
    "python3",
    "pip",
    "nox",
    "cd",
    "echo",
    "curl",
    "sudo",
)
#: Verbs of an annotation, and whether each needs arguments.
VERBS = {"run": False, "reduce": True, "check": True, "compose": True, "skip": True, "file": True}
SHELL_LANGS = ("", "bash", "sh", "shell", "console")

_FENCE = re.compile(r"^\s*```\s*([\w+-]*)\s*$")
_ANNOTATION = re.compile(r"^\s*<!--\s*test(?:\s+(\d+)(?:-(\d+))?)?\s*:\s*(\S+)\s*(.*?)\s*-->\s*$")


def how_to(n: int) -> str:
    """How to annotate command ``n`` of a block (the failure message of a new command)."""
    rows = [
        ("<!-- test: run -->", "every command of the block, as written"),
        (f"<!-- test {n}: reduce @train -->", "command n only, with overrides appended"),
        ("", "(@train, @rollout, @edge: REDUCTIONS in tests/project/test_docs.py)"),
        (f"<!-- test {n}: check REASON -->", "not run; its cells must pass the pre-flight here"),
        (f"<!-- test {n}: compose REASON -->", "not run; its cells must compose and validate"),
        (f"<!-- test {n}: skip REASON -->", "neither, e.g. `skip GPU: needs an NVIDIA GPU`"),
    ]
    lines = [f"    {left:<36}{right}" for left, right in rows]
    return "\n".join(
        [
            "Annotate it on a line right before its block, in the page's source:",
            *lines,
            "(docs/development.md#tested-docs; the test alone: pytest tests/project/test_docs.py)",
        ]
    )


@dataclass
class Annotation:
    verb: str
    args: str
    first: int | None = None  # 1-based command numbers; None = the whole block
    last: int | None = None

    def covers(self, n: int) -> bool:
        if self.first is None:
            return True
        return self.first <= n <= (self.last if self.last is not None else self.first)


@dataclass
class DocItem:
    """One command (``shell``), snippet (``python``) or file block (``file``) of a page."""

    page: str  # path relative to the repository
    line: int  # line of the command (of the block's first line for python / file)
    kind: str  # shell | python | file
    text: str  # the command (comments dropped), the snippet, the file's content
    number: int = 1  # 1-based position in its block
    verb: str | None = None
    args: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def describe(self) -> str:
        return f"{self.id} ({self.kind} {self.number} of its block): {self.text.strip()[:200]}"


@dataclass
class _Block:
    line: int
    lang: str
    body: list[str]
    annotations: list[Annotation] = field(default_factory=list)


def collect(repo: Path, pages: list[str]) -> list[DocItem]:
    """Every item of ``pages`` (paths relative to ``repo``), in page order."""
    items: list[DocItem] = []
    for page in pages:
        for block in _blocks((repo / page).read_text().splitlines()):
            items.extend(_items(page, block))
    return items


def _blocks(lines: list[str]) -> list[_Block]:
    blocks, pending, i = [], [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        note = _ANNOTATION.match(lines[i])
        if note:
            first, last, verb, args = note.groups()
            pending.append(
                Annotation(verb, args, int(first) if first else None, int(last) if last else None)
            )
        elif fence:
            end = next(j for j in range(i + 1, len(lines)) if _FENCE.match(lines[j]))
            blocks.append(_Block(i + 1, fence.group(1), lines[i + 1 : end], pending))
            pending, i = [], end
        elif lines[i].strip():
            pending = []  # an annotation belongs to the block right after it
        i += 1
    return blocks


def _items(page: str, block: _Block) -> list[DocItem]:
    files = [a for a in block.annotations if a.verb == "file"]
    if files:
        return [
            DocItem(
                page, block.line, "file", "\n".join(block.body) + "\n", 1, "file", files[0].args
            )
        ]
    if block.lang == "python":
        item = DocItem(page, block.line, "python", "\n".join(block.body) + "\n", 1, "run")
        _annotate(item, block.annotations)
        return [item]
    if block.lang not in SHELL_LANGS:
        return []
    commands = _commands(block)
    if not commands or not _is_command(commands[0][1]):
        return []
    items = []
    for n, (line, text) in enumerate(commands, start=1):
        item = DocItem(page, line, "shell", text, n)
        _annotate(item, block.annotations)
        items.append(item)
    return items


def _annotate(item: DocItem, annotations: list[Annotation]) -> None:
    # A numbered annotation wins over one for the whole block.
    for note in sorted(annotations, key=lambda a: a.first is not None):
        if note.covers(item.number):
            item.verb, item.args = note.verb, note.args


def _commands(block: _Block) -> list[tuple[int, str]]:
    """(line, command) per logical line; comment-only lines dropped, ``\\`` joined."""
    out: list[tuple[int, str]] = []
    carry: tuple[int, str] | None = None
    for offset, raw in enumerate(block.body, start=1):
        line = block.line + offset
        text = strip_comment(raw).strip()
        if carry is not None:
            line, text = carry[0], f"{carry[1]} {text}".strip()
            carry = None
        if text.endswith("\\"):
            carry = (line, text[:-1].rstrip())
        elif text:
            out.append((line, text))
    return out


def strip_comment(line: str) -> str:
    """``line`` without a ``#`` comment (a ``#`` outside quotes, at the start or after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _is_command(text: str) -> bool:
    words = text.split()
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before the program
    return bool(words) and words[0] in PROGRAMS


def problems(items: list[DocItem]) -> list[str]:
    """What is wrong with the annotations: unannotated commands, unknown verbs, no reason."""
    out = []
    for item in items:
        if item.verb is None:
            out.append(
                f"{item.describe()}\nis neither run nor listed as not runnable.\n"
                + how_to(item.number)
            )
        elif item.verb not in VERBS:
            out.append(f"{item.describe()}\nunknown verb {item.verb!r}; verbs: {', '.join(VERBS)}")
        elif VERBS[item.verb] and not item.args:
            out.append(
                f"{item.describe()}\n`{item.verb}` needs its arguments (overrides or a reason)"
            )
        elif item.kind == "python" and item.verb not in ("run", "skip"):
            out.append(f"{item.describe()}\na python snippet is run or skipped, not {item.verb!r}")
    return out


def rlperf_argv(command: str) -> tuple[str | None, list[str]] | None:
    """(folder from a leading ``cd DIR &&``, argv after ``rlperf``) of an rlperf command."""
    cwd = None
    match = re.match(r"^cd\s+(\S+)\s*&&\s*(.*)$", command)
    if match:
        cwd, command = match.group(1), match.group(2)
    words = shlex.split(command)
    if not words or words[0] != "rlperf" or any(w in ("&&", "|", ";") for w in words):
        return None
    return cwd, words[1:]
