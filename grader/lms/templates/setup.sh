#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image; the zip is
# unpacked in /autograder/source. It installs the grader's pinned dependencies in a
# virtual environment, makes sure uid/gid 65534 (nobody) exists (student code runs as a uid
# of its process tree's own, which needs no passwd entry; nobody is kept for the tools that
# expect it), makes the grader's source (reference solution, graded
# suite, grader.toml) readable by root only, and stores the run's cases (grader.exercise.case_store).
#   setup.sh --dry-run   prints the commands instead of running them.
set -euo pipefail
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; fi
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
run() { if [ "$DRY_RUN" = 1 ]; then echo "+ $*"; else "$@"; fi; }

# A Python >= 3.11 (Gradescope's Ubuntu images may ship an older python3).
PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
        && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        PYTHON="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$PYTHON" ]; then
    run apt-get update
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3.11 python3.11-venv
    PYTHON=/usr/bin/python3.11
fi

# Dependencies at the versions the grader was tested with. The grader itself is not
# pip-installed: it runs from $SOURCE, which only root can read.
run "$PYTHON" -m venv "$VENV"
run "$VENV/bin/python" -m pip install --no-cache-dir --quiet -r "$SOURCE/requirements.txt"
run chmod -R a+rX "$VENV"

# The unprivileged user the sandbox runs student code as.
if ! getent group 65534 >/dev/null; then run groupadd --gid 65534 nogroup; fi
if ! getent passwd 65534 >/dev/null; then
    run useradd --uid 65534 --gid 65534 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nobody
fi

# The source, with the reference solution and the graded suite: root only.
run chown -R root:root "$SOURCE"
run chmod -R go-rwx "$SOURCE"
run chmod 711 "$ROOT"

# The run's cases, drawn once here and stored in the image (grader.exercise.case_store), so that each
# run_autograder reads them back instead of drawing them; where the image cannot grade yet, each
# submission draws them as before.
(cd "$SOURCE" && run "$VENV/bin/python" -m grader.lms.autograder --store-cases) \
    || echo "note: the cases were not stored in the image; each submission draws them"
