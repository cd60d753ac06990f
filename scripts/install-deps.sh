#!/usr/bin/env bash
# Installs vela's build and test dependencies from Debian's packages. Idempotent: packages
# already present are left alone, and apt-get runs only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config   # toolchain
  libgtest-dev libgmock-dev                      # tests
  libsimde-dev                                   # portable AVX-512 intrinsics: kernel tests
  clang libclang-rt-dev                          # libFuzzer targets (fuzz/, scripts/fuzz.sh)
  nlohmann-json3-dev                             # JSON (references, later the HTTP API)
  libpcre2-dev                                   # Unicode regexes for BPE pre-tokenizers
  libboost-dev                                   # Boost.Beast/Asio: the HTTP server
  curl                                           # HTTP integration tests
  prometheus                                     # promtool + a real scrape in the metrics tests
  python3-dev pybind11-dev python3-pybind11      # the Python module (python/)
  python3-pytest python3-tqdm                    # its tests; generate()'s progress bar
  python3-jsonschema                             # independent validator of structured output
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install . (offline)
  openmpi-bin libopenmpi-dev                     # tensor parallelism over MPI (src/dist/)
  iproute2                                       # network namespaces as hosts in its tests
  nginx                                          # replicas behind a load balancer (deploy/nginx/)
  chromium                                       # the chat page's browser test (tests/server/webui)
)
# The openai npm client drives the server in integration tests: Node.js and npm from Debian,
# unless the machine already has them (e.g. a NodeSource build that bundles npm).
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The npm packages of the server's tests, at the versions their package-lock.json pins: the
# official openai client (tests/server/node) and playwright-core, which drives Debian's Chromium
# on the chat page (tests/server/webui; it downloads no browser). Each runs only when its
# node_modules is missing or older than its lock file; without network the step is skipped and
# so are the tests that need it.
repo_dir="$(cd "$(dirname "$0")/.." && pwd)"
for node_test in tests/server/node tests/server/webui; do
  node_dir="$repo_dir/$node_test"
  [ -f "$node_dir/package-lock.json" ] && command -v npm >/dev/null 2>&1 || continue
  if [ ! -f "$node_dir/node_modules/.package-lock.json" ] ||
     [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
    echo "install-deps: npm ci --prefix $node_test"
    npm ci --prefix "$node_dir" --no-audit --no-fund --loglevel=error ||
      echo "install-deps: npm ci failed; the tests that need $node_test will be skipped"
  fi
done
