"""Shell completion as docs/commands.md installs it: bash completes the psrec script's commands
and option values in a real shell from the script its one command writes; zsh and fish get
the same answers through their own protocols."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "psrec"


def _script() -> Path:
    if not SCRIPT.is_file():
        pytest.skip(f"no psrec script beside {sys.executable} (psrec is not installed there)")
    return SCRIPT


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.update(extra)
    return env


def test_bash_completes_commands_and_option_values_from_the_installed_script(
        tmp_path: Path) -> None:
    _script()
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on PATH")
    # The docs' one command for bash, into a scratch home.
    install = subprocess.run(
        [bash, "-c", "_PSREC_COMPLETE=bash_source psrec > ~/.psrec-complete.bash && "
                     "echo '. ~/.psrec-complete.bash' >> ~/.bashrc"],
        env=_env(HOME=str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert install.returncode == 0, install.stderr
    probe = """
. ~/.bashrc
ask() { COMPREPLY=(); COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _psrec_completion psrec;
        echo "${COMPREPLY[*]}"; }
ask psrec rep
ask psrec report --native-frames ""
ask psrec record --cpu-
"""
    r = subprocess.run([bash, "-c", probe], env=_env(HOME=str(tmp_path)), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["report", "mixed all python", "--cpu-source"], r.stdout


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_get_the_same_answers(shell: str) -> None:
    psrec = _script()
    source = subprocess.run([str(psrec)], env=_env(_PSREC_COMPLETE=f"{shell}_source"),
                            capture_output=True, text=True, timeout=60)
    assert source.returncode == 0 and "_psrec_completion" in source.stdout, source.stderr
    # (zsh gives the index of the word being completed; fish the word itself)
    r = subprocess.run([str(psrec)], env=_env(_PSREC_COMPLETE=f"{shell}_complete",
                                              COMP_WORDS="psrec rep",
                                              COMP_CWORD="1" if shell == "zsh" else "rep"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "report" in r.stdout, r.stdout
