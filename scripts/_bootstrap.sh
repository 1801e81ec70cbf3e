#!/usr/bin/env bash
# shellcheck shell=bash
# Shared helpers for scripts/demo and scripts/test. Source it; don't run it
# (running it directly is allowed for debugging: `scripts/_bootstrap.sh find_python`).
#
# Functions:
#   find_python [min_minor]          print the path of a CPython >= 3.<min_minor> (default 12), or exit 2
#   find_python_exact MINOR          print the path of a CPython 3.<MINOR> if one is around, else return 1
#   ensure_venv DIR PYTHON [PIN...]  create/refresh a venv with `-e .[test,docs]` (+ pins), cached by a stamp
#   ensure_postgres                  make sure PostgreSQL answers on 127.0.0.1:5432 (starts local clusters)
#   ensure_mysql_client_lib          make sure mysqlclient can build (MariaDB's C client library and pkg-config;
#                                    installs Debian's libmariadb-dev as root), or return 1
#   mysql_ready                      0 when MariaDB answers on $BACKWAVE_MYSQL_HOST:$BACKWAVE_MYSQL_PORT
#   ensure_pgbouncer                 make sure the pgbouncer binary is on PATH (installs Debian's pgbouncer as
#                                    root), or return 1; the test run starts its own instances
#
# Environment:
#   BACKWAVE_PYTHON          interpreter to use instead of searching (must be CPython >= 3.12)
#   BACKWAVE_FORCE_INSTALL=1 ignore the venv stamp and re-run pip install
#   BACKWAVE_PG_HOST / BACKWAVE_PG_PORT   PostgreSQL address (default 127.0.0.1 / 5432)
#   BACKWAVE_MYSQL_HOST / BACKWAVE_MYSQL_PORT   MariaDB address (default 127.0.0.1 / 3306)
#
# Everything here is written to be safe under `set -euo pipefail`. Diagnostics go to stderr;
# only find_python* write to stdout (the interpreter path), so `py=$(find_python)` works.

# Repository root: this file lives in <root>/scripts/.
BACKWAVE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
export BACKWAVE_ROOT

# The Django 6 pin is shared by scripts/demo and scripts/test so that both hit the same venv stamp.
# shellcheck disable=SC2034  # used by the scripts that source this file
BACKWAVE_DJANGO6_PIN="Django>=6.0,<7"
# shellcheck disable=SC2034
BACKWAVE_DJANGO52_PIN="Django>=5.2,<5.3"
# The extras every venv gets: the test suite's tools and the documentation site's (scripts/test builds it).
BACKWAVE_VENV_EXTRAS="test,docs"
# Where ensure_postgres looks (and where scripts/test points DATABASE_URL); overridable for odd setups.
BACKWAVE_PG_HOST="${BACKWAVE_PG_HOST:-127.0.0.1}"
BACKWAVE_PG_PORT="${BACKWAVE_PG_PORT:-5432}"
BACKWAVE_MYSQL_HOST="${BACKWAVE_MYSQL_HOST:-127.0.0.1}"
BACKWAVE_MYSQL_PORT="${BACKWAVE_MYSQL_PORT:-3306}"

bw_log() { printf 'backwave: %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------
# Python discovery
# ---------------------------------------------------------------------------------------------

# _bw_probe_python CMD MIN_MINOR [EXACT]
# Runs CMD and prints "<X.Y.Z> <sys.executable>". Returns 0 if it is CPython >= 3.MIN_MINOR
# (or exactly 3.MIN_MINOR when EXACT=1), 1 if it runs but doesn't qualify, >1 if it doesn't run.
# Actually running the candidate is the only reliable check: pyenv shims for versions that are not
# active exist on PATH but fail with "pyenv: python3.13: command not found" (exit 127).
_bw_probe_python() {
    local cmd=$1 min=$2 exact=${3:-0} out rc=0
    out=$("$cmd" - "$min" "$exact" 2>/dev/null <<'PY'
import sys
minor, exact = int(sys.argv[1]), sys.argv[2] == "1"
impl = getattr(getattr(sys, "implementation", None), "name", "?")
v = sys.version_info
print("%d.%d.%d %s" % (v[0], v[1], v[2], sys.executable))
if exact:
    ok = v[:2] == (3, minor)
else:
    ok = v[:2] >= (3, minor)
sys.exit(0 if (ok and impl == "cpython" and sys.executable) else 1)
PY
    ) || rc=$?
    # A broken interpreter may print nothing and exit 1; treat "no output" as "does not run".
    if [[ -z $out ]]; then
        return 3
    fi
    printf '%s\n' "$out"
    return "$rc"
}

# _bw_python_candidates MINOR...  -> candidate commands/paths, one per line, in preference order.
# Covers PATH (python3.M), pyenv's installed versions (newest patch first) and /usr/bin.
_bw_python_candidates() {
    local m root d
    for m in "$@"; do
        printf '%s\n' "python3.$m"
    done
    root=""
    if command -v pyenv >/dev/null 2>&1; then
        root=$(pyenv root 2>/dev/null || true)
    fi
    root=${root:-${PYENV_ROOT:-$HOME/.pyenv}}
    if [[ -d $root/versions ]]; then
        for m in "$@"; do
            # `sort -V -r`: newest patch release first; skips nothing, the probe decides.
            while IFS= read -r d; do
                [[ -n $d && -x $d/bin/python ]] && printf '%s\n' "$d/bin/python"
            done < <(compgen -G "$root/versions/3.$m*" | sort -V -r || true)
        done
    fi
    for m in "$@"; do
        printf '%s\n' "/usr/bin/python3.$m"
    done
}

# find_python [min_minor]
# Order: $BACKWAVE_PYTHON; python3.13, python3.12, python3.14 on PATH; pyenv 3.13*, 3.12*, 3.14*;
# /usr/bin/python3.1[2-4]; finally plain python3 if it is new enough.
find_python() {
    local min=${1:-12} cand out rc tried=() seen=" " m minors=()

    if [[ -n ${BACKWAVE_PYTHON:-} ]]; then
        rc=0
        out=$(_bw_probe_python "$BACKWAVE_PYTHON" "$min") || rc=$?
        if [[ $rc -eq 0 ]]; then
            printf '%s\n' "${out#* }"
            return 0
        fi
        # An explicit choice that doesn't work is an error, not a hint: don't silently use another one.
        if [[ $rc -eq 1 ]]; then
            bw_log "BACKWAVE_PYTHON=$BACKWAVE_PYTHON is Python ${out%% *}; Python 3.$min+ (CPython) is required."
        else
            bw_log "BACKWAVE_PYTHON=$BACKWAVE_PYTHON does not run (not found or broken)."
        fi
        bw_log "Unset BACKWAVE_PYTHON to search automatically, or point it at a Python 3.$min+ interpreter."
        exit 2
    fi

    # Preferred minors first (3.13 is the main target, 3.12 the floor, 3.14 accepted), then anything
    # else >= min that a future machine might have.
    for m in 13 12 14 15 16; do
        ((m >= min)) && minors+=("$m")
    done

    while IFS= read -r cand; do
        [[ $seen == *" $cand "* ]] && continue
        seen+="$cand "
        if [[ $cand == */* ]]; then
            [[ -x $cand ]] || continue # absolute path that doesn't exist: not worth listing
        elif ! command -v "$cand" >/dev/null 2>&1; then
            tried+=("$cand (not on PATH)")
            continue
        fi
        rc=0
        out=$(_bw_probe_python "$cand" "$min") || rc=$?
        case $rc in
            0) printf '%s\n' "${out#* }"; return 0 ;;
            1) tried+=("$cand (Python ${out%% *})") ;;
            *) tried+=("$cand (does not run, e.g. a pyenv shim for a version that is not active)") ;;
        esac
    done < <(_bw_python_candidates "${minors[@]}"; printf '%s\n' python3)

    {
        echo "backwave: Python 3.$min or newer (CPython) is required, but none was found."
        echo "backwave: tried, in order:"
        printf 'backwave:   - %s\n' "${tried[@]}"
        echo "backwave:   - pyenv's versions/3.1x* and /usr/bin/python3.1x (none usable)"
        echo "backwave: fix it with one of:"
        echo "backwave:   - apt-get install python3.12 python3.12-venv   (Debian/Ubuntu with a 3.12 package)"
        echo "backwave:   - pyenv install 3.13                          (then re-run; pyenv's versions are searched)"
        echo "backwave:   - BACKWAVE_PYTHON=/path/to/python3.12 $0 ...  (use a specific interpreter)"
    } >&2
    exit 2
}

# find_python_exact MINOR: a CPython 3.MINOR from PATH / pyenv / /usr/bin, or return 1 (quietly).
# Used to run the Django 5.2 compatibility pass on the oldest supported Python.
find_python_exact() {
    local minor=$1 cand out
    while IFS= read -r cand; do
        if [[ $cand != */* ]] && ! command -v "$cand" >/dev/null 2>&1; then
            continue
        fi
        if out=$(_bw_probe_python "$cand" "$minor" 1); then
            printf '%s\n' "${out#* }"
            return 0
        fi
    done < <(_bw_python_candidates "$minor")
    return 1
}

# ---------------------------------------------------------------------------------------------
# Virtualenvs
# ---------------------------------------------------------------------------------------------

# ensure_venv DIR PYTHON [PIN...]
# Makes DIR a venv of PYTHON with `pip install -e "<root>[test,docs]" PIN...`. A stamp file in the venv
# holds a hash of pyproject.toml, the extras, the pins, the Python version and the package's directory layout;
# when it matches, pip is skipped, so repeated runs cost a second. The install is editable, so code
# edits need no reinstall.
ensure_venv() (
    # A subshell function: `exit` leaves only the function, and the lock fd closes with it.
    set -euo pipefail
    dir=$1 py=$2
    shift 2
    pins=("$@")
    [[ $dir == /* ]] || dir="$BACKWAVE_ROOT/$dir"
    stamp="$dir/.backwave-install-stamp"
    vpy="$dir/bin/python"

    py_ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') || {
        bw_log "ensure_venv: $py does not run"
        exit 1
    }

    # Serialise concurrent runs (e.g. scripts/demo and scripts/test started together) on one venv.
    # The lock lives outside the venv, because the venv may be deleted and re-created under it.
    if command -v flock >/dev/null 2>&1; then
        lock_file="${TMPDIR:-/tmp}/backwave-venv-$(printf '%s' "$dir" | cksum | cut -d' ' -f1).lock"
        exec 9>"$lock_file"
        flock -w 900 9 || {
            bw_log "ensure_venv: timed out waiting for another install into $dir (lock $lock_file)"
            exit 1
        }
    fi

    # Re-create the venv when its interpreter is missing/broken or is a different X.Y than requested.
    if [[ -e $dir ]]; then
        venv_ver=$("$vpy" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true)
        if [[ -z $venv_ver || ${venv_ver%.*} != "${py_ver%.*}" ]]; then
            if [[ ! -f $dir/pyvenv.cfg && -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
                bw_log "ensure_venv: $dir exists but is not a virtualenv; refusing to delete it. Move it away."
                exit 1
            fi
            if [[ -z $venv_ver ]]; then
                bw_log "re-creating $dir (its python is missing or broken)"
            else
                bw_log "re-creating $dir (it has Python $venv_ver, wanted ${py_ver%.*})"
            fi
            rm -rf "$dir"
        fi
    fi
    if [[ ! -e $dir ]]; then
        bw_log "creating $dir with Python $py_ver ($py)"
        "$py" -m venv "$dir" || {
            bw_log "ensure_venv: '$py -m venv' failed (on Debian/Ubuntu: install the pythonX.Y-venv package)."
            rm -rf "$dir"
            exit 1
        }
    fi

    # mysqlclient (in the test extra) compiles against MariaDB's C client library. Without it, install the
    # extras' other requirements, so that everything but the MariaDB pass still runs.
    mode="extras=[$BACKWAVE_VENV_EXTRAS]"
    _bw_mysql_client_lib || mode="extras=[$BACKWAVE_VENV_EXTRAS] without mysqlclient"
    want=$(
        {
            printf 'python=%s\n%s\n' "$py_ver" "$mode"
            printf 'pin=%s\n' "${pins[@]}"
            cat "$BACKWAVE_ROOT/pyproject.toml"
            # setuptools' editable finder freezes the package layout at install time (a directory
            # without __init__.py is recorded as a namespace package), so a changed layout must
            # trigger a reinstall too. List each package directory and whether it has __init__.py.
            find "$BACKWAVE_ROOT"/backwave_django* -type d -name __pycache__ -prune -o -type d \
                -exec sh -c 'for d; do [ -f "$d/__init__.py" ] && echo "$d +" || echo "$d -"; done' sh {} + \
                2>/dev/null | LC_ALL=C sort || true
        } | cksum | cut -d' ' -f1
    )
    have=""
    [[ -f $stamp ]] && have=$(<"$stamp")
    if [[ $want == "$have" && ${BACKWAVE_FORCE_INSTALL:-0} != 1 ]]; then
        exit 0
    fi

    targets=("${BACKWAVE_ROOT}[$BACKWAVE_VENV_EXTRAS]")
    if [[ $mode != "extras=[$BACKWAVE_VENV_EXTRAS]" ]]; then
        bw_log "WARNING: no MariaDB client library (pkg-config libmariadb): installing the extras WITHOUT"
        bw_log "WARNING: mysqlclient, so nothing can run on MariaDB (scripts/test installs libmariadb-dev as root)."
        mapfile -t targets < <("$py" - "$BACKWAVE_ROOT/pyproject.toml" "$BACKWAVE_VENV_EXTRAS" <<'PY'
import sys, tomllib
extras = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]
print(sys.argv[1].rsplit("/", 1)[0])  # the package itself (editable), then the extras without mysqlclient
wanted = [r for name in sys.argv[2].split(",") for r in extras[name]]
print(*(r for r in wanted if not r.lower().startswith("mysqlclient")), sep="\n")
PY
        )
    fi
    bw_log "installing backwave-django[$BACKWAVE_VENV_EXTRAS] ${pins[*]} into $dir (takes a minute the first time)"
    rm -f "$stamp" # a half-finished install must not look current
    if ! "$vpy" -m pip install -q --disable-pip-version-check --upgrade pip \
        || ! "$vpy" -m pip install -q --disable-pip-version-check -e "${targets[@]}" "${pins[@]}"; then
        bw_log "ensure_venv: pip install into $dir failed (see the output above)."
        exit 1
    fi
    printf '%s\n' "$want" >"$stamp"
)

# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------

# _bw_pg_ready: 0 when the server at 127.0.0.1:5432 accepts connections.
_bw_pg_ready() {
    local h=$BACKWAVE_PG_HOST p=$BACKWAVE_PG_PORT
    if command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -h "$h" -p "$p" -t 3
    elif command -v psql >/dev/null 2>&1; then
        psql -h "$h" -p "$p" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1
    else
        # No client tools: settle for "something listens on the port" via bash's /dev/tcp.
        (exec 3<>"/dev/tcp/$h/$p") 2>/dev/null
    fi
}

# ensure_postgres: return 0 once PostgreSQL answers on 127.0.0.1:5432. Starts stopped local
# Debian-style clusters (pg_lsclusters / pg_ctlcluster). Returns 1 with a message otherwise.
ensure_postgres() {
    local ver name port status rest i started=0
    _bw_pg_ready && return 0

    if ! command -v pg_lsclusters >/dev/null 2>&1; then
        {
            echo "backwave: PostgreSQL is not reachable at $BACKWAVE_PG_HOST:$BACKWAVE_PG_PORT, and no local"
            echo "backwave: installation was found (no pg_lsclusters). Install it (apt-get install postgresql)"
            echo "backwave: or start a server there that accepts user 'postgres' without a password."
        } >&2
        return 1
    fi

    # --skip-systemctl-redirect: start the cluster directly; there is no systemd in containers.
    while read -r ver name port status rest; do
        [[ -z ${ver:-} || $status == online* ]] && continue
        bw_log "starting PostgreSQL cluster $ver/$name (port $port)"
        if pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start; then
            started=1
        else
            bw_log "could not start cluster $ver/$name (are you root or the postgres user?)"
        fi
    done < <(pg_lsclusters --no-header 2>/dev/null || true)

    if ((started == 0)); then
        bw_log "PostgreSQL is not reachable at $BACKWAVE_PG_HOST:$BACKWAVE_PG_PORT and no cluster could be started."
        bw_log "clusters: $(pg_lsclusters --no-header 2>/dev/null | tr '\n' ';' || true)"
        return 1
    fi

    for ((i = 0; i < 30; i++)); do
        _bw_pg_ready && return 0
        sleep 1
    done
    bw_log "PostgreSQL did not become ready on $BACKWAVE_PG_HOST:$BACKWAVE_PG_PORT within 30 s."
    return 1
}

# ---------------------------------------------------------------------------------------------
# MariaDB
# ---------------------------------------------------------------------------------------------

# _bw_mysql_client_lib: 0 when mysqlclient can find MariaDB's (or MySQL's) C client library.
_bw_mysql_client_lib() {
    command -v pkg-config >/dev/null 2>&1 \
        && { pkg-config --exists libmariadb || pkg-config --exists mysqlclient || pkg-config --exists mariadb; }
}

# ensure_mysql_client_lib: make sure mysqlclient can be built: Debian's libmariadb-dev and pkg-config,
# installed non-interactively when we are root with apt-get. Returns 1 (with a message) when they cannot be.
ensure_mysql_client_lib() {
    _bw_mysql_client_lib && return 0
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        bw_log "no MariaDB client library, and no root apt-get to install libmariadb-dev and pkg-config."
        return 1
    fi
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q libmariadb-dev pkg-config)
    if ! { "${apt[@]}" || { apt-get update -q && "${apt[@]}"; }; }; then
        bw_log "apt-get could not install libmariadb-dev and pkg-config."
        return 1
    fi
    _bw_mysql_client_lib
}

# mysql_ready: 0 when a MariaDB server answers on $BACKWAVE_MYSQL_HOST:$BACKWAVE_MYSQL_PORT (user root).
mysql_ready() {
    local h=$BACKWAVE_MYSQL_HOST p=$BACKWAVE_MYSQL_PORT admin
    admin=$(command -v mariadb-admin || command -v mysqladmin || true)
    if [[ -n $admin ]]; then
        "$admin" --protocol=tcp -h "$h" -P "$p" -u root --connect-timeout=3 ping >/dev/null 2>&1
    else
        (exec 3<>"/dev/tcp/$h/$p") 2>/dev/null
    fi
}

# ---------------------------------------------------------------------------------------------
# PgBouncer
# ---------------------------------------------------------------------------------------------

# ensure_pgbouncer: 0 once `pgbouncer` is on PATH, installing Debian's package as root when it is missing
# (the package's own service is never started: tests/pgbouncer starts instances of its own). Returns 1 with a
# message when it cannot be installed.
ensure_pgbouncer() {
    command -v pgbouncer >/dev/null 2>&1 && return 0
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        bw_log "no pgbouncer, and no root apt-get to install it."
        return 1
    fi
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends pgbouncer)
    if ! { "${apt[@]}" || { apt-get update -q && "${apt[@]}"; }; }; then
        bw_log "apt-get could not install pgbouncer."
        return 1
    fi
    command -v pgbouncer >/dev/null 2>&1
}

# Debug entry point: `bash scripts/_bootstrap.sh find_python` etc.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    "$@"
fi
