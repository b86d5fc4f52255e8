"""What the Python checkers of the test suite share (tests/jube, tests/slurm, tests/container):
the failure and skip exceptions, `check`, and `run_in_temp`, which runs one named test in a
fresh temporary folder and turns its outcome into ctest's exit code (0 passed, 1 failed with
the folder kept for a look, SKIP when the test cannot run here)."""

import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77  # the checkers' SKIP_RETURN_CODE in ctest


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def with_this_python_first(tmp, environ):
    """environ with PATH starting at a folder in tmp whose python3 is this interpreter (the one
    CMake found), so the campaigns' `python3` steps run under it. A version manager's shim
    first on PATH (pyenv's costs ~0.35 s a call) would otherwise start every collect step, and
    the steps would run under an interpreter the tests did not choose."""
    bindir = os.path.join(tmp, "python-bin")
    os.makedirs(bindir, exist_ok=True)
    link = os.path.join(bindir, "python3")
    if not os.path.lexists(link):
        os.symlink(sys.executable, link)
    return dict(environ, PATH=bindir + os.pathsep + environ.get("PATH", ""))


def run_in_temp(name, prefix, body, keep=False, quiet_pass=False):
    """body(tmp) in a new folder prefix-name-XXXX; returns the exit code. A timed-out command
    is a failure; the folder is removed unless the test failed or `keep` is set."""
    tmp = tempfile.mkdtemp(prefix="{0}-{1}-".format(prefix, name))
    try:
        body(tmp)
    except Skip as skip:
        print("SKIP ({0}): {1}".format(name, skip))
        shutil.rmtree(tmp, ignore_errors=True)
        return SKIP
    except (Failure, subprocess.TimeoutExpired) as failure:
        print("FAIL ({0}): {1}\n(temporary folder kept: {2})".format(name, failure, tmp))
        return 1
    if not quiet_pass:
        print("PASS ({0})".format(name))
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0
