"""Checks the Python that `make` uses, and the virtualenvs it made, before any rule runs.

    python3 tools/python_env.py VENV [VENV ...]

Prints one line and exits 0: ``ok``, or ``note: ...`` after removing a virtualenv
that another Python made (or that no longer runs), so that make rebuilds it.
Prints ``error: ...`` and exits 1 when this Python cannot run the project: torch
2.13.0, which the project pins, is built for CPython 3.10 to 3.14 only.

Written for any Python 3 (no newer syntax): it must run to say that a Python is too old.
"""
import os
import shutil
import subprocess
import sys

SUPPORTED = ((3, 10), (3, 14))  # the CPython versions torch 2.13.0 ships wheels for


def version_text(info):
    return "%d.%d" % (info[0], info[1])


def venv_python(venv):
    return os.path.join(venv, "Scripts" if os.name == "nt" else "bin", "python")


def venv_problem(venv):
    """Why ``venv`` cannot be reused by this Python, or None."""
    python = venv_python(venv)
    if not os.path.exists(python):
        return "it has no bin/python (a half-made or broken virtualenv)"
    try:
        out = subprocess.run([python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "its python does not start"
    if out.returncode != 0:
        return "its python does not start"
    made_by = tuple(int(x) for x in out.stdout.split())
    if made_by != tuple(sys.version_info[:2]):
        return "it was made by Python %s, and make now runs Python %s" % (
            version_text(made_by), version_text(sys.version_info))
    return None


def main(venvs):
    low, high = SUPPORTED
    if not low <= tuple(sys.version_info[:2]) <= high:
        print("error: %s is Python %s, but torch 2.13.0 needs Python %s to %s: run make with "
              "PYTHON=python3.X (X from %d to %d)" % (sys.executable, version_text(sys.version_info),
                                                      version_text(low), version_text(high), low[1], high[1]))
        return 1
    notes = []
    for venv in venvs:
        if os.path.isdir(venv):
            problem = venv_problem(venv)
            if problem:
                shutil.rmtree(venv)
                notes.append("removed %s (%s); it is made again" % (venv, problem))
    print("note: " + "; ".join(notes) if notes else "ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
