# Sourced by the setups of agents installed from the npm registry (tests/<setup>/setup.sh):
# the steps every one of them takes, in one place. A setup names its directory and the
# link the tests run, installs its package, and links the executable:
#
#   . "$(dirname "$0")/../support/npm_agent.sh"
#   npm_agent_begin gemini gemini               # tests/.cache/agents/gemini-<VERSION>/gemini
#   npm_agent_install "@google/gemini-cli@$version"
#   npm_agent_link "$dir/node_modules/.bin/gemini"
#
# `npm_agent_begin` prints the link and exits when it is already installed at the pinned
# version (tests/<setup>/VERSION): the setups are idempotent. Whether it is, is the
# function `installed`, `$link --version` saying exactly the version unless the setup
# defines its own before `npm_agent_begin`. Sets `here`, `root`, `version`, `dir`, `link`.

if ! command -v installed >/dev/null 2>&1; then
    installed() {
        [ "$("$link" --version 2>/dev/null)" = "$version" ]
    }
fi

# npm_agent_begin SETUP EXE
npm_agent_begin() {
    here=$(cd "$(dirname "$0")" && pwd)
    root=$(cd "$here/../.." && pwd)
    version=$(tr -d ' \n' < "$here/VERSION")
    dir="$root/tests/.cache/agents/$1-$version"
    link="$dir/$2"
    if [ -x "$link" ] && installed; then
        echo "$link"
        exit 0
    fi
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] ||
        echo "{\"name\":\"ahp-wrap-e2e-$1\",\"private\":true}" > "$dir/package.json"
}

# npm_agent_install PACKAGE@VERSION [npm options...]
npm_agent_install() {
    spec=$1
    shift
    (cd "$dir" && npm install --no-audit --no-fund --no-save --loglevel=error "$@" "$spec" >&2)
}

# npm_agent_first_runnable GLOB...: the first of these executables that is the pinned
# version (a platform package whose build runs here: baseline builds need no AVX2).
npm_agent_first_runnable() {
    for candidate in "$@"; do
        [ -x "$candidate" ] || continue
        if [ "$("$candidate" --version 2>/dev/null)" = "$version" ]; then
            echo "$candidate"
            return 0
        fi
    done
    echo "setup: no runnable executable at version $version among $*" >&2
    return 1
}

# npm_agent_link TARGET: the link to TARGET, named as the framework's executable so that
# ahp-wrap detects it; checked, then printed.
npm_agent_link() {
    if [ -z "$1" ] || [ ! -x "$1" ]; then
        echo "setup: no executable found under $dir/node_modules (${1:-none})" >&2
        exit 1
    fi
    ln -sf "$1" "$link"
    installed || {
        echo "setup: $link is not version $version" >&2
        exit 1
    }
    echo "$link"
}
