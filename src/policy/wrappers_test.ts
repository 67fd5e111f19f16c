import assert from "node:assert/strict";
import { optionTable, scanOptions, type Unwrapped, WRAPPERS } from "./_wrappers.ts";
import {
  awkUse,
  type CodeUse,
  findExecs,
  gitUse,
  interpreterUse,
  sedRunsCommands,
  shellUse,
} from "./_programs.ts";
import { holeWord, literalWord, type ShellWord } from "./_words.ts";
import { loadShellParser } from "./_parser.ts";

await loadShellParser();

const words = (line: string): ShellWord[] => line.split(" ").map(literalWord);

/** The inner command a wrapper runs, as text; or "none", "opaque", "script:<text>". */
function inner(line: string): string {
  const argv = words(line);
  return show(WRAPPERS.get(argv[0]!.literal!)!(argv));
}

function show(u: Unwrapped): string {
  switch (u.kind) {
    case "run":
      return [
        ...u.assignments.map((w) => w.display),
        ...u.argv.map((w) => w.literal ?? `<${w.display}>`),
      ].join(" ");
    case "script":
      return u.scripts.map((w) => `script:${w.literal}`).join(" + ");
    default:
      return u.kind;
  }
}

function cases(table: [string, string][]): void {
  const wrong = table.filter(([line, want]) => inner(line) !== want)
    .map(([line, want]) => `${line}: got "${inner(line)}", want "${want}"`);
  assert.deepEqual(wrong, []);
}

Deno.test("option scanner: clusters, attached and separate values, long prefixes, --", () => {
  const t = optionTable("a b u|user: i|in-place:: long-flag");
  const scan = (line: string) => {
    const r = scanOptions("x", words(line), 1, t);
    return r.ok ? [r.options.map((o) => `${o.id}=${o.value?.literal ?? ""}`).join(","), r.next] : r;
  };
  assert.deepEqual(scan("x -ab -uroot cmd"), ["a=,b=,u=root", 3]);
  assert.deepEqual(scan("x -a -u root cmd"), ["a=,u=root", 4]);
  assert.deepEqual(scan("x --user=root cmd"), ["u=root", 2]);
  assert.deepEqual(scan("x --us root cmd"), ["u=root", 3]);
  assert.deepEqual(scan("x -ibak --in-place cmd"), ["i=bak,i=", 3]);
  assert.deepEqual(scan("x --long -- -a"), ["long-flag=", 3]);
  assert.deepEqual(scan("x - cmd"), ["", 1]);
  assert.equal((scan("x -z cmd") as { ok: boolean }).ok, false);
  assert.equal((scan("x --nope cmd") as { ok: boolean }).ok, false);
  assert.equal((scan("x --long=1 cmd") as { ok: boolean }).ok, false);
  assert.equal((scan("x -u") as { ok: boolean }).ok, false);
  const dynamic = scanOptions("x", [literalWord("x"), holeWord("$X", true)], 1, t);
  assert.equal(dynamic.ok, false);
});

Deno.test("wrapper sudo", () =>
  cases([
    ["sudo rm -rf /", "rm -rf /"],
    ["sudo -u root -g wheel -E -H -- rm x", "rm x"],
    ["sudo -uroot -nE rm x", "rm x"],
    ["sudo --user=root --preserve-env=PATH rm x", "rm x"],
    ["sudo --preserve-env rm x", "rm x"],
    ["sudo -D /tmp -C 3 -T 10 rm x", "rm x"],
    ["sudo FOO=1 BAR=2 rm x", "FOO=1 BAR=2 rm x"],
    ["sudo -i rm x", "rm x"],
    ["sudo -s", "shell"],
    ["sudo -l rm", "none"],
    ["sudo -e /etc/hosts", "none"],
    ["sudo -v", "none"],
    ["sudo -h", "opaque"],
    ["sudo -Z rm", "opaque"],
  ]));

Deno.test("wrapper doas", () =>
  cases([
    ["doas rm x", "rm x"],
    ["doas -n -u root rm x", "rm x"],
    ["doas -s", "shell"],
    ["doas -C /etc/doas.conf rm", "none"],
  ]));

Deno.test("wrapper env", () => {
  cases([
    ["env rm x", "rm x"],
    ["env -i A=1 B=2 rm x", "A=1 B=2 rm x"],
    ["env - rm x", "rm x"],
    ["env -u HOME -C /tmp rm x", "rm x"],
    ["env --unset=HOME --chdir=/tmp -0 rm x", "rm x"],
    ["env --ignore-signal --default-signal=INT rm x", "rm x"],
    ["env -- rm x", "rm x"],
    ["env", "none"],
    ["env A=1", "none"],
    ["env --version", "none"],
    ["env -x rm", "opaque"],
  ]);
  const split = (s: string) =>
    show(WRAPPERS.get("env")!([literalWord("env"), ...s.split("|").map(literalWord)]));
  assert.equal(split("-S|rm -rf /"), "rm -rf /");
  assert.equal(split("-Srm -rf|/"), "rm -rf /");
  assert.equal(split("-vS|-i A=1 rm|x"), "A=1 rm x");
  assert.equal(split("--split-string=rm -rf|/"), "rm -rf /");
  assert.equal(split("-S|-S rm|x"), "rm x");
  assert.equal(split("-S|${X} y"), "opaque");
});

Deno.test("wrapper nice, nohup, setsid, stdbuf, ionice", () =>
  cases([
    ["nice rm x", "rm x"],
    ["nice -n 10 rm x", "rm x"],
    ["nice -n10 rm x", "rm x"],
    ["nice -10 rm x", "rm x"],
    ["nice --adjustment=5 rm x", "rm x"],
    ["nice", "none"],
    ["nohup rm x", "rm x"],
    ["nohup --help", "none"],
    ["setsid -f -w rm x", "rm x"],
    ["setsid --fork rm x", "rm x"],
    ["stdbuf -oL -e0 rm x", "rm x"],
    ["stdbuf -o L rm x", "rm x"],
    ["stdbuf --output=L rm x", "rm x"],
    ["ionice -c 3 -n 7 rm x", "rm x"],
    ["ionice -c3 -t rm x", "rm x"],
    ["ionice -p 123", "none"],
  ]));

Deno.test("wrapper time, timeout", () =>
  cases([
    ["time rm x", "rm x"],
    ["time -p rm x", "rm x"],
    ["time -v -o /tmp/t -f %e rm x", "rm x"],
    ["timeout 5 rm x", "rm x"],
    ["timeout -s KILL -k 1 5s rm x", "rm x"],
    ["timeout --signal=TERM --preserve-status 5 rm x", "rm x"],
    ["timeout --foreground 1m rm x", "rm x"],
    ["timeout 5", "none"],
  ]));

Deno.test("wrapper command, exec, builtin", () =>
  cases([
    ["command rm x", "rm x"],
    ["command -p rm x", "rm x"],
    ["command -v rm", "none"],
    ["command -V rm", "none"],
    ["command -pv rm", "none"],
    ["exec rm x", "rm x"],
    ["exec -a name -c -l rm x", "rm x"],
    ["exec", "none"],
    ["builtin eval x", "eval x"],
  ]));

Deno.test("wrapper xargs", () =>
  cases([
    ["xargs rm", "rm <…>"],
    ["xargs -0 -n 1 -P 4 rm -f", "rm -f <…>"],
    ["xargs -I {} cp {} /tmp", "cp <{}> /tmp"],
    ["xargs -I% mv % %.bak", "mv <%> <%.bak>"],
    ["xargs -i echo {}", "echo <{}>"],
    ["xargs --replace=@ echo @", "echo <@>"],
    ["xargs -d \\n -a list rm", "rm <…>"],
    ["xargs", "echo <…>"],
    ["xargs --show-limits", "none"],
    ["xargs -Q rm", "opaque"],
  ]));

Deno.test("wrapper flock, chroot, watch, su, runuser, script, ssh and others", () =>
  cases([
    ["flock /tmp/l rm x", "rm x"],
    ["flock -n -w 5 /tmp/l rm x", "rm x"],
    ["flock -x /tmp/l -c rm_x", "script:rm_x"],
    ["flock /tmp/l --command rm_x", "script:rm_x"],
    ["flock 9", "none"],
    ["flock -c rm /tmp/l", "opaque"],
    ["chroot / rm x", "rm x"],
    ["chroot --userspec=a:b --skip-chdir / rm x", "rm x"],
    ["chroot /", "shell"],
    ["watch -n 1 rm x", "script:rm x"],
    ["watch -x rm x", "rm x"],
    ["watch -d=permanent -t ls", "script:ls"],
    ["su -c rm_x root", "script:rm_x"],
    ["su - root -c rm_x", "script:rm_x"],
    ["su --command=rm_x", "script:rm_x"],
    ["su root", "shell"],
    ["su root script.sh", "opaque"],
    ["runuser -u nobody -- rm x", "rm x"],
    ["runuser -l nobody -c rm_x", "script:rm_x"],
    ["script -q -c rm_x /dev/null", "script:rm_x"],
    ["script log", "shell"],
    ["ssh host", "shell"],
    ["ssh -p 22 -i key host rm -rf /", "script:rm -rf /"],
    ["ssh -oProxyCommand=rm_x host", "script:rm_x"],
    ["ssh -o ProxyCommand=nc_%h host ls", "script:nc_%h + script:ls"],
    ["ssh -Z host", "opaque"],
    ["busybox rm x", "rm x"],
    ["busybox --list", "none"],
    ["pkexec --user root rm x", "rm x"],
    ["unbuffer -p rm x", "rm x"],
    ["taskset 0x3 rm x", "rm x"],
    ["taskset -c 0-3 rm x", "rm x"],
    ["taskset -p 123", "none"],
    ["chrt -f 10 rm x", "rm x"],
    ["chrt -p 123", "none"],
    ["noglob rm x", "rm x"],
    ["nocorrect rm x", "rm x"],
  ]));

function use(u: CodeUse): string {
  switch (u.kind) {
    case "script":
      return `script:${u.script.literal}`;
    case "file":
      return `file:${u.path.literal}`;
    default:
      return u.kind;
  }
}

Deno.test("shells: where the commands come from", () => {
  const table: [string, string][] = [
    ["bash -c rm_x", "script:rm_x"],
    ["bash -lc rm_x", "script:rm_x"],
    ["bash -ec rm_x", "script:rm_x"],
    ["bash -xc rm_x", "script:rm_x"],
    ["bash -c -x rm_x", "script:rm_x"],
    ["bash -o pipefail -c rm_x", "script:rm_x"],
    ["bash +O extglob -c rm_x", "script:rm_x"],
    ["bash --norc --noprofile -c rm_x", "script:rm_x"],
    ["bash --rcfile /x -ic rm_x", "script:rm_x"],
    ["bash -- script.sh", "file:script.sh"],
    ["bash script.sh -c x", "file:script.sh"],
    ["bash -s arg", "stdin"],
    ["bash", "stdin"],
    ["bash -", "stdin"],
    ["bash -c", "none"],
    ["bash -Q", "opaque"],
    ["bash --frobnicate -c x", "opaque"],
    ["zsh -fc rm_x", "script:rm_x"],
    ["zsh --no-rcs -c rm_x", "script:rm_x"],
    ["dash -ec rm_x", "script:rm_x"],
    ["mksh -T /dev/tty2 -c rm_x", "script:rm_x"],
  ];
  const wrong = table.filter(([line, want]) => {
    const argv = words(line);
    return use(shellUse(argv[0]!.literal!, argv)) !== want;
  });
  assert.deepEqual(wrong, []);
});

Deno.test("interpreters: inline code, stdin, files, modules", () => {
  const table: [string, string][] = [
    ["python3 -c x", "opaque"],
    ["python3 -Bc x", "opaque"],
    ["python3 -W ignore -c x", "opaque"],
    ["python3 -W ignore script.py", "file:script.py"],
    ["python3 -m http.server", "none"],
    ["python3 script.py -c x", "file:script.py"],
    ["python3", "stdin"],
    ["python3 -", "stdin"],
    ["python3.12 -c x", "opaque"],
    ["node -e x", "opaque"],
    ["node -pe x", "opaque"],
    ["node --eval=x", "opaque"],
    ["node --print x", "opaque"],
    ["node -r ts-node/register app.ts", "file:app.ts"],
    ["node --require x app.js", "file:app.js"],
    ["node app.js -e x", "file:app.js"],
    ["bun -e x", "opaque"],
    ["perl -e x", "opaque"],
    ["perl -lne x", "opaque"],
    ["perl -0777 -ne x", "opaque"],
    ["perl -MFile::Temp script.pl", "file:script.pl"],
    ["perl -i.bak script.pl", "file:script.pl"],
    ["ruby -e x", "opaque"],
    ["ruby -I lib app.rb", "file:app.rb"],
    ["php -r x", "opaque"],
    ["php index.php", "file:index.php"],
    ["lua -e x", "opaque"],
    ["Rscript -e x", "opaque"],
    ["julia --eval x", "opaque"],
    ["osascript -e x", "opaque"],
    ["deno eval x", "opaque"],
    ["deno repl --eval x", "opaque"],
    ["deno run -A main.ts", "none"],
    ["deno run -", "stdin"],
    ["deno", "stdin"],
  ];
  const wrong = table.filter(([line, want]) => {
    const argv = words(line);
    return use(interpreterUse(argv[0]!.literal!, argv)) !== want;
  }).map(([line, want]) =>
    `${line}: ${use(interpreterUse(line.split(" ")[0]!, words(line)))} ≠ ${want}`
  );
  assert.deepEqual(wrong, []);
});

Deno.test("awk: programs that run commands are opaque", () => {
  const awk = (...args: string[]) =>
    use(awkUse("awk", [literalWord("awk"), ...args.map(literalWord)]));
  assert.equal(awk("{print $1}", "f"), "none");
  assert.equal(awk("-F:", "-v", "x=1", "$1 || $2 {print}", "f"), "none");
  assert.equal(awk('BEGIN{system("id")}'), "opaque");
  assert.equal(awk('{print | "sh"}'), "opaque");
  assert.equal(awk('BEGIN{"date" | getline d}'), "opaque");
  assert.equal(awk("-f", "prog.awk", "f"), "file:prog.awk");
  assert.equal(awk("-e", 'BEGIN{system("x")}'), "opaque");
  assert.equal(awk('--source=@load "x"'), "opaque");
  assert.equal(awk("-l", "ext"), "opaque");
  assert.equal(awk("--bogus", "x"), "opaque");
  assert.equal(use(awkUse("awk", [literalWord("awk"), holeWord("$P", false)])), "opaque");
});

Deno.test("sed: the e command and the e flag are found", () => {
  for (
    const s of [
      "s/a/b/",
      "1,10p;/x/d",
      "s|a|b|gI",
      "y/abc/xyz/",
      "/start/,/end/ { s/x/y/; p }",
      "a text with e",
      "$!N",
      "1~2d",
      "s/e/e/g",
      "w /tmp/e",
    ]
  ) {
    assert.equal(sedRunsCommands(s), false, s);
  }
  for (const s of ["s/a/b/e", "1e id", "e", "s/a/b/ge", "/x/e rm", "s/a/b", "k", "1,$ e ls"]) {
    assert.equal(sedRunsCommands(s), true, s);
  }
});

Deno.test("find: every -exec family command is found, {} is a hole", () => {
  const found = findExecs(
    words("find . -name x -exec rm {} ; -execdir cp -t /t {} + -ok mv {} {}.b ;"),
  );
  assert.ok(Array.isArray(found));
  assert.deepEqual(
    found.map((c) => c.map((w) => w.literal ?? `<${w.display}>`).join(" ")),
    ["rm <{}>", "cp -t /t <{}>", "mv <{}> <{}.b>"],
  );
  assert.deepEqual(findExecs(words("find . -name x")), []);
  assert.ok(!Array.isArray(findExecs([literalWord("find"), holeWord("$A", true)])));
});

Deno.test("git: configuration that runs commands is opaque", () => {
  const git = (line: string) => use(gitUse(words(line)));
  assert.equal(git("git status"), "none");
  assert.equal(git("git -c user.name=x commit -m y"), "none");
  assert.equal(git("git -C /repo log"), "none");
  assert.equal(git("git -c alias.x=!rm x"), "opaque");
  assert.equal(git("git -c core.pager=rm log"), "opaque");
  assert.equal(git("git -c core.sshCommand=x fetch"), "opaque");
  assert.equal(git("git --config-env=core.pager=X log"), "opaque");
  assert.equal(git("git log -c core.pager=x"), "none");
});
