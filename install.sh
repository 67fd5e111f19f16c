#!/bin/sh
# Termada installer (POSIX sh; docs/INSTALL.md):
#
#   curl -fsSL https://github.com/termada/termada/releases/latest/download/install.sh | sh
#
# Picks the release asset for this OS/CPU, downloads it with SHA256SUMS (and SHA256SUMS.sig when
# published) over HTTPS, checks the SHA-256 and the Ed25519 signature against the release key
# pinned below, takes only the `termada` member out of the archive, checks that it runs, and
# moves it into ${TERMADA_BIN_DIR:-$HOME/.local/bin} in one rename. Any failure exits non-zero
# with one line on stderr and leaves no partial binary behind.
#
# Environment (operator knobs):
#   TERMADA_VERSION            a version to install (default: the latest release)
#   TERMADA_BIN_DIR            where `termada` goes (default: $HOME/.local/bin)
#   TERMADA_RELEASE_URL        release base (default: https://github.com/termada/termada/releases)
#   TERMADA_CA_FILE            a PEM CA bundle to trust as well (private mirrors, tests)
#   TERMADA_RELEASE_PUBKEY     replaces the pinned release key (base64 raw Ed25519 or SPKI PEM)
#   TERMADA_REQUIRE_SIGNATURE  1: refuse a release without a signature we can check
#   TERMADA_FROM_SOURCE        1: from a checkout, install a launcher that runs it with Deno
set -eu

# The release signing key's public half (raw Ed25519, base64). Same value as RELEASE_PUBKEY in
# src/update/verify.ts (a test keeps them equal).
PINNED_PUBKEY='VCEA82QpRpMHbJGFdG2oticZpDiin5h423yIfEll3Fo='
DENO_VERSION='2.9.6'
MAX_ASSET=209715200
MAX_SUMS=65536
MAX_SIG=1024
MAX_LATEST=4096

say() { printf 'termada-install: %s\n' "$*" >&2; }
die() {
  printf 'termada-install: error: %s\n' "$*" >&2
  exit 1
}

tmp=''
staged=''
cleanup() {
  if [ -n "$staged" ]; then rm -f "$staged"; fi
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

bin_dir=${TERMADA_BIN_DIR:-${HOME:?HOME is not set}/.local/bin}
require_sig=${TERMADA_REQUIRE_SIGNATURE:-0}

# Moves file $1 to $bin_dir/termada in one rename (a copy in the same directory first).
install_file() {
  mkdir -p "$bin_dir" || die "cannot create $bin_dir"
  staged="$bin_dir/.termada.new.$$"
  cp "$1" "$staged" || die "cannot write to $bin_dir"
  chmod 0755 "$staged"
  mv -f "$staged" "$bin_dir/termada" || die "cannot move termada into $bin_dir"
  staged=''
}

path_hint() {
  case ":${PATH:-}:" in
    *":$bin_dir:"*) ;;
    *)
      echo "$bin_dir is not on PATH; add it (e.g. in ~/.profile):"
      echo "  export PATH=\"$bin_dir:\$PATH\""
      ;;
  esac
}

# --- from a checkout ----------------------------------------------------------------------
if [ "${TERMADA_FROM_SOURCE:-0}" = 1 ]; then
  repo=$(cd "$(dirname "$0")" && pwd)
  if [ ! -f "$repo/mod.ts" ] || [ ! -f "$repo/deno.json" ]; then
    die "TERMADA_FROM_SOURCE=1 needs install.sh run from a Termada checkout (sh ./install.sh)"
  fi
  case $repo in *"'"*) die "the checkout path must not contain a single quote: $repo" ;; esac
  # The same Deno the dev tools use (scripts/dev_tools.ts): npm's deno package in .tools/.
  deno="$repo/.tools/node_modules/.bin/deno"
  have=''
  if [ -x "$deno" ]; then have=$("$deno" --version 2>/dev/null | sed -n '1s/^deno \([^ ]*\).*/\1/p'); fi
  if [ "$have" != "$DENO_VERSION" ]; then
    command -v npm >/dev/null 2>&1 || die "npm is needed to fetch Deno $DENO_VERSION (or install Node.js)"
    say "installing deno@$DENO_VERSION into $repo/.tools (npm)"
    npm install --prefix "$repo/.tools" --no-audit --no-fund --loglevel=error "deno@$DENO_VERSION" >&2 ||
      die "npm install deno@$DENO_VERSION failed"
    [ -x "$deno" ] || die "npm installed no deno binary at $deno"
  fi
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/termada-install.XXXXXX") || die "cannot create a temp dir"
  cat >"$tmp/termada" <<EOF
#!/bin/sh
# termada from the checkout $repo (install.sh, TERMADA_FROM_SOURCE=1); update it with git pull.
exec '$deno' run -P=daemon --no-prompt --quiet --config '$repo/deno.json' '$repo/mod.ts' "\$@"
EOF
  install_file "$tmp/termada"
  echo "Installed $bin_dir/termada (runs $repo with Deno $DENO_VERSION)"
  path_hint
  exit 0
fi

# --- a release binary ---------------------------------------------------------------------
base=${TERMADA_RELEASE_URL:-https://github.com/termada/termada/releases}
base=${base%/}
case $base in https://*) ;; *) die "the release URL must be HTTPS: $base" ;; esac
ca=${TERMADA_CA_FILE:-}
if [ -n "$ca" ] && [ ! -r "$ca" ]; then die "cannot read the CA file $ca (TERMADA_CA_FILE)"; fi

os=$(uname -s)
arch=$(uname -m)
case $os in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) die "unsupported OS \"$os\": releases exist for Linux and macOS (Windows: see docs/INSTALL.md)" ;;
esac
case $arch in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "unsupported CPU \"$arch\": releases exist for x86_64 and arm64" ;;
esac
# An x64 shell under Rosetta on Apple silicon: the native binary is the right one.
if [ "$os-$arch" = darwin-x64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
  arch=arm64
fi
target="$os-$arch"

if command -v curl >/dev/null 2>&1; then
  downloader=curl
elif command -v wget >/dev/null 2>&1; then
  downloader=wget
else
  die "neither curl nor wget is installed: install one of them"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/termada-install.XXXXXX") || die "cannot create a temp dir"

# fetch URL FILE MAX [optional]: 0 when FILE holds the whole body, 1 for an optional file the
# server does not have (404); anything else ends the script.
fetch() {
  url=$1 out=$2 max=$3 opt=${4:-}
  if [ "$downloader" = curl ]; then
    set -- --proto '=https' --proto-redir '=https' --tlsv1.2 -sS -L --max-filesize "$max" \
      --connect-timeout 30 --max-time 600 -o "$out" -w '%{http_code}'
    if [ -n "$ca" ]; then set -- "$@" --cacert "$ca"; fi
    rc=0
    status=$(curl "$@" "$url" 2>"$tmp/dl.log") || rc=$?
    if [ "$rc" -ne 0 ]; then
      case $rc in
        18 | 56 | 92) die "the download of $url was cut short (curl exit $rc)" ;;
        63) die "$url is larger than $max bytes" ;;
        *) die "cannot download $url (curl exit $rc: $(head -n 1 "$tmp/dl.log"))" ;;
      esac
    fi
  else
    set -- -q --https-only --tries=1 --timeout=60 --server-response -O "$out"
    if [ -n "$ca" ]; then set -- "$@" --ca-certificate="$ca"; fi
    rc=0
    wget "$@" "$url" 2>"$tmp/dl.log" || rc=$?
    status=$(sed -n 's/^ *HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' "$tmp/dl.log" | tail -n 1)
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 8 ]; then
      die "cannot download $url, or it was cut short (wget exit $rc)"
    fi
  fi
  if [ "$status" = 404 ] && [ "$opt" = optional ]; then
    rm -f "$out"
    return 1
  fi
  [ "$status" = 200 ] || die "cannot download $url (HTTP $status)"
  size=$(wc -c <"$out" | tr -d ' ')
  [ "$size" -le "$max" ] || die "$url is larger than $max bytes"
  return 0
}

valid_version() {
  printf '%s\n' "$1" | grep -Eq '^[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}(-[0-9A-Za-z.-]{1,64})?$'
}

version=${TERMADA_VERSION:-}
version=${version#v}
if [ -z "$version" ]; then
  fetch "$base/latest/download/latest.json" "$tmp/latest.json" "$MAX_LATEST"
  version=$(sed -n 's/.*"version"[[:space:]]*:[[:space:]]*"v\{0,1\}\([^"]*\)".*/\1/p' "$tmp/latest.json" | head -n 1)
  valid_version "$version" || die "$base/latest/download/latest.json names no version"
else
  valid_version "$version" || die "TERMADA_VERSION=\"$version\" is not a version (1.2.3)"
fi

asset="termada-$version-$target.tar.gz"
from="$base/download/v$version"
say "installing termada $version ($target) from $from"
fetch "$from/SHA256SUMS" "$tmp/SHA256SUMS" "$MAX_SUMS"
has_sig=1
fetch "$from/SHA256SUMS.sig" "$tmp/SHA256SUMS.sig" "$MAX_SIG" optional || has_sig=0
fetch "$from/$asset" "$tmp/$asset" "$MAX_ASSET"

# The signature covers SHA256SUMS; SHA256SUMS covers the asset.
if [ "$has_sig" = 1 ]; then
  if command -v openssl >/dev/null 2>&1 && openssl pkeyutl -help 2>&1 | grep -q rawin; then
    key=${TERMADA_RELEASE_PUBKEY:-$PINNED_PUBKEY}
    case $key in
      *"BEGIN PUBLIC KEY"*) printf '%s\n' "$key" >"$tmp/release.pub" ;;
      *)
        # SPKI DER = a 12-byte Ed25519 prefix + the raw key; 12 bytes are whole base64 groups.
        printf '%s\n' "$key" | grep -Eq '^[A-Za-z0-9+/]{43}=$' ||
          die "TERMADA_RELEASE_PUBKEY is not an Ed25519 key (base64 of 32 bytes, or SPKI PEM)"
        printf '%s\n' '-----BEGIN PUBLIC KEY-----' "MCowBQYDK2VwAyEA$key" \
          '-----END PUBLIC KEY-----' >"$tmp/release.pub"
        ;;
    esac
    openssl pkeyutl -verify -pubin -inkey "$tmp/release.pub" -rawin -in "$tmp/SHA256SUMS" \
      -sigfile "$tmp/SHA256SUMS.sig" >/dev/null 2>&1 ||
      die "bad signature: SHA256SUMS.sig of v$version does not verify with the release key"
    sig_note="signature verified"
  elif [ "$require_sig" = 1 ]; then
    die "cannot check SHA256SUMS.sig (needs openssl 3 with pkeyutl -rawin) and a signature is required"
  else
    say "warning: cannot check SHA256SUMS.sig (needs openssl 3); verifying by SHA-256 only"
    sig_note="signature not checked"
  fi
elif [ "$require_sig" = 1 ]; then
  die "release v$version publishes no SHA256SUMS.sig and a signature is required"
else
  say "note: release v$version publishes no SHA256SUMS.sig; verifying by SHA-256 only"
  sig_note="unsigned release"
fi

want=$(awk -v n="$asset" '$2 == n || $2 == ("*" n) { print $1; c++ } END { if (c != 1) exit 1 }' \
  "$tmp/SHA256SUMS") || die "SHA256SUMS does not list $asset exactly once"
want=$(printf '%s' "$want" | tr 'A-F' 'a-f')
if command -v sha256sum >/dev/null 2>&1; then
  got=$(sha256sum "$tmp/$asset" | cut -d ' ' -f 1)
elif command -v shasum >/dev/null 2>&1; then
  got=$(shasum -a 256 "$tmp/$asset" | cut -d ' ' -f 1)
else
  die "neither sha256sum nor shasum is installed: cannot verify the download"
fi
[ "$got" = "$want" ] || die "checksum mismatch: $asset has SHA-256 $got, SHA256SUMS says $want"

# A release archive holds exactly one member, the regular file `termada`.
members=$(tar -tzf "$tmp/$asset" 2>/dev/null) || die "$asset is not a valid .tar.gz"
[ "$members" = termada ] || die "$asset must hold exactly one file named termada; refusing it"
mkdir "$tmp/x"
tar -xzof "$tmp/$asset" -C "$tmp/x" termada 2>/dev/null || die "cannot extract termada from $asset"
if [ -L "$tmp/x/termada" ] || [ ! -f "$tmp/x/termada" ]; then
  die "termada in $asset is not a regular file; refusing it"
fi
chmod 0755 "$tmp/x/termada"
ran=$("$tmp/x/termada" version 2>/dev/null | head -n 1) || true
case $ran in
  "termada $version" | "termada v$version" | "termada $version "* | "termada v$version "*) ;;
  *) die "the downloaded binary does not run here or is not v$version (it printed \"$ran\")" ;;
esac

install_file "$tmp/x/termada"
echo "Installed termada $version to $bin_dir/termada (SHA-256 verified, $sig_note)"
path_hint
