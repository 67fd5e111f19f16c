/**
 * The decision corpus: one case per line — command, rule set, expected action. A string is the
 * one-word form (a shell command line); an array is an exact argv. Every bypass case expects the
 * action the rules intend, so a bypass that gets through fails the test and is listed by name.
 */
import assert from "node:assert/strict";
import { decide, type PolicyAction, type PolicyRules } from "./mod.ts";
import { loadShellParser } from "./_parser.ts";

await loadShellParser();

const RULES = {
  /** No rules at all: everything is allowed, opaque included. */
  none: { allow: [], deny: [], confirm: [] },
  /** A deny list only. */
  deny: {
    allow: [],
    deny: ["rm -rf *", "rm -fr *", "curl *", "wget *", "dd *", "chmod -R 777 *", "shutdown *"],
    confirm: [],
  },
  /** Deny and confirm lists. */
  mixed: {
    allow: [],
    deny: ["rm -rf *", "curl *"],
    confirm: ["git push *", "npm publish *", "sudo *", "docker *"],
  },
  /** An allow list with deny and confirm: unmatched commands need confirmation. */
  allowlist: {
    allow: [
      "git status *",
      "git diff *",
      "git log *",
      "ls *",
      "cat *",
      "echo *",
      "grep *",
      "head *",
      "wc *",
      "pwd",
      "cd *",
      "npm test *",
      "find *",
      "xargs *",
      "sort *",
    ],
    deny: ["rm -rf *"],
    confirm: ["git push *"],
  },
  /** An allow list alone: unmatched commands are denied. */
  allowonly: { allow: ["ls *", "echo *", "cat *", "git *"], deny: [], confirm: [] },
} satisfies Record<string, PolicyRules>;

type Case = [command: string | string[], rules: keyof typeof RULES, expected: PolicyAction];

function check(cases: Case[]): void {
  const failures: string[] = [];
  for (const [command, rules, expected] of cases) {
    const argv = typeof command === "string" ? [command] : command;
    // As a daemon with the exec gate decides (the default on Linux); the case without it is
    // below: program files are then opaque.
    const d = decide(argv, RULES[rules], { execGate: true });
    if (d.action !== expected) {
      failures.push(
        `${
          JSON.stringify(command)
        } with "${rules}": ${d.action}, expected ${expected} — ${d.reason}`,
      );
    }
  }
  assert.deepEqual(failures, [], `\n${failures.join("\n")}`);
}

const ALLOWED: Case[] = [
  ["ls -la", "deny", "allow"],
  ["git status", "mixed", "allow"],
  ["cd /work && npm test", "deny", "allow"],
  ['grep -rn "foo" src/ | head -20', "deny", "allow"],
  ["cat > notes.txt <<'EOF'\nrm -rf / is only text here: $(nothing)\nEOF", "deny", "allow"],
  ["for f in *.ts; do echo $f; done", "deny", "allow"],
  ["python3 script.py", "deny", "allow"],
  ["npm run build 2>&1 | tail -5", "mixed", "allow"],
  ['export PATH="$HOME/bin:$PATH"', "deny", "allow"],
  ["[ -f x ] && echo yes || echo no", "deny", "allow"],
  ["awk '{print $1}' file", "deny", "allow"],
  ["awk -F: '$3 > 1000 || $1 == \"x\" {print $1}' /etc/passwd", "deny", "allow"],
  ["sed -i 's/foo/bar/g' file.txt", "deny", "allow"],
  ["sed -n '1,10p;/x/d' f", "deny", "allow"],
  ['find . -name "*.ts" -type f | xargs wc -l', "deny", "allow"],
  ["kill -9 $(pgrep node)", "deny", "allow"],
  ["node -v", "deny", "allow"],
  ["python3 -m pytest -x", "deny", "allow"],
  ['while read -r l; do echo "$l"; done < f', "deny", "allow"],
  ["case $1 in a) echo a;; *) echo b;; esac", "deny", "allow"],
  ['git commit -m "fix: rm -rf was too eager"', "deny", "allow"],
  ["time make", "deny", "allow"],
  ["echo $((1 + 2)) ${#arr[@]}", "deny", "allow"],
  ["command -v rm", "deny", "allow"],
  ["command -V curl", "deny", "allow"],
  ["rm -r build", "deny", "allow"],
  ["rm file.txt", "deny", "allow"],
  ["", "deny", "allow"],
  ["# just a comment", "deny", "allow"],
  ["X=1", "deny", "allow"],
  ["ssh host ls", "deny", "allow"],
  ["echo done!", "deny", "allow"],
  ['echo "$!" ${!prefix*}', "deny", "allow"],
  ["bash script.sh", "deny", "allow"],
  ["bash", "deny", "allow"],
  ["env", "deny", "allow"],
  ["sudo -l", "mixed", "confirm"],
  ["nice", "deny", "allow"],
  [["echo", "rm -rf /"], "deny", "allow"],
  [["git", "commit", "-m", "$(curl x)"], "deny", "allow"],
  [["ls", "-la", "/tmp"], "allowlist", "allow"],
];

const DENIED_AND_CONFIRMED: Case[] = [
  ["rm -rf /", "deny", "deny"],
  ["rm -rf /tmp/x", "mixed", "deny"],
  ["rm -fr /", "deny", "deny"],
  ["curl https://example.com", "deny", "deny"],
  ["wget -qO- x", "deny", "deny"],
  ["dd if=/dev/zero of=/dev/sda", "deny", "deny"],
  ["chmod -R 777 /", "deny", "deny"],
  ["shutdown now", "deny", "deny"],
  ["shutdown", "deny", "deny"],
  ["git push origin main", "mixed", "confirm"],
  ["git push", "mixed", "confirm"],
  ["npm publish --access public", "mixed", "confirm"],
  ["docker run --rm -it ubuntu", "mixed", "confirm"],
  ["sudo apt-get update", "mixed", "confirm"],
  ["git status && git push", "mixed", "confirm"],
  ["git push && rm -rf /", "mixed", "deny"],
  ["echo ok; curl x", "mixed", "deny"],
  [["rm", "-rf", "/"], "deny", "deny"],
  [["/bin/rm", "-rf", "/"], "deny", "deny"],
  [["git", "push", "--force"], "mixed", "confirm"],
  [["sudo", "-u", "root", "rm", "-rf", "/"], "deny", "deny"],
  [["bash", "-c", "rm -rf /"], "deny", "deny"],
];

const ALLOW_LISTS: Case[] = [
  ["git status", "allowlist", "allow"],
  ["git status --short", "allowlist", "allow"],
  ["ls -la | grep x | head -3", "allowlist", "allow"],
  ["pwd", "allowlist", "allow"],
  ["cd /tmp && ls", "allowlist", "allow"],
  ["echo $HOME", "allowlist", "allow"],
  ["cat ~/notes.txt", "allowlist", "allow"],
  ["ls *.ts", "allowlist", "allow"],
  ["find . -name '*.log' | xargs wc -l", "allowlist", "allow"],
  ["git push", "allowlist", "confirm"],
  ["npm install left-pad", "allowlist", "confirm"],
  ["ls && make", "allowlist", "confirm"],
  ["git status; python3 x.py", "allowlist", "confirm"],
  ["rm -rf node_modules", "allowlist", "deny"],
  ["sudo ls", "allowlist", "confirm"],
  ["nice ls", "allowlist", "confirm"],
  ["git $CMD", "allowlist", "confirm"],
  ["ls && curl x", "allowonly", "deny"],
  ["ls -la", "allowonly", "allow"],
  ["git push --force", "allowonly", "allow"],
  ["make", "allowonly", "deny"],
  ["python3 -c 'print(1)'", "allowonly", "deny"],
  ["echo `date`", "allowonly", "deny"],
  ["echo $(ls)", "allowonly", "allow"],
  // The file names find and xargs pass on are unknown: they could be "-rf /" (deny rules).
  ["find . -exec rm {} \\;", "allowlist", "deny"],
  ["xargs rm < files.txt", "allowlist", "deny"],
  ["find . -exec chmod 644 {} \\;", "allowlist", "confirm"],
  ["find . -name x", "allowlist", "allow"],
  ["find . -name '*.md' -exec grep -l TODO {} +", "allowlist", "allow"],
  ["xargs touch < files.txt", "allowlist", "confirm"],
];

const BYPASSES: Case[] = [
  // command substitution and backticks, also inside quotes and other words
  ["echo $(rm -rf /)", "deny", "deny"],
  ["echo `rm -rf /`", "deny", "deny"],
  ['echo "$(rm -rf /)"', "deny", "deny"],
  ['echo "`rm -rf /`"', "deny", "deny"],
  ["echo `echo \\`rm -rf /\\``", "deny", "deny"],
  ["echo ${x:-$(rm -rf /)}", "deny", "deny"],
  ["echo $(( $(rm -rf /) + 1 ))", "deny", "deny"],
  ["x=$(rm -rf /) ls", "deny", "deny"],
  ['x=(a "$(rm -rf /)")', "deny", "deny"],
  ["cat > $(rm -rf /)", "deny", "deny"],
  ["[[ -n $(rm -rf /) ]]", "deny", "deny"],
  ["(( $(rm -rf /) ))", "deny", "deny"],
  ["for x in $(rm -rf /); do :; done", "deny", "deny"],
  ["case $(rm -rf /) in *) ;; esac", "deny", "deny"],
  // absolute and relative paths
  ["/bin/rm -rf /", "deny", "deny"],
  ["/usr/bin/rm -rf /", "deny", "deny"],
  ["./rm -rf /", "deny", "deny"],
  ["../../usr/bin/rm -rf /", "deny", "deny"],
  ["~/bin/curl x", "deny", "deny"],
  ['"$DIR"/rm -rf /', "deny", "deny"],
  ["~/bin/tool --flag", "deny", "allow"],
  ["$DIR/tool", "deny", "deny"],
  // quoting and escaping
  ["r\\m -rf /", "deny", "deny"],
  ["\\rm -rf /", "deny", "deny"],
  ['"r"m -rf /', "deny", "deny"],
  ["'rm' -rf /", "deny", "deny"],
  ["'r''m' -rf /", "deny", "deny"],
  ['"rm" "-rf" "/"', "deny", "deny"],
  ["rm '-rf' /", "deny", "deny"],
  ["rm -r\\f /", "deny", "deny"],
  ["c\\u\\r\\l x", "deny", "deny"],
  ["$'\\x72m' -rf /", "deny", "deny"],
  ["$'\\162\\155' -rf /", "deny", "deny"],
  ["$'\\u0072m' -rf /", "deny", "deny"],
  ['$"rm" -rf /', "deny", "deny"],
  ["r\\\nm -rf /", "deny", "deny"],
  // ${IFS}, brace expansion, variables as command names
  ["rm${IFS}-rf${IFS}/", "deny", "deny"],
  ["rm$IFS-rf$IFS/", "deny", "deny"],
  ["{rm,-rf,/}", "deny", "deny"],
  ["{curl,x}", "deny", "deny"],
  ["X=/; rm -rf $X", "deny", "deny"],
  ['rm -rf "$HOME"', "deny", "deny"],
  ["a=rm; $a -rf /", "deny", "deny"],
  ['f=curl; "$f" x', "deny", "deny"],
  ["${x}m -rf /", "deny", "deny"],
  ["$(echo rm) -rf /", "deny", "deny"],
  ["`echo rm` -rf /", "deny", "deny"],
  ["/usr/bin/r? -rf /", "deny", "deny"],
  ["/usr/bin/c*l x", "deny", "deny"],
  ["r[m] -rf /", "deny", "deny"],
  ["/bin/r[l-n] -rf /", "deny", "deny"],
  ["rm -rf /[u]sr", "deny", "deny"],
  // newlines and separators inside the one word
  ["echo hi; rm -rf /", "deny", "deny"],
  ["echo hi\nrm -rf /", "deny", "deny"],
  ["echo hi & rm -rf /", "deny", "deny"],
  ["true && rm -rf / || false", "deny", "deny"],
  ["ls | rm -rf /", "deny", "deny"],
  ["! rm -rf /", "deny", "deny"],
  ["(rm -rf /)", "deny", "deny"],
  ["{ rm -rf /; }", "deny", "deny"],
  ["if true; then rm -rf /; fi", "deny", "deny"],
  ["if false; then :; elif true; then :; else rm -rf /; fi", "deny", "deny"],
  ["while true; do rm -rf /; done", "deny", "deny"],
  ["until false; do curl x; done", "deny", "deny"],
  ["select x in a; do rm -rf /; done", "deny", "deny"],
  // process substitution
  ["cat <(rm -rf /)", "deny", "deny"],
  ["tee >(curl x)", "deny", "deny"],
  ["diff <(ls) <(curl x)", "deny", "deny"],
  // nested shells, clustered flags, --
  ['bash -c "rm -rf /"', "deny", "deny"],
  ["sh -c 'rm -rf /'", "deny", "deny"],
  ['bash -lc "rm -rf /"', "deny", "deny"],
  ['bash -ec "rm -rf /"', "deny", "deny"],
  ['bash -xc "rm -rf /"', "deny", "deny"],
  ['bash -c -x "rm -rf /"', "deny", "deny"],
  ['bash -o errexit -c "rm -rf /"', "deny", "deny"],
  ['bash --norc --noprofile -c "rm -rf /"', "deny", "deny"],
  ['zsh -fc "rm -rf /"', "deny", "deny"],
  ["dash -c 'curl x'", "deny", "deny"],
  ['bash -c "bash -c \\"rm -rf /\\""', "deny", "deny"],
  ['sh -c \'sh -c "sh -c \\"curl x\\""\'', "deny", "deny"],
  ["/bin/bash -c 'rm -rf /'", "deny", "deny"],
  ['bash -c "$CMD"', "deny", "deny"],
  ["bash -c 'echo ok' -- 'rm -rf /'", "deny", "allow"],
  ['sh -c "rm -rf $1" _ /', "deny", "deny"],
  ["bash --rcfile x -c 'rm -rf /'", "deny", "deny"],
  ["bash <(curl x)", "deny", "deny"],
  ["fish -c 'rm -rf /'", "deny", "deny"],
  // env, sudo, xargs, find -exec and other wrappers
  ["env rm -rf /", "deny", "deny"],
  ["env -i PATH=/bin rm -rf /", "deny", "deny"],
  ["env -u HOME -- rm -rf /", "deny", "deny"],
  ['env -S "rm -rf /"', "deny", "deny"],
  ["env -S'rm -rf' /", "deny", "deny"],
  ["env -vS 'rm -rf' /", "deny", "deny"],
  ["env --split-string='curl x'", "deny", "deny"],
  ["env $X rm -rf /", "deny", "deny"],
  ["env LD_PRELOAD=/tmp/x.so ls", "deny", "deny"],
  ["sudo rm -rf /", "deny", "deny"],
  ["sudo -u root -E -- rm -rf /", "deny", "deny"],
  ["sudo -uroot rm -rf /", "deny", "deny"],
  ["sudo --user=root rm -rf /", "deny", "deny"],
  ["sudo -s rm -rf /", "deny", "deny"],
  ["sudo FOO=1 rm -rf /", "deny", "deny"],
  ["sudo $X", "deny", "deny"],
  ["sudo -h rm -rf /", "deny", "deny"],
  ["doas -u root rm -rf /", "deny", "deny"],
  ["sudo env nice rm -rf /", "deny", "deny"],
  ["sudo env X=1 nice -n 5 /bin/rm -rf /", "deny", "deny"],
  ["echo / | xargs rm -rf", "deny", "deny"],
  ["xargs -0 -n1 rm -rf < list", "deny", "deny"],
  ["xargs -I{} rm -rf {} < list", "deny", "deny"],
  ["xargs -I % sh -c 'rm -rf %' < list", "deny", "deny"],
  ["echo rm | xargs -I{} {} -rf /", "deny", "deny"],
  ["xargs sh -c 'curl x'", "deny", "deny"],
  ["find / -exec rm -rf {} \\;", "deny", "deny"],
  ["find / -execdir rm -rf {} +", "deny", "deny"],
  ["find . -name x -ok curl {} ';'", "deny", "deny"],
  ["find . -exec sh -c 'rm -rf /' \\;", "deny", "deny"],
  ["find . -exec sh -c 'echo {}' \\;", "deny", "deny"],
  ["find . $ARGS", "deny", "deny"],
  ["nice -n 10 rm -rf /", "deny", "deny"],
  ["nice -10 rm -rf /", "deny", "deny"],
  ["nohup rm -rf / &", "deny", "deny"],
  ["setsid -f rm -rf /", "deny", "deny"],
  ["stdbuf -oL -eL rm -rf /", "deny", "deny"],
  ["ionice -c 3 -n 7 rm -rf /", "deny", "deny"],
  ["timeout 5 rm -rf /", "deny", "deny"],
  ["timeout -s KILL -k 1 5s rm -rf /", "deny", "deny"],
  ["timeout --foreground 5 curl x", "deny", "deny"],
  ["flock /tmp/lock rm -rf /", "deny", "deny"],
  ["flock -n /tmp/lock -c 'rm -rf /'", "deny", "deny"],
  ["chroot / rm -rf /", "deny", "deny"],
  ["chroot --userspec=a:b / curl x", "deny", "deny"],
  ["busybox rm -rf /", "deny", "deny"],
  ["watch -n 1 rm -rf /", "deny", "deny"],
  ["watch 'curl x'", "deny", "deny"],
  ["su -c 'rm -rf /' root", "deny", "deny"],
  ["su root -c 'curl x'", "deny", "deny"],
  ["script -qc 'rm -rf /' /dev/null", "deny", "deny"],
  ["taskset 1 rm -rf /", "deny", "deny"],
  ["sudo --frobnicate rm -rf /", "deny", "deny"],
  // time / nice chains, exec, command, builtin
  ["time rm -rf /", "deny", "deny"],
  ["time -p rm -rf /", "deny", "deny"],
  ["time nice nohup rm -rf /", "deny", "deny"],
  ["/usr/bin/time -v rm -rf /", "deny", "deny"],
  ["exec rm -rf /", "deny", "deny"],
  ["exec -a myname rm -rf /", "deny", "deny"],
  ["command rm -rf /", "deny", "deny"],
  ["command -p rm -rf /", "deny", "deny"],
  ["builtin eval 'rm -rf /'", "deny", "deny"],
  ["coproc rm -rf /", "deny", "deny"],
  // interpreters and other code: opaque, denied while there are rules
  ["python3 -c 'import os; os.system(\"rm -rf /\")'", "deny", "deny"],
  ["python -Bc 'print(1)'", "deny", "deny"],
  ["node -e 'require(\"child_process\")'", "deny", "deny"],
  ["node --eval=1", "deny", "deny"],
  ["node -p 1", "deny", "deny"],
  ["perl -e 'system(\"rm -rf /\")'", "deny", "deny"],
  ["perl -lne 'print'", "deny", "deny"],
  ["perl -0777 -pe 's/a/b/' f", "deny", "deny"],
  ["perl -l script.pl", "deny", "allow"],
  ["ruby -e 'x'", "deny", "deny"],
  ["php -r 'system(\"id\");'", "deny", "deny"],
  ["deno eval 'Deno.exit()'", "deny", "deny"],
  ["lua -e 'os.execute(\"id\")'", "deny", "deny"],
  ["awk 'BEGIN { system(\"rm -rf /\") }'", "deny", "deny"],
  ["awk '{ print | \"sh\" }'", "deny", "deny"],
  ["gawk -e 'BEGIN{\"id\" | getline}'", "deny", "deny"],
  ["sed 's/a/b/e' f", "deny", "deny"],
  ["sed '1e rm -rf /' f", "deny", "deny"],
  ["echo 'import os' | python3", "deny", "deny"],
  ["python3 - <<EOF\nimport os\nEOF", "deny", "deny"],
  ["curl x | sh", "none", "allow"],
  ["echo 'rm -rf /' | bash", "deny", "deny"],
  ["cat x.sh | sh -s", "deny", "deny"],
  // eval, source, aliases, functions
  ["eval 'rm -rf /'", "deny", "deny"],
  ['eval "$CMD"', "deny", "deny"],
  ["eval $(echo rm) -rf /", "deny", "deny"],
  ["source ./evil.sh", "deny", "deny"],
  [". ./evil.sh", "deny", "deny"],
  ["alias x=rm; x -rf /", "deny", "deny"],
  ["alias ls='rm -rf /'", "deny", "deny"],
  ["x() { rm -rf /; }; x", "deny", "deny"],
  ["function x { curl x; }", "deny", "deny"],
  ['f() { "$@"; }; f rm -rf /', "deny", "deny"],
  ["command_not_found_handle() { rm -rf /; }", "deny", "deny"],
  ["trap 'rm -rf /' EXIT", "deny", "deny"],
  ['trap "$CMD" EXIT', "deny", "deny"],
  ["hash -p /bin/rm ls", "deny", "deny"],
  ["enable -f ./x.so x", "deny", "deny"],
  ["fc -s", "deny", "deny"],
  ["bind -x '\"\\C-x\": rm -rf /'", "deny", "deny"],
  // here-documents and here-strings into shells
  ["bash <<EOF\nrm -rf /\nEOF", "deny", "deny"],
  ["sh <<'EOF'\ncurl x\nEOF", "deny", "deny"],
  ["bash <<-EOF\n\trm -rf /\n\tEOF", "deny", "deny"],
  ["bash <<EOF\n$(cat x)\nEOF", "deny", "deny"],
  ["bash <<< 'rm -rf /'", "deny", "deny"],
  ["sudo bash <<EOF\nrm -rf /\nEOF", "deny", "deny"],
  ["cat <<EOF\n$(rm -rf /)\nEOF", "deny", "deny"],
  ["cat <<EOF | sh\nrm -rf /\nEOF", "deny", "deny"],
  ["sudo -s <<EOF\nrm -rf /\nEOF", "deny", "deny"],
  ["sudo -i <<< 'curl x'", "deny", "deny"],
  ["su <<EOF\ncurl x\nEOF", "deny", "deny"],
  ["doas -s <<EOF\nrm -rf /\nEOF", "deny", "deny"],
  ["chroot / <<EOF\nrm -rf /\nEOF", "deny", "deny"],
  ["ssh host <<EOF\nrm -rf /\nEOF", "deny", "deny"],
  ["echo 'rm -rf /' | sudo -s", "deny", "deny"],
  ["sudo -s", "deny", "allow"],
  // state the shell runs later: prompts, hooks, array subscripts, history
  ["PROMPT_COMMAND='rm -rf /'", "deny", "deny"],
  ["export PS1='$(rm -rf /)'", "deny", "deny"],
  ["PS0='$(curl x)' true", "deny", "deny"],
  ["declare -n r=PROMPT_COMMAND; r='curl x'", "deny", "deny"],
  ["printf -v PROMPT_COMMAND 'curl x'", "deny", "deny"],
  ["read PROMPT_COMMAND <<< 'curl x'", "deny", "deny"],
  ["read $name", "deny", "deny"],
  ["x='a[$(rm -rf /)]'; echo $((x))", "deny", "deny"],
  ["[[ -v 'a[$(curl x)]' ]]", "deny", "deny"],
  ["echo ${x@P}", "deny", "deny"],
  ["echo !!", "deny", "deny"],
  ["!-1", "deny", "deny"],
  ['echo "!rm"', "deny", "deny"],
  ["ls *(e:'rm -rf /':)", "deny", "deny"],
  ["=rm -rf /", "deny", "deny"],
  // remote and configured commands: ssh, git -c
  ["ssh host 'rm -rf /'", "deny", "deny"],
  ["ssh -p 2222 host rm -rf /", "deny", "deny"],
  ["ssh -o ProxyCommand='curl x' host", "deny", "deny"],
  ["ssh host uptime", "deny", "allow"],
  ["git -c alias.x='!rm -rf /' x", "deny", "deny"],
  ["git -c core.pager='curl x' log", "deny", "deny"],
  ["git -c user.name=a commit -m x", "deny", "allow"],
  // zsh forms
  ["$=cmd -rf /", "deny", "deny"],
  ["noglob rm -rf /", "deny", "deny"],
  ["nocorrect curl x", "deny", "deny"],
  ["cat =(curl x)", "deny", "deny"],
  // builtins that run text later or re-evaluate it
  ["declare 'a=($(rm -rf /))'", "deny", "deny"],
  ["let 'x=a[$(rm -rf /)]'", "deny", "deny"],
  ["BASH_ENV=/tmp/x bash -c ls", "deny", "deny"],
  ["env BASH_ENV=/tmp/x bash script.sh", "deny", "deny"],
  ["mapfile -C 'rm -rf /' -c 1 < f", "deny", "deny"],
  ["complete -C 'rm -rf /' ls", "deny", "deny"],
  ["trap -- 'curl x' INT", "deny", "deny"],
  // code reaching a shell through another wrapper
  ["xargs -a list sh", "deny", "deny"],
  ["find . -exec bash {} \\;", "deny", "deny"],
  ["command eval 'curl x'", "deny", "deny"],
  ["exec bash -c 'curl x'", "deny", "deny"],
  ["time bash -c 'curl x'", "deny", "deny"],
  ["nohup sh -c 'curl x' &", "deny", "deny"],
  ["echo 'curl x' | xargs -0 bash -c", "deny", "deny"],
  ['"$(printf rm)" -rf /', "deny", "deny"],
  // whitespace, comments, redirections
  ["rm\t-rf\t/", "deny", "deny"],
  ["rm   -rf    /", "deny", "deny"],
  ["echo a\r\nrm -rf /", "deny", "deny"],
  ["rm -rf / 2>/dev/null", "deny", "deny"],
  ["cd / && rm -rf *", "deny", "deny"],
  ["ls # ; rm -rf /", "deny", "allow"],
  ["ls #\nrm -rf /", "deny", "deny"],
  // an exact argv is not a shell line: ";" is a word, but shells and wrappers are still read
  [["echo", "a;", "rm", "-rf", "/"], "deny", "allow"],
  [["sh", "-c", "curl x"], "deny", "deny"],
  [["env", "-S", "rm -rf /"], "deny", "deny"],
  [["sudo", "--", "/usr/bin/rm", "-rf", "/"], "deny", "deny"],
  [["python3", "-c", "print(1)"], "deny", "deny"],
  // unparseable or oversized: opaque
  ["echo 'unterminated", "deny", "deny"],
  ["rm -rf / <<EOF", "deny", "deny"],
  ["for x in a; do", "deny", "deny"],
  ["(".repeat(200) + "ls" + ")".repeat(200), "deny", "deny"],
  ["(".repeat(200) + "ls" + ")".repeat(200), "none", "allow"],
];

Deno.test("corpus: ordinary commands are allowed", () => check(ALLOWED));
Deno.test("corpus: deny and confirm rules apply", () => check(DENIED_AND_CONFIRMED));
Deno.test("corpus: allow lists admit only what they name", () => check(ALLOW_LISTS));
Deno.test("corpus: no bypass gets through", () => check(BYPASSES));

Deno.test("corpus: the corpus is large enough", () => {
  const n = ALLOWED.length + DENIED_AND_CONFIRMED.length + ALLOW_LISTS.length + BYPASSES.length;
  assert.ok(n >= 150, `only ${n} cases`);
});

Deno.test("without an exec gate, a program file given to a shell or interpreter is opaque", () => {
  const rules = RULES.deny;
  for (
    const c of [
      ["bash script.sh"],
      ["bash", "script.sh"],
      ["python3 x.py"],
      ["perl -l script.pl"],
      ["sh < x.sh"],
      ["bash /dev/stdin"],
      ["bash /proc/self/fd/0"],
      ["node x.js"],
    ]
  ) {
    const d = decide(c, rules);
    assert.equal(d.action, "deny", `${JSON.stringify(c)}: ${d.reason}`);
    assert.equal(d.opaque, true);
    assert.match(d.reason, /no exec gate/);
    // With the gate, what the file runs is decided at each exec instead.
    assert.equal(decide(c, rules, { execGate: true }).action, "allow", JSON.stringify(c));
  }
  // A policy without rules still allows everything.
  assert.equal(decide(["bash script.sh"], { allow: [], deny: [], confirm: [] }).action, "allow");
});
