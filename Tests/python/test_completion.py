"""The bash completion (completions/cachectl.bash) held to `cachectl --help`:
real bash sources the installed file's source and completes command lines;
what it offers must be what the usage names, where the usage names it.

A command the usage gained and the completion did not (`delete`, `--string`,
`--offset` and `--limit` were missing for a while) fails here.
"""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "completions", "cachectl.bash")


def usage(bins):
    out = subprocess.run([os.path.join(bins, "cachectl"), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def commands(text):
    """{(command, subcommand or ""): set of options} from the usage's commands."""
    section = text.split("\ncommands:\n", 1)[1].split("\noptions:\n", 1)[0]
    table, last = {}, None
    for line in section.splitlines():
        if re.match(r"^  [a-z]", line):
            words = line.split("   ")[0].split()  # the synopsis, before the description's column
            cmd, rest = words[0], words[1:]
            subs = [""]
            if rest and re.fullmatch(r"[a-z]+", rest[0]):
                subs = [rest.pop(0)]
            elif rest and re.fullmatch(r"\[[a-z|]+\]", rest[0]):
                subs = rest.pop(0).strip("[]").split("|")
            last = [(cmd, s) for s in subs]
            for key in last:
                table.setdefault(key, set()).update(options(" ".join(rest)))
        elif last and re.match(r"^    +\[", line):
            for key in last:
                table[key].update(options(line.strip().split("   ")[0]))
    return table


def options(synopsis):
    return set(re.findall(r"\[(-{1,2}[a-z]+)", synopsis))


def global_options(text):
    section = text.split("\noptions:\n", 1)[1].split("\nexit status:", 1)[0]
    found = set(re.findall(r"^  (--[a-z]+)", section, re.M)) - {"--"}
    return found | {"--help", "--version"}


def complete(*words):
    """What the completion offers for `cachectl WORDS...` (the last word is
    the one being completed)."""
    line = ["cachectl", *words]
    quoted = " ".join("'%s'" % w for w in line)
    prog = "source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _cachectl; printf '%%s\\n' \"${COMPREPLY[@]}\"" % (
        SCRIPT, quoted, len(line) - 1)
    out = subprocess.run(["bash", "--noprofile", "--norc", "-c", prog], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return {w for w in out.stdout.splitlines() if w}


@pytest.fixture(scope="module")
def help_text(bins):
    return usage(bins)


def test_the_usage_parses_into_every_command(help_text):
    table = commands(help_text)
    # What this test reads of the usage is there, so a change of its layout fails here, not silently.
    assert ("get", "posts") in table and "--offset" in table[("get", "posts")]
    assert ("delete", "post") in table and "--string" in table[("delete", "post")]
    assert ("prefetch", "images") in table and "--force" in table[("prefetch", "images")]
    assert "--json" in global_options(help_text)


def test_the_first_word_offers_every_command_and_global_option(help_text):
    table = commands(help_text)
    expected = {cmd for cmd, _ in table} | global_options(help_text)
    assert complete("") == expected


def test_each_command_offers_its_subcommands(help_text):
    table = commands(help_text)
    for cmd in {c for c, _ in table}:
        subs = {s for c, s in table if c == cmd and s}
        if not subs:
            continue
        offered = complete(cmd, "")
        # prefetch's kind is optional: its options come with the kinds.
        extra = set().union(*(table[(cmd, s)] for s in subs)) if cmd == "prefetch" else set()
        assert offered == subs | extra, (cmd, offered)


def test_each_subcommand_offers_its_options(help_text):
    for (cmd, sub), opts in commands(help_text).items():
        words = [cmd, sub] if sub else [cmd]
        assert complete(*words, "-") == {o for o in opts if o.startswith("-")}, (cmd, sub)


def test_options_with_values_are_skipped_and_completed(help_text):
    # A global option's value is not taken for the command.
    assert complete("--socket", "/tmp/x.sock", "get", "") == complete("get", "")
    assert complete("--timeout", "5", "delete", "") == {"post"}
    # The words after --query or --offset are values: nothing is offered for them.
    assert complete("get", "posts", "--offset", "") == set()
    assert complete("get", "posts", "--query", "") == set()
    assert complete("get", "posts", "--offset", "10", "--") == {"--query", "--offset", "--limit"}
    # The values the usage spells out.
    assert complete("get", "image", "3", "--fit", "") == set(re.search(r"--fit (\w+)\|(\w+)", help_text).groups())
